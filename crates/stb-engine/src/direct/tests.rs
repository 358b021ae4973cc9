//! `prepare` against catalog and fingerprint values held in memory: no server.

use std::collections::BTreeMap;

use stb_warehouse::fingerprints::Fingerprint;
use stb_warehouse::{CatalogColumn, CatalogRelation};

use super::*;

const DATABASE: &str = "shop";

/// orders (Kafka) -> clean; customers (adopted) -> names; enriched = clean joined with
/// names (a fan-in when both are rebuilt); report (view) reads enriched; pl__archive is
/// virtual unless `archive_mode` says otherwise.
fn project(archive_mode: &str) -> (tempfile::TempDir, Project, Compiled) {
    let files = [
        (
            "streambuild_project.toml".to_owned(),
            format!("name = \"shop\"\ndefault_target = \"dev\"\n[targets.dev]\ndatabase = \"{DATABASE}\"\n[defaults]\npipeline_mode = \"direct\"\n"),
        ),
        (
            "sources/sources.yml".to_owned(),
            "sources:\n  - name: orders\n    kind: kafka\n    broker_list: \"b:9092\"\n    topic: orders\n    replay_boundary: {mode: offsets}\n  - name: customers\n    kind: stream_table\n    table_name: customers_existing\n    replay_boundary:\n      mode: timestamp\n      columns:\n        _replay_timestamp: updated_at\n".to_owned(),
        ),
        (
            "pipelines/pl__orders/clean.sql".to_owned(),
            "MODEL (order_by [\"_replay_partition\", \"_replay_offset\"]);\nSELECT _replay_partition::Int32 AS _replay_partition, _replay_offset::Int64 AS _replay_offset, JSONExtractUInt(kafka_value, 'customer')::UInt64 AS customer\nFROM __source(\"orders\")\n".to_owned(),
        ),
        (
            "pipelines/pl__customers/names.sql".to_owned(),
            "MODEL (order_by [\"id\"]);\nSELECT id::UInt64 AS id, name::String AS name, _replay_timestamp::DateTime64(3) AS _replay_timestamp\nFROM __source(\"customers\")\n".to_owned(),
        ),
        (
            "pipelines/pl__orders/enriched.sql".to_owned(),
            "MODEL (order_by [\"_replay_partition\", \"_replay_offset\"]);\nSELECT c._replay_partition::Int32 AS _replay_partition, c._replay_offset::Int64 AS _replay_offset, n.name::String AS name\nFROM __ref(\"clean\") AS c\nJOIN __ref(\"names\", ref_type='reference') AS n ON n.id = c.customer\n".to_owned(),
        ),
        (
            "pipelines/pl__reporting/report.sql".to_owned(),
            "MODEL (kind view);\nSELECT name::String AS name, count()::UInt64 AS orders FROM __ref(\"enriched\") GROUP BY name\n".to_owned(),
        ),
        (
            "pipelines/pl__archive/pipeline.toml".to_owned(),
            format!("mode = \"{archive_mode}\"\n"),
        ),
        (
            "pipelines/pl__archive/archived.sql".to_owned(),
            "MODEL (order_by [\"_replay_partition\", \"_replay_offset\"]);\nSELECT _replay_partition::Int32 AS _replay_partition, _replay_offset::Int64 AS _replay_offset\nFROM __source(\"orders\")\n".to_owned(),
        ),
    ];
    crate::compiled_project(&files)
}

fn relation(name: &str, columns: &[(&str, &str)], create: &str) -> CatalogRelation {
    CatalogRelation {
        name: name.into(),
        engine: "MergeTree".into(),
        sorting_key: String::new(),
        partition_key: String::new(),
        create_table_query: create.into(),
        as_select: String::new(),
        uuid: String::new(),
        defined: true,
        columns: columns
            .iter()
            .map(|(n, t)| CatalogColumn {
                name: (*n).into(),
                data_type: (*t).into(),
                default_expression: String::new(),
            })
            .collect::<Vec<_>>()
            .into(),
    }
}

