use std::collections::BTreeSet;

use stb_ddl::cluster::{Cluster, Topology};
use stb_ddl::{Column, KafkaSettings, MaterializedView, QualifiedName, Table, View};
use stb_model::planning::{Deployable, QueryPart};

use super::{ClusterTarget, Shard, distribute};
use crate::direct::{
    DirectPlan, Landing, PlanModel, PlanSource, RelationKind, Selection, model_graph, plan_direct,
};
use crate::workflow::{Stabilization, Workflow, WorkflowOptions, assemble};

const LINEAGE: [&str; 2] = ["_replay_partition", "_replay_offset"];

/// A table model of `name` fed by `input` (a `source` or a model), keeping the lineage.
fn table(name: &str, input: QueryPart, engine: &str) -> PlanModel {
    let driving = match &input {
        QueryPart::Model(model) => model.clone(),
        QueryPart::Source { name, .. } => name.clone(),
        QueryPart::Text(_) => unreachable!("an input"),
    };
    let relation = format!("tbl__{name}");
    let columns = ["customer_id", "amount", LINEAGE[0], LINEAGE[1]];
    let select = "SELECT customer_id, amount, _replay_partition, _replay_offset FROM ";
    let input_text = match &input {
        QueryPart::Model(model) => format!("shop.tbl__{model}"),
        QueryPart::Source { relation, .. } => relation.clone(),
        QueryPart::Text(_) => unreachable!("an input"),
    };
    let storage = Table {
        name: QualifiedName::new("shop", &relation),
        columns: columns.iter().map(|c| Column::new(c, "UInt64")).collect(),
        engine: engine.into(),
        order_by: vec!["customer_id".into()],
        partition_by: None,
        ttl: None,
        settings: Vec::new(),
    };
    let view = MaterializedView {
        name: QualifiedName::new("shop", &format!("mv__{name}")),
        target: QualifiedName::new("shop", &relation),
        query: String::new(),
        refresh: None,
    };
    PlanModel {
        // What one server runs: the workflow is assembled from these first.
        create_statements: vec![
            storage.render(),
            MaterializedView {
                query: format!("{select}{input_text}"),
                ..view.clone()
            }
            .render(),
        ],
        name: name.into(),
        pipeline: "pl__shop".into(),
        is_table: true,
        relations: vec![
            (RelationKind::Table, relation.clone()),
            (RelationKind::MaterializedView, format!("mv__{name}")),
        ],
        reads: vec![driving.clone()],
        driving_input: Some(driving),
        reference: format!("shop.{relation}"),
        output_columns: columns
            .iter()
            .map(|c| ((*c).to_owned(), "UInt64".to_owned()))
            .collect(),
        boundary_mode: Some("offsets".into()),
        replay_query: vec![
            "SELECT customer_id, amount, _replay_partition, _replay_offset FROM ".into(),
            String::new(),
        ],
        sharding_key: Some("cityHash64(customer_id)".into()),
        deployable: Deployable {
            table: Some(storage),
            materialized_view: Some(view),
            view: None,
            query_parts: vec![QueryPart::Text(select.into()), input],
        },
        ..PlanModel::default()
    }
}

