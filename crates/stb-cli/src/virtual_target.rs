//! What the commands on virtual deployments share: their flags, and connecting to a
//! project that has virtual pipelines.

use std::io::{BufRead, Write};
use std::process::ExitCode;

use crate::output::{Failure, fail};

pub(crate) use crate::args::TargetArgs as Common;

/// Discovers the project (it must have virtual pipelines) and connects.
pub(crate) fn connect_virtual(
    common: &Common,
) -> Result<(stb_warehouse::Client, String), ExitCode> {
    let project = match common.project.discover(common.json) {
        Ok((_, project)) => project,
        Err(code) => return Err(code),
    };
    connect_project(common, &project)
}

/// Compiles the project (it must have virtual pipelines) and connects.
pub(crate) fn connect_compiled(
    common: &Common,
) -> Result<
    (
        stb_project::Project,
        stb_compile::Compiled,
        stb_warehouse::Client,
        String,
    ),
    ExitCode,
> {
    let (project, compiled) = common
        .project
        .compile(common.json, common.connection.database.as_deref())?;
    let (client, database) = connect_project(common, &project)?;
    Ok((project, compiled, client, database))
}

fn connect_project(
    common: &Common,
    project: &stb_project::Project,
) -> Result<(stb_warehouse::Client, String), ExitCode> {
    stb_engine::deployments::reports::require_virtual(project)
        .map_err(|error| fail(&Failure::from(error), common.json))?;
    common
        .connection
        .connect(project)
        .map_err(|failure| fail(&failure, common.json))
}

/// Who holds the target lock while a command switches or drops relations.
pub(crate) fn lock_owner() -> String {
    std::env::var("STREAMBUILD_RUN_INVOCATION_ID")
        .ok()
        .filter(|id| !id.trim().is_empty())
        .unwrap_or_else(|| uuid::Uuid::new_v4().to_string())
}

/// `--json` without `--auto-approve` for a command that asks first.
pub(crate) fn refuse_unapproved_json() -> ExitCode {
    fail(
        &Failure {
            code: stb_engine::build::APPROVAL_CODE,
            message: "--json cannot prompt for confirmation".into(),
            hint: "add --auto-approve".into(),
        },
        true,
    )
}

/// Asks `question` at the terminal; anything but `y`/`yes` declines.
pub(crate) fn confirmed(question: &str) -> bool {
    let _ = write!(std::io::stdout().lock(), "{question} [y/N] ");
    let _ = std::io::stdout().flush();
    let mut answer = String::new();
    if std::io::stdin().lock().read_line(&mut answer).is_err() {
        return false;
    }
    matches!(answer.trim().to_ascii_lowercase().as_str(), "y" | "yes")
}