fn landing(compiled: &Compiled) -> Landing {
    compiled
        .plan_sources
        .iter()
        .find_map(|s| s.landing.clone())
        .expect("a managed landing")
}

/// The adopted table, and, with `deployed`, the landing and every model relation.
fn catalog(compiled: &Compiled, deployed: bool) -> Catalog {
    let mut relations = vec![relation(
        "customers_existing",
        &[
            ("id", "UInt64"),
            ("name", "String"),
            ("updated_at", "DateTime64(3)"),
        ],
        "",
    )];
    if deployed {
        let landing = landing(compiled);
        relations.push(relation(&landing.raw_table, stb_ddl::RAW_COLUMNS, ""));
        let mut kafka = relation(&landing.kafka_table, &[], &landing.create_kafka);
        kafka.engine = "Kafka".into();
        relations.push(kafka);
        relations.push(relation(&landing.view, &[], &landing.create_view));
        for model in compiled.plan_models.iter() {
            for (_, name) in &model.relations {
                relations.push(relation(name, &[], ""));
            }
        }
    }
    Catalog::new("UTC", relations)
}

fn reads(catalog: Catalog, fingerprints: Fingerprints) -> Reads {
    Reads {
        database: DATABASE.into(),
        catalog,
        fingerprints,
        catalog_stamp: None,
        cluster: None,
    }
}

fn plan(
    project: &Project,
    compiled: &Compiled,
    request: &Scope,
    reads: &Reads,
) -> Result<Planned, EngineError> {
    let resolved = request.resolve(compiled)?;
    prepare(project, compiled, &resolved, reads, Settings::default())
}

fn direct_only() -> (tempfile::TempDir, Project, Compiled) {
    project("direct")
}

fn roots(planned: &Planned) -> Vec<(&str, usize)> {
    planned
        .roots()
        .iter()
        .map(|r| (r.model.as_str(), r.stage))
        .collect()
}

#[test]
fn a_greenfield_plan_rebuilds_everything_with_the_fan_in_in_its_own_stage() {
    let (_dir, project, compiled) = direct_only();
    let reads = reads(catalog(&compiled, false), Fingerprints::Absent);
    let planned = plan(&project, &compiled, &Scope::default(), &reads).expect("plan");
    assert_eq!(planned.selection_mode(), "all");
    assert!(!planned.nothing_changed);
    assert_eq!(
        roots(&planned),
        [("names", 0), ("archived", 0), ("clean", 0), ("enriched", 1)]
    );
    assert_eq!(
        planned
            .plan
            .replay_roots
            .iter()
            .find(|r| r.model == "enriched")
            .map(|r| r.reason()),
        Some("side_input_rebuilt")
    );
    assert!(
        planned
            .changes
            .iter()
            .all(|(_, change)| change.status.as_str() == "first_baseline")
    );
    // A fresh landing: created, with its consumer group reset, before anything replays.
    let steps: Vec<&str> = planned
        .workflow
        .steps
        .iter()
        .map(|s| s.id.as_str())
        .collect();
    assert!(steps.contains(&"reset_consumer_group__orders"), "{steps:?}");
    assert!(planned.repairs.is_empty() && planned.recreations.is_empty());
    assert_eq!(
        planned.relations_of("enriched"),
        ["tbl__enriched", "mv__enriched"]
    );
    // Nothing exists yet, so nothing can be lost: no table is measured.
    assert!(planned.probes.iter().all(|p| p.live_sql.is_none()));
}

