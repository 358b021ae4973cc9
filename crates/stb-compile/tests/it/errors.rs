//! Compile errors: code, location, message.

use crate::support::{SHOP, compile_files};

fn error(overrides: &[(&str, &str)]) -> (String, String, String) {
    crate::support::single_error(overrides)
}

const CLEAN: &str = "pipelines/pl__orders/staging/orders_clean.sql";
const VIEW: &str = "pipelines/pl__reporting/customer_counts.sql";

#[test]
fn header_errors_point_into_the_header() {
    let (code, at, message) = error(&[(
        CLEAN,
        "MODEL (kind: table);\nSELECT 1::UInt8 AS x FROM __source(\"orders\")",
    )]);
    assert_eq!(
        (code.as_str(), at.as_str()),
        (
            "STB-COMPILE-001",
            "pipelines/pl__orders/staging/orders_clean.sql:1:12"
        )
    );
    assert_eq!(
        message,
        "Model 'orders_clean' unexpected ':' after key 'kind'; use SQLBuild syntax 'kind value'"
    );
    let (code, _, message) = error(&[(
        CLEAN,
        "MODEL (partition \"x\");\nSELECT 1::UInt8 AS x FROM __source(\"orders\")",
    )]);
    assert_eq!(code, "STB-COMPILE-001");
    assert!(
        message.contains("contains unsupported keys: partition"),
        "{message}"
    );
    let (code, at, _) = error(&[(
        CLEAN,
        "-- no header\nSELECT 1::UInt8 AS x FROM __source(\"orders\")",
    )]);
    assert_eq!(
        (code.as_str(), at.as_str()),
        (
            "STB-COMPILE-001",
            "pipelines/pl__orders/staging/orders_clean.sql:1:1"
        )
    );
}

#[test]
fn output_contract_errors_point_at_the_projection() {
    let (code, at, message) = error(&[(
        CLEAN,
        "MODEL (order_by [\"x\"]);\nSELECT\n  x::UInt8 AS x,\n  y\nFROM __source(\"orders\")",
    )]);
    assert_eq!(
        (code.as_str(), at.as_str()),
        (
            "STB-COMPILE-002",
            "pipelines/pl__orders/staging/orders_clean.sql:4:3"
        )
    );
    assert!(
        message.starts_with("Transform 'orders_clean' has an invalid output contract at column 2"),
        "{message}"
    );
}

#[test]
fn storage_expressions_use_output_columns_only() {
    let (code, _, message) = error(&[(
        CLEAN,
        "MODEL (order_by [\"missing\"]);\nSELECT x::UInt8 AS x FROM __source(\"orders\")",
    )]);
    assert_eq!(code, "STB-COMPILE-002");
    assert!(message.contains("invalid ORDER BY expression `missing`. Referenced output columns not found in the derived schema: missing. Available columns: x."), "{message}");
}

#[test]
fn default_order_by_needs_replay_timestamp() {
    let (code, _, message) = error(&[(
        CLEAN,
        "MODEL (description \"d\");\nSELECT x::UInt8 AS x FROM __source(\"orders\")",
    )]);
    assert_eq!(code, "STB-COMPILE-002");
    assert!(
        message.contains("ORDER BY expression `_replay_timestamp`"),
        "{message}"
    );
}

#[test]
fn retention_rules() {
    let (code, _, message) = error(&[(
        CLEAN,
        "MODEL (order_by [\"x\"], retention (duration \"7d\", timestamp_column ts));\nSELECT x::UInt8 AS x FROM __source(\"orders\")",
    )]);
    assert_eq!(code, "STB-COMPILE-002");
    assert_eq!(
        message,
        "Model 'orders_clean' retention requires missing output columns: ts"
    );
    let (_, _, message) = error(&[(
        CLEAN,
        "MODEL (order_by [\"x\"], retention (duration \"7d\", timestamp_column ts));\nSELECT x::UInt8 AS x, ts::Nullable(DateTime) AS ts FROM __source(\"orders\")",
    )]);
    assert_eq!(
        message,
        "Model 'orders_clean' retention columns must be non-null Date or DateTime values: ts (Nullable(DateTime))"
    );
}

#[test]
fn relation_names_are_checked() {
    let (code, _, message) = error(&[(
        CLEAN,
        "MODEL (order_by [\"x\"], relation_name \"raw__mine\");\nSELECT x::UInt8 AS x FROM __source(\"orders\")",
    )]);
    assert_eq!(code, "STB-COMPILE-003");
    assert!(message.contains("uses reserved prefix"), "{message}");
}

#[test]
fn views_are_terminal() {
    let reader = (
        "pipelines/pl__reporting/more.sql",
        "MODEL (kind view);\nSELECT orders::UInt64 AS orders FROM __ref(\"customer_counts\")",
    );
    let (code, at, message) = error(&[reader]);
    assert_eq!((code.as_str(), at.as_str()), ("STB-COMPILE-004", VIEW));
    assert_eq!(
        message,
        "View model 'customer_counts' must be terminal; referenced by downstream model(s): more"
    );
}

#[test]
fn direct_and_virtual_pipelines_do_not_mix() {
    let (code, at, message) = error(&[(
        "pipelines/pl__reporting/pipeline.toml",
        "mode = \"virtual\"\n",
    )]);
    assert_eq!(
        (code.as_str(), at.as_str()),
        (
            "STB-COMPILE-004",
            "pipelines/pl__reporting/customer_counts.sql:3:6"
        )
    );
    assert!(message.starts_with("Pipeline 'pl__reporting' is virtual but model 'customer_counts' references model 'order_customers' in direct pipeline 'pl__orders'."), "{message}");
}

#[test]
fn pipeline_scope_needs_an_allowlist_entry() {
    let project = "name = \"shop\"\ndefault_target = \"dev\"\n[targets.dev]\ndatabase = \"shop_dev\"\n[dependencies]\nmodel_reference_scope = \"pipeline\"\n[[dependencies.allowed_cross_pipeline_references]]\nupstream_pipeline = \"pl__customers\"\ndownstream_pipeline = \"pl__orders\"\n";
    let (code, at, message) = error(&[("streambuild_project.toml", project)]);
    assert_eq!(
        (code.as_str(), at.as_str()),
        (
            "STB-COMPILE-004",
            "pipelines/pl__reporting/customer_counts.sql:3:6"
        )
    );
    assert!(
        message.contains("dependencies.model_reference_scope is 'pipeline'"),
        "{message}"
    );
}

#[test]
fn unknown_sql_macros_are_reported_where_they_are_called() {
    let diagnostics = compile_files(SHOP, &[(CLEAN, "MODEL (order_by [\"x\"]);\nSELECT @region('eu')::String AS x FROM __source(\"orders\") WHERE note = 'me@x()'")]).expect_err("unknown macro");
    assert_eq!(diagnostics.len(), 1, "{diagnostics:#?}");
    assert_eq!(diagnostics[0].code, "STB-DISCOVER-014");
    assert_eq!(
        diagnostics[0]
            .location
            .as_ref()
            .map(ToString::to_string)
            .as_deref(),
        Some("pipelines/pl__orders/staging/orders_clean.sql:2:8")
    );
}
