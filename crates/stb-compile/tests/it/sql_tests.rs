//! SQL tests compile to one comparison statement, and that statement, run on ClickHouse,
//! returns exactly the differences: bags, so duplicates count and NULL equals NULL.

use stb_test_support::execute;

use crate::support::{SHOP, compile_files};

const ORDERS_MOCK: &str = "__source__orders AS (
    SELECT '{\"order_id\":\"o1\",\"customer_id\":7}' AS kafka_value, 0 AS _replay_partition, 1 AS _replay_offset,
           toDateTime64('2026-01-01 00:00:00', 3) AS _replay_timestamp, now64(3) AS _replay_landed_at
    UNION ALL
    SELECT '{\"order_id\":\"o2\",\"customer_id\":8}', 0, 2, NULL, toDateTime64('2026-01-02 00:00:00', 3)
  )";

fn statement(test: &str, extra: &[(&str, &str)]) -> String {
    let mut overrides = vec![("tests/orders.sql", test)];
    overrides.extend_from_slice(extra);
    let compiled = compile_files(SHOP, &overrides).unwrap_or_else(|d| panic!("{d:#?}"));
    let (_, sql) = compiled
        .files
        .iter()
        .find(|(path, _)| path.starts_with("compiled/tests/"))
        .expect("a compiled test");
    sql.clone()
}

/// (diff type, row values, multiplicity) for every difference.
fn differences(sql: &str) -> Vec<String> {
    let body = execute(&format!(
        "SELECT _diff_type, _row_values, _multiplicity FROM ({}) ORDER BY _diff_type, toString(_row_values) FORMAT TSV",
        sql.trim_end()
            .trim_end_matches(';')
            .replace("\nSETTINGS join_use_nulls = 0", "")
    ));
    body.lines().map(str::to_owned).collect()
}

#[test]
fn a_matching_expectation_passes() {
    let test = format!(
        "TEST (name parses_orders);\nWITH\n  {ORDERS_MOCK},\n  __expected__orders_clean AS (SELECT 'o1' AS order_id, 7 AS customer_id UNION ALL SELECT 'o2', 8)\nSELECT 1\n"
    );
    assert_eq!(differences(&statement(&test, &[])), Vec::<String>::new());
}

#[test]
fn multiplicity_and_values_are_compared_as_bags() {
    let test = format!(
        "TEST (name wrong_rows);\nWITH\n  {ORDERS_MOCK},\n  __expected__orders_clean AS (SELECT 'o1' AS order_id UNION ALL SELECT 'o1' UNION ALL SELECT 'o3')\nSELECT 1\n"
    );
    assert_eq!(
        differences(&statement(&test, &[])),
        [
            "missing\t['o1']\t1",
            "missing\t['o3']\t1",
            "unexpected\t['o2']\t1"
        ],
        "a duplicated expected row is one row too many; o3 is missing; o2 was not expected"
    );
}

#[test]
fn nulls_match_nulls_but_not_values() {
    let model = (
        "pipelines/pl__orders/maybe_customers.sql",
        "MODEL (order_by [\"order_id\"]);\nSELECT order_id::String AS order_id, nullIf(customer_id, 8)::Nullable(UInt64) AS customer_id FROM __ref(\"orders_clean\")\n",
    );
    let passing = format!(
        "TEST (name nulls);\nWITH\n  {ORDERS_MOCK},\n  __expected__maybe_customers AS (SELECT 'o1' AS order_id, 7 AS customer_id UNION ALL SELECT 'o2', NULL)\nSELECT 1\n"
    );
    assert_eq!(
        differences(&statement(&passing, &[model])),
        Vec::<String>::new()
    );
    let failing = format!(
        "TEST (name nulls);\nWITH\n  {ORDERS_MOCK},\n  __expected__maybe_customers AS (SELECT 'o1' AS order_id, 7 AS customer_id UNION ALL SELECT 'o2', 8)\nSELECT 1\n"
    );
    assert_eq!(
        differences(&statement(&failing, &[model])),
        ["missing\t['o2','8']\t1", "unexpected\t['o2',NULL]\t1"]
    );
}

#[test]
fn a_mock_nothing_reads_is_a_warning() {
    let test = format!(
        "TEST (name extra);\nWITH\n  {ORDERS_MOCK},\n  __ref__custmer_names AS (SELECT 7 AS customer_id),\n  __expected__orders_clean AS (SELECT 'o1' AS order_id UNION ALL SELECT 'o2')\nSELECT 1\n"
    );
    let compiled =
        compile_files(SHOP, &[("tests/orders.sql", &test)]).unwrap_or_else(|d| panic!("{d:#?}"));
    let messages: Vec<String> = compiled
        .warnings
        .iter()
        .map(|w| w.message.clone())
        .collect();
    assert_eq!(
        messages,
        ["SQL test 'tests/orders.sql' never reaches mock '__ref__custmer_names'"]
    );
    assert_eq!(
        compiled.warnings[0]
            .location
            .as_ref()
            .map(ToString::to_string)
            .as_deref(),
        Some("tests/orders.sql:9:28")
    );
}

