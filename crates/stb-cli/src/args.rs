//! The argument groups several commands share: which project, which warehouse, what to
//! rebuild. Commands flatten them; none of them imports another command.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use stb_project::{DiscoverOptions, Project};

use crate::output::report;

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
    /// Discovers the project, or reports why not and returns the exit code. (Commands that
    /// connect compile through [`Self::compile`], or [`pin_database`] first.)
    pub(crate) fn discover(&self, json: bool) -> Result<(DiscoverOptions, Project), ExitCode> {
        let options = self.options()?;
        match stb_project::discover(&options) {
            Ok(project) => Ok((options, project)),
            Err(diagnostics) => Err(report(diagnostics, json)),
        }
    }

    /// Discovers and compiles the project for `database` (`--database`, when given: the
    /// relations it creates are named in that database, not the target's), or reports why
    /// not and returns the exit code.
    pub(crate) fn compile(
        &self,
        json: bool,
        database: Option<&str>,
    ) -> Result<(Project, stb_compile::Compiled), ExitCode> {
        self.compile_for(json, database, stb_compile::Output::Artifacts)
    }

    /// [`Self::compile`], producing only `output` (a plan reads no artifact).
    pub(crate) fn compile_for(
        &self,
        json: bool,
        database: Option<&str>,
        output: stb_compile::Output,
    ) -> Result<(Project, stb_compile::Compiled), ExitCode> {
        let (_, mut project) = self.discover(json)?;
        pin_database(&mut project, database);
        match stb_compile::compile_with(&project, output) {
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

/// The project, its connection and `--json`: what a command that reads one target takes.
#[derive(Debug, Args)]
pub(crate) struct TargetArgs {
    #[command(flatten)]
    pub(crate) project: ProjectArgs,
    #[command(flatten)]
    pub(crate) connection: ConnectionArgs,
    /// Print machine-readable JSON on stdout.
    #[arg(long)]
    pub(crate) json: bool,
}

#[derive(Debug, Clone, Args)]
pub(crate) struct ConnectionArgs {
    /// ClickHouse host (env STREAMBUILD_CLICKHOUSE_HOST).
    #[arg(long, value_name = "HOST")]
    pub(crate) host: Option<String>,
    /// ClickHouse HTTP port (env STREAMBUILD_CLICKHOUSE_PORT).
    #[arg(long, value_name = "PORT")]
    pub(crate) port: Option<u16>,
    /// ClickHouse user (env STREAMBUILD_CLICKHOUSE_USERNAME).
    #[arg(long, value_name = "USER")]
    pub(crate) username: Option<String>,
    /// ClickHouse password (env STREAMBUILD_CLICKHOUSE_PASSWORD; prefer the variable, a flag
    /// shows in the process list).
    #[arg(long, value_name = "PASSWORD")]
    pub(crate) password: Option<String>,
    /// The target database (default: the target's `database`, else `default`).
    #[arg(long, value_name = "NAME")]
    pub(crate) database: Option<String>,
}

/// What to rebuild; shared by `stb plan` and `stb build`.
#[derive(Debug, Args)]
pub(crate) struct ScopeArgs {
    /// Models or pipelines to rebuild (`name`, `model:name`, `pipeline:name`); everything
    /// downstream comes with them. Default: every model.
    #[arg(long, short = 's', value_name = "SELECTOR")]
    pub(crate) select: Vec<String>,
    /// Replay only history from this UTC instant on (`YYYY-MM-DD` or
    /// `YYYY-MM-DDTHH:MM:SS[.ffffff][Z]`); direct builds discard the rows before it.
    /// Needs --select or --changed.
    #[arg(long, value_name = "TIME")]
    pub(crate) start_time: Option<String>,
    /// Rebuild the models whose query or identity differs from their last successful
    /// build (and those never built), with everything downstream. Excludes --select.
    #[arg(long)]
    pub(crate) changed: bool,
    /// Also rebuild upstream models the selection reads that do not exist in the target.
    #[arg(long)]
    pub(crate) include_missing_upstream: bool,
    /// Virtual pipelines: rebuild the selection from all retained history even where a
    /// bounded replay would do. Needs --select.
    #[arg(long)]
    pub(crate) full_refresh: bool,
    /// Virtual pipelines: the deployment's id (`YYYYMMDDTHHMMSSZ_<letters or digits>`)
    /// instead of a fresh one.
    #[arg(long, value_name = "ID")]
    pub(crate) deployment_id: Option<String>,
}

impl ScopeArgs {
    /// The scope these flags ask for, read once (the start time here, and never again)
    /// and handed to the engine whole.
    pub(crate) fn scope(&self) -> Result<stb_engine::scope::Scope, crate::output::Failure> {
        let start_time = self
            .start_time
            .as_deref()
            .map(stb_plan::options::parse_start_time)
            .transpose()
            .map_err(|e| crate::output::Failure::from(stb_engine::EngineError::from(e)))?;
        Ok(stb_engine::scope::Scope {
            select: self.select.clone(),
            start_time,
            changed: self.changed,
            include_missing_upstream: self.include_missing_upstream,
            full_refresh: self.full_refresh,
            deployment_id: self.deployment_id.clone(),
        })
    }
}

/// Makes `--database` the project's database, so compiled DDL and the connection agree.
pub(crate) fn pin_database(project: &mut Project, database: Option<&str>) {
    if let Some(database) = database {
        project.database = Some(database.to_owned());
    }
}
