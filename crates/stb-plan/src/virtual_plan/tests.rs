use std::collections::{BTreeMap, BTreeSet};

use stb_model::planning::{Deployable, PlanModel, QueryPart, RelationKind, ReplayPolicy};

use super::*;

const ACTIVE: &str = "20261201T090000Z_aaaaaa";

/// A table model `name` reading `input` (a source, or a model when `from_model`).
fn table(name: &str, input: &str, from_model: bool, columns: &[(&str, &str)]) -> PlanModel {
    let relation = format!("tbl__{name}");
    let source_part = if from_model {
        QueryPart::Model(input.to_owned())
    } else {
        QueryPart::Text(format!("db.raw__{input}"))
    };
    PlanModel {
        name: name.to_owned(),
        pipeline: "pl__p".to_owned(),
        is_table: true,
        relations: vec![
            (RelationKind::Table, relation.clone()),
            (RelationKind::MaterializedView, format!("mv__{name}")),
        ],
        reads: vec![input.to_owned()],
        driving_input: Some(input.to_owned()),
        output_columns: columns
            .iter()
            .map(|(n, t)| ((*n).to_owned(), (*t).to_owned()))
            .collect(),
        storage: "{\"engine\":\"MergeTree()\"}".to_owned(),
        boundary_mode: Some("offsets".to_owned()),
        reference: format!("db.{relation}"),
        deployable: Deployable {
            query_parts: vec![QueryPart::Text("SELECT * FROM ".to_owned()), source_part],
            table: Some(stb_ddl::Table {
                name: stb_ddl::QualifiedName::new("db", &relation),
                columns: columns
                    .iter()
                    .map(|(n, t)| stb_ddl::Column::new(n, t))
                    .collect(),
                engine: "MergeTree()".to_owned(),
                order_by: vec!["amount".to_owned()],
                partition_by: None,
                ttl: None,
                settings: Vec::new(),
            }),
            materialized_view: Some(stb_ddl::MaterializedView {
                name: stb_ddl::QualifiedName::new("db", &format!("mv__{name}")),
                target: stb_ddl::QualifiedName::new("db", &relation),
                query: String::new(),
                refresh: None,
            }),
            view: None,
        },
        ..PlanModel::default()
    }
}

fn view(name: &str, input: &str) -> PlanModel {
    PlanModel {
        name: name.to_owned(),
        pipeline: "pl__p".to_owned(),
        is_table: false,
        relations: vec![(RelationKind::View, format!("view__{name}"))],
        reads: vec![input.to_owned()],
        deployable: Deployable {
            query_parts: vec![
                QueryPart::Text("SELECT count() FROM ".to_owned()),
                QueryPart::Model(input.to_owned()),
            ],
            view: Some(stb_ddl::View {
                name: stb_ddl::QualifiedName::new("db", &format!("view__{name}")),
                query: String::new(),
            }),
            ..Deployable::default()
        },
        ..PlanModel::default()
    }
}

const LINEAGE: &[(&str, &str)] = &[
    ("_replay_partition", "Int32"),
    ("_replay_offset", "Int64"),
    ("amount", "UInt64"),
];

/// a (from source s) -> b (from a) -> v (view over b); c (from source s) alone.
fn project() -> Vec<PlanModel> {
    vec![
        table("a", "s", false, LINEAGE),
        table("b", "a", true, LINEAGE),
        view("v", "b"),
        table("c", "s", false, &[("n", "UInt64")]),
    ]
}

/// Every model deployed by `ACTIVE`, with the specs it recorded.
fn deployed_as(models: &[PlanModel]) -> Deployed {
    let mut deployed = Deployed::default();
    for model in models {
        for (kind, relation) in &model.relations {
            let physical = format!("{relation}__{ACTIVE}");
            deployed.relations.insert(physical.clone());
            deployed.relations.insert(relation.clone());
            if *kind != RelationKind::MaterializedView {
                deployed.bindings.insert(relation.clone(), physical);
            }
            deployed
                .recorded
                .insert(relation.clone(), object_fingerprint(model, *kind));
        }
    }
    deployed
}

fn id() -> DeploymentId {
    DeploymentId::parse("20261202T000000Z_bbbbbb").expect("id")
}

