use super::{Pair, Shape, Window, buckets_sql, key_expressions, rows_sql};

fn pair<'a>(shape: &'a Shape, window: &'a Window, only: &'a [u64]) -> Pair<'a> {
    Pair {
        from: "db.a",
        to: "db.b",
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
        "((_replay_partition = 0 AND _replay_offset BETWEEN 3 AND 9) OR (_replay_partition = 1 AND _replay_offset BETWEEN 0 AND 4))"
    );
}

#[test]
fn each_side_is_bucketed_by_its_key_and_hashed_over_every_compared_column() {
    assert_eq!(
        buckets_sql("db.a", &shape(), &Window::Everything, 256),
        "SELECT toString(cityHash64(tuple(_replay_partition, _replay_offset)) % 256) AS bucket, count() AS n, toString(sum(cityHash64(_replay_partition, _replay_offset, toString(amount)))) AS h FROM db.a WHERE 1 GROUP BY bucket"
    );
}

#[test]
fn the_counts_join_both_sides_reduced_to_a_row_per_key() {
    let shape = shape();
    let sql = pair(&shape, &Window::Everything, &[3, 7]).counts_sql();
    assert_eq!(
        sql,
        "SELECT countIf(side = 'from') AS only_in_from, countIf(side = 'to') AS only_in_to, countIf(side = 'changed') AS changed FROM (\
         SELECT __k0, __k1, a.__n AS from_rows, b.__n AS to_rows, \
         multiIf(b.__n = 0, 'from', a.__n = 0, 'to', a.__n != b.__n OR a.__h != b.__h, 'changed', 'same') AS side \
         FROM (SELECT _replay_partition AS __k0, _replay_offset AS __k1, count() AS __n, sum(cityHash64(_replay_partition, _replay_offset, toString(amount))) AS __h FROM db.a WHERE 1 \
         AND cityHash64(tuple(_replay_partition, _replay_offset)) % 256 IN (3, 7) GROUP BY __k0, __k1) AS a \
         FULL OUTER JOIN (SELECT _replay_partition AS __k0, _replay_offset AS __k1, count() AS __n, sum(cityHash64(_replay_partition, _replay_offset, toString(amount))) AS __h FROM db.b WHERE 1 \
         AND cityHash64(tuple(_replay_partition, _replay_offset)) % 256 IN (3, 7) GROUP BY __k0, __k1) AS b \
         USING (__k0, __k1) SETTINGS join_use_nulls = 0)"
    );
    // Without buckets: the whole tables.
    assert!(
        !pair(&shape, &Window::Everything, &[])
            .counts_sql()
            .contains("% 256 IN")
    );
}

#[test]
fn samples_take_a_few_keys_of_each_kind_and_their_rows_are_read_by_key() {
    let shape = shape();
    let sql = pair(&shape, &Window::Disjoint, &[]).samples_sql(5);
    assert!(
        sql.ends_with("WHERE side != 'same' ORDER BY side, __k0, __k1 LIMIT 5 BY side"),
        "{sql}"
    );
    assert!(sql.contains("FROM db.a WHERE 0"), "{sql}");
    assert_eq!(
        rows_sql(
            "db.a",
            &shape,
            &[
                vec!["0".into(), "2".into()],
                vec!["1".into(), "it's".into()]
            ],
            3
        ),
        "SELECT _replay_partition AS __k0, _replay_offset AS __k1, * FROM db.a \
         WHERE tuple(toString(_replay_partition), toString(_replay_offset)) IN (tuple('0', '2'), tuple('1', 'it\\'s')) \
         ORDER BY __k0, __k1 LIMIT 3 BY __k0, __k1"
    );
}
