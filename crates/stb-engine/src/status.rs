//! `stb status`: the project as the warehouse holds it now. Who holds the target lock,
//! which runs are live, and for every source and model whether rows are arriving
//! (activity) and how old its newest row is against its source's expectation (freshness).
//! A virtual model is read through its stable view's active copy.

use serde::Serialize;
use stb_compile::Compiled;
use stb_project::Project;
use stb_project::policies::Freshness;
use stb_project::sources::SourceKind;
use stb_warehouse::Client;

use crate::EngineError;
use crate::activity::judge::{self, Activity, Capabilities, FreshnessState, Newest};
use crate::runs::{RunSummary, Windows};

/// One source or model.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RelationStatus {
    pub name: String,
    /// Sources: `kafka`, `stream_table`, `postgres`; models: `table` or `view`.
    pub kind: String,
    pub pipeline: Option<String>,
    /// The physical table its rows are in (a virtual model's active copy).
    pub relation: Option<String>,
    /// Whether that table exists.
    pub built: bool,
    /// `None` for views and pulls read through a table function: nothing is written.
    pub activity: Option<Activity>,
    pub freshness: FreshnessState,
}

/// The project's live state in one target.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ProjectStatus {
    pub database: String,
    /// The warehouse's clock when it was read.
    pub captured_at: String,
    pub window_seconds: u64,
    pub capabilities: Capabilities,
    /// The run holding the target's mutation lock.
    pub lock_holder: Option<String>,
    /// Runs still `running` or `unresponsive`.
    pub live_runs: Vec<RunSummary>,
    pub sources: Vec<RelationStatus>,
    pub models: Vec<RelationStatus>,
}

/// The time column a source's freshness is judged by: when rows landed if it records
/// that, else their event time.
fn source_time_column(source: &stb_project::sources::Source) -> Option<String> {
    match source.kind {
        SourceKind::Kafka => Some("_replay_landed_at".to_owned()),
        SourceKind::StreamTable => {
            ["_replay_landed_at", "_replay_timestamp"]
                .iter()
                .find_map(|role| {
                    source
                        .columns
                        .iter()
                        .find(|(r, _)| r == role)
                        .map(|(_, column)| column.clone())
                })
        }
        SourceKind::Postgres => None,
    }
}

/// The source a model's rows come from, following driving inputs through models.
fn driving_source<'c>(compiled: &'c Compiled, model: &str) -> Option<&'c str> {
    let mut current = model;
    for _ in 0..=compiled.plan_models.len() {
        let input = compiled
            .plan_models
            .iter()
            .find(|m| m.name == current)?
            .driving_input
            .as_deref()?;
        if compiled.plan_sources.iter().any(|s| s.name == input) {
            return Some(input);
        }
        current = input;
    }
    None
}

/// One relation before the warehouse's evidence is read.
struct Planned {
    status: RelationStatus,
    time_column: Option<String>,
    expectation: Option<Freshness>,
    writes: bool,
}

