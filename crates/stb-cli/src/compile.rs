//! `stb compile`: offline, deterministic artifacts under target/.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;

use crate::args::ProjectArgs;
use crate::output::print_json;
use crate::output::report;

#[derive(Debug, Args)]
pub(crate) struct CompileArgs {
    #[command(flatten)]
    project: ProjectArgs,
    /// Where artifacts go (default: <project>/target). `run/` inside it is never touched.
    #[arg(long, value_name = "DIR")]
    target_dir: Option<PathBuf>,
    /// Compile and report problems without writing any artifact (fast CI validation).
    #[arg(long)]
    check: bool,
    /// Compile every model, ignoring what the last compile in the target directory
    /// recorded (by default only changed model files are compiled again and only files
    /// whose bytes changed are written).
    #[arg(long)]
    full: bool,
    /// Also check every model's SQL and table on the embedded engine (a scratch chDB
    /// server, no warehouse needed): what cannot be checked offline is listed, with why.
    #[arg(long)]
    validate: bool,
    /// Print machine-readable JSON on stdout.
    #[arg(long)]
    json: bool,
}

pub(crate) fn run(args: &CompileArgs) -> ExitCode {
    let (options, project) = match args.project.discover(args.json) {
        Ok(found) => found,
        Err(code) => return code,
    };
    let target_dir = args
        .target_dir
        .clone()
        .map_or_else(|| project.root.join("target"), |dir| options.cwd.join(dir));
    if !args.check && !args.validate {
        return match stb_compile::incremental::compile_and_publish(&project, &target_dir, args.full)
        {
            Ok(published) => {
                print_warnings(&published.warnings, args.json);
                print_published(&published, &target_dir, None, args.json);
                ExitCode::SUCCESS
            }
            Err(stb_compile::incremental::Failure::Compile(diagnostics)) => {
                report(diagnostics, args.json)
            }
            Err(stb_compile::incremental::Failure::Publish(problem)) => {
                report(problem.into(), args.json)
            }
        };
    }
    // Validation checks the planner's view of the models against the engine; a check
    // alone only needs the files.
    let output = if args.validate {
        stb_compile::Output::Artifacts
    } else {
        stb_compile::Output::FilesOnly
    };
    let compiled = match stb_compile::compile_with(&project, output) {
        Ok(compiled) => compiled,
        Err(diagnostics) => return report(diagnostics, args.json),
    };
    print_warnings(&compiled.warnings, args.json);
    let validation = if args.validate {
        match validate(&project, &compiled, args.json) {
            Ok(validated) => Some(validated),
            Err(code) => return code,
        }
    } else {
        None
    };
    if args.check {
        if args.json {
            let mut answer = serde_json::json!({"checked": true, "pipelines": compiled.pipelines, "models": compiled.models, "warnings": compiled.warnings});
            if let Some(validation) = &validation {
                answer["validation"] = serde_json::json!(validation);
            }
            print_json(&answer);
        } else {
            let _ = writeln!(
                std::io::stdout().lock(),
                "Compiled {} models in {} pipelines; nothing written (--check)",
                compiled.models,
                compiled.pipelines
            );
        }
        return ExitCode::SUCCESS;
    }
    if let Err(diagnostic) = stb_compile::publish::publish(&compiled, &target_dir) {
        return report(diagnostic.into(), args.json);
    }
    let published = stb_compile::incremental::Published {
        pipelines: compiled.pipelines,
        models: compiled.models,
        artifacts: compiled.files.keys().cloned().collect(),
        warnings: compiled.warnings,
        whole: Some("--validate"),
        recompiled: compiled.models,
        written: compiled.files.len(),
    };
    print_published(&published, &target_dir, validation.as_ref(), args.json);
    ExitCode::SUCCESS
}

/// Warnings on stderr in the same shape as errors, so editors and people read both alike.
fn print_warnings(warnings: &[stb_diagnostics::Diagnostic], json: bool) {
    if json {
        return; // they are in the answer
    }
    for warning in warnings {
        let text = warning.to_string();
        crate::output::eprint_styled(&format!("{}\n", text.replacen("error[", "warning[", 1)));
    }
}

fn print_published(
    published: &stb_compile::incremental::Published,
    target_dir: &std::path::Path,
    validation: Option<&Offline>,
    json: bool,
) {
    if json {
        let mut answer = serde_json::json!({
            "target_dir": target_dir,
            "pipelines": published.pipelines,
            "models": published.models,
            "artifacts": published.artifacts,
            "warnings": published.warnings,
            "recompiled_models": published.recompiled,
            "written_files": published.written,
            "whole_compile": published.whole,
        });
        // Only with --validate: a plain compile checked nothing on an engine.
        if let Some(validation) = validation {
            answer["validation"] = serde_json::json!(validation);
        }
        print_json(&answer);
        return;
    }
    let mut stdout = std::io::stdout().lock();
    let _ = writeln!(
        stdout,
        "Wrote compile artifacts to {}",
        target_dir.display()
    );
    let _ = writeln!(stdout, "Pipelines: {}", published.pipelines);
    let _ = writeln!(stdout, "Models: {}", published.models);
    if published.whole.is_none() {
        let kept = published.artifacts.len().saturating_sub(published.written);
        let _ = writeln!(
            stdout,
            "Incremental: recompiled {} of {} models, wrote {} files, left {kept} as they were",
            published.recompiled, published.models, published.written
        );
    }
}

/// What `--validate` found on the embedded engine.
#[derive(serde::Serialize)]
struct Offline {
    engine_version: String,
    #[serde(flatten)]
    validated: stb_engine::validation::Validated,
}

/// Starts a scratch engine, checks the project on it, and says what it checked (text on
/// stderr, so the artifacts' lines keep stdout); the exit code when something failed.
fn validate(
    project: &stb_project::Project,
    compiled: &stb_compile::Compiled,
    json: bool,
) -> Result<Offline, ExitCode> {
    if !json {
        // The engine's own progress names a log in a directory gone once it stops.
        let _ = writeln!(
            std::io::stderr().lock(),
            "Starting the embedded engine (a scratch chDB server, removed afterwards)"
        );
    }
    let engine = stb_localstack::scratch::ScratchEngine::start(&mut stb_localstack::Silent)
        .map_err(|error| crate::output::fail(&error.into(), json))?;
    let client = stb_warehouse::Client::new(stb_warehouse::ConnectionConfig {
        port: engine.port,
        ..stb_warehouse::ConnectionConfig::default()
    })
    .map_err(|error| {
        let error = stb_engine::EngineError::from(&error);
        crate::output::fail(&error.into(), json)
    })?;
    let validated = stb_engine::validation::validate_offline(&client, project, compiled)
        .map_err(|refused| report(refused, json))?;
    if !json {
        let mut stderr = std::io::stderr().lock();
        let _ = writeln!(
            stderr,
            "Checked {} statements on the embedded engine (ClickHouse {}) in {} ms",
            validated.checked, engine.version, validated.elapsed_ms
        );
        for unchecked in &validated.unchecked {
            let _ = writeln!(
                stderr,
                "  not checked offline: {}: {}",
                unchecked.model, unchecked.reason
            );
        }
    }
    Ok(Offline {
        engine_version: engine.version.clone(),
        validated,
    })
}