fn plan(models: &[PlanModel], deployed: &Deployed, options: &Options) -> VirtualPlan {
    let refs: Vec<&PlanModel> = models.iter().collect();
    plan_virtual(&refs, deployed, options, &id()).expect("plan")
}

fn changes(plan: &VirtualPlan) -> Vec<(String, ChangeType)> {
    plan.object_changes
        .iter()
        .map(|c| (c.name.clone(), c.change_type))
        .collect()
}

#[test]
fn a_greenfield_target_creates_everything_in_one_subtree_per_root() {
    let models = project();
    let plan = plan(&models, &Deployed::default(), &Options::default());
    assert!(
        plan.object_changes
            .iter()
            .all(|c| c.change_type == ChangeType::Create && c.root_state == RootState::Greenfield)
    );
    let roots: Vec<(&str, &[String])> = plan
        .rebuild_subtrees
        .iter()
        .map(|s| (s.root.as_str(), s.affected.as_slice()))
        .collect();
    // a's subtree holds b and v; c stands alone.
    assert_eq!(roots.len(), 2, "{roots:?}");
    assert_eq!(roots[0].0, "a");
    assert_eq!(roots[0].1, ["a", "b", "v"]);
    assert_eq!(roots[1].0, "c");
    assert!(
        plan.rebuild_subtrees
            .iter()
            .all(|s| s.execution_mode == ExecutionMode::FullRebuild && s.replay_required)
    );
    assert_eq!(plan.deployed_models, ["a", "b", "v", "c"]);
    assert_eq!(plan.deployment_id, "20261202T000000Z_bbbbbb");
}

#[test]
fn an_unchanged_deployment_plans_nothing() {
    let models = project();
    let plan = plan(&models, &deployed_as(&models), &Options::default());
    assert!(
        plan.object_changes
            .iter()
            .all(|c| c.change_type == ChangeType::NoOp
                && c.root_state == RootState::ActiveViewPresent
                && c.active_deployment_id.as_deref() == Some(ACTIVE))
    );
    assert!(plan.rebuild_subtrees.is_empty());
    assert!(plan.deployed_models.is_empty());
}

#[test]
fn another_spelling_of_the_same_types_rebuilds_nothing() {
    let spelled = |column: &str, cast: &str| {
        let mut model = table("t", "raw", false, &[("at", column)]);
        model.deployable.query_parts[0] = QueryPart::Text(format!("SELECT x::{cast} AS at FROM "));
        vec![model]
    };
    let deployed = deployed_as(&spelled("DateTime64(3)", "DateTime64(3)"));
    // Case, an alias and spacing: the server's own spelling is the same type.
    let respelt = plan(
        &spelled("datetime64( 3 )", "datetime64(3)"),
        &deployed,
        &Options::default(),
    );
    assert!(
        respelt
            .object_changes
            .iter()
            .all(|c| c.change_type == ChangeType::NoOp && c.schema_change_kind.is_none()),
        "{:?}",
        changes(&respelt)
    );
    assert!(respelt.sql_diffs.is_empty());
    // A real change of type still rebuilds, as a breaking change.
    let retyped = plan(
        &spelled("DateTime64(6)", "DateTime64(6)"),
        &deployed,
        &Options::default(),
    );
    assert_eq!(
        changes(&retyped),
        [
            ("tbl__t".to_owned(), ChangeType::Rebuild),
            ("mv__t".to_owned(), ChangeType::Rebuild)
        ]
    );
}

#[test]
fn a_query_change_with_the_same_columns_is_an_ordinary_rebuild_of_its_subtree() {
    let models = project();
    let deployed = deployed_as(&models);
    let mut changed = project();
    changed[1].deployable.query_parts[0] =
        QueryPart::Text("SELECT * FROM (SELECT 1) AS x, ".to_owned());
    let plan = plan(&changed, &deployed, &Options::default());
    assert_eq!(
        changes(&plan)
            .iter()
            .filter(|(_, c)| *c == ChangeType::Rebuild)
            .map(|(n, _)| n.as_str())
            .collect::<Vec<_>>(),
        ["mv__b"]
    );
    let subtree = &plan.rebuild_subtrees[0];
    assert_eq!(subtree.root, "b");
    assert_eq!(subtree.affected, ["b", "v"]);
    assert_eq!(subtree.upstream_boundary_key.as_deref(), Some("a"));
    assert_eq!(subtree.execution_mode, ExecutionMode::FullRebuild);
    let table_change = plan
        .object_changes
        .iter()
        .find(|c| c.name == "tbl__b")
        .expect("table");
    assert_eq!(table_change.schema_change_kind, None);
}

