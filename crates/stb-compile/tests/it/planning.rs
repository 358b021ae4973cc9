//! The compiled graph feeds the direct planner: models in topological order with their
//! relations, reads and driving inputs.

use std::collections::BTreeSet;

use stb_plan::direct::{RelationKind, Selection, model_graph, plan_direct};

use crate::support::{SHOP, compile_files};

#[test]
fn the_shop_plans_with_roots_at_each_source() {
    let compiled = compile_files(SHOP, &[]).unwrap_or_else(|d| panic!("{d:#?}"));
    let order: Vec<&str> = compiled
        .plan_models
        .iter()
        .map(|m| m.name.as_str())
        .collect();
    let position = |name: &str| order.iter().position(|n| *n == name).expect(name);
    assert!(position("orders_clean") < position("order_customers"));
    assert!(position("customer_names") < position("order_customers"));
    assert!(position("order_customers") < position("customer_counts"));
    let orders_clean = &compiled.plan_models[position("orders_clean")];
    assert_eq!(orders_clean.driving_input.as_deref(), Some("orders"));
    assert_eq!(
        orders_clean
            .relations
            .iter()
            .map(|(k, _)| *k)
            .collect::<Vec<_>>(),
        [RelationKind::Table, RelationKind::MaterializedView]
    );
    let plan = plan_direct(
        &compiled.plan_models,
        &compiled.plan_sources,
        &Selection::new(&model_graph(&compiled.plan_models), None),
        &|_| true,
    )
    .expect("plan");
    let roots: BTreeSet<(&str, &str)> = plan
        .replay_roots
        .iter()
        .map(|r| (r.model.as_str(), r.driving_input.as_str()))
        .collect();
    // order_customers joins customer_names, which the same build rebuilds: a fan-in,
    // replayed from orders_clean once customer_names is complete.
    assert_eq!(
        roots,
        [
            ("customer_names", "customers"),
            ("order_customers", "orders_clean"),
            ("orders_clean", "orders")
        ]
        .into()
    );
    let fan_in = plan
        .replay_roots
        .iter()
        .find(|r| r.model == "order_customers")
        .expect("root");
    assert_eq!(
        (fan_in.stage, fan_in.waits_for.as_slice()),
        (1, &["customer_names".to_owned()][..])
    );
    assert!(fan_in.propagated.is_empty(), "customer_counts is a view");
    let last_created = plan.creation.last().map(|(k, _)| *k);
    assert_eq!(
        last_created,
        Some(RelationKind::MaterializedView),
        "the fan-in's view"
    );
    let managed: Vec<(&str, bool)> = compiled
        .plan_sources
        .iter()
        .map(|s| (s.name.as_str(), s.framework_managed))
        .collect();
    assert!(managed.contains(&("orders", true)));
    assert!(managed.contains(&("customers", false)));
    let relations: Vec<(&str, Option<&str>)> = compiled
        .plan_sources
        .iter()
        .map(|s| (s.name.as_str(), s.relation.as_deref()))
        .collect();
    assert!(
        relations.contains(&("orders", Some("raw__orders"))),
        "{relations:?}"
    );
    assert!(
        relations.contains(&("customers", Some("customers_existing"))),
        "{relations:?}"
    );
}