#[test]
fn a_selection_plans_its_closure_and_needs_what_it_reads() {
    let (_dir, project, compiled) = direct_only();
    let request = Scope {
        select: vec!["enriched".into()],
        ..Scope::default()
    };
    // Nothing deployed: enriched reads clean and names, which do not exist.
    let missing = plan(
        &project,
        &compiled,
        &request,
        &reads(catalog(&compiled, false), Fingerprints::Absent),
    )
    .expect_err("prerequisites missing");
    assert_eq!(missing.code, PREREQUISITE_CODE);
    let deployed = reads(catalog(&compiled, true), Fingerprints::Absent);
    let planned = plan(&project, &compiled, &request, &deployed).expect("plan");
    assert_eq!(planned.executed_models(), ["enriched", "report"]);
    assert_eq!(planned.selection_mode(), "selected");
    // names is not rebuilt: enriched is an ordinary root, replayed from clean.
    assert_eq!(roots(&planned), [("enriched", 0)]);
    // With --include-missing-upstream and nothing deployed, the upstream comes along.
    let upstream = Scope {
        include_missing_upstream: true,
        ..request
    };
    let planned = plan(
        &project,
        &compiled,
        &upstream,
        &reads(catalog(&compiled, false), Fingerprints::Absent),
    )
    .expect("plan");
    assert_eq!(
        planned.executed_models(),
        ["names", "clean", "enriched", "report"]
    );
}

fn recorded(compiled: &Compiled, except: &[&str]) -> Fingerprints {
    let found: BTreeMap<String, Fingerprint> = compiled
        .plan_models
        .iter()
        .filter(|m| !except.contains(&m.name.as_str()))
        .map(|m| {
            (
                format!("{DATABASE}.{}", m.name),
                Fingerprint {
                    definition_sql: m.query.clone(),
                    definition_hash: stb_plan::sql_change::sql_hash(&m.query),
                    identity_metadata: m.identity(),
                },
            )
        })
        .collect();
    Fingerprints::Found(found)
}

#[test]
fn changed_rebuilds_what_differs_from_its_last_build_with_its_downstream() {
    let (_dir, project, compiled) = direct_only();
    let changed = Scope {
        changed: true,
        ..Scope::default()
    };
    let deployed = catalog(&compiled, true);
    let planned = plan(
        &project,
        &compiled,
        &changed,
        &reads(deployed.clone(), recorded(&compiled, &["names"])),
    )
    .expect("plan");
    assert_eq!(planned.executed_models(), ["names", "enriched", "report"]);
    assert_eq!(planned.selection_mode(), "changed");
    assert_eq!(planned.plan.entries[0].reason.as_str(), "changed");
    let planned = plan(
        &project,
        &compiled,
        &changed,
        &reads(deployed.clone(), recorded(&compiled, &[])),
    )
    .expect("plan");
    assert!(planned.nothing_changed && planned.executed_models().is_empty());
    let unreadable = plan(
        &project,
        &compiled,
        &changed,
        &reads(deployed, Fingerprints::Unavailable("timeout".into())),
    )
    .expect_err("records unreadable");
    assert_eq!(unreadable.code, RECORDS_CODE);
}

fn with_kafka_create(catalog: &mut Catalog, landing: &Landing, create: Option<String>) {
    let replacement = create.map(|create| relation(&landing.kafka_table, &[], &create));
    *catalog = std::mem::replace(catalog, Catalog::new("UTC", Vec::new()))
        .with_relation(&landing.kafka_table, replacement);
}

