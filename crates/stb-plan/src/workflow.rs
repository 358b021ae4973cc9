//! The direct build's workflow: every statement, in the order it runs, assembled once
//! before confirmation. Replay statements are templates until their boundary is captured.
//!
//! Phases are monotonic: preparation, teardown, realization, stabilization, boundary,
//! replay. All boundaries are captured before the first replay so every capture is taken
//! as close as possible to the moment the new views went live.

use std::collections::BTreeMap;

use crate::direct::{DirectPlan, PlanError, PlanModel, PlanSource};
use crate::options::StartTime;
use crate::replay::{
    Anchor, BoundaryMode, ReplayTemplate, capture_sql, existing_keys, required_columns,
};

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Phase {
    Preparation,
    Teardown,
    Realization,
    Stabilization,
    Boundary,
    Replay,
}

impl Phase {
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Preparation => "preparation",
            Self::Teardown => "teardown",
            Self::Realization => "realization",
            Self::Stabilization => "stabilization",
            Self::Boundary => "boundary",
            Self::Replay => "replay",
        }
    }
}

/// What a step does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// A statement known in full now.
    Statement(String),
    /// Runs root `n`'s capture query and keeps its answer.
    Capture(usize),
    /// Waits until the inserts running when the boundaries were captured have finished,
    /// so every row they committed to a driving input has reached the new views' tables
    /// before a replay looks for rows the views already wrote.
    SettleInserts,
    /// Renders and runs root `n`'s replay from its capture.
    Replay(usize),
}

/// The running inserts a settle step waits for.
pub const RUNNING_INSERTS_SQL: &str =
    "SELECT query_id FROM system.processes WHERE query_kind = 'Insert'";

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Step {
    pub id: String,
    pub phase: Phase,
    pub action: Action,
}

impl Step {
    /// `query` for reads, `mutation` for everything that changes the warehouse.
    #[must_use]
    pub fn intent(&self) -> &'static str {
        match self.action {
            Action::Capture(_) | Action::SettleInserts => "query",
            Action::Statement(_) if self.phase == Phase::Stabilization => "query",
            Action::Statement(_) | Action::Replay(_) => "mutation",
        }
    }
}

/// One replay root, ready to capture and replay.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RootReplay {
    pub model: String,
    pub driving_input: String,
    pub propagated: Vec<String>,
    pub capture_sql: String,
    pub template: ReplayTemplate,
}

