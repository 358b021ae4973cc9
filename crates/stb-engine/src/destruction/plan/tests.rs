//! Planning destructions over a compiled project and a catalog held in memory.

use super::*;
use crate::destruction::{Relation, Resource};

const DATABASE: &str = "shop";

/// orders (Kafka) -> clean -> big (pl__orders); report (view, pl__reporting) reads big;
/// archived (pl__archive, virtual) reads orders.
fn project() -> (tempfile::TempDir, Project, Compiled) {
    let files = [
        (
            "streambuild_project.toml",
            "name = \"shop\"\ndefault_target = \"dev\"\n[targets.dev]\ndatabase = \"shop\"\n",
        ),
        (
            "sources/sources.yml",
            "sources:\n  - name: orders\n    kind: kafka\n    broker_list: \"b:9092\"\n    topic: orders\n    replay_boundary: {mode: offsets}\n",
        ),
        (
            "pipelines/pl__orders/clean.sql",
            "MODEL (order_by [\"_replay_partition\", \"_replay_offset\"]);\nSELECT _replay_partition::Int32 AS _replay_partition, _replay_offset::Int64 AS _replay_offset, JSONExtractUInt(kafka_value, 'amount')::UInt64 AS amount\nFROM __source(\"orders\")\n",
        ),
        (
            "pipelines/pl__orders/big.sql",
            "MODEL (order_by [\"_replay_partition\", \"_replay_offset\"]);\nSELECT _replay_partition::Int32 AS _replay_partition, _replay_offset::Int64 AS _replay_offset, amount::UInt64 AS amount\nFROM __ref(\"clean\")\nWHERE amount > 10\n",
        ),
        (
            "pipelines/pl__reporting/report.sql",
            "MODEL (kind view);\nSELECT count()::UInt64 AS n FROM __ref(\"big\")\n",
        ),
        (
            "pipelines/pl__archive/pipeline.toml",
            "mode = \"virtual\"\n",
        ),
        (
            "pipelines/pl__archive/archived.sql",
            "MODEL (order_by [\"_replay_partition\", \"_replay_offset\"]);\nSELECT _replay_partition::Int32 AS _replay_partition, _replay_offset::Int64 AS _replay_offset\nFROM __source(\"orders\")\n",
        ),
    ];
    crate::compiled_project(&files)
}

const COPY: &str = "20261201T000000Z_aaaaaa";

fn relation(name: &str, engine: &str, rows: u64) -> Relation {
    let table = !matches!(engine, "View" | "MaterializedView");
    Relation {
        name: name.to_owned(),
        engine: engine.to_owned(),
        rows: table.then_some(rows),
        bytes: table.then_some(rows * 10),
    }
}

/// Everything the project built, a virtual copy of archived bound by its stable view, and
/// a relation from an older manifest of pl__orders (`old_totals`).
fn live() -> Live {
    let copy = |name: &str| format!("{name}__{COPY}");
    let resource =
        |manifest: &str, pipeline: &str, name: &str, role: &str, relation: &str| Resource {
            manifest_id: manifest.to_owned(),
            pipeline: pipeline.to_owned(),
            logical_type: if pipeline.is_empty() {
                "source"
            } else {
                "model"
            }
            .to_owned(),
            logical_name: name.to_owned(),
            role: role.to_owned(),
            relation: relation.to_owned(),
        };
    Live {
        database: DATABASE.to_owned(),
        relations: vec![
            relation("_streambuild_manifests", "MergeTree", 2),
            relation("kafka__orders", "Kafka", 0),
            relation("raw__orders", "MergeTree", 100),
            relation("mv__orders", "MaterializedView", 0),
            relation("tbl__clean", "MergeTree", 100),
            relation("mv__clean", "MaterializedView", 0),
            relation("tbl__big", "MergeTree", 40),
            relation("mv__big", "MaterializedView", 0),
            relation("view__report", "View", 0),
            relation("tbl__old_totals", "MergeTree", 7),
            relation(&copy("tbl__archived"), "MergeTree", 100),
            relation(&copy("mv__archived"), "MaterializedView", 0),
            relation("tbl__archived", "View", 0),
        ],
        manifests: vec!["m2".into(), "m1".into()],
        manifest_pipelines: [
            (
                "m2".to_owned(),
                vec!["pl__orders".to_owned(), "pl__reporting".to_owned()],
            ),
            (
                "m1".to_owned(),
                vec!["pl__orders".to_owned(), "pl__legacy".to_owned()],
            ),
        ]
        .into(),
        resources: vec![
            resource("m2", "pl__orders", "clean", "table", "tbl__clean"),
            resource("m2", "", "orders", "landing_table", "raw__orders"),
            resource("m1", "pl__orders", "old_totals", "table", "tbl__old_totals"),
        ],
        objects: ["table", "materialized_view"]
            .iter()
            .map(|kind| {
                let logical = if *kind == "table" {
                    "tbl__archived"
                } else {
                    "mv__archived"
                };
                stb_warehouse::deployments::ObjectRow {
                    deployment_id: COPY.to_owned(),
                    object_type: (*kind).to_owned(),
                    logical_name: logical.to_owned(),
                    physical_name: copy(logical),
                    model: "archived".to_owned(),
                    is_selected_root: *kind == "table",
                    observed_at: "2026-12-01 00:00:00.000".to_owned(),
                }
            })
            .collect(),
        readers: Vec::new(),
    }
}

