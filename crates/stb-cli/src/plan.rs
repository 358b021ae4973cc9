//! `stb plan`: for direct pipelines, what a build would drop, recreate and replay, and how
//! each model's SQL changed since its last build; for virtual pipelines, what a new
//! deployment would stage beside production. Read-only against ClickHouse.

use std::process::ExitCode;

use clap::{Args, ValueEnum};

use stb_engine::plan::{Document, Plan, Purpose};

use crate::args::{ConnectionArgs, ProjectArgs, ScopeArgs};
use crate::output::{fail, report};

#[derive(Debug, Args)]
pub(crate) struct PlanArgs {
    #[command(flatten)]
    project: ProjectArgs,
    #[command(flatten)]
    connection: ConnectionArgs,
    #[command(flatten)]
    scope: ScopeArgs,
    /// Show whole SQL diffs.
    #[arg(long, short = 'v')]
    verbose: bool,
    /// Print machine-readable JSON on stdout (as `--format json`).
    #[arg(long)]
    json: bool,
    /// How to print the plan: `text`, `json`, or `markdown` for a pull request's comment
    /// (a summary line, destructive steps first, SQL diffs folded, at most 65,536
    /// characters).
    #[arg(long, value_enum, value_name = "FORMAT")]
    format: Option<Format>,
    /// Write the JSON or Markdown to FILE instead of stdout.
    #[arg(long, value_name = "FILE")]
    out: Option<std::path::PathBuf>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Format {
    Text,
    Json,
    Markdown,
}

impl PlanArgs {
    fn format(&self) -> Format {
        match self.format {
            Some(format) => format,
            None if self.json => Format::Json,
            None => Format::Text,
        }
    }
}

/// Runs `write` on the file `out` names, or on stdout.
fn emit_with(
    out: Option<&std::path::Path>,
    write: impl FnOnce(&mut dyn std::io::Write) -> std::io::Result<()>,
) -> Result<(), crate::output::Failure> {
    let failed = |what: String, e: std::io::Error| crate::output::Failure {
        code: stb_plan::options::FLAG_CODE,
        message: format!("cannot write {what}: {e}"),
        hint: "name a file in a directory that exists and can be written".to_owned(),
    };
    match out {
        Some(path) => {
            let file =
                std::fs::File::create(path).map_err(|e| failed(path.display().to_string(), e))?;
            let mut buffered = std::io::BufWriter::new(file);
            write(&mut buffered)
                .and_then(|()| std::io::Write::flush(&mut buffered))
                .map_err(|e| failed(path.display().to_string(), e))
        }
        None => {
            let mut stdout = std::io::stdout().lock();
            write(&mut stdout).map_err(|e| failed("the plan".to_owned(), e))
        }
    }
}

pub(crate) fn run(args: &PlanArgs) -> ExitCode {
    let format = args.format();
    if args.json && format != Format::Json {
        let failure = crate::output::Failure {
            code: stb_plan::options::FLAG_CODE,
            message: "--json and --format name two formats".to_owned(),
            hint: "drop --json, or --format".to_owned(),
        };
        return fail(&failure, false);
    }
    if args.out.is_some() && format == Format::Text {
        let failure = crate::output::Failure {
            code: stb_plan::options::FLAG_CODE,
            message: "--out writes the plan as JSON or Markdown".to_owned(),
            hint: "add --format markdown or --format json".to_owned(),
        };
        return fail(&failure, false);
    }
    // Errors are JSON when the plan would have been.
    let json = format == Format::Json;
    let scope = match args.scope.scope() {
        Ok(scope) => scope,
        Err(failure) => return fail(&failure, json),
    };
    let (_, mut project) = match args.project.discover(json) {
        Ok(found) => found,
        Err(code) => return code,
    };
    crate::args::pin_database(&mut project, args.connection.database.as_deref());
    // The warehouse's catalog is read while the models compile.
    let connected = args.connection.read_ahead(&project, Purpose::Show);
    let compiled = match stb_compile::compile_with(&project, stb_compile::Output::PlanOnly) {
        Ok(compiled) => compiled,
        Err(diagnostics) => return report(diagnostics, json),
    };
    let plan = match args
        .connection
        .plan(&project, &compiled, &scope, Purpose::Show, connected)
    {
        Ok(plan) => plan,
        Err(failure) => return fail(&failure, json),
    };
    if let Some(invalid) = plan.refused() {
        return report(invalid, json);
    }
    let document = plan.document();
    // target/run/plan/ holds the plan's JSON and its build's steps (a mixed plan's two
    // phases are each their own build's and are not written).
    let written = match (&plan, &document) {
        (Plan::Direct(one) | Plan::Virtual(one), Document::Direct(written)) => {
            crate::run_artifacts::write_plan(&project.root, &one.planned, written)
        }
        (Plan::Virtual(one), Document::Virtual(written)) => {
            crate::run_artifacts::write_plan(&project.root, &one.planned, written)
        }
        _ => Ok(()),
    };
    if let Err(failure) = written {
        return fail(&failure, json);
    }
    // The document just written is what `--json` prints: printed as it is, not made again
    // beside it (at 10,000 models each is tens of megabytes).
    match format {
        Format::Json if args.out.is_none() => {
            crate::output::print_json(&document);
            return ExitCode::SUCCESS;
        }
        Format::Json | Format::Markdown => {
            let written = if format == Format::Json {
                // Streamed to the file: at 10,000 models the document is tens of megabytes.
                emit_with(args.out.as_deref(), |out| {
                    serde_json::to_writer_pretty(&mut *out, &document)
                        .map_err(std::io::Error::other)?;
                    out.write_all(b"\n")
                })
            } else {
                let text = stb_engine::plan::markdown::markdown(
                    &document,
                    stb_engine::plan::markdown::GITHUB_COMMENT_LIMIT,
                );
                emit_with(args.out.as_deref(), |out| out.write_all(text.as_bytes()))
            };
            return match written {
                Ok(()) => ExitCode::SUCCESS,
                Err(failure) => fail(&failure, json),
            };
        }
        Format::Text => {}
    }
    drop(document);
    crate::plan_render::print_plan(&plan, args.verbose);
    ExitCode::SUCCESS
}
