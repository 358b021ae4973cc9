//! The planner at 5,000 and 20,000 synthetic models: the work it does (model lookups and
//! questions about relations) grows with the models, not with their square.

use std::cell::Cell;
use std::collections::BTreeSet;

use stb_ddl::{Column, QualifiedName, Table};
use stb_model::planning::{Deployable, Landing, PlanModel, PlanSource, QueryPart, RelationKind};

use crate::direct::{Selection, model_graph, plan_direct};
use crate::validation::{shapes, validation};
use crate::workflow::{Stabilization, WorkflowOptions, assemble};

const PER_PIPELINE: usize = 100;

fn typed_table(name: &str) -> Table {
    Table {
        name: QualifiedName::new("db", &format!("tbl__{name}")),
        columns: vec![
            Column::new("x", "UInt64"),
            Column::new("_replay_partition", "Int32"),
            Column::new("_replay_offset", "Int64"),
        ],
        engine: "MergeTree".into(),
        order_by: vec!["x".into()],
        partition_by: None,
        ttl: None,
        settings: Vec::new(),
    }
}

/// A project shaped like the benchmark's: chains of table models, one source each, every
/// tenth model joining a model of the pipeline before (a fan-in when both are rebuilt),
/// and a view at the end of each chain.
fn project(models: usize) -> (Vec<PlanModel>, Vec<PlanSource>) {
    let pipelines = models / PER_PIPELINE;
    let mut all = Vec::with_capacity(models);
    let mut sources = Vec::with_capacity(pipelines);
    for p in 0..pipelines {
        let source = format!("events_{p}");
        sources.push(PlanSource {
            name: source.clone(),
            framework_managed: true,
            relation: Some(format!("raw__{source}")),
            reference: Some(format!("db.raw__{source}")),
            replay_columns: vec!["_replay_partition".into(), "_replay_offset".into()],
            landing: Some(Landing {
                kafka_table: format!("kafka__{source}"),
                raw_table: format!("raw__{source}"),
                view: format!("mv__{source}"),
                raw_definition: Some(typed_table(&format!("raw__{source}"))),
                ..Landing::default()
            }),
            ..PlanSource::default()
        });
        for m in 0..PER_PIPELINE {
            let name = format!("p{p}_m{m}");
            let driving = if m == 0 {
                source.clone()
            } else {
                format!("p{p}_m{}", m - 1)
            };
            let mut reads = vec![driving.clone()];
            let mut parts = vec![
                QueryPart::Text("SELECT x, _replay_partition, _replay_offset FROM ".into()),
                if m == 0 {
                    QueryPart::Source {
                        name: source.clone(),
                        relation: format!("db.raw__{source}"),
                    }
                } else {
                    QueryPart::Model(driving.clone())
                },
            ];
            if p > 0 && m % 10 == 5 {
                let side = format!("p{}_m{m}", p - 1);
                parts.push(QueryPart::Text(" AS d LEFT JOIN ".into()));
                parts.push(QueryPart::Model(side.clone()));
                parts.push(QueryPart::Text(" AS s USING x".into()));
                reads.push(side);
            }
            let view = m == PER_PIPELINE - 1;
            let relations = if view {
                vec![(RelationKind::View, format!("vw__{name}"))]
            } else {
                vec![
                    (RelationKind::Table, format!("tbl__{name}")),
                    (RelationKind::MaterializedView, format!("mv__{name}")),
                ]
            };
            let create_statements = relations
                .iter()
                .map(|(_, relation)| format!("CREATE {relation}"))
                .collect();
            all.push(PlanModel {
                name: name.clone(),
                pipeline: format!("pl__{source}"),
                is_table: !view,
                relations,
                reads,
                driving_input: (!view).then_some(driving),
                create_statements,
                query: format!("SELECT x FROM {name}"),
                reference: format!("db.tbl__{name}"),
                output_columns: vec![
                    ("x".into(), "UInt64".into()),
                    ("_replay_partition".into(), "Int32".into()),
                    ("_replay_offset".into(), "Int64".into()),
                ],
                boundary_mode: Some("offsets".into()),
                replay_query: vec![
                    "SELECT x, _replay_partition, _replay_offset FROM ".into(),
                    String::new(),
                ],
                deployable: Deployable {
                    table: (!view).then(|| typed_table(&name)),
                    query_parts: parts,
                    ..Deployable::default()
                },
                ..PlanModel::default()
            });
        }
    }
    (all, sources)
}

/// The state a plan starts from.
#[derive(Debug, Clone, Copy)]
enum State {
    NothingBuilt,
    AllBuilt,
    /// `--select` of the first model of the first pipeline, with its downstream.
    OneSelected,
}

/// The work one plan does, from the model graph to the validation's sessions: model
/// lookups plus questions about relations, and the plan's size (its steps and checks).
fn work(models: usize, state: State) -> (u64, usize) {
    let (models, sources) = project(models);
    let asked = Cell::new(0_u64);
    let built = !matches!(state, State::NothingBuilt);
    let present = |_: &str| {
        asked.set(asked.get() + 1);
        built
    };
    let before = super::lookups();
    let graph = model_graph(&models);
    let selected = match state {
        State::OneSelected => Some(BTreeSet::from(["p0_m0".to_owned()])),
        State::NothingBuilt | State::AllBuilt => None,
    };
    let selection =
        Selection::new(&graph, selected).with_missing_upstream(&graph, &models, &present);
    let plan = plan_direct(&models, &sources, &selection, &present).expect("a plan");
    let options = WorkflowOptions {
        database: "db".into(),
        stabilization: Stabilization::Evidence,
        start_time: None,
        recreate_sources: Vec::new(),
        seeds: std::collections::BTreeMap::new(),
        root_start_times: std::collections::BTreeMap::new(),
        pacing: Default::default(),
    };
    let workflow = assemble(&plan, &models, &sources, &options, &present).expect("a workflow");
    let scope: Vec<&str> = plan.entries.iter().map(|e| e.model.as_str()).collect();
    let checks = validation(&scope, &models, &sources, &present);
    let shapes = shapes(&checks.checks);
    let size = workflow.steps.len() + checks.checks.len() + shapes.len();
    (super::lookups() - before + asked.get(), size)
}

#[test]
fn a_plan_of_20000_models_does_four_times_the_work_of_5000_not_sixteen() {
    for state in [State::NothingBuilt, State::AllBuilt, State::OneSelected] {
        let (small, small_size) = work(5_000, state);
        let (large, large_size) = work(20_000, state);
        let ratio = large as f64 / small as f64;
        // Linear is 4; a lookup per pair of models (or of models and roots, stages,
        // sources) would be 16. The plan itself grows by the same factor.
        assert!(
            ratio < 4.5,
            "{state:?}: {small} at 5,000 models, {large} at 20,000 ({ratio:.2}x)"
        );
        assert!(
            large_size >= small_size * 3,
            "{state:?}: {small_size} {large_size}"
        );
        // A few lookups per model, not one per pair.
        assert!(
            large < 40 * 20_000,
            "{state:?}: {large} lookups at 20,000 models"
        );
    }
}