#[test]
fn added_columns_are_non_breaking_and_seed_from_the_active_table() {
    let models = project();
    let deployed = deployed_as(&models);
    let mut changed = project();
    changed[0]
        .output_columns
        .push(("note".to_owned(), "String".to_owned()));
    let plan = plan(&changed, &deployed, &Options::default());
    let table = plan
        .object_changes
        .iter()
        .find(|c| c.name == "tbl__a")
        .expect("a");
    assert_eq!(table.change_type, ChangeType::Rebuild);
    assert_eq!(table.schema_change_kind, Some(SchemaChange::NonBreaking));
    assert_eq!(table.seed_compatibility, Some(Seeding::Seedable));
    assert_eq!(
        plan.rebuild_subtrees[0].execution_mode,
        ExecutionMode::SeededBoundedRebuild
    );
    assert_eq!(plan.rebuild_subtrees[0].affected, ["a", "b", "v"]);
}

#[test]
fn removed_or_retyped_columns_are_breaking_and_retyped_ones_cannot_seed() {
    let models = project();
    let deployed = deployed_as(&models);
    let mut removed = project();
    removed[3].output_columns.clear();
    removed[3]
        .output_columns
        .push(("m".to_owned(), "UInt64".to_owned()));
    let plan_removed = plan(&removed, &deployed, &Options::default());
    let c = plan_removed
        .object_changes
        .iter()
        .find(|c| c.name == "tbl__c")
        .expect("c");
    assert_eq!(c.schema_change_kind, Some(SchemaChange::Breaking));
    assert_eq!(c.seed_compatibility, Some(Seeding::Seedable));
    assert_eq!(
        plan_removed.rebuild_subtrees[0].execution_mode,
        ExecutionMode::FullRebuild
    );

    let mut retyped = project();
    retyped[3].output_columns[0].1 = "Int64".to_owned();
    let plan_retyped = plan(&retyped, &deployed, &Options::default());
    let c = plan_retyped
        .object_changes
        .iter()
        .find(|c| c.name == "tbl__c")
        .expect("c");
    assert_eq!(c.schema_change_kind, Some(SchemaChange::Breaking));
    assert_eq!(c.seed_compatibility, Some(Seeding::NonSeedable));
}

#[test]
fn full_refresh_and_start_time_force_the_selection() {
    let models = project();
    let deployed = deployed_as(&models);
    let full = plan(
        &models,
        &deployed,
        &Options {
            selected: Some(BTreeSet::from(["c".to_owned()])),
            full_refresh: true,
            start_time: None,
        },
    );
    assert_eq!(full.rebuild_subtrees.len(), 1);
    assert_eq!(full.rebuild_subtrees[0].root, "c");
    assert!(full.rebuild_subtrees[0].forced_full_refresh);
    assert_eq!(
        full.rebuild_subtrees[0].execution_mode,
        ExecutionMode::FullRebuild
    );

    let bounded = plan(
        &models,
        &deployed,
        &Options {
            selected: Some(BTreeSet::from(["b".to_owned()])),
            full_refresh: false,
            start_time: Some("2026-11-30 00:00:00.000".to_owned()),
        },
    );
    assert_eq!(bounded.rebuild_subtrees[0].root, "b");
    assert_eq!(
        bounded.rebuild_subtrees[0].execution_mode,
        ExecutionMode::SeededBoundedRebuild
    );
    assert_eq!(
        bounded.rebuild_subtrees[0].forced_start_time.as_deref(),
        Some("2026-11-30 00:00:00.000")
    );

    // Nothing deployed: no active table bounds the replay.
    let refs: Vec<&PlanModel> = models.iter().collect();
    let refused = plan_virtual(
        &refs,
        &Deployed::default(),
        &Options {
            selected: Some(BTreeSet::from(["b".to_owned()])),
            full_refresh: false,
            start_time: Some("2026-11-30 00:00:00.000".to_owned()),
        },
        &id(),
    )
    .expect_err("no active deployment");
    assert!(refused.message.contains("'b'"), "{}", refused.message);
    assert!(
        refused.message.contains("greenfield"),
        "{}",
        refused.message
    );
}

