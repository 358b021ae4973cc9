use std::path::Path;

use super::{ModelDetails, describe, pick_runs};
use crate::runs::RunSummary;

fn orders() -> stb_compile::Compiled {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/orders");
    let mut project = stb_project::discover(&stb_project::DiscoverOptions {
        project_dir: Some(dir.clone()),
        cwd: dir,
        ..Default::default()
    })
    .expect("the demo discovers");
    project.database = Some("orders_demo".to_owned());
    stb_compile::compile(&project).expect("the demo compiles")
}

#[test]
fn a_model_is_described_with_its_statements_and_the_checks_that_read_it() {
    let compiled = orders();
    let details: ModelDetails = describe(&compiled, "paid_orders").expect("a model");
    assert_eq!(details.pipeline, "pl__orders");
    assert!(
        details.query.contains("FROM orders_demo.tbl__order_events"),
        "{}",
        details.query
    );
    let owned: Vec<(&str, &str)> = details
        .statements
        .iter()
        .map(|s| (s.kind, s.relation.as_str()))
        .collect();
    assert_eq!(
        owned,
        [
            ("table", "tbl__paid_orders"),
            ("materialized_view", "mv__paid_orders")
        ]
    );
    assert!(
        details.statements[0].sql.starts_with("CREATE TABLE"),
        "{:?}",
        details.statements
    );
    // The test that compares paid_orders' rows, and the audit that reads it beside
    // customer_revenue; order_events' own audits are not its.
    let checks: Vec<(&str, &str)> = details
        .checks
        .iter()
        .map(|c| (c.kind, c.name.as_str()))
        .collect();
    assert_eq!(
        checks,
        [
            ("test", "only_paid_events_become_paid_orders"),
            ("audit", "revenue_matches_paid_orders"),
        ]
    );
    let view = describe(&compiled, "order_status").expect("a view model");
    assert_eq!(view.statements.len(), 1);
    assert_eq!(view.statements[0].kind, "view");
}

#[test]
fn an_unknown_model_is_not_found_with_a_code() {
    let error = describe(&orders(), "paid_order").expect_err("no such model");
    assert_eq!(error.code, super::UNKNOWN_MODEL_CODE);
    assert_eq!(error.kind, crate::ErrorKind::NotFound);
}

fn run(id: &str, status: &'static str, scope: &[&str]) -> RunSummary {
    RunSummary {
        invocation_id: id.to_owned(),
        status,
        command: None,
        mode: None,
        display_command: None,
        owner: None,
        started_at: None,
        last_event_at: None,
        silent_seconds: None,
        duration_ms: None,
        scope: scope.iter().map(|s| (*s).to_owned()).collect(),
        selectors: Vec::new(),
        total_statements: None,
        completed_statements: 0,
        written_rows: 0,
        deployment_id: None,
        error_message: None,
    }
}

#[test]
fn a_models_runs_are_the_newest_that_executed_it_and_the_newest_that_succeeded() {
    let newest_first = vec![
        run("other", "succeeded", &["model:order_events"]),
        run(
            "failed",
            "failed",
            &["model:paid_orders", "model:customer_revenue"],
        ),
        run("built", "succeeded", &["model:paid_orders"]),
        run("older", "succeeded", &["model:paid_orders"]),
    ];
    let picked = pick_runs(newest_first.clone(), "paid_orders");
    assert_eq!(picked.searched, 4);
    assert_eq!(
        picked.last.map(|r| r.invocation_id).as_deref(),
        Some("failed")
    );
    assert_eq!(
        picked.last_success.map(|r| r.invocation_id).as_deref(),
        Some("built")
    );
    let never = pick_runs(newest_first, "top_customers");
    assert!(never.last.is_none() && never.last_success.is_none());
}