/// Orders land from Kafka; `clean` reads them, `totals` reads `clean`, `revenue` is a
/// view over `totals`.
fn project() -> (Vec<PlanModel>, Vec<PlanSource>) {
    let managed = stb_ddl::managed_source(
        "shop",
        "orders",
        KafkaSettings {
            broker_list: "kafka:9092".into(),
            topic: "shop.orders".into(),
            group: "streambuild_orders_shop".into(),
            format: "JSONAsString".into(),
            settings: vec![("kafka_sasl_password".into(), "hunter2".into())],
            hidden: Vec::new(),
        },
        None,
    );
    let landing = Landing {
        kafka_table: "kafka__orders".into(),
        raw_table: "raw__orders".into(),
        view: "mv__orders".into(),
        create_kafka: managed
            .kafka
            .render_if_not_exists(stb_ddl::Audience::Runtime),
        create_kafka_recorded: managed
            .kafka
            .render_if_not_exists(stb_ddl::Audience::Artifact),
        create_raw: managed.raw.render_if_not_exists(),
        raw_definition: Some(managed.raw.clone()),
        create_view: managed.landing.render_if_not_exists(),
        kafka_definition: Some(managed.kafka.clone()),
        view_definition: Some(managed.landing.clone()),
        consumer_group: managed.kafka.group.clone(),
        brokers: "kafka:9092".into(),
        settings: Vec::new(),
    };
    let sources = vec![PlanSource {
        name: "orders".into(),
        framework_managed: true,
        relation: Some("raw__orders".into()),
        reference: Some("shop.raw__orders".into()),
        replay_columns: ["_replay_partition", "_replay_offset", "_replay_timestamp"]
            .map(str::to_owned)
            .to_vec(),
        landing: Some(landing),
        ..PlanSource::default()
    }];
    let source = QueryPart::Source {
        name: "orders".into(),
        relation: "shop.raw__orders".into(),
    };
    let models = vec![
        table("clean", source, "MergeTree()"),
        table(
            "totals",
            QueryPart::Model("clean".into()),
            "SummingMergeTree(amount)",
        ),
        PlanModel {
            name: "revenue".into(),
            pipeline: "pl__shop".into(),
            relations: vec![(RelationKind::View, "vw__revenue".into())],
            create_statements: vec![
                "CREATE VIEW shop.vw__revenue AS\nSELECT sum(amount) AS revenue FROM shop.tbl__totals"
                    .into(),
            ],
            reads: vec!["totals".into()],
            reference: "shop.vw__revenue".into(),
            deployable: Deployable {
                view: Some(View {
                    name: QualifiedName::new("shop", "vw__revenue"),
                    query: String::new(),
                }),
                query_parts: vec![
                    QueryPart::Text("SELECT sum(amount) AS revenue FROM ".into()),
                    QueryPart::Model("totals".into()),
                ],
                ..Deployable::default()
            },
            ..PlanModel::default()
        },
    ];
    (models, sources)
}

fn target(topology: Topology, shards: u32) -> ClusterTarget {
    ClusterTarget {
        cluster: Cluster::new(topology, "analytics"),
        shards: (1..=shards)
            .map(|number| Shard {
                number,
                replicas: vec![format!("ch-{number}a:9000"), format!("ch-{number}b:9000")],
            })
            .collect(),
    }
}

/// The workflow of the whole project on `target` (assembled for one server, then
/// distributed); `built`: every relation exists.
fn on(
    target: &ClusterTarget,
    models: &[PlanModel],
    sources: &[PlanSource],
    built: bool,
) -> Result<Workflow, crate::direct::PlanError> {
    // Built: every relation, and the local parts of the tables (a view has none).
    let present =
        move |name: &str| built && (!name.ends_with("_local") || name.starts_with("tbl__"));
    let plan: DirectPlan = plan_direct(
        models,
        sources,
        &Selection::new(&model_graph(models), None::<BTreeSet<String>>),
        &present,
    )
    .expect("plan");
    let single = assemble(
        &plan,
        models,
        sources,
        &WorkflowOptions {
            database: "shop".into(),
            stabilization: Stabilization::Timed(5),
            start_time: None,
            recreate_sources: Vec::new(),
            seeds: std::collections::BTreeMap::new(),
            root_start_times: std::collections::BTreeMap::new(),
            pacing: Default::default(),
        },
        &present,
    )
    .expect("workflow");
    distribute(single, &plan, models, sources, target, &present)
}

/// Every step as the plan lists it: where it runs, its id, its recorded statement.
fn listing(workflow: &Workflow) -> String {
    workflow
        .steps
        .iter()
        .map(|step| {
            format!(
                "-- {} [{}]\n{}",
                step.id,
                step.shard
                    .map_or_else(|| "this server".to_owned(), |s| format!("shard {s}")),
                workflow.recorded_sql(step)
            )
        })
        .collect::<Vec<_>>()
        .join("\n\n")
}

#[test]
fn a_sharded_first_build_creates_local_parts_and_replays_on_every_shard() {
    let (models, sources) = project();
    let sharded = on(&target(Topology::Sharded, 2), &models, &sources, false).expect("sharded");
    insta::assert_snapshot!("sharded_first_build", listing(&sharded));
}