#[test]
fn root_states_follow_the_stable_views() {
    let mut deployed = Deployed::default();
    deployed
        .bindings
        .insert("tbl__a".into(), format!("tbl__a__{ACTIVE}"));
    deployed
        .bindings
        .insert("tbl__b".into(), "tbl__b_copy".into());
    deployed.relations.insert(format!("tbl__c__{ACTIVE}"));
    assert_eq!(deployed.state("tbl__a").0, RootState::ActiveViewPresent);
    assert_eq!(
        deployed.state("tbl__a").1.map(|i| i.to_string()).as_deref(),
        Some(ACTIVE)
    );
    assert_eq!(deployed.state("tbl__b").0, RootState::InvalidActiveView);
    assert_eq!(deployed.state("tbl__c").0, RootState::LogicalViewMissing);
    assert_eq!(deployed.state("tbl__d").0, RootState::Greenfield);
    // A binding to another model's copy is not this model's deployment.
    deployed
        .bindings
        .insert("tbl__e".into(), format!("tbl__a__{ACTIVE}"));
    assert_eq!(deployed.state("tbl__e").0, RootState::InvalidActiveView);
}

#[test]
fn a_partial_deployment_reads_unchanged_upstream_models_from_their_active_copies() {
    let models = project();
    let placement = Placement {
        deployed: BTreeSet::from(["b".to_owned(), "v".to_owned()]),
        active: BTreeMap::from([
            ("a".to_owned(), DeploymentId::parse(ACTIVE).expect("id")),
            ("c".to_owned(), DeploymentId::parse(ACTIVE).expect("id")),
        ]),
    };
    let renamed = deployment_models(&models, "db", &id(), &placement, &|_| true).expect("resolved");
    let by_name = |name: &str| renamed.iter().find(|m| m.name == name).expect(name);
    let new = "20261202T000000Z_bbbbbb";
    let b = by_name("b");
    assert_eq!(
        b.relations,
        [
            (RelationKind::Table, format!("tbl__b__{new}")),
            (RelationKind::MaterializedView, format!("mv__b__{new}")),
        ]
    );
    assert!(b.create_statements[0].starts_with(&format!("CREATE TABLE db.tbl__b__{new} (")));
    // The copy of b reads a's active copy, never the stable view tbl__a.
    assert_eq!(
        b.create_statements[1],
        format!(
            "CREATE MATERIALIZED VIEW db.mv__b__{new}\nTO db.tbl__b__{new} AS\nSELECT * FROM db.tbl__a__{ACTIVE}"
        )
    );
    assert_eq!(b.replay_query, ["SELECT * FROM ", ""]);
    assert_eq!(b.reference, format!("db.tbl__b__{new}"));
    let v = by_name("v");
    assert_eq!(
        v.create_statements,
        [format!(
            "CREATE VIEW db.view__v__{new} AS\nSELECT count() FROM db.tbl__b__{new}"
        )]
    );
    // Upstream models keep their active copies' names, so the plan finds them present.
    assert_eq!(by_name("a").relations[0].1, format!("tbl__a__{ACTIVE}"));
    assert_eq!(by_name("a").reference, format!("db.tbl__a__{ACTIVE}"));

    let missing = Placement {
        deployed: BTreeSet::from(["b".to_owned()]),
        active: BTreeMap::new(),
    };
    let refused =
        deployment_models(&models, "db", &id(), &missing, &|_| true).expect_err("a is nowhere");
    assert!(
        refused.message.contains("'b' reads 'a'"),
        "{}",
        refused.message
    );
    // A direct model is read where it is.
    let direct = deployment_models(&models, "db", &id(), &missing, &|name| name != "a")
        .expect("a is direct");
    assert_eq!(direct[0].relations[0].1, "tbl__a");
}

fn policy(
    breaking: Option<&str>,
    non_breaking: Option<&str>,
    fallback: Option<&str>,
) -> ReplayPolicy {
    ReplayPolicy {
        breaking: breaking.map(str::to_owned),
        non_breaking: non_breaking.map(str::to_owned),
        fallback: fallback.map(str::to_owned),
    }
}

