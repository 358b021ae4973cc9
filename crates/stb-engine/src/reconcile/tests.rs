use super::*;

#[test]
fn a_view_target_is_read_from_the_ddl_clickhouse_keeps() {
    assert_eq!(
        view_target(
            "CREATE MATERIALIZED VIEW db.mv__x TO db.tbl__x (`a` UInt64) AS SELECT a FROM db.raw"
        ),
        Some(("db".to_owned(), "tbl__x".to_owned()))
    );
    assert_eq!(
        view_target(
            "CREATE MATERIALIZED VIEW `my db`.mv TO `my db`.`odd\\`name` (`a` UInt64) AS SELECT 1"
        ),
        Some(("my db".to_owned(), "odd`name".to_owned()))
    );
    assert_eq!(
        view_target("CREATE MATERIALIZED VIEW db.mv (`a` UInt64) ENGINE = Memory AS SELECT 1"),
        None
    );
}

#[test]
fn engines_and_keys_compare_as_clickhouse_reformats_them() {
    assert_eq!(
        engine_expression(
            "CREATE TABLE db.t (`a` UInt64) ENGINE = ReplacingMergeTree(v, is_deleted) ORDER BY a SETTINGS index_granularity = 8192"
        ),
        Some("ReplacingMergeTree(v, is_deleted)")
    );
    assert_eq!(
        engine_expression("CREATE TABLE db.t (`a` UInt64) ENGINE = MergeTree"),
        Some("MergeTree")
    );
    assert_eq!(engine_key("MergeTree()"), engine_key("MergeTree"));
    assert_ne!(
        engine_key("ReplacingMergeTree(v)"),
        engine_key("ReplacingMergeTree")
    );
    assert_eq!(key("(version)"), key("version"));
    assert_eq!(key("tuple()"), key(""));
    assert_eq!(key("`p`, o"), key("p,o"));
    assert_eq!(key("toYYYYMM(ts)"), "toYYYYMM(ts)");
    // Two expressions in parentheses each are not one tuple.
    assert_eq!(key("(a) + (b)"), "(a)+(b)");
    // A model's type as authored against the type the live table has.
    assert_eq!(comparable_type("BIGINT"), comparable_type("Int64"));
    assert_eq!(
        comparable_type("Tuple(a bigint, b text)"),
        comparable_type("Tuple(\n    a Int64,\n    b String)")
    );
    assert_ne!(comparable_type("UInt32"), comparable_type("UInt64"));
}

#[test]
fn record_ids_carry_the_warehouse_instant() {
    assert_eq!(
        record_id("2026-12-01 09:30:05.123"),
        "reconcile_20261201T093005Z"
    );
}
