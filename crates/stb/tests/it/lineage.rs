//! `stb lineage` as users run it on the demo project: the tree, its JSON, and errors.

use assert_cmd::Command;
use serde_json::Value;

fn orders() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/orders")
}

fn lineage(args: &[&str]) -> std::process::Output {
    Command::cargo_bin("stb")
        .expect("the stb binary")
        .arg("lineage")
        .args(args)
        .arg("--project-dir")
        .arg(orders())
        .output()
        .expect("stb runs")
}

#[test]
fn revenue_is_traced_to_the_json_path_it_is_read_at() {
    let output = lineage(&["customer_revenue.revenue_cents"]);
    assert!(output.status.success(), "{output:?}");
    assert_eq!(
        String::from_utf8_lossy(&output.stdout),
        "customer_revenue.revenue_cents  (aggregated)\n\
         └─ paid_orders.amount_cents  (copied)\n   \
         └─ order_events.amount_cents  (computed)\n      \
         └─ source orders: kafka_value at amount_cents\n"
    );
    let output = lineage(&["customer_revenue.revenue_cents", "--json"]);
    assert!(output.status.success(), "{output:?}");
    let json: Value = serde_json::from_slice(&output.stdout).expect("JSON");
    let source = &json["inputs"][0]["inputs"][0]["inputs"][0];
    assert_eq!(source["kind"], "source");
    assert_eq!(source["name"], "orders");
    assert_eq!(source["column"], "kafka_value");
    assert_eq!(source["json_path"], serde_json::json!(["amount_cents"]));
}

#[test]
fn a_column_that_is_not_there_fails_with_a_code_and_a_suggestion() {
    let output = lineage(&["customer_revenue.revenue", "--json"]);
    assert_eq!(output.status.code(), Some(1));
    let json: Value = serde_json::from_slice(&output.stdout).expect("JSON");
    assert_eq!(json["error"]["code"], "STB-LINEAGE-001");
    assert!(
        json["error"]["hint"]
            .as_str()
            .is_some_and(|h| h.contains("revenue_cents")),
        "{json}"
    );
    let output = lineage(&["customer_revenue"]);
    assert_eq!(output.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&output.stderr).contains("STB-LINEAGE-001"));
}