/// The subtree rooted at `a` once `a` changes as `change` says under `replay_policy`.
fn a_subtree(
    change: &dyn Fn(&mut PlanModel),
    replay_policy: ReplayPolicy,
    deployed: &Deployed,
) -> Subtree {
    let mut changed = project();
    change(&mut changed[0]);
    changed[0].replay_policy = replay_policy;
    let plan = plan(&changed, deployed, &Options::default());
    plan.rebuild_subtrees
        .into_iter()
        .find(|s| s.root == "a")
        .expect("a subtree rooted at a")
}

#[test]
fn replay_on_change_picks_the_mode_for_the_change_kind() {
    let deployed = deployed_as(&project());
    let add = |m: &mut PlanModel| {
        m.output_columns
            .push(("note".to_owned(), "String".to_owned()));
    };
    let query = |m: &mut PlanModel| {
        m.deployable.query_parts[0] = QueryPart::Text("SELECT DISTINCT * FROM ".to_owned());
    };
    let retype = |m: &mut PlanModel| m.output_columns[2].1 = "Int64".to_owned();
    // No policy: added columns are seeded from the active copy's frontier, anything else
    // is rebuilt in full.
    let seeded = a_subtree(&add, ReplayPolicy::default(), &deployed);
    assert_eq!(seeded.execution_mode, ExecutionMode::SeededBoundedRebuild);
    assert_eq!(seeded.execution_lookback_seconds, None);
    assert!(seeded.history_preserving_bounded_supported);
    let full = a_subtree(&query, ReplayPolicy::default(), &deployed);
    assert_eq!(full.execution_mode, ExecutionMode::FullRebuild);
    // A policy per kind: a query change counts as breaking.
    let full = a_subtree(&add, policy(None, Some("full"), None), &deployed);
    assert_eq!(full.execution_mode, ExecutionMode::FullRebuild);
    assert_eq!(full.configured_backfill_mode.as_deref(), Some("full"));
    let bounded = a_subtree(&query, policy(Some("bounded-30m"), None, None), &deployed);
    assert_eq!(bounded.execution_mode, ExecutionMode::SeededBoundedRebuild);
    assert_eq!(bounded.execution_lookback_seconds, Some(1800));
    // A retyped column cannot seed: bounded without the active rows.
    let unseeded = a_subtree(&retype, policy(Some("bounded-2h"), None, None), &deployed);
    assert_eq!(
        unseeded.execution_mode,
        ExecutionMode::UnseededBoundedRebuild
    );
    assert_eq!(unseeded.execution_lookback_seconds, Some(7200));
}

#[test]
fn a_bounded_policy_without_lineage_in_the_active_table_falls_back() {
    let mut without_lineage = project();
    without_lineage[0].output_columns = vec![("amount".to_owned(), "UInt64".to_owned())];
    let deployed = deployed_as(&without_lineage);
    let change = |m: &mut PlanModel| {
        m.output_columns = vec![("amount".to_owned(), "UInt64".to_owned())];
        m.deployable.query_parts[0] = QueryPart::Text("SELECT DISTINCT * FROM ".to_owned());
    };
    let full = a_subtree(&change, policy(Some("bounded-1d"), None, None), &deployed);
    assert_eq!(full.execution_mode, ExecutionMode::FullRebuild);
    assert_eq!(
        full.resolved_bounded_replay_fallback.as_deref(),
        Some("full")
    );
    assert!(!full.history_preserving_bounded_supported);
    let unseeded = a_subtree(
        &change,
        policy(Some("bounded-1d"), None, Some("bounded_without_history")),
        &deployed,
    );
    assert_eq!(
        unseeded.execution_mode,
        ExecutionMode::UnseededBoundedRebuild
    );
    assert_eq!(
        unseeded.resolved_bounded_replay_fallback.as_deref(),
        Some("bounded_without_history")
    );
    assert_eq!(unseeded.execution_lookback_seconds, Some(86_400));
}

#[test]
fn lookbacks_are_read_from_bounded_values() {
    assert_eq!(ReplayPolicy::lookback_seconds("bounded-30s"), Some(30));
    assert_eq!(ReplayPolicy::lookback_seconds("bounded-7d"), Some(604_800));
    assert_eq!(ReplayPolicy::lookback_seconds("full"), None);
    assert_eq!(ReplayPolicy::lookback_seconds("bounded-0m"), None);
    assert_eq!(ReplayPolicy::lookback_seconds("bounded-x"), None);
}
