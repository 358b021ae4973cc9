use super::*;

fn request(json: &str) -> Request {
    serde_json::from_str(json).expect("request")
}

fn predicate(json: &str) -> Predicate {
    serde_json::from_str(json).expect("predicate")
}

#[test]
fn every_filter_compiles_to_escaped_literals() {
    let cases = [
        (
            r#"{"field": "partition", "op": "in", "values": [0, 2]}"#,
            "kafka_partition IN (0, 2)",
        ),
        (
            r#"{"field": "key", "op": "eq", "value": "a'b"}"#,
            r"kafka_key = 'a\'b'",
        ),
        (
            r#"{"field": "key", "op": "prefix", "value": "ord"}"#,
            "startsWith(kafka_key, 'ord')",
        ),
        (
            r#"{"field": "value", "op": "contains", "value": "x\\y"}"#,
            r"position(kafka_value, 'x\\y') > 0",
        ),
        (
            r#"{"field": "json", "op": "exists", "path": "a.b"}"#,
            "JSONHas(kafka_value, 'a', 'b')",
        ),
        (
            r#"{"field": "json", "op": "gt", "path": "n", "value": "2.5"}"#,
            "(JSONHas(kafka_value, 'n') AND JSONExtractFloat(kafka_value, 'n') > 2.5)",
        ),
        (
            r#"{"field": "header", "op": "eq", "value": "trace"}"#,
            "has(kafka_header_keys, 'trace')",
        ),
        (
            r#"{"field": "header", "op": "contains", "value": "abc"}"#,
            "arrayExists(v -> position(v, 'abc') > 0, kafka_header_values)",
        ),
    ];
    for (json, sql) in cases {
        assert_eq!(condition(&predicate(json)).expect(json), sql, "{json}");
    }
    let eq = condition(&predicate(
        r#"{"field": "json", "op": "eq", "path": "status", "value": "paid"}"#,
    ))
    .expect("eq");
    assert!(
        eq.contains("JSONExtractString(kafka_value, 'status')"),
        "{eq}"
    );
    assert!(eq.ends_with("= 'paid')"), "{eq}");
}

#[test]
fn anything_off_the_list_is_refused() {
    for json in [
        r#"{"field": "sql", "op": "eq", "value": "1=1"}"#,
        r#"{"field": "key", "op": "like", "value": "%"}"#,
        r#"{"field": "partition", "op": "in", "values": [-1]}"#,
        r#"{"field": "partition", "op": "in", "values": []}"#,
        r#"{"field": "json", "op": "gt", "path": "n", "value": "many"}"#,
        r#"{"field": "json", "op": "eq", "path": "a'b", "value": "x"}"#,
        r#"{"field": "json", "op": "exists", "path": "a..b"}"#,
        r#"{"field": "json", "op": "exists", "path": "a.b.c.d.e.f.g.h.i"}"#,
        r#"{"field": "key", "op": "eq"}"#,
    ] {
        let refused = condition(&predicate(json)).expect_err(json);
        assert_eq!(refused.code, MESSAGES_CODE);
    }
    let long = format!(
        r#"{{"field": "json", "op": "exists", "path": "{}"}}"#,
        "x".repeat(65)
    );
    assert!(condition(&predicate(&long)).is_err());
    assert!(
        serde_json::from_str::<Request>(r#"{"mode": {"kind": "newest"}, "order": "x"}"#).is_err()
    );
}

#[test]
fn times_must_be_iso_8601() {
    for good in [
        "2026-12-01",
        "2026-12-01T10:00:00Z",
        "2026-12-01 10:00:00.123",
        "2026-12-01T10:00:00+02:00",
    ] {
        assert!(time(good).is_ok(), "{good}");
    }
    for bad in [
        "yesterday",
        "2026-12-01T10:00",
        "2026-12-01') OR 1=1 --",
        "2026-12-01T10:00:00Z'",
        "2026-12-01é",
        "",
    ] {
        assert!(time(bad).is_err(), "{bad}");
    }
}

#[test]
fn a_listing_orders_newest_first_and_pages_by_keyset() {
    let compiled = compile(&request(
        r#"{"mode": {"kind": "timeRange", "fromTime": "2026-12-01T00:00:00Z"},
            "predicates": [{"field": "key", "op": "eq", "value": "k"}],
            "limit": 9000, "previewPaths": ["order.id"],
            "cursor": {"landedAt": "2026-12-01 10:00:00.000", "partition": 1, "offset": 7}}"#,
    ))
    .expect("compiles");
    assert_eq!(compiled.limit, 500, "clamped");
    let sql = list_sql(&compiled, &QualifiedName::new("db", "raw__orders"), None);
    assert!(sql.contains("FROM db.raw__orders WHERE kafka_landed_at >= parseDateTime64BestEffort('2026-12-01T00:00:00Z', 3, 'UTC') AND kafka_key = 'k' AND (kafka_landed_at, kafka_partition, kafka_offset) < (parseDateTime64BestEffort('2026-12-01 10:00:00.000', 3, 'UTC'), 1, 7)"), "{sql}");
    assert!(
        sql.contains("JSONExtractRaw(kafka_value, 'order', 'id') AS preview_0"),
        "{sql}"
    );
    assert!(
        sql.ends_with(
            "ORDER BY kafka_landed_at DESC, kafka_partition DESC, kafka_offset DESC LIMIT 500"
        ),
        "{sql}"
    );
    let newest = compile(&request("{}")).expect("newest by default");
    assert!(newest.newest);
    assert_eq!(newest.limit, 50);
    let windowed = list_sql(
        &newest,
        &QualifiedName::new("db", "raw__orders"),
        Some(3600),
    );
    assert!(
        windowed.contains("WHERE kafka_landed_at >= now64(3, 'UTC') - INTERVAL 3600 SECOND"),
        "{windowed}"
    );
}

#[test]
fn an_offset_range_needs_its_partition() {
    assert!(
        compile(&request(
            r#"{"mode": {"kind": "offsetRange", "fromOffset": 1}}"#
        ))
        .is_err()
    );
    let compiled = compile(&request(
        r#"{"mode": {"kind": "offsetRange", "partition": 2, "fromOffset": 10, "toOffset": 20}}"#,
    ))
    .expect("compiles");
    assert_eq!(
        compiled.conditions,
        [
            "kafka_partition = 2",
            "kafka_offset >= 10",
            "kafka_offset <= 20"
        ]
    );
    assert!(compile(&request(r#"{"timeColumn": "wall"}"#)).is_err());
    assert!(compile(&request(r#"{"previewPaths": ["a", "b", "c", "d", "e"]}"#)).is_err());
}