#[test]
fn a_sharded_rebuild_sets_aside_both_parts_and_drops_them_last() {
    let (models, sources) = project();
    let sharded = on(&target(Topology::Sharded, 3), &models, &sources, true).expect("sharded");
    insta::assert_snapshot!("sharded_rebuild", listing(&sharded));
    // Each replay root captures and replays once on each of the three shards, after its
    // replica has synced, and every capture of the stage comes before its first replay.
    let ids: Vec<&str> = sharded.steps.iter().map(|s| s.id.as_str()).collect();
    for shard in 1..=3 {
        let sync = format!("sync_input_clean__shard_{shard}");
        let capture = format!("capture_replay_clean__shard_{shard}");
        let position = |id: &str| ids.iter().position(|i| *i == id).expect(id);
        assert!(position(&sync) < position(&capture));
        assert!(position(&capture) < position("replay_clean__shard_1"));
    }
    assert_eq!(
        sharded.steps.iter().filter(|s| s.shard.is_some()).count(),
        12,
        "three shards: the input's sync and the capture, the target's sync and the replay"
    );
    // Nothing runs there that names a relation without its cluster: every DDL is ON CLUSTER.
    for step in &sharded.steps {
        if step.shard.is_none()
            && let crate::workflow::Action::Statement(sql) = &step.action
            && !sql.starts_with("SELECT sleepEachRow")
        {
            assert!(sql.contains("ON CLUSTER analytics"), "{}: {sql}", step.id);
        }
    }
    // What the build created, both parts of every table (the undo itself is not written
    // for a cluster yet: builds are refused there).
    assert!(sharded.undo.created.iter().any(|r| r == "tbl__clean_local"));
    // The Kafka table's secrets stay out of what is recorded.
    assert!(!listing(&sharded).contains("hunter2"));
}

#[test]
fn a_shard_s_replay_reads_its_part_under_the_input_s_name() {
    let (models, sources) = project();
    let sharded = on(&target(Topology::Sharded, 2), &models, &sources, true).expect("sharded");
    let cluster = sharded.cluster.as_ref().expect("cluster work");
    let root = &cluster.shard_roots[0];
    let replay = root.template.render("_replay_offset <= 9");
    assert!(
        replay.starts_with("INSERT INTO shop.tbl__clean SELECT"),
        "{replay}"
    );
    assert!(
        replay.contains("FROM (SELECT * FROM shop.raw__orders_local WHERE (_replay_offset <= 9)"),
        "{replay}"
    );
    assert!(
        replay.contains(") AS raw__orders SETTINGS"),
        "read under the input's name: {replay}"
    );
    assert!(
        replay.ends_with("SETTINGS distributed_foreground_insert = 1"),
        "{replay}"
    );
    assert!(root.capture_sql.contains("FROM shop.raw__orders_local"));
    // The single-server root is untouched: the plan's totals are counted through it.
    assert_eq!(
        sharded.roots[0].template.anchor.read_from(),
        "shop.raw__orders"
    );
}

#[test]
fn on_cluster_statements_name_the_cluster_and_replicate_every_table() {
    let (models, sources) = project();
    let replicated =
        on(&target(Topology::OnCluster, 1), &models, &sources, true).expect("on_cluster");
    insta::assert_snapshot!("on_cluster_rebuild", listing(&replicated));
    assert!(!listing(&replicated).contains("_local"));
}

#[test]
fn a_sharded_model_driven_by_an_adopted_table_is_refused() {
    let (mut models, mut sources) = project();
    sources.push(PlanSource {
        name: "payments".into(),
        relation: Some("payments".into()),
        reference: Some("shop.payments".into()),
        replay_columns: LINEAGE.map(str::to_owned).to_vec(),
        ..PlanSource::default()
    });
    models.push(table(
        "paid",
        QueryPart::Source {
            name: "payments".into(),
            relation: "shop.payments".into(),
        },
        "MergeTree()",
    ));
    let error =
        on(&target(Topology::Sharded, 2), &models, &sources, true).expect_err("no local part");
    assert!(
        error
            .message
            .contains("'payments', which has no local part"),
        "{}",
        error.message
    );
    // On on_cluster a shard's replay reads the table as it is: with one replica per
    // shard that is all of its rows; with more, each replica may hold other rows.
    let mut single_replicas = target(Topology::OnCluster, 2);
    for shard in &mut single_replicas.shards {
        shard.replicas.truncate(1);
    }
    assert!(on(&single_replicas, &models, &sources, true).is_ok());
    let error = on(&target(Topology::OnCluster, 1), &models, &sources, true)
        .expect_err("an adopted table on replicas");
    assert!(
        error.message.contains("a table stb did not create"),
        "{}",
        error.message
    );
}