#[test]
fn landing_drift_is_repaired_or_refused_and_missing_pieces_are_restored() {
    let (_dir, project, compiled) = direct_only();
    let landing = landing(&compiled);
    let select_orders = Scope {
        select: vec!["pipeline:pl__orders".into()],
        ..Scope::default()
    };
    let mut moved = catalog(&compiled, true);
    with_kafka_create(
        &mut moved,
        &landing,
        Some(landing.create_kafka.replace("'orders'", "'orders_v2'")),
    );
    let planned = plan(
        &project,
        &compiled,
        &select_orders,
        &reads(moved, Fingerprints::Absent),
    )
    .expect("settings drift is repaired");
    assert_eq!(planned.recreations.len(), 1, "{:?}", planned.recreations);
    assert_eq!(planned.recreations[0].0, "orders");
    let steps: Vec<&str> = planned
        .workflow
        .steps
        .iter()
        .map(|s| s.id.as_str())
        .collect();
    assert!(
        steps.contains(&"recreate_source_kafka__orders"),
        "{steps:?}"
    );

    let mut regrouped = catalog(&compiled, true);
    with_kafka_create(
        &mut regrouped,
        &landing,
        Some(
            landing
                .create_kafka
                .replace(&landing.consumer_group, "someone_else"),
        ),
    );
    let refused = plan(
        &project,
        &compiled,
        &select_orders,
        &reads(regrouped, Fingerprints::Absent),
    )
    .expect_err("a new consumer group would not resume");
    assert_eq!(refused.code, SOURCE_DRIFT_CODE);

    let mut lost = catalog(&compiled, true);
    with_kafka_create(&mut lost, &landing, None);
    let planned = plan(
        &project,
        &compiled,
        &select_orders,
        &reads(lost.clone(), Fingerprints::Absent),
    )
    .expect("a missing Kafka table is restored");
    assert_eq!(
        planned.repairs,
        [("orders".to_owned(), vec!["kafka_table"])]
    );
    let steps: Vec<&str> = planned
        .workflow
        .steps
        .iter()
        .map(|s| s.id.as_str())
        .collect();
    assert!(steps.contains(&"restore_source_kafka__orders"), "{steps:?}");
    // Read only through a model the build does not rebuild, it stops the build instead.
    let through = Scope {
        select: vec!["report".into()],
        ..Scope::default()
    };
    let refused = plan(
        &project,
        &compiled,
        &through,
        &reads(lost.clone(), Fingerprints::Absent),
    );
    assert!(
        refused.is_ok(),
        "report reads enriched, not the landing's models directly"
    );
    let enriched_only = Scope {
        select: vec!["enriched".into()],
        ..Scope::default()
    };
    let refused = plan(
        &project,
        &compiled,
        &enriched_only,
        &reads(lost, Fingerprints::Absent),
    )
    .expect_err("clean's landing is broken and clean is not rebuilt");
    assert_eq!(refused.code, SOURCE_DRIFT_CODE);
    assert!(
        refused.hint.contains("--select pipeline:pl__orders"),
        "{}",
        refused.hint
    );
}

#[test]
fn refusals_come_with_their_codes() {
    let (_dir, project, compiled) = project("virtual");
    let empty = reads(catalog(&compiled, false), Fingerprints::Absent);
    let virtual_scope = plan(&project, &compiled, &Scope::default(), &empty)
        .expect_err("a virtual pipeline in scope");
    assert_eq!(virtual_scope.code, VIRTUAL_CODE);
    assert!(virtual_scope.message.contains("pl__archive"));
    let (_dir, project, compiled) = direct_only();
    let no_adopted_table = Reads {
        catalog: Catalog::new("UTC", Vec::new()),
        ..reads(catalog(&compiled, false), Fingerprints::Absent)
    };
    let adopted = plan(&project, &compiled, &Scope::default(), &no_adopted_table)
        .expect_err("the adopted table is missing");
    assert_eq!(adopted.code, ADOPTED_CODE);
    let unknown = Scope {
        select: vec!["nope".into()],
        ..Scope::default()
    }
    .resolve(&compiled)
    .expect_err("an unknown selector");
    assert!(unknown.code.starts_with("STB-SELECT-"), "{unknown:?}");
    let unbounded = Scope {
        start_time: stb_plan::options::parse_start_time("2026-11-01").ok(),
        ..Scope::default()
    }
    .resolve(&compiled)
    .expect_err("--start-time needs a selection");
    assert_eq!(unbounded.code, FLAG_CODE);
    let bad = Settings::from_env(&|_| Some("soon".into())).expect_err("not seconds");
    assert_eq!(bad.code, FLAG_CODE);
    assert_eq!(
        Settings::from_env(&|_| None).map(|s| s.stabilization_seconds),
        Ok(None),
        "no timed wait unless asked"
    );
    assert_eq!(
        Settings::from_env(&|_| Some("2".into())).map(|s| s.stabilization_seconds),
        Ok(Some(2))
    );
}

