use super::{ColumnLineage, Derivation, Input, query_lineage};

/// Columns of the relations the tests read.
fn columns_of(relation: &str) -> Option<Vec<String>> {
    let columns: &[&str] = match relation {
        "db.raw__orders" => &["kafka_value", "_replay_partition", "_replay_offset"],
        "db.orders" => &["order_id", "customer_id", "amount_cents", "kind", "ts"],
        "db.customers" => &["customer_id", "name", "region"],
        _ => return None,
    };
    Some(columns.iter().map(|c| (*c).to_owned()).collect())
}

fn lineage(sql: &str) -> Vec<ColumnLineage> {
    query_lineage(sql, &columns_of).unwrap_or_else(|e| panic!("{e:?} in {sql}"))
}

fn of<'l>(all: &'l [ColumnLineage], column: &str) -> &'l ColumnLineage {
    all.iter()
        .find(|l| l.column == column)
        .unwrap_or_else(|| panic!("{column} in {all:#?}"))
}

fn input(relation: &str, column: &str, path: &[&str]) -> Input {
    Input {
        relation: relation.to_owned(),
        column: column.to_owned(),
        json_path: path.iter().map(|p| (*p).to_owned()).collect(),
    }
}

#[test]
fn json_fields_of_a_landing_are_traced_to_their_paths() {
    let all = lineage(
        "SELECT\n  JSONExtractString(kafka_value, 'order_id')::String AS order_id,\n  JSONExtractUInt(kafka_value, 'payment', 'amount_cents')::UInt64 AS amount_cents,\n  JSONExtract(kafka_value, 'tags', 'Array(String)') AS tags,\n  JSON_VALUE(kafka_value, '$.customer.id') AS customer_id,\n  _replay_offset::Int64 AS _replay_offset,\n  now64(3) AS seen_at\nFROM db.raw__orders -- the landing",
    );
    assert_eq!(
        all.iter().map(|l| l.column.as_str()).collect::<Vec<_>>(),
        [
            "order_id",
            "amount_cents",
            "tags",
            "customer_id",
            "_replay_offset",
            "seen_at"
        ]
    );
    let amount = of(&all, "amount_cents");
    assert_eq!(
        amount.inputs,
        [input(
            "db.raw__orders",
            "kafka_value",
            &["payment", "amount_cents"]
        )]
    );
    assert_eq!(amount.derivation, Derivation::Computed);
    assert_eq!(
        of(&all, "tags").inputs,
        [input("db.raw__orders", "kafka_value", &["tags"])],
        "the type argument of JSONExtract is not a key"
    );
    assert_eq!(
        of(&all, "customer_id").inputs,
        [input("db.raw__orders", "kafka_value", &["$.customer.id"])]
    );
    let offset = of(&all, "_replay_offset");
    assert_eq!(offset.derivation, Derivation::Copied, "a cast copies");
    assert_eq!(
        offset.inputs,
        [input("db.raw__orders", "_replay_offset", &[])]
    );
    let seen = of(&all, "seen_at");
    assert_eq!(
        (seen.derivation, seen.inputs.len()),
        (Derivation::Constant, 0)
    );
}

#[test]
fn joins_attribute_each_column_to_its_side() {
    let all = lineage(
        "SELECT o.order_id::String AS order_id, name::String AS customer_name, concat(region, '/', o.kind) AS place, customer_id AS who\nFROM db.orders AS o\nLEFT ANY JOIN db.customers c ON o.customer_id = c.customer_id\nWHERE o.amount_cents > 0",
    );
    assert_eq!(
        of(&all, "order_id").inputs,
        [input("db.orders", "order_id", &[])]
    );
    assert_eq!(
        of(&all, "customer_name").inputs,
        [input("db.customers", "name", &[])],
        "only the customers hold name"
    );
    let place = of(&all, "place");
    assert_eq!(
        place.inputs,
        [
            input("db.customers", "region", &[]),
            input("db.orders", "kind", &[])
        ]
    );
    assert_eq!(place.derivation, Derivation::Computed);
    // Both sides hold customer_id: the query does not say which, and neither do we.
    let who = of(&all, "who");
    assert!(who.inputs.is_empty(), "{who:?}");
    assert_eq!(who.unresolved, ["customer_id"]);
}

