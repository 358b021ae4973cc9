//! Arbitrary header text and arbitrary SQL never panic the compiler: they compile or they
//! are reported.

use proptest::prelude::*;

use crate::support::{SHOP, compile_files};

const CLEAN: &str = "pipelines/pl__orders/staging/orders_clean.sql";

fn header_fragment() -> impl Strategy<Value = String> {
    prop::collection::vec(
        prop::sample::select(vec![
            "kind",
            "view",
            "table",
            "engine",
            "\"MergeTree()\"",
            "order_by",
            "[",
            "]",
            "(",
            ")",
            ",",
            ":",
            "{",
            "retention",
            "duration",
            "\"7d\"",
            "timestamp_column",
            "x",
            "settings",
            "ttl",
            "'",
            "\"",
            "\\",
            ");",
            "relation_name",
            "raw__x",
            "columns",
            "audits",
            "42",
            "-1.5",
            "true",
        ]),
        0..16,
    )
    .prop_map(|parts| parts.join(" "))
}

fn sql_fragment() -> impl Strategy<Value = String> {
    prop::collection::vec(
        prop::sample::select(vec![
            "SELECT",
            "x::UInt8",
            "AS",
            "x",
            ",",
            "*",
            "FROM",
            "__source(\"orders\")",
            "__ref(\"orders_clean\")",
            "__ref(",
            "GROUP BY",
            "UNION ALL",
            "(",
            ")",
            "CAST(",
            "WITH",
            "a AS (SELECT 1)",
            ";",
            "'",
            "--",
            "/*",
            "*/",
            "PREWHERE",
            "@",
            "@x(",
            "count()",
            "::",
            "`q`",
            "\n",
        ]),
        0..24,
    )
    .prop_map(|parts| parts.join(" "))
}

fn audit_fragment() -> impl Strategy<Value = String> {
    prop::collection::vec(
        prop::sample::select(vec![
            "name",
            "a",
            "a/b",
            "severity",
            "warning",
            "every",
            "\"5m\"",
            "\"0s\"",
            "warmup",
            "scheduled",
            "false",
            "true",
            "(",
            ")",
            ",",
            "[",
            "]",
            "values",
            "column",
            "model",
            "\"q\"",
            "v",
            "1.5",
        ]),
        0..12,
    )
    .prop_map(|parts| parts.join(" "))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn structured_noise_is_reported_not_panicked(header in header_fragment(), sql in sql_fragment()) {
        let model = format!("MODEL ({header});\n{sql}");
        if let Err(diagnostics) = compile_files(SHOP, &[(CLEAN, &model)]) {
            prop_assert!(diagnostics.iter().all(|d| !d.code.is_empty() && !d.hint.is_empty()));
        }
    }

    #[test]
    fn arbitrary_text_is_reported_not_panicked(text in ".{0,200}") {
        let _ = compile_files(SHOP, &[(CLEAN, &text)]);
    }

    #[test]
    fn audit_noise_is_reported_not_panicked(
        header in audit_fragment(),
        args in audit_fragment(),
        sql in sql_fragment(),
    ) {
        let audit = format!("AUDIT ({header});\n{sql}");
        let generic = format!("AUDIT ();\n{sql} @model @column @'v' @v");
        let model = format!(
            "MODEL (order_by [\"order_id\"], columns (order_id (audits [g ({args}), g])));\nSELECT JSONExtractString(kafka_value, 'order_id')::String AS order_id FROM __source(\"orders\")"
        );
        let files = [
            ("audits/x.sql", audit.as_str()),
            ("audits/generic/g.sql", generic.as_str()),
            (CLEAN, model.as_str()),
        ];
        if let Err(diagnostics) = compile_files(SHOP, &files) {
            prop_assert!(diagnostics.iter().all(|d| !d.code.is_empty() && !d.hint.is_empty()));
        }
    }
}
