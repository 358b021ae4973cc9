use super::{Pair, Shape, Source, Window, buckets_sql, key_expressions, rows_sql};

const A: Source<'static> = Source {
    relation: "db.a",
    merged: false,
};

fn pair<'a>(shape: &'a Shape, window: &'a Window, only: &'a [u64]) -> Pair<'a> {
    Pair {
        from: A,
        to: Source {
            relation: "db.b",
            merged: true,
        },
        shape,
        window,
        only,
        buckets: 256,
    }
}

fn shape() -> Shape {
    Shape {
        key: vec!["_replay_partition".into(), "_replay_offset".into()],
        compared: vec![
            "_replay_partition".into(),
            "_replay_offset".into(),
            "amount".into(),
        ],
        retyped: vec!["amount".into()],
        aggregates: vec![],
    }
}

#[test]
fn sorting_keys_split_at_their_top_level_commas() {
    assert_eq!(key_expressions("p, o"), ["p", "o"]);
    assert_eq!(key_expressions("(p, o)"), ["p", "o"]);
    assert_eq!(
        key_expressions("toDate(ts), intHash32(id, 'a,b')"),
        ["toDate(ts)", "intHash32(id, 'a,b')"]
    );
    assert!(key_expressions("tuple()").is_empty());
    assert!(key_expressions("").is_empty());
}

#[test]
fn windows_keep_only_the_history_both_copies_hold() {
    assert_eq!(Window::Everything.predicate(), "1");
    assert_eq!(Window::Disjoint.predicate(), "0");
    assert_eq!(
        Window::Span {
            column: "_replay_timestamp".into(),
            lower: "2026-12-01 00:00:00.000".into(),
            upper: "2026-12-02 00:00:00.000".into(),
        }
        .predicate(),
        "_replay_timestamp >= '2026-12-01 00:00:00.000' AND _replay_timestamp <= '2026-12-02 00:00:00.000'"
    );
    assert_eq!(
        Window::Offsets(vec![
            ("0".into(), "3".into(), "9".into()),
            ("1".into(), "0".into(), "4".into()),
        ])
        .predicate(),
        "((_replay_partition = '0' AND _replay_offset BETWEEN '3' AND '9') OR (_replay_partition = '1' AND _replay_offset BETWEEN '0' AND '4'))"
    );
}

#[test]
fn each_side_is_bucketed_by_its_key_as_text_and_hashed_over_every_compared_column() {
    // Names of the statement's own are prefixed: a model's columns named `bucket`, `n` or
    // `h` are not taken for them.
    assert_eq!(
        buckets_sql(A, &shape(), &Window::Everything, 256),
        "SELECT toString(cityHash64(tuple(toString(_replay_partition), toString(_replay_offset))) % 256) AS __stb_bucket, count() AS __stb_n, \
         toString(sum(cityHash64(_replay_partition, _replay_offset, toString(amount)))) AS __stb_h FROM db.a WHERE 1 GROUP BY __stb_bucket"
    );
    let mut aggregating = shape();
    aggregating.aggregates = vec!["amount".into()];
    assert!(
        buckets_sql(A, &aggregating, &Window::Everything, 256)
            .contains("toString(finalizeAggregation(amount))")
    );
}

#[test]
fn the_counts_group_both_sides_reduced_to_a_row_per_key() {
    let shape = shape();
    let sql = pair(&shape, &Window::Everything, &[3, 7]).counts_sql();
    let side = |relation: &str, tag: &str| {
        format!(
            "SELECT toString(_replay_partition) AS __stb_k0, toString(_replay_offset) AS __stb_k1, count() AS __stb_n, \
             sum(cityHash64(_replay_partition, _replay_offset, toString(amount))) AS __stb_h, '{tag}' AS __stb_side FROM {relation} WHERE 1 \
             AND cityHash64(tuple(toString(_replay_partition), toString(_replay_offset))) % 256 IN (3, 7) GROUP BY __stb_k0, __stb_k1"
        )
    };
    assert_eq!(
        sql,
        format!(
            "SELECT countIf(__stb_kind = 'from') AS only_in_from, countIf(__stb_kind = 'to') AS only_in_to, countIf(__stb_kind = 'changed') AS changed FROM (\
             SELECT __stb_k0, __stb_k1, sumIf(__stb_n, __stb_side = 'a') AS __stb_from_rows, sumIf(__stb_n, __stb_side = 'b') AS __stb_to_rows, \
             multiIf(__stb_to_rows = 0, 'from', __stb_from_rows = 0, 'to', \
             __stb_from_rows != __stb_to_rows OR sumIf(__stb_h, __stb_side = 'a') != sumIf(__stb_h, __stb_side = 'b'), 'changed', 'same') AS __stb_kind \
             FROM ({} UNION ALL {}) GROUP BY __stb_k0, __stb_k1)",
            side("db.a", "a"),
            // A merging engine is read merged.
            side("db.b FINAL", "b"),
        )
    );
    // Without buckets: the whole tables.
    assert!(
        !pair(&shape, &Window::Everything, &[])
            .counts_sql()
            .contains("% 256 IN")
    );
}

#[test]
fn samples_take_a_few_keys_of_each_kind_and_their_rows_are_read_by_key_within_the_window() {
    let shape = shape();
    let sql = pair(&shape, &Window::Disjoint, &[]).samples_sql(5);
    assert!(
        sql.ends_with(
            "WHERE __stb_kind != 'same' ORDER BY __stb_kind, __stb_k0, __stb_k1 LIMIT 5 BY __stb_kind"
        ),
        "{sql}"
    );
    assert!(sql.contains("FROM db.a WHERE 0"), "{sql}");
    assert_eq!(
        rows_sql(
            A,
            &shape,
            &Window::Everything,
            &[
                vec![Some("0".into()), Some("2".into())],
                vec![Some("1".into()), None],
                vec![Some("it's".into()), Some("9".into())],
            ],
            3
        ),
        "SELECT toString(_replay_partition) AS __stb_k0, toString(_replay_offset) AS __stb_k1, * FROM db.a WHERE (1) AND (\
         (toString(_replay_partition) = '0' AND toString(_replay_offset) = '2') OR \
         (toString(_replay_partition) = '1' AND toString(_replay_offset) IS NULL) OR \
         (toString(_replay_partition) = 'it\\'s' AND toString(_replay_offset) = '9')) \
         ORDER BY __stb_k0, __stb_k1 LIMIT 3 BY __stb_k0, __stb_k1"
    );
}

#[test]
fn a_quote_escaped_in_a_sorting_key_does_not_end_its_string() {
    assert_eq!(
        key_expressions(r"concat(a, 'it\'s, ok'), b"),
        [r"concat(a, 'it\'s, ok')", "b"]
    );
}
