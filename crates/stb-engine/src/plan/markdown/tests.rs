use serde_json::{Value, json};

use super::{GITHUB_COMMENT_LIMIT, markdown};
use crate::plan::Document;

/// Every example project's plan document (`plan::examples_tests`), by name, planned once.
fn example(name: &str) -> Value {
    static EXAMPLES: std::sync::OnceLock<Vec<(String, String)>> = std::sync::OnceLock::new();
    let (_, text) = EXAMPLES
        .get_or_init(crate::plan::examples_tests::examples)
        .iter()
        .find(|(example, _)| example == name)
        .unwrap_or_else(|| panic!("an example named {name}"));
    serde_json::from_str(text).expect("json")
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
        .find("drop table <code>tbl__paid_orders</code>")
        .expect("the drop");
    let models = text.find("Models (").expect("the models");
    assert!(loss < drop && drop < models, "{text}");
    assert!(text.contains("**breaking**"), "{text}");
}

/// `changed_orders` with `count` models, each with a diff of `diff_chars` characters.
fn many_models(count: usize, diff_chars: usize) -> Value {
    let mut plan = changed_orders();
    let template = plan["entries"][1].clone();
    let long_diff = format!(
        "--- previous\n+++ current\n@@ -1,1 +1,1 @@\n-{}\n+{}\n",
        "x".repeat(diff_chars / 2),
        "y".repeat(diff_chars / 2)
    );
    let entries: Vec<Value> = (0..count)
        .map(|i| {
            let mut entry = template.clone();
            entry["model"] = json!(format!("model_{i}"));
            entry["sql_change"]["unified_diff"] = json!(long_diff);
            entry
        })
        .collect();
    plan["entries"] = Value::Array(entries);
    plan
}

fn the_end(text: &str) -> String {
    let count = text.chars().count();
    text.chars().skip(count.saturating_sub(600)).collect()
}

#[test]
fn a_plan_too_large_for_a_comment_gives_up_its_diffs_then_rows_and_says_so() {
    let text = render(&many_models(3_000, 800), GITHUB_COMMENT_LIMIT);
    assert!(
        text.chars().count() <= GITHUB_COMMENT_LIMIT - 300,
        "{} characters",
        text.chars().count()
    );
    assert!(
        text.contains("**3,000 models rebuilt**"),
        "the summary stays"
    );
    assert!(text.contains("1,234 rows are lost"), "the loss stays");
    // The table is cut row by row, and no diff is shown once it is.
    assert!(
        text.contains("| <code>model_0</code> |"),
        "{}",
        the_end(&text)
    );
    assert!(text.contains("…and "), "{}", the_end(&text));
    assert!(!text.contains("### SQL diffs"), "{}", the_end(&text));
    assert!(
        text.contains("> Truncated to fit a comment:")
            && text.contains("the SQL diffs of 3,000 model(s) left out"),
        "{}",
        the_end(&text)
    );
    // Under a tiny limit the text is cut, never longer.
    let tiny = render(&many_models(3_000, 800), 200);
    assert!(tiny.chars().count() <= 200, "{tiny}");
}

#[test]
fn a_whole_table_keeps_as_many_diffs_as_fit() {
    let text = render(&many_models(40, 4_000), GITHUB_COMMENT_LIMIT);
    assert!(
        text.chars().count() <= GITHUB_COMMENT_LIMIT,
        "{}",
        text.chars().count()
    );
    assert!(
        text.contains("| <code>model_39</code> |"),
        "every row of the table"
    );
    assert!(text.contains("### SQL diffs"));
    assert!(text.contains("<summary><code>model_0</code></summary>"));
    assert!(!text.contains("<summary><code>model_39</code></summary>"));
    assert!(text.contains("model(s) left out"), "{}", the_end(&text));
}

#[test]
fn a_long_destructive_list_is_cut_and_counted() {
    let mut plan = changed_orders();
    plan["teardown"] = Value::Array(
        (0..5_000)
            .map(|i| json!({"kind": "table", "relation": format!("tbl__model_{i}")}))
            .collect(),
    );
    let text = render(&plan, GITHUB_COMMENT_LIMIT);
    assert!(
        text.chars().count() <= GITHUB_COMMENT_LIMIT,
        "{}",
        text.chars().count()
    );
    assert!(
        text.contains("5,000 relations dropped where they exist"),
        "{}",
        text.chars().take(400).collect::<String>()
    );
    assert!(text.contains("1,234 rows are lost"), "the loss comes first");
    assert!(text.contains("…and "), "{}", the_end(&text));
    assert!(
        text.contains("> Truncated to fit a comment:"),
        "{}",
        the_end(&text)
    );
}

#[test]
fn warnings_and_names_are_kept_as_written_and_cannot_break_the_markdown() {
    let mut plan = changed_orders();
    plan["warnings"] =
        json!(["mutable_ref_replay_not_guaranteed: 'paid_orders' reads a mutable side input"]);
    plan["entries"][0]["model"] = json!("odd|name`with<html>");
    let text = render(&plan, GITHUB_COMMENT_LIMIT);
    assert!(
        text.contains(
            "- mutable_ref_replay_not_guaranteed: 'paid_orders' reads a mutable side input"
        ),
        "{text}"
    );
    assert!(
        text.contains("| <code>odd&#124;name`with&lt;html&gt;</code> |"),
        "{text}"
    );
}