#[test]
fn aggregates_and_windows_say_so() {
    let all = lineage(
        "SELECT customer_id::String AS customer_id, sum(amount_cents)::UInt64 AS revenue_cents, count()::UInt64 AS orders, sumIf(amount_cents, kind = 'paid') AS paid,\n  row_number() OVER (PARTITION BY customer_id ORDER BY ts) AS rank, avg(amount_cents) OVER (PARTITION BY customer_id) AS average\nFROM db.orders GROUP BY customer_id",
    );
    let revenue = of(&all, "revenue_cents");
    assert_eq!(revenue.derivation, Derivation::Aggregated);
    assert_eq!(revenue.inputs, [input("db.orders", "amount_cents", &[])]);
    let orders = of(&all, "orders");
    assert_eq!(
        (orders.derivation, orders.inputs.len()),
        (Derivation::Aggregated, 0)
    );
    assert_eq!(
        of(&all, "paid").inputs,
        [
            input("db.orders", "amount_cents", &[]),
            input("db.orders", "kind", &[])
        ]
    );
    let rank = of(&all, "rank");
    assert_eq!(rank.derivation, Derivation::Windowed);
    assert_eq!(
        rank.inputs,
        [
            input("db.orders", "customer_id", &[]),
            input("db.orders", "ts", &[])
        ]
    );
    assert_eq!(of(&all, "average").derivation, Derivation::Windowed);
    assert_eq!(of(&all, "customer_id").derivation, Derivation::Copied);
}

#[test]
fn ctes_subqueries_and_aliases_are_followed_with_their_json_paths() {
    let all = lineage(
        "WITH parsed AS (\n  SELECT JSONExtractRaw(kafka_value, 'customer') AS customer, JSONExtractUInt(kafka_value, 'amount') AS amount FROM db.raw__orders\n), 100 AS cents\nSELECT\n  JSONExtractString(customer, 'id') AS customer_id,\n  amount * cents AS amount_cents,\n  amount_cents + 1 AS next_cents,\n  big.total AS total\nFROM parsed\nCROSS JOIN (SELECT sum(amount_cents) AS total FROM db.orders) AS big",
    );
    assert_eq!(
        of(&all, "customer_id").inputs,
        [input("db.raw__orders", "kafka_value", &["customer", "id"])],
        "the CTE's path, then the outer one"
    );
    let amount = of(&all, "amount_cents");
    assert_eq!(
        amount.inputs,
        [input("db.raw__orders", "kafka_value", &["amount"])]
    );
    assert!(amount.unresolved.is_empty(), "the scalar cents: {amount:?}");
    assert_eq!(
        of(&all, "next_cents").inputs,
        amount.inputs,
        "an alias of the same SELECT"
    );
    let total = of(&all, "total");
    assert_eq!(total.inputs, [input("db.orders", "amount_cents", &[])]);
    assert_eq!(total.derivation, Derivation::Aggregated);
}

#[test]
fn unions_read_each_branch_by_position_and_stars_expand_in_subqueries() {
    let all = lineage(
        "SELECT id AS id FROM (\n  SELECT order_id AS id FROM db.orders\n  UNION ALL\n  SELECT customer_id FROM db.customers\n)",
    );
    assert_eq!(
        of(&all, "id").inputs,
        [
            input("db.customers", "customer_id", &[]),
            input("db.orders", "order_id", &[])
        ]
    );
    let all = lineage("SELECT region::String AS region FROM (SELECT * FROM db.customers) AS c");
    assert_eq!(
        of(&all, "region").inputs,
        [input("db.customers", "region", &[])]
    );
}

#[test]
fn what_cannot_be_traced_is_marked() {
    let all = lineage(
        "SELECT dictGet('regions', 'name', customer_id) AS region_name, arrayMap(x -> x * 2, [amount_cents]) AS doubled, toStartOfDay(ts) + INTERVAL 1 DAY AS day, mystery AS m FROM db.orders",
    );
    let region = of(&all, "region_name");
    assert_eq!(region.opaque, ["dictGet"]);
    assert_eq!(region.inputs, [input("db.orders", "customer_id", &[])]);
    let doubled = of(&all, "doubled");
    assert_eq!(
        doubled.inputs,
        [input("db.orders", "amount_cents", &[])],
        "a lambda's parameter is not a column"
    );
    assert_eq!(
        of(&all, "day").inputs,
        [input("db.orders", "ts", &[])],
        "an interval's unit is not a column"
    );
    // One relation in scope: a name it is not known to hold is still its, as ClickHouse
    // would read it (the warehouse refuses the query if it is not there).
    assert_eq!(of(&all, "m").inputs, [input("db.orders", "mystery", &[])]);
}

#[test]
fn a_macro_expanded_query_is_read_like_any_other() {
    // What a SQL macro expands to (the compiler expands macros before analysis): a CASE
    // over two columns, spread over lines with comments.
    let all = lineage(
        "SELECT\n  /* cents_to_units(amount_cents) */ (amount_cents / 100)::Decimal(18, 2) AS amount,\n  CASE WHEN kind = 'paid' THEN 1 ELSE 0 END AS is_paid -- status_flag(kind)\nFROM db.orders;",
    );
    assert_eq!(
        of(&all, "amount").inputs,
        [input("db.orders", "amount_cents", &[])]
    );
    assert_eq!(
        of(&all, "is_paid").inputs,
        [input("db.orders", "kind", &[])]
    );
}

