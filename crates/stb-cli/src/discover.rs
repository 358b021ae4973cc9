//! `stb discover`: what the project holds, or every problem with it.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use stb_diagnostics::Diagnostics;
use stb_project::{DiscoverOptions, Project};

use crate::output::print_json;

#[derive(Debug, Args)]
pub(crate) struct DiscoverArgs {
    #[command(flatten)]
    pub(crate) project: ProjectArgs,
    /// Print machine-readable JSON on stdout (schema in docs/project.md).
    #[arg(long)]
    json: bool,
}

/// Options every project command shares.
#[derive(Debug, Args)]
pub(crate) struct ProjectArgs {
    /// Project directory (default: the nearest directory upwards holding streambuild_project.toml).
    #[arg(long, value_name = "DIR")]
    project_dir: Option<PathBuf>,
    /// Target to resolve (default: streambuild_local.toml `target`, then `default_target`).
    #[arg(long, value_name = "NAME")]
    target: Option<String>,
    /// Project variables as a JSON object; they override every [vars] table.
    #[arg(long, value_name = "JSON")]
    vars: Option<String>,
}

impl ProjectArgs {
    /// Discovers the project, or reports why not and returns the exit code.
    pub(crate) fn discover(&self, json: bool) -> Result<(DiscoverOptions, Project), ExitCode> {
        let options = self.options()?;
        match stb_project::discover(&options) {
            Ok(project) => Ok((options, project)),
            Err(diagnostics) => Err(report(diagnostics, json)),
        }
    }

    /// Discovers and compiles the project, or reports why not and returns the exit code.
    pub(crate) fn compile(&self, json: bool) -> Result<(Project, stb_compile::Compiled), ExitCode> {
        let (_, project) = self.discover(json)?;
        match stb_compile::compile(&project) {
            Ok(compiled) => Ok((project, compiled)),
            Err(diagnostics) => Err(report(diagnostics, json)),
        }
    }

    /// The discovery options, or exit code 2 for a malformed `--vars`.
    pub(crate) fn options(&self) -> Result<DiscoverOptions, ExitCode> {
        let vars = match self
            .vars
            .as_deref()
            .map(stb_project::vars_from_json)
            .transpose()
        {
            Ok(vars) => vars.unwrap_or_default(),
            Err(message) => {
                let _ = writeln!(std::io::stderr().lock(), "error: {message}");
                return Err(ExitCode::from(2));
            }
        };
        Ok(DiscoverOptions {
            project_dir: self.project_dir.clone(),
            cwd: std::env::current_dir().unwrap_or_default(),
            target: self.target.clone(),
            vars,
        })
    }
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

pub(crate) fn report(diagnostics: Diagnostics, json: bool) -> ExitCode {
    let sorted = diagnostics.into_sorted();
    if json {
        print_json(&serde_json::json!({ "errors": sorted }));
    } else {
        let mut stderr = std::io::stderr().lock();
        for diagnostic in &sorted {
            let _ = writeln!(stderr, "{diagnostic}");
        }
        let _ = writeln!(stderr, "\n{} error(s); nothing was changed.", sorted.len());
    }
    ExitCode::from(1)
}
