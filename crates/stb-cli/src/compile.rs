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
    /// Print machine-readable JSON on stdout.
    #[arg(long)]
    json: bool,
}

pub(crate) fn run(args: &CompileArgs) -> ExitCode {
    let (options, project) = match args.project.discover(args.json) {
        Ok(found) => found,
        Err(code) => return code,
    };
    let compiled = match stb_compile::compile(&project) {
        Ok(compiled) => compiled,
        Err(diagnostics) => return report(diagnostics, args.json),
    };
    if !args.json {
        let mut stderr = std::io::stderr().lock();
        for warning in &compiled.warnings {
            // Same shape as errors, so editors and people read both alike.
            let text = warning.to_string();
            let _ = writeln!(stderr, "{}", text.replacen("error[", "warning[", 1));
        }
    }
    if args.check {
        if args.json {
            print_json(
                &serde_json::json!({"checked": true, "pipelines": compiled.pipelines, "models": compiled.models, "warnings": compiled.warnings}),
            );
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
    let target_dir = args
        .target_dir
        .clone()
        .map_or_else(|| project.root.join("target"), |dir| options.cwd.join(dir));
    if let Err(diagnostic) = stb_compile::publish::publish(&compiled, &target_dir) {
        return report(diagnostic.into(), args.json);
    }
    if args.json {
        print_json(&serde_json::json!({
            "target_dir": target_dir,
            "pipelines": compiled.pipelines,
            "models": compiled.models,
            "artifacts": compiled.files.keys().collect::<Vec<_>>(),
            "warnings": compiled.warnings,
        }));
    } else {
        let mut stdout = std::io::stdout().lock();
        let _ = writeln!(
            stdout,
            "Wrote compile artifacts to {}",
            target_dir.display()
        );
        let _ = writeln!(stdout, "Pipelines: {}", compiled.pipelines);
        let _ = writeln!(stdout, "Models: {}", compiled.models);
    }
    ExitCode::SUCCESS
}