#[test]
fn a_chain_is_rebuilt_from_mocks() {
    let test = format!(
        "TEST (name joined);\nWITH\n  {ORDERS_MOCK},\n  __ref__customer_names AS (SELECT 7 AS customer_id, 'Ada' AS name),\n  __expected__order_customers AS (SELECT 'o1' AS order_id, 'Ada' AS customer_name UNION ALL SELECT 'o2', '')\nSELECT 1\n"
    );
    let sql = statement(&test, &[]);
    assert!(sql.contains("__model__orders_clean AS ("), "{sql}");
    assert!(
        !sql.contains("__model__customer_names"),
        "a mock cuts the chain"
    );
    assert_eq!(differences(&sql), Vec::<String>::new());
}

fn error(test: &str) -> String {
    compile_files(SHOP, &[("tests/orders.sql", test)])
        .expect_err("invalid test")
        .into_iter()
        .map(|d| format!("{} {}", d.code, d.message))
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn invalid_tests_are_reported() {
    assert!(error("TEST (name t);\nWITH __expected__nope AS (SELECT 1 AS x), __ref__a AS (SELECT 1)\nSELECT 1").contains("targets unknown model 'nope'"));
    assert!(error("TEST (name t);\nWITH __ref__x AS (SELECT 1), __expected__orders_clean AS (SELECT 'o1' AS order_id)\nSELECT 1").contains("dependency 'orders' cannot be resolved. Add `__source__orders`"));
    assert!(error("TEST (name t);\nWITH __ref__x AS (SELECT 1), __expected__orders_clean AS (SELECT 'o1' AS order_id)\nSELECT 2").contains("ceremonial top-level `SELECT 1`"));
    assert!(error(&format!("TEST (name t);\nWITH {ORDERS_MOCK}, __expected__orders_clean AS (SELECT 'o1' AS nope)\nSELECT 1")).contains("expects columns not produced by 'orders_clean': nope"));
    assert!(
        error("TEST (name t, colour blue);\nWITH a AS (SELECT 1)\nSELECT 1")
            .contains("only supports `name` and `mode`")
    );
    assert!(error("SELECT 1").contains("must start with a TEST (...); header"));
    assert!(error(&format!("TEST (name t);\nWITH {ORDERS_MOCK}, __assert__ghost AS (SELECT x FROM __ref(\"nope\"))\nSELECT 1")).contains("assertion '__assert__ghost' reads 'nope', which is neither a model nor mocked"));
    assert!(error("TEST (name t);\nWITH __ref__x AS (SELECT 1), __assert__raw AS (SELECT order_id FROM __ref(\"orders_clean\"))\nSELECT 1").contains("targets 'orders_clean', but dependency 'orders' cannot be resolved"));
    assert!(error(&format!("TEST (name t);\nWITH {ORDERS_MOCK}, __assert__star AS (SELECT * FROM __ref(\"orders_clean\"))\nSELECT 1")).contains("assertion '__assert__star'"));
    assert!(
        error(&format!("TEST (name t);\nWITH {ORDERS_MOCK}\nSELECT 1"))
            .contains("one __expected__<model> or __assert__<label> CTE")
    );
    assert!(error("TEST (name t);\nWITH __macro_actual__ AS (SELECT 1 AS x), __macro_expected__ AS (SELECT 1 AS x)\nSELECT 1").contains("use TEST (mode macro)"));
    assert!(
        error("TEST (name t, mode unit);\nWITH a AS (SELECT 1)\nSELECT 1")
            .contains("mode must be model or macro")
    );
    assert!(error("TEST (name t, mode macro);\nWITH __macro_actual__ AS (SELECT 1 AS x), __macro_expected__ AS (SELECT 1 AS y)\nSELECT 1").contains("must project the same column names (x vs y)"));
    assert!(error("TEST (name t, mode macro);\nWITH __macro_actual__ AS (SELECT 1 AS x), __ref__orders AS (SELECT 1 AS x), __macro_expected__ AS (SELECT 1 AS x)\nSELECT 1").contains("belongs to model-mode tests"));
    assert!(
        error("TEST (name t, mode macro);\nWITH __macro_actual__ AS (SELECT 1 AS x)\nSELECT 1")
            .contains("needs exactly one __macro_actual__ and one __macro_expected__")
    );
}

#[test]
fn assertions_read_the_rebuilt_chain_and_fail_with_their_rows() {
    let test = format!(
        "TEST (name checks);\nWITH\n  {ORDERS_MOCK},\n  __ref__customer_names AS (SELECT 7 AS customer_id, 'Ada' AS name),\n  __assert__every_order_has_a_customer AS (SELECT order_id FROM __ref(\"order_customers\") WHERE customer_name = ''),\n  __assert__ids_present AS (SELECT order_id FROM __ref(\"orders_clean\") WHERE order_id = '')\nSELECT 1\n"
    );
    let compiled =
        compile_files(SHOP, &[("tests/checks.sql", &test)]).unwrap_or_else(|d| panic!("{d:#?}"));
    let sql = &compiled.files["compiled/tests/checks/checks.sql"];
    assert!(
        sql.contains("__assert__ids_present AS (SELECT order_id FROM __model__orders_clean WHERE"),
        "{sql}"
    );
    // o2's customer (8) has no name in the mock: one unexpected row from the first assertion.
    assert_eq!(differences(sql), ["unexpected\t['o2']\t1"]);
    let manifest: serde_json::Value =
        serde_json::from_str(&compiled.files["manifest.json"]).expect("json");
    assert_eq!(
        manifest["tests"]["checks"]["assertions"],
        serde_json::json!(["every_order_has_a_customer", "ids_present"])
    );
    assert_eq!(
        manifest["tests"]["checks"]["targets"],
        serde_json::json!([])
    );
}

const CENTS: &str =
    "def cents(column: str) -> str:\n    return f\"toInt64(round({column} * 100))\"\n";

fn macro_test(test: &str) -> Result<stb_compile::Compiled, Vec<stb_diagnostics::Diagnostic>> {
    compile_files(
        SHOP,
        &[("macros/money.py", CENTS), ("tests/cents.sql", test)],
    )
}

#[test]
fn macro_tests_compare_a_macro_with_plain_sql() {
    let test = "TEST (name cents_round, mode macro);\nWITH\n  input AS (SELECT 2.5 AS amount),\n  __macro_actual__ AS (SELECT @cents(\"amount\") AS cents FROM input),\n  __macro_expected__ AS (SELECT toInt64(250) AS cents)\nSELECT 1\n";
    let compiled = macro_test(test).unwrap_or_else(|d| panic!("{d:#?}"));
    let sql = &compiled.files["compiled/tests/macro cents_round/cents_round.sql"];
    assert!(
        sql.contains("SELECT toInt64(round(amount * 100)) AS cents FROM input"),
        "{sql}"
    );
    assert_eq!(differences(sql), Vec::<String>::new());
    let manifest: serde_json::Value =
        serde_json::from_str(&compiled.files["manifest.json"]).expect("json");
    assert_eq!(manifest["tests"]["cents_round"]["mode"], "macro");
    assert_eq!(
        manifest["tests"]["cents_round"]["targets"],
        serde_json::json!(["macro cents_round"])
    );
    // No casts: a wrong value is a difference, both ways.
    let wrong = test.replace("toInt64(250)", "toInt64(25)");
    let compiled = macro_test(&wrong).unwrap_or_else(|d| panic!("{d:#?}"));
    let sql = &compiled.files["compiled/tests/macro cents_round/cents_round.sql"];
    assert_eq!(
        differences(sql),
        ["missing\t['25']\t1", "unexpected\t['250']\t1"]
    );
}

#[test]
fn macro_tests_call_macros_only_in_the_actual_side() {
    let test = "TEST (name t, mode macro);\nWITH\n  __macro_actual__ AS (SELECT @cents(\"1\") AS cents),\n  __macro_expected__ AS (SELECT @cents(\"1\") AS cents)\nSELECT 1\n";
    let diagnostics = macro_test(test).expect_err("the expected side calls a macro");
    assert_eq!(diagnostics.len(), 1, "{diagnostics:#?}");
    assert!(
        diagnostics[0]
            .message
            .contains("calls macro '@cents' outside __macro_actual__"),
        "{}",
        diagnostics[0].message
    );
    assert_eq!(
        diagnostics[0].location.as_ref().map(ToString::to_string),
        Some("tests/cents.sql:4:33".to_owned())
    );
}

#[test]
fn model_tests_expand_macros_in_their_mocks() {
    let test = format!(
        "TEST (name parsed);\nWITH\n  {},\n  __expected__orders_clean AS (SELECT 'o1' AS order_id, toUInt64(@cents(\"0.07\")) AS customer_id)\nSELECT 1\n",
        ORDERS_MOCK.replace("UNION ALL\n    SELECT '{\"order_id\":\"o2\",\"customer_id\":8}', 0, 2, NULL, toDateTime64('2026-01-02 00:00:00', 3)\n", "")
    );
    let compiled = compile_files(
        SHOP,
        &[("macros/money.py", CENTS), ("tests/orders.sql", &test)],
    )
    .unwrap_or_else(|d| panic!("{d:#?}"));
    let sql = &compiled.files["compiled/tests/orders_clean/parsed.sql"];
    assert!(
        sql.contains("toUInt64(toInt64(round(0.07 * 100)))"),
        "{sql}"
    );
    assert_eq!(differences(sql), Vec::<String>::new());
}

#[test]
fn the_macros_example_test_passes_on_clickhouse() {
    let dir = stb_test_support::package_dir().join("../../examples/macros_quality");
    let compiled = crate::support::compile_dir(&dir).unwrap_or_else(|d| panic!("{d:#?}"));
    let sql = &compiled.files["compiled/tests/payments_clean/payments_are_parsed_in_cents.sql"];
    assert_eq!(differences(sql), Vec::<String>::new());
    let sql = &compiled.files["compiled/tests/macro cents_keep_sign_and_drop_float_noise/cents_keep_sign_and_drop_float_noise.sql"];
    assert_eq!(differences(sql), Vec::<String>::new());
}
