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
        consumer_group: "streambuild_orders_shop".into(),
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

/// The single-server workflow of the whole project; `built`: every relation exists.
fn workflow(models: &[PlanModel], sources: &[PlanSource], built: bool) -> Workflow {
    let present = move |_: &str| built;
    let plan: DirectPlan = plan_direct(
        models,
        sources,
        &Selection::new(&model_graph(models), None::<BTreeSet<String>>),
        &present,
    )
    .expect("plan");
    assemble(
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
        },
        &present,
    )
    .expect("workflow")
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
    let single = workflow(&models, &sources, false);
    let sharded =
        distribute(single, &models, &sources, &target(Topology::Sharded, 2)).expect("sharded");
    insta::assert_snapshot!("sharded_first_build", listing(&sharded));
}

#[test]
fn a_sharded_rebuild_sets_aside_both_parts_and_drops_them_last() {
    let (models, sources) = project();
    let single = workflow(&models, &sources, true);
    let sharded =
        distribute(single, &models, &sources, &target(Topology::Sharded, 3)).expect("sharded");
    insta::assert_snapshot!("sharded_rebuild", listing(&sharded));
    // Each replay root captures and replays once on each of the three shards, after its
    // replica has synced, and every capture of the stage comes before its first replay.
    let ids: Vec<&str> = sharded.steps.iter().map(|s| s.id.as_str()).collect();
    for shard in 1..=3 {
        let sync = format!("sync_replica_clean__shard_{shard}");
        let capture = format!("capture_replay_clean__shard_{shard}");
        let position = |id: &str| ids.iter().position(|i| *i == id).expect(id);
        assert!(position(&sync) < position(&capture));
        assert!(position(&capture) < position("replay_clean__shard_1"));
    }
    assert_eq!(
        sharded.steps.iter().filter(|s| s.shard.is_some()).count(),
        9,
        "three shards: a sync, a capture and a replay each"
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
    // A build that stops is undone over both parts of every table it created.
    assert!(sharded.undo.created.iter().any(|r| r == "tbl__clean_local"));
    // The Kafka table's secrets stay out of what is recorded.
    assert!(!listing(&sharded).contains("hunter2"));
}

#[test]
fn a_shard_s_replay_reads_its_part_under_the_input_s_name() {
    let (models, sources) = project();
    let sharded = distribute(
        workflow(&models, &sources, true),
        &models,
        &sources,
        &target(Topology::Sharded, 2),
    )
    .expect("sharded");
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
    let replicated = distribute(
        workflow(&models, &sources, true),
        &models,
        &sources,
        &target(Topology::OnCluster, 1),
    )
    .expect("on_cluster");
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
    let error = distribute(
        workflow(&models, &sources, true),
        &models,
        &sources,
        &target(Topology::Sharded, 2),
    )
    .expect_err("no local part");
    assert!(
        error
            .message
            .contains("'payments', which has no local part"),
        "{}",
        error.message
    );
    // One server per shard needs no local part: the same project plans on_cluster.
    assert!(
        distribute(
            workflow(&models, &sources, true),
            &models,
            &sources,
            &target(Topology::OnCluster, 1),
        )
        .is_ok()
    );
}

#[test]
fn a_table_the_cluster_cannot_hold_is_refused() {
    let (mut models, sources) = project();
    models[1].deployable.table.as_mut().expect("table").engine = "Memory".into();
    let error = distribute(
        workflow(&models, &sources, true),
        &models,
        &sources,
        &target(Topology::Sharded, 2),
    )
    .expect_err("Memory");
    assert!(
        error.message.contains("model 'totals'"),
        "{}",
        error.message
    );
}
