//! `stb discover`: what the project holds, or every problem with it.

use std::io::Write;
use std::process::ExitCode;

use clap::Args;
use stb_project::Project;

use crate::args::ProjectArgs;
use crate::output::{print_json, report};

#[derive(Debug, Args)]
pub(crate) struct DiscoverArgs {
    #[command(flatten)]
    pub(crate) project: ProjectArgs,
    /// Print machine-readable JSON on stdout (schema in docs/project.md).
    #[arg(long)]
    json: bool,
}

pub(crate) fn run(args: &DiscoverArgs) -> ExitCode {
    let options = match args.project.options() {
        Ok(options) => options,
        Err(code) => return code,
    };
    match stb_project::discover(&options) {
        Ok(project) if args.json => {
            print_json(&project);
            ExitCode::SUCCESS
        }
        Ok(project) => {
            let _ = std::io::stdout()
                .lock()
                .write_all(render(&project).as_bytes());
            ExitCode::SUCCESS
        }
        Err(diagnostics) => report(diagnostics, args.json),
    }
}

fn render(project: &Project) -> String {
    let mut text = format!(
        "project {}  target {}  database {}\n",
        project.name,
        project.target,
        project.database.as_deref().unwrap_or("default")
    );
    for pipeline in &project.pipelines {
        let protection = pipeline.protection.as_ref().map_or_else(String::new, |p| {
            format!("  protected (--confirm {})", p.confirmation)
        });
        text.push_str(&format!(
            "\n{}  {}  source {}{protection}\n",
            pipeline.name,
            pipeline.mode.as_str(),
            pipeline.source.as_deref().unwrap_or("-")
        ));
        for model in &pipeline.models {
            let kind = match model.kind {
                stb_project::pipelines::ModelKind::Table => "table",
                stb_project::pipelines::ModelKind::View => "view",
            };
            text.push_str(&format!("  {:<32} {kind:<5}  {}\n", model.name, model.file));
        }
    }
    if !project.sources.is_empty() {
        text.push_str("\nsources\n");
        for source in &project.sources {
            let what = source
                .topic
                .as_deref()
                .or(source.table_name.as_deref())
                .unwrap_or("");
            text.push_str(&format!(
                "  {:<32} {:<12}  {what}  {}\n",
                source.name,
                source.kind.as_str(),
                source.file
            ));
        }
    }
    text
}