#[test]
fn deployable_queries_cut_at_model_references_and_rejoin_to_the_compiled_query() {
    use stb_model::planning::QueryPart;
    let compiled = compile_files(SHOP, &[]).unwrap_or_else(|d| panic!("{d:#?}"));
    let reference = |model: &str| {
        compiled
            .plan_models
            .iter()
            .find(|m| m.name == model)
            .map(|m| m.reference.clone())
            .expect(model)
    };
    for model in compiled.plan_models.iter() {
        let deployable = &model.deployable;
        // With every model at its logical relation, the parts are the compiled query.
        assert_eq!(
            deployable.query_with(&reference),
            model.query,
            "{}",
            model.name
        );
        let referenced: BTreeSet<&str> = deployable
            .query_parts
            .iter()
            .filter_map(|part| match part {
                QueryPart::Model(name) => Some(name.as_str()),
                QueryPart::Text(_) | QueryPart::Source { .. } => None,
            })
            .collect();
        let model_reads: BTreeSet<&str> = model
            .reads
            .iter()
            .map(String::as_str)
            .filter(|read| compiled.plan_models.iter().any(|m| m.name == *read))
            .collect();
        assert_eq!(referenced, model_reads, "{}", model.name);
        assert_eq!(deployable.table.is_some(), model.is_table, "{}", model.name);
        // Cut at the driving input, they are the compiler's replay query.
        if let Some(input) = &model.driving_input {
            assert_eq!(
                deployable.cut_at(input, &reference),
                model.replay_query,
                "{}",
                model.name
            );
        }
        assert_eq!(deployable.view.is_some(), !model.is_table, "{}", model.name);
    }
    // A model reading another model has a cut; a model reading only a source has none.
    let order_customers = compiled
        .plan_models
        .iter()
        .find(|m| m.name == "order_customers")
        .expect("model");
    assert!(
        order_customers
            .deployable
            .query_parts
            .iter()
            .any(|p| matches!(p, QueryPart::Model(name) if name == "orders_clean"))
    );
}

#[test]
fn a_ref_that_names_a_source_reads_it_as_source_does() {
    use stb_model::planning::QueryPart;
    // The reference's fixtures write `FROM __ref("order_events")` for a Kafka source.
    let path = "pipelines/pl__orders/staging/orders_clean.sql";
    let original = SHOP
        .iter()
        .find(|(file, _)| *file == path)
        .map(|(_, text)| *text)
        .expect("orders_clean");
    let by_ref = original.replace("__source(\"orders\")", "__ref(\"orders\")");
    let as_source = compile_files(SHOP, &[]).unwrap_or_else(|d| panic!("{d:#?}"));
    let as_ref =
        compile_files(SHOP, &[(path, by_ref.as_str())]).unwrap_or_else(|d| panic!("{d:#?}"));
    let clean = |compiled: &stb_compile::Compiled| {
        compiled
            .plan_models
            .iter()
            .find(|m| m.name == "orders_clean")
            .cloned()
            .expect("orders_clean")
    };
    let (expected, actual) = (clean(&as_source), clean(&as_ref));
    assert!(
        actual.deployable.query_parts.iter().any(|part| matches!(
            part,
            QueryPart::Source { name, relation } if name == "orders" && relation.ends_with("raw__orders")
        )),
        "{:?}",
        actual.deployable.query_parts
    );
    // The same query, graph and replay either way: only the spelling differs.
    assert_eq!(actual.query, expected.query);
    assert_eq!(actual.driving_input, expected.driving_input);
    assert_eq!(actual.reads, expected.reads);
    assert_eq!(actual.replay_query, expected.replay_query);
    // A deployment renders the source where a model's physical name would go.
    let rendered = actual.deployable.query_with(&|_| String::new());
    assert!(rendered.contains("raw__orders"), "{rendered}");
}

#[test]
fn a_compile_for_a_plan_gives_the_planner_the_same_project_without_the_artifacts() {
    let dir = tempfile::tempdir().expect("tempdir");
    crate::support::write(dir.path(), SHOP);
    let project = stb_project::discover(&stb_project::DiscoverOptions {
        project_dir: Some(dir.path().to_path_buf()),
        cwd: dir.path().to_path_buf(),
        ..Default::default()
    })
    .expect("discover");
    let full = stb_compile::compile(&project).expect("compile");
    let for_plan =
        stb_compile::compile_with(&project, stb_compile::Output::PlanOnly).expect("compile");
    assert_eq!(for_plan.plan_models, full.plan_models);
    assert_eq!(for_plan.plan_sources, full.plan_sources);
    assert_eq!(for_plan.tests, full.tests);
    assert_eq!(for_plan.audits, full.audits);
    assert_eq!(
        (for_plan.models, for_plan.pipelines),
        (full.models, full.pipelines)
    );
    assert!(full.files.contains_key("manifest.json"));
    // No model resource, manifest or DAG: what a plan never reads.
    assert!(
        !for_plan
            .files
            .keys()
            .any(|path| path.starts_with("compiled/resources/") || path.ends_with(".json")),
        "{:?}",
        for_plan.files.keys().collect::<Vec<_>>()
    );
}
