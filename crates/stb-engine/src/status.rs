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
    /// Whether that table (or a view model's view) exists.
    pub built: bool,
    /// Every relation the model owns in the target (for a virtual model: its stable
    /// view), and whether it exists; a model with one missing is incomplete.
    pub relations: Vec<OwnedRelation>,
    /// The rows `relation` holds now (a table's parts count them; a view is counted);
    /// `None` when it is not built or could not be counted.
    pub rows: Option<u64>,
    /// The bytes `relation` takes (a table's parts; `None` for views, for tables not built
    /// and where the engine does not know).
    pub bytes: Option<u64>,
    /// `None` for views and pulls read through a table function: nothing is written.
    pub activity: Option<Activity>,
    pub freshness: FreshnessState,
}

/// A relation a model owns, and whether the target holds it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct OwnedRelation {
    pub name: String,
    /// `table`, `materialized_view` or `view`.
    pub kind: &'static str,
    pub present: bool,
}

/// Whether the target is whole, and what mends it when it is not.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TargetCondition {
    /// `healthy`; `half_built` (a build stopped and was neither given back nor finished:
    /// tables of it are still set aside); `incomplete` (relations of models are missing).
    pub state: &'static str,
    pub message: Option<String>,
    /// The command that mends it.
    pub mend: Option<String>,
    /// Tables a stopped build set aside.
    pub set_aside: Vec<String>,
    /// Models with a relation missing.
    pub incomplete_models: Vec<String>,
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
    /// Half-built or incomplete targets say so, with the command that mends them.
    pub target: TargetCondition,
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
            relations: Vec::new(),
            rows: None,
            bytes: None,
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
            use stb_plan::direct::RelationKind;
            // Where its rows are read: a table model's table, a view model's view.
            let table = model
                .relations
                .iter()
                .find(|(kind, _)| matches!(kind, RelationKind::Table | RelationKind::View))
                .map(|(_, name)| name.clone());
            let is_virtual = project.pipelines.iter().any(|p| {
                p.name == model.pipeline && p.mode == stb_project::project_config::Mode::Virtual
            });
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
            let mut status = blank(
                &model.name,
                if model.is_table { "table" } else { "view" },
                Some(model.pipeline.clone()),
                physical,
            );
            // A deployment's views carry its id; what readers rely on is the stable view.
            status.relations = model
                .relations
                .iter()
                .filter(|(kind, _)| !is_virtual || *kind != RelationKind::MaterializedView)
                .map(|(kind, name)| OwnedRelation {
                    name: name.clone(),
                    kind: kind.as_str(),
                    present: state.relations.contains(name),
                })
                .collect();
            Planned {
                writes: model.is_table,
                status,
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
    let counts = row_counts(client, database, sources.iter().chain(&models));
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
                if let Some(counted) = counts.get(&relation).filter(|_| status.built) {
                    status.rows = Some(counted.rows);
                    status.bytes = counted.bytes;
                }
                status
            })
            .collect()
    };
    let suspended = match &lock_holder {
        Some(holder) => crate::unlock::suspended_under(client, database, holder)?,
        None => None,
    };
    Ok(ProjectStatus {
        database: database.to_owned(),
        captured_at,
        window_seconds,
        capabilities,
        lock_holder,
        live_runs,
        sources: judged(sources),
        target: condition(&state, &models, suspended),
        models: judged(models),
    })
}

/// The rows of every built relation of `planned`: tables by their parts' count, with their
/// bytes (one query), views by counting them (one query each, bounded to a few seconds; one
/// that does not answer in time stays uncounted).
fn row_counts<'p>(
    client: &Client,
    database: &str,
    planned: impl Iterator<Item = &'p Planned> + Clone,
) -> std::collections::BTreeMap<String, stb_warehouse::Stored> {
    let built = planned.filter(|p| p.status.built);
    let tables: Vec<String> = built
        .clone()
        .filter(|p| p.writes)
        .filter_map(|p| p.status.relation.clone())
        .collect();
    let mut counts = client.stored(database, &tables).unwrap_or_default();
    for view in built
        .filter(|p| !p.writes)
        .filter_map(|p| p.status.relation.as_ref())
    {
        let counted = client
            .query(&format!(
                "SELECT toString(count()) AS n FROM {} SETTINGS max_execution_time = 5",
                stb_ddl::QualifiedName::new(database, view)
            ))
            .ok()
            .and_then(|rows| rows.text(0, "n"))
            .and_then(|n| n.parse().ok());
        if let Some(rows) = counted {
            counts.insert(view.clone(), stb_warehouse::Stored { rows, bytes: None });
        }
    }
    counts
}

/// Suspended (a build keeps the lock to be resumed) before half-built (a stopped build's
/// asides are there) before incomplete (relations missing).
fn condition(
    state: &crate::deployments::State,
    models: &[Planned],
    suspended: Option<(String, serde_json::Value)>,
) -> TargetCondition {
    let set_aside: Vec<String> = state
        .relations
        .iter()
        .filter(|r| stb_plan::restore::is_aside(r))
        .cloned()
        .collect();
    let incomplete_models: Vec<String> = models
        .iter()
        .filter(|p| p.status.relations.iter().any(|r| !r.present))
        .map(|p| p.status.name.clone())
        .collect();
    let (state, message, mend) = if let Some((run, at)) = suspended {
        (
            "suspended",
            Some(format!(
                "build {run} is suspended in its replay of {} {}: what it built is partly filled",
                at["model"].as_str().unwrap_or("?"),
                match (at["nextChunk"].as_u64(), at["chunks"].as_u64()) {
                    (Some(next), Some(chunks)) if next > chunks => {
                        format!("after its last chunk ({chunks})")
                    }
                    (next, chunks) => format!(
                        "at chunk {} of {}",
                        next.unwrap_or_default(),
                        chunks.unwrap_or_default()
                    ),
                }
            )),
            Some(format!(
                "stb build --resume {run} (or stb unlock to give the target back)"
            )),
        )
    } else if !set_aside.is_empty() {
        (
            "half_built",
            Some(format!(
                "a build stopped and was neither given back nor finished: {} set aside",
                set_aside.join(", ")
            )),
            Some("stb unlock".to_owned()),
        )
    } else if !incomplete_models.is_empty() {
        (
            "incomplete",
            Some(format!(
                "relations are missing for {}",
                incomplete_models.join(", ")
            )),
            Some("stb build --changed".to_owned()),
        )
    } else {
        ("healthy", None, None)
    };
    TargetCondition {
        state,
        message,
        mend,
        set_aside,
        incomplete_models,
    }
}