fn destroy(pipelines: &[&str], include_orphans: bool) -> Request<'static> {
    let pipelines: Vec<String> = pipelines.iter().map(|p| (*p).to_owned()).collect();
    Request {
        operation: Operation::DestroyPipelines,
        pipelines: Box::leak(pipelines.into_boxed_slice()),
        include_orphans,
        production: false,
        max_table_size_to_drop: None,
    }
}

fn names(plan: &DestructionPlan) -> Vec<&str> {
    plan.relations.iter().map(|d| d.name.as_str()).collect()
}

#[test]
fn a_pipeline_read_by_one_left_out_is_refused() {
    let (_dir, project, compiled) = project();
    let error = plan(
        &project,
        &compiled,
        &destroy(&["pl__orders"], false),
        &live(),
    )
    .expect_err("refused");
    assert_eq!(error.code, DESTRUCTION_CODE);
    assert!(
        error.message.contains("pl__reporting (reads big)"),
        "{}",
        error.message
    );
    let unknown =
        plan(&project, &compiled, &destroy(&["pl__nope"], false), &live()).expect_err("unknown");
    assert!(unknown.message.contains("no pipeline 'pl__nope'"));
}

#[test]
fn readers_go_before_what_they_read_and_the_numbers_are_said() {
    let (_dir, project, compiled) = project();
    let planned = plan(
        &project,
        &compiled,
        &destroy(&["pl__orders", "pl__reporting"], false),
        &live(),
    )
    .expect("plan");
    assert_eq!(
        names(&planned),
        [
            "view__report",
            "mv__big",
            "mv__clean",
            "tbl__big",
            "tbl__clean"
        ],
        "no landing, no lifecycle table, no relation of an older manifest"
    );
    assert_eq!(planned.total_rows, 140);
    assert_eq!(planned.total_bytes, 1400);
    assert_eq!(planned.pipelines, ["pl__orders", "pl__reporting"]);
    assert_eq!(planned.challenges, ["pl__orders", "pl__reporting"]);
    assert_eq!(
        planned.relations[0].statement,
        "DROP VIEW IF EXISTS shop.view__report SYNC"
    );
    assert_eq!(
        planned.relations[4].statement,
        "DROP TABLE IF EXISTS shop.tbl__clean SYNC"
    );
    // Orphans of older manifests come with --include-orphans, and a table limit is kept.
    let mut with_orphans = destroy(&["pl__orders", "pl__reporting"], true);
    with_orphans.max_table_size_to_drop = Some(1024);
    let planned = plan(&project, &compiled, &with_orphans, &live()).expect("plan");
    assert!(names(&planned).contains(&"tbl__old_totals"));
    assert!(
        planned
            .relations
            .iter()
            .filter(|d| d.engine == "MergeTree")
            .all(|d| d
                .statement
                .ends_with(" SETTINGS max_table_size_to_drop = 1024")),
        "{planned:?}"
    );
}