#[test]
fn a_query_that_does_not_read_is_an_error_not_a_panic() {
    for sql in [
        "SELECT 'unterminated",
        "INSERT INTO t VALUES (1)",
        "",
        "WITH x AS (SELECT 1)",
    ] {
        assert!(query_lineage(sql, &columns_of).is_err(), "{sql}");
    }
    // Odd but readable text gives an answer.
    for sql in [
        "SELECT (((a",
        "SELECT a FROM (",
        "SELECT FROM",
        "SELECT a AS FROM t",
    ] {
        let _ = query_lineage(sql, &columns_of);
    }
}

proptest::proptest! {
    #[test]
    fn arbitrary_text_is_answered_without_a_panic(sql in "[ -~\n]{0,160}") {
        let _ = query_lineage(&sql, &columns_of);
    }

    #[test]
    fn sql_shaped_noise_is_answered_without_a_panic(words in proptest::collection::vec(
        proptest::sample::select(vec![
            "SELECT", "FROM", "WITH", "AS", "(", ")", ",", ".", "*", "JOIN", "ON", "UNION",
            "ALL", "a", "b", "db.orders", "x", "->", "::", "String", "OVER", "sum", "'k'",
            "JSONExtract", "ARRAY", "INTERVAL", "1", "DAY", "USING", "LEFT", "GROUP", "BY",
        ]),
        0..40,
    )) {
        let _ = query_lineage(&words.join(" "), &columns_of);
    }
}

#[test]
fn subqueries_units_lambdas_and_key_columns_in_expressions() {
    let all = lineage(
        "SELECT if(customer_id IN (SELECT customer_id FROM db.customers), 1, 0) AS known,\n  EXTRACT(YEAR FROM ts) AS year, ts + INTERVAL amount_cents DAY AS later\nFROM db.orders",
    );
    let known = of(&all, "known");
    assert_eq!(known.inputs, [input("db.orders", "customer_id", &[])]);
    assert_eq!(known.opaque, ["(subquery)"], "the subquery is not followed");
    assert_eq!(of(&all, "year").inputs, [input("db.orders", "ts", &[])]);
    assert_eq!(
        of(&all, "later").inputs,
        [
            input("db.orders", "amount_cents", &[]),
            input("db.orders", "ts", &[])
        ]
    );
    let all = lineage(
        "SELECT arrayMap(j -> JSONExtractString(j, 'id'), JSONExtractArrayRaw(kafka_value, 'items')) AS ids,\n  JSONExtractString(kafka_value, _replay_partition) AS keyed\nFROM db.raw__orders",
    );
    assert_eq!(
        of(&all, "ids").inputs,
        [input("db.raw__orders", "kafka_value", &["items"])],
        "a lambda's parameter read through JSON is not a column"
    );
    assert_eq!(
        of(&all, "keyed").inputs,
        [
            input("db.raw__orders", "_replay_partition", &[]),
            input("db.raw__orders", "kafka_value", &[])
        ],
        "a key given by a column is an input; the path stops where keys stop being literal"
    );
}

#[test]
fn aliases_implicit_names_and_star_modifiers() {
    // `a` is an alias: the table named a is not what a.x means.
    let all = lineage("SELECT a.x AS x FROM db.a AS b JOIN db.c AS a ON b.k = a.k");
    assert_eq!(of(&all, "x").inputs, [input("db.c", "x", &[])]);
    let all = lineage("SELECT CAST(amount_cents AS UInt64) amount FROM db.orders");
    let amount = of(&all, "amount");
    assert_eq!(amount.derivation, Derivation::Copied, "a cast copies");
    assert_eq!(amount.inputs, [input("db.orders", "amount_cents", &[])]);
    let all = lineage("SELECT kind AS kind FROM (SELECT * EXCEPT (ts) FROM db.orders)");
    assert_eq!(of(&all, "kind").inputs, [input("db.orders", "kind", &[])]);
}

#[test]
fn deep_nesting_and_runaway_aliases_are_refused_not_overflowed() {
    let deep = format!("SELECT {}1{} AS x", "(".repeat(20_000), ")".repeat(20_000));
    let refused = query_lineage(&deep, &columns_of).expect_err("too deep");
    assert!(refused.message.contains("nested"), "{refused:?}");
    // Each alias reads the one before twice: 2^40 readings without a bound.
    let mut items = vec!["amount_cents AS a0".to_owned()];
    for level in 1..=40 {
        items.push(format!("a{p} + a{p} AS a{level}", p = level - 1));
    }
    let runaway = format!("SELECT {} FROM db.orders", items.join(", "));
    let refused = query_lineage(&runaway, &columns_of).expect_err("too intricate");
    assert!(refused.message.contains("intricate"), "{refused:?}");
}