#[test]
fn on_cluster_shards_without_their_own_coordination_path_are_refused() {
    let (models, sources) = project();
    let mut shared = target(Topology::OnCluster, 2);
    shared.cluster.zookeeper_path = "/clickhouse/tables/{uuid}".into();
    let error = on(&shared, &models, &sources, true).expect_err("one table on every server");
    assert!(
        error.message.contains("names no {shard}"),
        "{}",
        error.message
    );
    // One shard: every server is meant to be a replica of the one table.
    shared.shards.truncate(1);
    assert!(on(&shared, &models, &sources, true).is_ok());
}

#[test]
fn a_relation_named_like_another_step_is_dropped_as_itself() {
    let (mut models, sources) = project();
    // Its teardown step is `drop_previous_tbl__clean`, the id the cleanup of the
    // set-aside `tbl__clean` has too; `source_kafka__orders` reads like the Kafka table's.
    for relation in ["previous_tbl__clean", "source_kafka__orders"] {
        models.push(PlanModel {
            name: relation.into(),
            pipeline: "pl__shop".into(),
            relations: vec![(RelationKind::View, relation.into())],
            create_statements: vec![format!("CREATE VIEW shop.{relation} AS SELECT 1")],
            reference: format!("shop.{relation}"),
            deployable: Deployable {
                view: Some(View {
                    name: QualifiedName::new("shop", relation),
                    query: String::new(),
                }),
                query_parts: vec![QueryPart::Text("SELECT 1".into())],
                ..Deployable::default()
            },
            ..PlanModel::default()
        });
    }
    let sharded = on(&target(Topology::Sharded, 2), &models, &sources, true).expect("sharded");
    let statements: Vec<(&str, crate::workflow::Phase, String)> = sharded
        .steps
        .iter()
        .map(|s| (s.id.as_str(), s.phase, sharded.recorded_sql(s).into_owned()))
        .collect();
    let teardown: Vec<&String> = statements
        .iter()
        .filter(|(_, phase, _)| *phase == crate::workflow::Phase::Teardown)
        .map(|(_, _, sql)| sql)
        .collect();
    assert!(
        teardown
            .iter()
            .any(|sql| sql.contains("shop.previous_tbl__clean "))
    );
    assert!(
        teardown
            .iter()
            .any(|sql| sql.contains("shop.source_kafka__orders "))
    );
    assert!(
        !teardown.iter().any(|sql| sql.starts_with("DROP")
            && (sql.contains("tbl__clean__stb_prev") || sql.contains("shop.kafka__orders "))),
        "{teardown:#?}"
    );
    // The set-aside is dropped last, both parts.
    assert!(statements.iter().any(|(_, phase, sql)| {
        *phase == crate::workflow::Phase::Cleanup
            && sql.contains("DROP TABLE IF EXISTS shop.tbl__clean__stb_prev_local")
    }));
    // A view has no local part to drop.
    assert!(
        !statements
            .iter()
            .any(|(_, _, sql)| sql.contains("previous_tbl__clean_local"))
    );
}

#[test]
fn replays_wait_for_queued_and_replicated_rows_on_every_shard() {
    let (models, sources) = project();
    let sharded = on(&target(Topology::Sharded, 2), &models, &sources, true).expect("sharded");
    let ids: Vec<&str> = sharded.steps.iter().map(|s| s.id.as_str()).collect();
    let position = |id: &str| {
        ids.iter()
            .position(|i| *i == id)
            .unwrap_or_else(|| panic!("{id} in {ids:?}"))
    };
    // The new views write the root's table through its Distributed table: those rows are
    // sent to their shards and fetched by the replica before the replay looks for them.
    assert!(position("flush_target_clean") < position("sync_target_clean__shard_1"));
    assert!(position("sync_target_clean__shard_2") < position("replay_clean__shard_2"));
    let flush = sharded
        .steps
        .iter()
        .find(|s| s.id == "flush_target_clean")
        .expect("flush");
    assert_eq!(
        sharded.recorded_sql(flush),
        "SYSTEM FLUSH DISTRIBUTED shop.tbl__clean ON CLUSTER analytics"
    );
    // A landing is written where it is consumed: nothing queued to flush, only replicas.
    assert!(!ids.contains(&"flush_input_clean"));
    assert!(position("sync_input_clean__shard_1") < position("capture_replay_clean__shard_1"));
}

#[test]
fn a_table_the_cluster_cannot_hold_is_refused() {
    let (mut models, sources) = project();
    models[1].deployable.table.as_mut().expect("table").engine = "Memory".into();
    let error = on(&target(Topology::Sharded, 2), &models, &sources, true).expect_err("Memory");
    assert!(
        error.message.contains("model 'totals'"),
        "{}",
        error.message
    );
}
