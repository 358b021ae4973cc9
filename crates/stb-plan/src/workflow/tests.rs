use std::collections::BTreeSet;

use super::*;
use crate::direct::{RelationKind, Selection, model_graph, plan_direct};
use crate::options::parse_start_time;

fn table(name: &str, driving: &str, columns: &[&str]) -> PlanModel {
    PlanModel {
        name: name.into(),
        pipeline: "pl__events".into(),
        is_table: true,
        relations: vec![
            (RelationKind::Table, format!("tbl__{name}")),
            (RelationKind::MaterializedView, format!("mv__{name}")),
        ],
        create_statements: vec![
            format!("CREATE TABLE db.tbl__{name} (x UInt8) ENGINE = MergeTree ORDER BY x"),
            format!(
                "CREATE MATERIALIZED VIEW db.mv__{name} TO db.tbl__{name} AS SELECT x FROM db.{driving}"
            ),
        ],
        reads: vec![driving.into()],
        driving_input: Some(driving.into()),
        reference: format!("db.tbl__{name}"),
        output_columns: columns
            .iter()
            .map(|c| ((*c).to_owned(), "UInt64".to_owned()))
            .collect(),
        boundary_mode: Some("offsets".into()),
        replay_query: vec!["SELECT x FROM ".into(), String::new()],
        ..PlanModel::default()
    }
}

fn project() -> (Vec<PlanModel>, Vec<PlanSource>) {
    let models = vec![
        table(
            "clean",
            "events",
            &["x", "_replay_partition", "_replay_offset"],
        ),
        table("counts", "clean", &["x"]),
        PlanModel {
            name: "report".into(),
            pipeline: "pl__events".into(),
            relations: vec![(RelationKind::View, "vw__report".into())],
            create_statements: vec![
                "CREATE VIEW db.vw__report AS SELECT x FROM db.tbl__counts".into(),
            ],
            reads: vec!["counts".into()],
            ..PlanModel::default()
        },
    ];
    let sources = vec![PlanSource {
        name: "events".into(),
        relation: Some("events".into()),
        reference: Some("db.events".into()),
        replay_columns: vec![
            "_replay_partition".into(),
            "_replay_offset".into(),
            "_replay_timestamp".into(),
        ],
        ..PlanSource::default()
    }];
    (models, sources)
}

fn options(start: Option<&str>) -> WorkflowOptions {
    WorkflowOptions {
        database: "db".into(),
        stabilization_seconds: 2,
        start_time: start.map(|s| parse_start_time(s).expect("time")),
    }
}

fn plan(models: &[PlanModel], sources: &[PlanSource], selected: Option<&[&str]>) -> DirectPlan {
    let selected: Option<BTreeSet<String>> =
        selected.map(|names| names.iter().map(|n| (*n).to_owned()).collect());
    plan_direct(
        models,
        sources,
        &Selection::new(&model_graph(models), selected),
        &|_| true,
    )
    .expect("plan")
}

fn step_ids(workflow: &Workflow) -> Vec<&str> {
    workflow.steps.iter().map(|s| s.id.as_str()).collect()
}

#[test]
fn phases_run_in_order_and_every_capture_precedes_every_replay() {
    let (models, sources) = project();
    let workflow = assemble(
        &plan(&models, &sources, None),
        &models,
        &sources,
        &options(None),
        &|_| true,
    )
    .expect("workflow");
    assert_eq!(
        step_ids(&workflow),
        [
            "prepare_target_database",
            "drop_vw__report",
            "drop_mv__counts",
            "drop_mv__clean",
            "drop_tbl__counts",
            "drop_tbl__clean",
            "realize_tbl__clean",
            "realize_tbl__counts",
            "realize_mv__counts",
            "realize_mv__clean",
            "realize_vw__report",
            "wait_for_live_stabilization",
            "capture_replay_clean",
            "wait_for_inflight_inserts",
            "replay_clean",
        ]
    );
    let phases: Vec<Phase> = workflow.steps.iter().map(|s| s.phase).collect();
    assert!(phases.is_sorted(), "phases must be monotonic: {phases:?}");
    let root = &workflow.roots[0];
    assert_eq!(root.propagated, ["counts"]);
    assert_eq!(root.template.anchor.relation, "db.events");
    assert_eq!(
        workflow.recorded_sql(&workflow.steps[14]),
        "-- replay_clean: INSERT INTO db.tbl__clean from events bounded by capture_replay_clean (offsets boundary); rendered at runtime"
    );
    assert_eq!(workflow.steps[14].intent(), "mutation");
    assert_eq!(workflow.steps[12].intent(), "query");
}

#[test]
fn a_root_below_the_source_needs_lineage_columns_on_its_input() {
    let (models, sources) = project();
    // `counts` alone replays from `clean`, which keeps partition and offset.
    let workflow = assemble(
        &plan(&models, &sources, Some(&["counts"])),
        &models,
        &sources,
        &options(None),
        &|_| true,
    )
    .expect("workflow");
    assert_eq!(workflow.roots[0].template.anchor.relation, "db.tbl__clean");
    // ...but not the event time a start time is compared with.
    let error = assemble(
        &plan(&models, &sources, Some(&["counts"])),
        &models,
        &sources,
        &options(Some("2026-11-01")),
        &|_| true,
    )
    .expect_err("no time column");
    assert!(
        error.message.contains("has no column _replay_timestamp"),
        "{}",
        error.message
    );
    assert!(error.hint.contains("--select"));
}

#[test]
fn view_only_scopes_neither_wait_nor_replay() {
    let (models, sources) = project();
    let workflow = assemble(
        &plan(&models, &sources, Some(&["report"])),
        &models,
        &sources,
        &options(None),
        &|_| true,
    )
    .expect("workflow");
    assert_eq!(
        step_ids(&workflow),
        [
            "prepare_target_database",
            "drop_vw__report",
            "realize_vw__report"
        ]
    );
}
