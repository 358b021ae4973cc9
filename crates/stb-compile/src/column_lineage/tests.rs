use super::{InputKind, TRACE_CODE, trace};

fn orders() -> (stb_project::Project, crate::Compiled) {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/orders");
    let project = stb_project::discover(&stb_project::DiscoverOptions {
        project_dir: Some(root.clone()),
        cwd: root,
        ..Default::default()
    })
    .expect("the example discovers");
    let compiled =
        crate::compile_with(&project, crate::Output::PlanOnly).expect("the example compiles");
    (project, compiled)
}

#[test]
fn revenue_is_traced_through_the_models_to_its_json_path() {
    let (project, compiled) = orders();
    let traced = trace(&project, &compiled, "customer_revenue", "revenue_cents").expect("traced");
    assert_eq!(traced.derivation, Some("aggregated"));
    let [paid] = traced.inputs.as_slice() else {
        panic!("{traced:#?}")
    };
    assert_eq!(
        (paid.kind, paid.name.as_str(), paid.column.as_str()),
        (InputKind::Model, "paid_orders", "amount_cents")
    );
    assert_eq!(paid.derivation, Some("copied"));
    let [events] = paid.inputs.as_slice() else {
        panic!("{paid:#?}")
    };
    assert_eq!(
        (
            events.name.as_str(),
            events.column.as_str(),
            events.derivation
        ),
        ("order_events", "amount_cents", Some("computed"))
    );
    let [landing] = events.inputs.as_slice() else {
        panic!("{events:#?}")
    };
    assert_eq!(
        (
            landing.kind,
            landing.name.as_str(),
            landing.column.as_str(),
            landing.json_path.as_slice()
        ),
        (
            InputKind::Source,
            "orders",
            "kafka_value",
            ["amount_cents".to_owned()].as_slice()
        )
    );
    assert!(landing.inputs.is_empty() && landing.derivation.is_none());
}

#[test]
fn a_join_s_columns_come_from_their_sides() {
    let (project, compiled) = orders();
    let traced = trace(&project, &compiled, "order_status", "paid_at").expect("traced");
    let names: Vec<&str> = traced.inputs.iter().map(|i| i.name.as_str()).collect();
    assert_eq!(names, ["paid_orders"], "{traced:#?}");
}

#[test]
fn a_model_or_column_that_is_not_there_is_an_error_with_a_suggestion() {
    let (project, compiled) = orders();
    let missing =
        trace(&project, &compiled, "customer_revenu", "revenue_cents").expect_err("no model");
    assert_eq!(missing.code, TRACE_CODE);
    assert!(missing.hint.contains("customer_revenue"), "{missing:?}");
    let missing = trace(&project, &compiled, "customer_revenue", "revenue").expect_err("no column");
    assert!(missing.hint.contains("revenue_cents"), "{missing:?}");
}
