//! A direct plan as JSON: `stb plan --json`, `target/run/plan/plan.json` and the dev
//! server's `/api/plan` all print this document, and the web UI's `DirectPlan` type
//! mirrors it (checked by a test against the examples it writes for the UI).
//!
//! Typed, serialised and read back alike: text borrows from the plan when it is written
//! (at 10,000 models a copy of every name would be tens of megabytes) and is owned when
//! it is read. Members are declared in alphabetical order: the order the document had
//! when it was a `serde_json::Value`, whose maps sort their keys, so its bytes are the
//! same. Values of other crates' types (the shrink guard, the replay windows, the
//! validation) are held as the JSON values they were.

use std::borrow::Cow;

use serde::{Deserialize, Serialize};
use stb_plan::options::StartTime;

use super::Planned;

type Text<'a> = Cow<'a, str>;

/// The document.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DirectJson<'a> {
    pub adapter: Text<'a>,
    /// On an `on_cluster` or `sharded` target: its shards, and what each root's replay
    /// reads and writes on every shard (the steps say which shard runs each capture and
    /// replay). Absent on one server.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster: Option<Box<ClusterJson<'a>>>,
    /// The relations the build creates, in order.
    pub creation: Vec<RelationJson<'a>>,
    pub database: Text<'a>,
    /// One per model rebuilt, in build order.
    pub entries: Vec<EntryJson<'a>>,
    pub execution_scope: Vec<Text<'a>>,
    pub landing_repairs: Vec<LandingRepairJson<'a>>,
    /// `direct`.
    pub mode: Text<'a>,
    pub plan_hash: String,
    pub prerequisite_scope: Vec<PrerequisiteJson<'a>>,
    /// The replays together against the target's budget ([`stb_plan::cost::CostSummary`]).
    pub replay_cost: serde_json::Value,
    /// What each replay root reads ([`stb_plan::cost::ReplayCost`]).
    pub replay_costs: serde_json::Value,
    pub replay_roots: Vec<ReplayRootJson<'a>>,
    /// `all`, `selected` or `changed`.
    pub selection_mode: Text<'a>,
    pub shrink: serde_json::Value,
    pub source_recreations: Vec<RecreationJson<'a>>,
    pub start_time: Option<Text<'a>>,
    /// The relations the build drops first, in order.
    pub teardown: Vec<RelationJson<'a>>,
    pub validation: serde_json::Value,
    pub warnings: Vec<Text<'a>>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RelationJson<'a> {
    /// `table`, `view` or `materialized_view`, as the plan names it.
    pub kind: Text<'a>,
    pub relation: Text<'a>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EntryJson<'a> {
    pub is_replay_root: bool,
    pub model: Text<'a>,
    pub reason: Text<'a>,
    pub relation_names: Vec<Text<'a>>,
    pub sql_change: SqlChangeJson<'a>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SqlChangeJson<'a> {
    pub current_hash: Text<'a>,
    pub previous_hash: Option<Text<'a>>,
    /// `new`, `changed` or `unchanged`.
    pub status: Text<'a>,
    pub unified_diff: Text<'a>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LandingRepairJson<'a> {
    pub missing: Vec<Text<'a>>,
    pub source: Text<'a>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PrerequisiteJson<'a> {
    pub framework_managed: bool,
    pub name: Text<'a>,
    pub present: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReplayRootJson<'a> {
    pub bounded: bool,
    pub driving_input: Text<'a>,
    pub driving_input_relation: Text<'a>,
    pub model: Text<'a>,
    pub model_key: ModelKeyJson<'a>,
    pub propagated_models: Vec<Text<'a>>,
    /// `driving_input_not_rebuilt` or `side_input_rebuilt`.
    pub reason: Text<'a>,
    pub replay_boundary_mode: Text<'a>,
    /// What retained history restores against what the table holds; `null` when the
    /// shrink guard did not measure it.
    pub replay_window: serde_json::Value,
    pub settings: Vec<SettingJson<'a>>,
    pub skips_keys_already_written: Option<Vec<Text<'a>>>,
    pub stage: usize,
    pub start_time_column: Option<Text<'a>>,
    pub waits_for: Vec<Text<'a>>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClusterJson<'a> {
    pub name: Text<'a>,
    pub replays: Vec<ClusterReplayJson<'a>>,
    pub shards: Vec<ShardJson<'a>>,
    /// `on_cluster` or `sharded`.
    pub topology: Text<'a>,
}

/// One replay root as every shard runs it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClusterReplayJson<'a> {
    pub model: Text<'a>,
    /// What a shard's capture and replay read: its part of the driving input.
    pub reads: Text<'a>,
    /// Where the replayed rows go (a sharded target's `Distributed` table places them).
    pub writes: Text<'a>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ShardJson<'a> {
    /// Its replicas' `host:port`.
    pub replicas: Vec<Text<'a>>,
    pub shard: u32,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelKeyJson<'a> {
    pub name: Text<'a>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SettingJson<'a> {
    pub name: Text<'a>,
    pub value: Text<'a>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RecreationJson<'a> {
    pub changes: Vec<Text<'a>>,
    pub source: Text<'a>,
}

fn texts<'a>(items: impl IntoIterator<Item = &'a str>) -> Vec<Text<'a>> {
    items.into_iter().map(Cow::Borrowed).collect()
}

fn relations(list: &[(stb_plan::direct::RelationKind, String)]) -> Vec<RelationJson<'_>> {
    list.iter()
        .map(|(kind, name)| RelationJson {
            kind: Cow::Borrowed(kind.as_str()),
            relation: Cow::Borrowed(name),
        })
        .collect()
}

/// The plan's JSON document.
#[must_use]
pub fn json(planned: &Planned) -> DirectJson<'_> {
    let by_model = planned.relations_by_model();
    let windows: std::collections::HashMap<&str, _> = planned
        .replay_windows
        .iter()
        .map(|w| (w.model.as_str(), w))
        .collect();
    let entries = planned
        .plan
        .entries
        .iter()
        .zip(&planned.changes)
        .map(|(entry, (_, change))| EntryJson {
            is_replay_root: entry.is_replay_root,
            model: Cow::Borrowed(&entry.model),
            reason: Cow::Borrowed(entry.reason.as_str()),
            relation_names: texts(
                by_model
                    .get(entry.model.as_str())
                    .into_iter()
                    .flatten()
                    .copied(),
            ),
            sql_change: SqlChangeJson {
                current_hash: Cow::Borrowed(&change.current_hash),
                previous_hash: change.previous_hash.as_deref().map(Cow::Borrowed),
                status: Cow::Borrowed(change.status.as_str()),
                unified_diff: Cow::Borrowed(&change.unified_diff),
            },
        })
        .collect();
    let replay_roots = planned
        .roots()
        .iter()
        .map(|root| ReplayRootJson {
            bounded: root.bounded,
            driving_input: Cow::Borrowed(&root.driving_input),
            driving_input_relation: Cow::Borrowed(&root.template.anchor.relation),
            model: Cow::Borrowed(&root.model),
            model_key: ModelKeyJson {
                name: Cow::Borrowed(&root.model),
            },
            propagated_models: texts(root.propagated.iter().map(String::as_str)),
            reason: Cow::Borrowed(if root.waits_for.is_empty() {
                "driving_input_not_rebuilt"
            } else {
                "side_input_rebuilt"
            }),
            replay_boundary_mode: Cow::Borrowed(root.template.anchor.mode.as_str()),
            replay_window: windows
                .get(root.model.as_str())
                .and_then(|window| serde_json::to_value(window).ok())
                .unwrap_or_default(),
            settings: root
                .template
                .settings
                .iter()
                .map(|(name, value)| SettingJson {
                    name: Cow::Borrowed(name),
                    value: Cow::Borrowed(value),
                })
                .collect(),
            skips_keys_already_written: root
                .template
                .skip_existing
                .map(|keys| texts(keys.iter().copied())),
            stage: root.stage,
            start_time_column: root.template.anchor.time_column.map(Cow::Borrowed),
            waits_for: texts(root.waits_for.iter().map(String::as_str)),
        })
        .collect();
    DirectJson {
        adapter: Cow::Borrowed("clickhouse"),
        cluster: planned
            .workflow
            .cluster
            .as_ref()
            .map(|work| Box::new(cluster(work))),
        creation: relations(&planned.plan.creation),
        database: Cow::Borrowed(&planned.database),
        entries,
        execution_scope: texts(planned.plan.entries.iter().map(|e| e.model.as_str())),
        landing_repairs: planned
            .repairs
            .iter()
            .map(|(source, missing)| LandingRepairJson {
                missing: texts(missing.iter().copied()),
                source: Cow::Borrowed(source),
            })
            .collect(),
        mode: Cow::Borrowed("direct"),
        plan_hash: planned.plan_hash(),
        prerequisite_scope: planned
            .plan
            .prerequisites
            .iter()
            .map(|p| PrerequisiteJson {
                framework_managed: p.framework_managed,
                name: Cow::Borrowed(&p.name),
                present: p.present,
            })
            .collect(),
        replay_cost: serde_json::to_value(planned.cost_summary()).unwrap_or_default(),
        replay_costs: serde_json::to_value(&planned.replay_costs).unwrap_or_default(),
        replay_roots,
        selection_mode: Cow::Borrowed(planned.selection_mode()),
        shrink: serde_json::to_value(planned.shrink_summary()).unwrap_or_default(),
        source_recreations: planned
            .recreations
            .iter()
            .map(|(source, changes)| RecreationJson {
                changes: texts(changes.iter().map(String::as_str)),
                source: Cow::Borrowed(source),
            })
            .collect(),
        start_time: planned
            .start_time
            .as_ref()
            .map(|start| Cow::Borrowed(StartTime::as_str(start))),
        teardown: relations(&planned.plan.teardown),
        validation: serde_json::to_value(&planned.validated).unwrap_or_default(),
        warnings: texts(planned.plan.warnings.iter().map(String::as_str)),
    }
}

fn cluster(work: &stb_plan::cluster::ClusterWork) -> ClusterJson<'_> {
    let target = &work.target;
    ClusterJson {
        name: Cow::Borrowed(&target.cluster.name),
        replays: work
            .shard_roots
            .iter()
            .map(|root| ClusterReplayJson {
                model: Cow::Borrowed(&root.model),
                reads: Cow::Borrowed(root.template.anchor.read_from()),
                writes: Cow::Borrowed(&root.template.target),
            })
            .collect(),
        shards: target
            .shards
            .iter()
            .map(|shard| ShardJson {
                replicas: texts(shard.replicas.iter().map(String::as_str)),
                shard: shard.number,
            })
            .collect(),
        topology: Cow::Borrowed(target.cluster.topology.as_str()),
    }
}