fn planned_relations(
    project: &Project,
    compiled: &Compiled,
    state: &crate::deployments::State,
) -> (Vec<Planned>, Vec<Planned>) {
    let expectation_of = |source: &str| {
        project
            .sources
            .iter()
            .find(|s| s.name == source)
            .and_then(|s| s.freshness.or(project.defaults.freshness))
    };
    let blank = |name: &str, kind: &str, pipeline: Option<String>, relation: Option<String>| {
        RelationStatus {
            name: name.to_owned(),
            kind: kind.to_owned(),
            pipeline,
            built: relation
                .as_ref()
                .is_some_and(|r| state.relations.contains(r)),
            relation,
            activity: None,
            freshness: judge::freshness(&Newest::default(), None),
        }
    };
    let sources = project
        .sources
        .iter()
        .map(|source| {
            let relation = compiled
                .plan_sources
                .iter()
                .find(|s| s.name == source.name)
                .and_then(|s| s.relation.clone());
            let kind = match source.kind {
                SourceKind::Kafka => "kafka",
                SourceKind::StreamTable => "stream_table",
                SourceKind::Postgres => "postgres",
            };
            Planned {
                writes: relation.is_some(),
                status: blank(&source.name, kind, None, relation),
                time_column: source_time_column(source),
                expectation: expectation_of(&source.name),
            }
        })
        .collect();
    let models = compiled
        .plan_models
        .iter()
        .map(|model| {
            let table = model
                .relations
                .iter()
                .find(|(kind, _)| *kind == stb_plan::direct::RelationKind::Table)
                .map(|(_, name)| name.clone());
            // A stable view reads the active copy: that is where rows arrive.
            let physical = table
                .as_ref()
                .map(|t| state.bindings.get(t).cloned().unwrap_or_else(|| t.clone()));
            let columns = physical
                .as_ref()
                .and_then(|p| state.columns.get(p))
                .cloned()
                .unwrap_or_default();
            let time_column = ["_replay_landed_at", "_replay_timestamp"]
                .iter()
                .find(|c| columns.iter().any(|(name, _)| name == *c))
                .map(|c| (*c).to_owned());
            Planned {
                writes: model.is_table,
                status: blank(
                    &model.name,
                    if model.is_table { "table" } else { "view" },
                    Some(model.pipeline.clone()),
                    physical,
                ),
                time_column,
                expectation: driving_source(compiled, &model.name).and_then(expectation_of),
            }
        })
        .collect();
    (sources, models)
}

/// Reads the project's live state: two catalog reads, the live runs, one query per
/// activity log and one for every relation's newest row.
///
/// # Errors
/// The catalog or the runs could not be read (activity or newest rows that cannot be read
/// are reported `unknown` instead).
pub fn read(
    client: &Client,
    database: &str,
    project: &Project,
    compiled: &Compiled,
    window_seconds: u64,
    windows: Windows,
) -> Result<ProjectStatus, EngineError> {
    let error = |e: stb_warehouse::WarehouseError| EngineError::from(&e);
    let state = crate::deployments::read_state(client, database)?;
    let captured_at = crate::deployments::warehouse_now(client)?;
    let lock_holder = stb_warehouse::lock_holder(client, database).map_err(error)?;
    let live_runs = stb_warehouse::runs::active(client, database, windows.presumed_failed_ms)
        .map_err(error)?
        .iter()
        .map(|run| crate::runs::summarise(run, windows))
        .filter(|run| matches!(run.status, "running" | "unresponsive"))
        .collect();
    let capabilities = crate::activity::capabilities(client).map_err(error)?;
    let (mut sources, mut models) = planned_relations(project, compiled, &state);
    let built = |p: &&mut Planned| p.status.built;
    let tables: Vec<String> = sources
        .iter_mut()
        .chain(models.iter_mut())
        .filter(built)
        .filter(|p| p.writes)
        .filter_map(|p| p.status.relation.clone())
        .collect();
    let evidence =
        crate::activity::evidence(client, database, &tables, capabilities, window_seconds);
    let timed: Vec<(String, String)> = sources
        .iter_mut()
        .chain(models.iter_mut())
        .filter(built)
        .filter_map(|p| Some((p.status.relation.clone()?, p.time_column.clone()?)))
        .collect();
    let newest = crate::activity::newest(client, database, &timed);
    let judged = |planned: Vec<Planned>| -> Vec<RelationStatus> {
        planned
            .into_iter()
            .map(|p| {
                let mut status = p.status;
                let relation = status.relation.clone().unwrap_or_default();
                if status.built && p.writes {
                    status.activity = evidence
                        .get(&relation)
                        .map(|e| judge::activity(capabilities, e, window_seconds));
                }
                // Its newest row, when it is built, has a column to tell by and could be
                // read; anything else is unknown.
                let found = if status.built {
                    newest.get(&relation).cloned().unwrap_or_default()
                } else {
                    Newest::default()
                };
                status.freshness = judge::freshness(&found, p.expectation);
                status
            })
            .collect()
    };
    Ok(ProjectStatus {
        database: database.to_owned(),
        captured_at,
        window_seconds,
        capabilities,
        lock_holder,
        live_runs,
        sources: judged(sources),
        models: judged(models),
    })
}
