use std::collections::BTreeSet;

use super::*;
use crate::direct::{Landing, RelationKind, Selection, model_graph, plan_direct};
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
        stabilization: Stabilization::Timed(2),
        start_time: start.map(|s| parse_start_time(s).expect("time")),
        recreate_sources: Vec::new(),
        seeds: std::collections::BTreeMap::new(),
        root_start_times: std::collections::BTreeMap::new(),
        pacing: Default::default(),
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

/// Makes `source` a managed Kafka source whose landing holds a credential.
fn with_kafka_landing(source: &mut PlanSource) {
    source.reference = Some("db.raw__events".into());
    source.replay_columns.push("_replay_landed_at".into());
    source.landing = Some(Landing {
        kafka_table: "kafka__events".into(),
        raw_table: "raw__events".into(),
        view: "mv__events".into(),
        create_kafka: "CREATE TABLE IF NOT EXISTS db.kafka__events (message String) ENGINE = Kafka SETTINGS kafka_sasl_password = 's3cret'".into(),
        create_kafka_recorded: "CREATE TABLE IF NOT EXISTS db.kafka__events (message String) ENGINE = Kafka SETTINGS kafka_sasl_password = '***'".into(),
        create_raw: "CREATE TABLE IF NOT EXISTS db.raw__events (x UInt8) ENGINE = MergeTree ORDER BY x".into(),
        raw_definition: None,
        create_view: "CREATE MATERIALIZED VIEW IF NOT EXISTS db.mv__events TO db.raw__events AS SELECT 1 AS x FROM db.kafka__events".into(),
        consumer_group: "group_db".into(),
        brokers: "b:9092".into(),
        settings: Vec::new(),
        ..Landing::default()
    });
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
            "set_aside_tbl__counts",
            "set_aside_tbl__clean",
            "realize_tbl__clean",
            "realize_tbl__counts",
            "realize_mv__counts",
            "realize_mv__clean",
            "realize_vw__report",
            "wait_for_live_stabilization",
            "capture_replay_clean",
            "wait_for_inflight_inserts",
            "replay_clean",
            // The old tables were kept aside until now.
            "drop_previous_tbl__counts",
            "drop_previous_tbl__clean",
        ]
    );
    assert_eq!(
        workflow.undo.set_aside,
        [
            ("tbl__counts".to_owned(), "tbl__counts__stb_prev".to_owned()),
            ("tbl__clean".to_owned(), "tbl__clean__stb_prev".to_owned()),
        ]
    );
    assert_eq!(
        workflow.undo.dropped,
        ["vw__report", "mv__counts", "mv__clean"]
    );
    assert_eq!(
        workflow.undo.created,
        [
            "tbl__clean",
            "tbl__counts",
            "mv__counts",
            "mv__clean",
            "vw__report"
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

#[test]
fn roots_on_paused_landings_need_no_wait_and_a_fresh_landing_resets_its_group() {
    let (mut models, mut sources) = project();
    with_kafka_landing(&mut sources[0]);
    models.truncate(1);
    let plan = plan(&models, &sources, None);
    // The landing does not exist yet.
    let workflow = assemble(&plan, &models, &sources, &options(None), &|r| {
        r != "raw__events"
    })
    .expect("workflow");
    assert_eq!(
        step_ids(&workflow),
        [
            "prepare_target_database",
            "reset_consumer_group__events",
            "prepare_source_kafka__events",
            "prepare_source_raw__events",
            "pause_source_mv__events",
            "drop_mv__clean",
            "set_aside_tbl__clean",
            "realize_tbl__clean",
            "realize_mv__clean",
            "capture_replay_clean",
            "wait_for_inflight_inserts",
            "replay_clean",
            "activate_source_mv__events",
            "drop_previous_tbl__clean",
        ],
        "no stabilisation wait: nothing inserts into a paused landing"
    );
    assert!(workflow.recorded_sql(&workflow.steps[2]).contains("'***'"));
    assert!(!workflow.recorded_sql(&workflow.steps[2]).contains("s3cret"));
    assert_eq!(workflow.steps[1].intent(), "kafka");
    assert_eq!(workflow.fresh_groups[0].group, "group_db");
    assert!(!format!("{:?}", workflow.fresh_groups).contains("b:9092"));
    assert_eq!(
        workflow.paused_landings[0].resume_sql,
        sources[0]
            .landing
            .as_ref()
            .map(|l| l.create_view.clone())
            .unwrap_or_default()
    );
}

/// clean <- events; names <- clean; joined <- clean joins names (a fan-in).
fn fan_in_project(clean_columns: &[&str]) -> (Vec<PlanModel>, Vec<PlanSource>) {
    let (_, sources) = project();
    let mut joined = table(
        "joined",
        "clean",
        &["x", "_replay_partition", "_replay_offset"],
    );
    joined.reads.push("names".into());
    let models = vec![
        table("clean", "events", clean_columns),
        table("names", "clean", &["x"]),
        joined,
    ];
    (models, sources)
}

fn landing() -> Landing {
    Landing {
        kafka_table: "kafka__events".into(),
        raw_table: "raw__events".into(),
        view: "mv__events".into(),
        create_view: "CREATE MATERIALIZED VIEW IF NOT EXISTS db.mv__events TO db.raw__events AS SELECT 1 AS x FROM db.kafka__events".into(),
        ..Landing::default()
    }
}

#[test]
fn a_fan_in_on_a_paused_landing_creates_its_view_and_replays_all_of_its_input_after_the_first_stage()
 {
    let (models, mut sources) = fan_in_project(&["x"]);
    sources[0].landing = Some(landing());
    let workflow = assemble(
        &plan(&models, &sources, None),
        &models,
        &sources,
        &options(None),
        &|_| true,
    )
    .expect("clean needs no lineage columns: its content is frozen");
    let ids = step_ids(&workflow);
    let position = |id: &str| ids.iter().position(|s| *s == id).expect(id);
    assert!(
        position("replay_clean") < position("realize_mv__joined"),
        "{ids:?}"
    );
    assert!(position("realize_mv__joined") < position("replay_joined"));
    assert!(position("replay_joined") < position("activate_source_mv__events"));
    assert!(
        !ids.contains(&"capture_replay_joined"),
        "nothing to bound: {ids:?}"
    );
    let joined = &workflow.roots[1];
    assert_eq!(
        (joined.model.as_str(), joined.stage, joined.bounded),
        ("joined", 1, false)
    );
    assert_eq!(joined.template.skip_existing, None);
    assert!(joined.placeholder().contains("from all of clean"));
}

#[test]
fn a_fan_in_fed_live_bounds_its_replay_on_its_rebuilt_input() {
    // An adopted source is never paused: the fan-in's input keeps growing, so its replay
    // is bounded after its view is live, and the input needs the lineage columns.
    let (models, sources) = fan_in_project(&["x"]);
    let error = assemble(
        &plan(&models, &sources, None),
        &models,
        &sources,
        &options(Some("2026-11-01")),
        &|_| true,
    )
    .expect_err("clean has no lineage columns");
    assert!(
        error.message.contains("'joined' joins names, rebuilt in this build, so it replays from 'clean' once that is complete"),
        "{}",
        error.message
    );
    let (models, sources) = fan_in_project(&["x", "_replay_partition", "_replay_offset"]);
    let workflow = assemble(
        &plan(&models, &sources, None),
        &models,
        &sources,
        &options(Some("2026-11-01")),
        &|_| true,
    )
    .expect("workflow");
    let ids = step_ids(&workflow);
    let tail: Vec<&str> = ids[ids
        .iter()
        .position(|s| *s == "replay_clean")
        .expect("clean")..]
        .to_vec();
    assert_eq!(
        tail,
        [
            "replay_clean",
            "realize_mv__joined",
            "wait_for_live_stabilization_stage_1",
            "capture_replay_joined",
            "wait_for_inflight_inserts_stage_1",
            "replay_joined",
            "drop_previous_tbl__joined",
            "drop_previous_tbl__names",
            "drop_previous_tbl__clean",
        ]
    );
    let joined = &workflow.roots[1];
    assert!(joined.bounded);
    assert_eq!(joined.start_time, None, "clean holds the window already");
    assert_eq!(
        workflow.roots[0].start_time.as_ref().map(|s| s.as_str()),
        Some("2026-11-01 00:00:00.000")
    );
}

fn chunked(rows: Option<u64>) -> WorkflowOptions {
    let mut options = options(None);
    options.pacing.chunk_rows = rows;
    options
}

#[test]
fn a_chunked_workflow_without_paused_landings_is_resumable_and_round_trips_as_recorded() {
    let (models, sources) = project();
    let plan = plan(&models, &sources, None);
    let plain = assemble(&plan, &models, &sources, &chunked(None), &|_| true).expect("workflow");
    assert_eq!(
        crate::resume::not_resumable(&plain).as_deref(),
        Some("none of its replays is cut into chunks")
    );
    let workflow =
        assemble(&plan, &models, &sources, &chunked(Some(1000)), &|_| true).expect("workflow");
    assert_eq!(crate::resume::not_resumable(&workflow), None);
    // What a resume point holds reads back as the same workflow, lineage names included.
    let recorded = crate::resume::recorded_workflow(&workflow);
    let text = serde_json::to_string(&recorded).expect("json");
    let read: Workflow = serde_json::from_str(&text).expect("read back");
    assert_eq!(read, workflow);
    assert_eq!(
        read.roots[0].template.skip_existing,
        Some(&["_replay_partition", "_replay_offset"][..])
    );
}

#[test]
fn a_workflow_that_pauses_a_landing_is_never_suspended_and_credentials_are_never_recorded() {
    let (mut models, mut sources) = project();
    with_kafka_landing(&mut sources[0]);
    models.truncate(1);
    let plan = plan(&models, &sources, None);
    let workflow = assemble(&plan, &models, &sources, &chunked(Some(1000)), &|r| {
        r != "raw__events"
    })
    .expect("workflow");
    let why = crate::resume::not_resumable(&workflow).expect("not resumable");
    assert!(
        why.contains("pauses the landing of source 'events'"),
        "{why}"
    );
    let text = serde_json::to_string(&crate::resume::recorded_workflow(&workflow)).expect("json");
    assert!(
        !text.contains("s3cret") && !text.contains("b:9092"),
        "{text}"
    );
    assert!(text.contains("'***'"));
}
