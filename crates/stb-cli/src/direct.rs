//! The plan `stb plan` shows and `stb build` runs: the CLI's edge around the engine
//! (connect, read, plan, measure), shared by both commands.

use std::sync::Arc;

use stb_engine::direct::{Planned, Settings, measure, prepare as plan, read};

use crate::args::{ConnectionArgs, ScopeArgs};
use crate::output::Failure;

/// A plan and the connection it was read through.
pub(crate) struct Prepared {
    pub(crate) planned: Planned,
    pub(crate) client: Arc<stb_warehouse::Client>,
}

/// Checks the flags and selectors, connects, reads the warehouse, plans and measures the
/// shrink guard.
pub(crate) fn prepare(
    project: &stb_project::Project,
    compiled: &stb_compile::Compiled,
    connection: &ConnectionArgs,
    scope: &ScopeArgs,
) -> Result<Prepared, Failure> {
    let resolved = scope.request().resolve(compiled)?;
    let (client, database) = connection.connect(project)?;
    let reads = read(&client, &database, compiled)?;
    let settings = Settings::from_env(&|name| std::env::var(name).ok())?;
    let mut planned = plan(project, compiled, &resolved, &reads, settings)?;
    measure(&client, &mut planned)?;
    Ok(Prepared {
        planned,
        client: Arc::new(client),
    })
}