#[test]
fn a_virtual_pipeline_owns_its_copies_and_stable_views() {
    let (_dir, project, compiled) = project();
    let planned = plan(
        &project,
        &compiled,
        &destroy(&["pl__archive"], false),
        &live(),
    )
    .expect("plan");
    assert_eq!(
        names(&planned),
        [
            "tbl__archived",
            &format!("mv__archived__{COPY}"),
            &format!("tbl__archived__{COPY}"),
        ]
    );
    assert_eq!(planned.relations[0].role, "stable_view");
    assert_eq!(planned.relations[2].role, "deployment_copy");
}

#[test]
fn a_pipeline_only_older_manifests_know_can_be_destroyed() {
    let (_dir, project, compiled) = project();
    let mut state = live();
    state.resources.push(Resource {
        manifest_id: "m1".into(),
        pipeline: "pl__legacy".into(),
        logical_type: "model".into(),
        logical_name: "gone".into(),
        role: "table".into(),
        relation: "tbl__old_totals".into(),
    });
    let planned = plan(
        &project,
        &compiled,
        &destroy(&["pl__legacy"], false),
        &state,
    )
    .expect("plan");
    assert_eq!(names(&planned), ["tbl__old_totals"]);
    assert_eq!(planned.pipelines, ["pl__legacy"]);
}

#[test]
fn views_elsewhere_that_read_owned_relations_block() {
    let (_dir, project, compiled) = project();
    let mut state = live();
    state.readers.push((
        "analytics".into(),
        "daily".into(),
        "CREATE VIEW analytics.daily AS SELECT count() FROM shop.tbl__big".into(),
    ));
    let error = plan(
        &project,
        &compiled,
        &destroy(&["pl__orders", "pl__reporting"], false),
        &state,
    )
    .expect_err("blocked");
    assert!(
        error.message.contains("analytics.daily (reads tbl__big)"),
        "{}",
        error.message
    );
    // A name inside a longer one is not a read.
    let mut state = live();
    state.readers.push((
        "shop".into(),
        "other".into(),
        "CREATE VIEW shop.other AS SELECT 1 FROM shop.tbl__big_archive".into(),
    ));
    plan(
        &project,
        &compiled,
        &destroy(&["pl__orders", "pl__reporting"], false),
        &state,
    )
    .expect("not a reader");
}

#[test]
fn a_reset_drops_everything_owned_with_the_landings_and_asks_for_production() {
    let (_dir, project, compiled) = project();
    let request = Request {
        operation: Operation::ResetTarget,
        pipelines: &[],
        include_orphans: false,
        production: true,
        max_table_size_to_drop: None,
    };
    let planned = plan(&project, &compiled, &request, &live()).expect("plan");
    let dropped = names(&planned);
    for expected in [
        "kafka__orders",
        "raw__orders",
        "mv__orders",
        "tbl__clean",
        "tbl__archived",
    ] {
        assert!(dropped.contains(&expected), "{expected}: {dropped:?}");
    }
    assert!(!dropped.contains(&"_streambuild_manifests"));
    assert_eq!(
        dropped.last(),
        Some(&"kafka__orders"),
        "Kafka tables go last"
    );
    // Four pipelines: the first, middle and last are typed, then PRODUCTION.
    assert_eq!(
        planned.challenges,
        ["pl__archive", "pl__orders", "pl__reporting", "PRODUCTION"]
    );
    // Another relation changes the fingerprint a re-plan under the lock compares.
    let mut changed = live();
    changed.relations.push(relation(
        "tbl__big__20261202T000000Z_bbbbbb",
        "MergeTree",
        1,
    ));
    let again = plan(&project, &compiled, &request, &changed).expect("plan");
    assert_ne!(again.fingerprint, planned.fingerprint);
    assert_eq!(
        plan(&project, &compiled, &request, &live())
            .expect("plan")
            .fingerprint,
        planned.fingerprint
    );
}
