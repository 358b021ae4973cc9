use serde_json::{Value, json};

use super::{GITHUB_COMMENT_LIMIT, markdown};
use crate::plan::Document;

/// Every example project's plan document (`plan::examples_tests`), by name.
fn example(name: &str) -> Value {
    let (_, text) = crate::plan::examples_tests::examples()
        .into_iter()
        .find(|(example, _)| example == name)
        .unwrap_or_else(|| panic!("an example named {name}"));
    serde_json::from_str(&text).expect("json")
}

fn render(value: &Value, limit: usize) -> String {
    let document: Document<'_> = serde_json::from_value(value.clone()).expect("a plan document");
    markdown(&document, limit)
}

#[test]
fn a_direct_plan_of_everything_reads_as_a_comment() {
    insta::assert_snapshot!(render(&example("orders"), GITHUB_COMMENT_LIMIT));
}

#[test]
fn a_virtual_plan_names_its_deployment_and_what_it_stages() {
    insta::assert_snapshot!(render(&example("deployments"), GITHUB_COMMENT_LIMIT));
}

#[test]
fn a_mixed_plan_has_both_phases_under_one_summary() {
    insta::assert_snapshot!(render(&example("mixed"), GITHUB_COMMENT_LIMIT));
}

/// The orders plan with `paid_orders`' query changed and rows that retained history no
/// longer holds: the loss first, the diff folded.
fn changed_orders() -> Value {
    let mut plan = example("orders");
    let entries = plan["entries"].as_array_mut().expect("entries");
    let paid = entries
        .iter_mut()
        .find(|e| e["model"] == "paid_orders")
        .expect("paid_orders");
    paid["sql_change"]["status"] = json!("query_changed");
    paid["sql_change"]["unified_diff"] = json!(
        "--- previous\n+++ current\n@@ -13,2 +13,2 @@\n FROM shop.tbl__order_events\n-WHERE kind = 'paid'\n+WHERE kind = 'paid' AND amount_cents > 0\n"
    );
    plan["shrink"]["lost_rows"] = json!(1234);
    plan["shrink"]["needs_allow_shrink"] = json!(true);
    plan["shrink"]["models"] = json!(["order_events"]);
    plan["teardown"] = json!([
        {"kind": "materialized_view", "relation": "mv__paid_orders"},
        {"kind": "table", "relation": "tbl__paid_orders"}
    ]);
    plan
}

#[test]
fn losses_and_drops_come_first_and_a_changed_query_is_folded() {
    let text = render(&changed_orders(), GITHUB_COMMENT_LIMIT);
    insta::assert_snapshot!(text);
    let loss = text.find("1,234 rows are lost").expect("the loss");
    let drop = text
        .find("drop table `tbl__paid_orders`")
        .expect("the drop");
    let models = text.find("Models (").expect("the models");
    assert!(loss < drop && drop < models, "{text}");
    assert!(text.contains("**breaking**"), "{text}");
}

#[test]
fn a_plan_too_large_for_a_comment_is_cut_with_a_note_and_keeps_its_summary() {
    let mut plan = changed_orders();
    let template = plan["entries"][1].clone();
    let long_diff = format!(
        "--- previous\n+++ current\n@@ -1,1 +1,1 @@\n-{}\n+{}\n",
        "x".repeat(400),
        "y".repeat(400)
    );
    let entries: Vec<Value> = (0..3_000)
        .map(|i| {
            let mut entry = template.clone();
            entry["model"] = json!(format!("model_{i}"));
            entry["sql_change"]["unified_diff"] = json!(long_diff);
            entry
        })
        .collect();
    plan["entries"] = Value::Array(entries);
    let text = render(&plan, GITHUB_COMMENT_LIMIT);
    assert!(
        text.chars().count() <= GITHUB_COMMENT_LIMIT,
        "{} characters",
        text.chars().count()
    );
    assert!(
        text.contains("**3000 models rebuilt**"),
        "the summary stays"
    );
    assert!(text.contains("1,234 rows are lost"), "the loss stays");
    assert!(
        text.contains("> Truncated to fit a comment:") && text.contains("SQL diffs of"),
        "{}",
        &text[text.len().saturating_sub(600)..]
    );
    assert!(text.contains("<code>model_0</code>"), "the first diffs fit");
    // Under a tiny limit the text is cut, never longer.
    let tiny = render(&plan, 200);
    assert!(tiny.chars().count() <= 200, "{tiny}");
}