impl RootReplay {
    /// What the statement records hold for the replay until its boundary is known.
    #[must_use]
    pub fn placeholder(&self) -> String {
        format!(
            "-- replay_{}: INSERT INTO {} from {} bounded by capture_replay_{} ({} boundary); rendered at runtime",
            self.model,
            self.template.target,
            self.driving_input,
            self.model,
            self.template.anchor.mode.as_str()
        )
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Workflow {
    pub database: String,
    pub steps: Vec<Step>,
    pub roots: Vec<RootReplay>,
    pub start_time: Option<StartTime>,
}

impl Workflow {
    /// The statement a step records before it runs (replays: their placeholder).
    #[must_use]
    pub fn recorded_sql(&self, step: &Step) -> String {
        match &step.action {
            Action::Statement(sql) => sql.clone(),
            Action::Capture(root) => self.roots[*root].capture_sql.clone(),
            Action::SettleInserts => RUNNING_INSERTS_SQL.to_owned(),
            Action::Replay(root) => self.roots[*root].placeholder(),
        }
    }
}

/// How the workflow is built.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkflowOptions {
    pub database: String,
    /// How long the new views run before the boundary is captured, so inserts that began
    /// before they existed have finished.
    pub stabilization_seconds: u32,
    pub start_time: Option<StartTime>,
}

fn qualified(database: &str, relation: &str) -> String {
    stb_ddl::QualifiedName::new(database, relation).to_string()
}

/// Assembles the direct workflow of `plan`.
///
/// # Errors
/// A replay root whose driving input lacks the columns its boundary mode needs.
pub fn assemble(
    plan: &DirectPlan,
    models: &[PlanModel],
    sources: &[PlanSource],
    options: &WorkflowOptions,
) -> Result<Workflow, PlanError> {
    let by_name: BTreeMap<&str, &PlanModel> = models.iter().map(|m| (m.name.as_str(), m)).collect();
    let database = &options.database;
    let mut steps = vec![Step {
        id: "prepare_target_database".into(),
        phase: Phase::Preparation,
        action: Action::Statement(format!(
            "CREATE DATABASE IF NOT EXISTS {}",
            stb_ddl::identifier(database)
        )),
    }];
    for (_, relation) in &plan.teardown {
        // DROP TABLE drops views too, so a model that changed kind is still torn down.
        steps.push(Step {
            id: format!("drop_{relation}"),
            phase: Phase::Teardown,
            action: Action::Statement(format!(
                "DROP TABLE IF EXISTS {} SYNC",
                qualified(database, relation)
            )),
        });
    }
    for (kind, relation) in &plan.creation {
        let statement = models
            .iter()
            .filter(|m| plan.entries.iter().any(|e| e.model == m.name))
            .find_map(|m| {
                m.relations
                    .iter()
                    .position(|(k, r)| k == kind && r == relation)
                    .and_then(|i| m.create_statements.get(i))
            });
        if let Some(statement) = statement {
            steps.push(Step {
                id: format!("realize_{relation}"),
                phase: Phase::Realization,
                action: Action::Statement(statement.clone()),
            });
        }
    }
    let roots = plan
        .replay_roots
        .iter()
        .map(|root| root_replay(root, &by_name, sources, options))
        .collect::<Result<Vec<_>, _>>()?;
    if !roots.is_empty() && options.stabilization_seconds > 0 {
        let seconds = options.stabilization_seconds;
        steps.push(Step {
            id: "wait_for_live_stabilization".into(),
            phase: Phase::Stabilization,
            // Server-side, so the wait is part of the recorded workflow; at most one second
            // per row keeps it under ClickHouse's per-block sleep limit.
            action: Action::Statement(format!(
                "SELECT sleepEachRow(1) FROM numbers({seconds}) SETTINGS max_block_size = 1, function_sleep_max_microseconds_per_block = {}",
                u64::from(seconds) * 1_000_000
            )),
        });
    }
    for (index, root) in roots.iter().enumerate() {
        steps.push(Step {
            id: format!("capture_replay_{}", root.model),
            phase: Phase::Boundary,
            action: Action::Capture(index),
        });
    }
    if roots.iter().any(|r| r.template.skip_existing.is_some()) {
        steps.push(Step {
            id: "wait_for_inflight_inserts".into(),
            phase: Phase::Boundary,
            action: Action::SettleInserts,
        });
    }
    for (index, root) in roots.iter().enumerate() {
        steps.push(Step {
            id: format!("replay_{}", root.model),
            phase: Phase::Replay,
            action: Action::Replay(index),
        });
    }
    Ok(Workflow {
        database: database.clone(),
        steps,
        roots,
        start_time: options.start_time.clone(),
    })
}

fn root_replay(
    root: &crate::direct::ReplayRoot,
    by_name: &BTreeMap<&str, &PlanModel>,
    sources: &[PlanSource],
    options: &WorkflowOptions,
) -> Result<RootReplay, PlanError> {
    let model = by_name.get(root.model.as_str()).ok_or_else(|| PlanError {
        message: format!("replay root '{}' is not a compiled model", root.model),
        hint: "recompile the project",
    })?;
    let mode = model
        .boundary_mode
        .as_deref()
        .and_then(BoundaryMode::parse)
        .ok_or_else(|| PlanError {
            message: format!(
                "'{}' has no replay boundary mode: its pipeline reads no source with replay_boundary",
                root.model
            ),
            hint: "give the pipeline's source a replay_boundary mode",
        })?;
    let (reference, columns) = match by_name.get(root.driving_input.as_str()) {
        Some(input) => (
            input.reference.clone(),
            input
                .output_columns
                .iter()
                .map(|(name, _)| name.clone())
                .filter(|name| name.starts_with("_replay_"))
                .collect::<Vec<_>>(),
        ),
        None => {
            let source = sources
                .iter()
                .find(|s| s.name == root.driving_input)
                .ok_or_else(|| PlanError {
                    message: format!(
                        "'{}' reads unknown input '{}'",
                        root.model, root.driving_input
                    ),
                    hint: "recompile the project",
                })?;
            (
                source.reference.clone().unwrap_or_default(),
                source.replay_columns.clone(),
            )
        }
    };
    let time_column = required_columns(mode, &columns, options.start_time.is_some()).map_err(
        |missing| PlanError {
            message: format!(
                "replay root '{}' reads '{}', which has no column {missing}: a {} replay{} needs it",
                root.model,
                root.driving_input,
                mode.as_str(),
                if options.start_time.is_some() { " with --start-time" } else { "" }
            ),
            hint: "select the upstream model too (--select <upstream>) so the replay starts where the lineage columns exist",
        },
    )?;
    if model.replay_query.len() < 2 {
        return Err(PlanError {
            message: format!(
                "replay root '{}' does not reference its driving input '{}' where a replay can bound it",
                root.model, root.driving_input
            ),
            hint: "reference the driving input with __source(...) or __ref(...) in FROM",
        });
    }
    let anchor = Anchor {
        relation: reference,
        mode,
        time_column,
    };
    Ok(RootReplay {
        model: root.model.clone(),
        driving_input: root.driving_input.clone(),
        propagated: root.propagated.clone(),
        capture_sql: capture_sql(&anchor, options.start_time.as_ref()),
        template: ReplayTemplate {
            target: model.reference.clone(),
            query_parts: model.replay_query.clone(),
            anchor,
            settings: model.replay_settings.clone(),
            skip_existing: existing_keys(
                mode,
                model.aggregate,
                &model
                    .output_columns
                    .iter()
                    .map(|(name, _)| name.clone())
                    .collect::<Vec<_>>(),
            ),
        },
    })
}

#[cfg(test)]
mod tests;