#[test]
fn inserts_are_awaited_on_evidence_unless_something_writes_without_being_a_query() {
    use stb_plan::workflow::Stabilization;
    let (_dir, project, compiled) = direct_only();
    let names = Scope {
        select: vec!["names".into()],
        ..Scope::default()
    };
    let deployed = catalog(&compiled, true);
    // The orders landing's Kafka table is not paused by a build of names alone: it writes
    // in the background, so the timed wait stays.
    let planned = plan(
        &project,
        &compiled,
        &names,
        &reads(deployed.clone(), Fingerprints::Absent),
    )
    .expect("plan");
    let steps: Vec<&str> = planned
        .workflow
        .steps
        .iter()
        .map(|s| s.id.as_str())
        .collect();
    assert!(steps.contains(&"wait_for_live_stabilization"), "{steps:?}");
    assert_eq!(
        stabilization(Settings::default(), &planned.plan, &compiled, &deployed),
        Stabilization::Timed(DEFAULT_STABILIZATION_SECONDS)
    );
    // Without a background writer, every writer of the adopted table is a query: wait for
    // those only.
    let quiet = Catalog::new(
        "UTC",
        deployed
            .relations()
            .iter()
            .cloned()
            .map(|mut relation| {
                if relation.engine == "Kafka" {
                    relation.engine = "Null".into();
                }
                relation
            })
            .collect(),
    );
    let planned = plan(
        &project,
        &compiled,
        &names,
        &reads(quiet, Fingerprints::Absent),
    )
    .expect("plan");
    let steps: Vec<&str> = planned
        .workflow
        .steps
        .iter()
        .map(|s| s.id.as_str())
        .collect();
    assert!(
        steps.contains(&"wait_for_inserts_begun_before_views"),
        "{steps:?}"
    );
    assert!(!steps.contains(&"wait_for_live_stabilization"), "{steps:?}");
    // A build that pauses that landing does not count its Kafka table.
    let everything = plan(
        &project,
        &compiled,
        &Scope::default(),
        &reads(deployed.clone(), Fingerprints::Absent),
    )
    .expect("plan");
    assert_eq!(
        stabilization(Settings::default(), &everything.plan, &compiled, &deployed),
        Stabilization::Evidence
    );
    // A refreshable view writes on its own schedule, and is known by the server's list of
    // them (a plan does not read the views' definitions).
    let refreshing = deployed
        .clone()
        .with_refreshable(Some(BTreeSet::from(["hourly".to_owned()])));
    assert_eq!(
        stabilization(
            Settings::default(),
            &everything.plan,
            &compiled,
            &refreshing
        ),
        Stabilization::Timed(DEFAULT_STABILIZATION_SECONDS)
    );
    // A materialized view that is not refreshable writes as part of client queries; but
    // when the server cannot list refreshable views, any materialized view may be one.
    let mut view = relation("mv__other", &[], "");
    view.engine = "MaterializedView".into();
    let with_view = Catalog::new(
        "UTC",
        deployed.relations().iter().cloned().chain([view]).collect(),
    );
    assert_eq!(
        stabilization(Settings::default(), &everything.plan, &compiled, &with_view),
        Stabilization::Evidence
    );
    assert_eq!(
        stabilization(
            Settings::default(),
            &everything.plan,
            &compiled,
            &with_view.with_refreshable(None)
        ),
        Stabilization::Timed(DEFAULT_STABILIZATION_SECONDS)
    );
    let asked = Settings {
        stabilization_seconds: Some(3),
    };
    assert_eq!(
        stabilization(asked, &everything.plan, &compiled, &deployed),
        Stabilization::Timed(3)
    );
}
