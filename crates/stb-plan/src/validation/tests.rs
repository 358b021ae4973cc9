use stb_ddl::{Column, QualifiedName, Table};
use stb_model::planning::{Deployable, Landing, PlanModel, PlanSource, QueryPart, RelationKind};

use super::*;

fn table(name: &str, engine: &str) -> Table {
    Table {
        name: QualifiedName::new("db", &format!("tbl__{name}")),
        columns: vec![Column::new("id", "UInt64"), Column::new("amount", "UInt64")],
        engine: engine.to_owned(),
        order_by: vec!["id".to_owned()],
        partition_by: None,
        ttl: None,
        settings: Vec::new(),
    }
}

fn text(piece: &str) -> QueryPart {
    QueryPart::Text(piece.to_owned())
}

fn model(name: &str, reads: &str, parts: Vec<QueryPart>, engine: Option<&str>) -> PlanModel {
    PlanModel {
        name: name.into(),
        is_table: engine.is_some(),
        relations: vec![(RelationKind::Table, format!("tbl__{name}"))],
        reads: vec![reads.into()],
        reference: format!("db.tbl__{name}"),
        output_columns: vec![
            ("id".into(), "UInt64".into()),
            ("amount".into(), "UInt64".into()),
        ],
        deployable: Deployable {
            table: engine.map(|e| table(name, e)),
            query_parts: parts,
            ..Deployable::default()
        },
        ..PlanModel::default()
    }
}

fn project() -> (Vec<PlanModel>, Vec<PlanSource>) {
    let source = PlanSource {
        name: "orders".into(),
        framework_managed: true,
        relation: Some("raw__orders".into()),
        reference: Some("db.raw__orders".into()),
        landing: Some(Landing {
            raw_table: "raw__orders".into(),
            raw_definition: Some(table("raw", "MergeTree")),
            ..Landing::default()
        }),
        ..PlanSource::default()
    };
    let parsed = model(
        "parsed",
        "orders",
        vec![
            text("SELECT id, amount FROM "),
            QueryPart::Source {
                name: "orders".into(),
                relation: "db.raw__orders".into(),
            },
            text(" AS o -- the author's comment;\n;  "),
        ],
        Some("MergeTree"),
    );
    let totals = model(
        "totals",
        "parsed",
        vec![
            text("SELECT id, sum(amount) AS amount FROM "),
            QueryPart::Model("parsed".into()),
            text(" FINAL GROUP BY id"),
        ],
        Some("SummingMergeTree"),
    );
    let report = model(
        "report",
        "totals",
        vec![text("SELECT * FROM "), QueryPart::Model("totals".into())],
        None,
    );
    (vec![parsed, totals, report], vec![source])
}

#[test]
fn rebuilt_models_are_checked_against_stand_ins_in_plan_order() {
    let (models, sources) = project();
    let checked = validation(&["totals", "report"], &models, &sources, &|_| true);
    let statements: Vec<(&str, Subject, &str)> = checked
        .checks
        .iter()
        .map(|c| (c.name.as_str(), c.subject, c.sql.as_str()))
        .collect();
    assert_eq!(
        statements,
        vec![
            (
                "totals",
                Subject::Query,
                // An upstream outside the scope keeps the relation it names now.
                "EXPLAIN SELECT id, sum(amount) AS amount FROM db.tbl__parsed FINAL GROUP BY id"
            ),
            (
                "totals",
                Subject::Storage,
                "CREATE TEMPORARY TABLE stb_check_1 (\n    id UInt64,\n    amount UInt64\n) ENGINE = SummingMergeTree\nORDER BY (id)"
            ),
            // A rebuilt upstream is read through its stand-in.
            (
                "report",
                Subject::Query,
                "EXPLAIN SELECT * FROM stb_check_1"
            ),
            (
                "report",
                Subject::Storage,
                "CREATE TEMPORARY TABLE stb_check_2 (\n    id UInt64,\n    amount UInt64\n) ENGINE = MergeTree\nORDER BY ()"
            ),
        ]
    );
    assert!(checked.checks[1].authored && !checked.checks[3].authored);
    assert!(checked.unchecked.is_empty());
}

#[test]
fn a_landing_the_build_creates_is_checked_and_read_through_its_stand_in() {
    let (models, sources) = project();
    let checked = validation(&["parsed"], &models, &sources, &|relation| {
        relation != "raw__orders"
    });
    assert_eq!(checked.checks[0].subject, Subject::Landing);
    assert_eq!(checked.checks[0].name, "orders");
    assert!(
        checked.checks[0]
            .sql
            .starts_with("CREATE TEMPORARY TABLE stb_check_1 (")
    );
    // The author's bytes are kept; only the trailing `;` goes.
    assert_eq!(
        checked.checks[1].sql,
        "EXPLAIN SELECT id, amount FROM stb_check_1 AS o -- the author's comment;\n"
    );
    // Present landings are read where they are.
    let present = validation(&["parsed"], &models, &sources, &|_| true);
    assert_eq!(
        present.checks[0].sql,
        "EXPLAIN SELECT id, amount FROM db.raw__orders AS o -- the author's comment;\n"
    );
}

#[test]
fn cluster_engines_and_table_functions_are_reported_as_not_fully_checked() {
    let (mut models, mut sources) = project();
    models[1].deployable.table = Some(table(
        "totals",
        "ReplicatedSummingMergeTree('/t', '{replica}')",
    ));
    sources[0].relation = None;
    let checked = validation(&["parsed", "totals"], &models, &sources, &|_| true);
    let reasons: Vec<(&str, &str)> = checked
        .unchecked
        .iter()
        .map(|u| (u.name.as_str(), u.reason.split(' ').next().unwrap_or("")))
        .collect();
    assert_eq!(reasons, vec![("parsed", "it"), ("totals", "engine")]);
    // The replicated table is stood in by its columns, still checked.
    let storage = checked
        .checks
        .iter()
        .find(|c| c.name == "totals" && c.subject == Subject::Storage)
        .map(|c| c.sql.as_str())
        .unwrap_or_default();
    assert!(
        storage.contains("ENGINE = MergeTree\nORDER BY ()"),
        "{storage}"
    );
    assert!(
        !checked
            .checks
            .iter()
            .any(|c| c.name == "parsed" && c.subject == Subject::Query)
    );
}

#[test]
fn offline_an_adopted_input_is_unchecked_and_its_readers_use_the_typed_table() {
    let (models, mut sources) = project();
    // Nothing exists offline: the managed landing is made from its definition.
    let offline = validation(&["parsed", "totals"], &models, &sources, &|_| false);
    assert_eq!(offline.checks[0].subject, Subject::Landing);
    assert!(offline.unchecked.is_empty(), "{:?}", offline.unchecked);
    // An adopted table has no definition of ours: its reader is listed, with why.
    sources[0].landing = None;
    sources[0].framework_managed = false;
    let offline = validation(&["parsed", "totals"], &models, &sources, &|_| false);
    assert_eq!(offline.unchecked.len(), 1);
    assert_eq!(offline.unchecked[0].name, "parsed");
    assert_eq!(
        offline.unchecked[0].reason,
        "it reads raw__orders (source 'orders'), whose columns only the target's warehouse knows"
    );
    let checks: Vec<(&str, Subject)> = offline
        .checks
        .iter()
        .map(|c| (c.name.as_str(), c.subject))
        .collect();
    assert_eq!(
        checks,
        vec![
            ("parsed", Subject::Storage),
            ("totals", Subject::Query),
            ("totals", Subject::Storage),
        ]
    );
    assert_eq!(
        offline.checks[1].sql,
        "EXPLAIN SELECT id, sum(amount) AS amount FROM stb_check_1 FINAL GROUP BY id"
    );
    // Online, the same table is there and read where it is.
    let online = validation(&["parsed"], &models, &sources, &|_| true);
    assert!(online.unchecked.is_empty());
}

#[test]
fn checks_name_the_stand_ins_they_make_and_read() {
    let (models, sources) = project();
    let checked = validation(&["parsed", "totals", "report"], &models, &sources, &|r| {
        r != "raw__orders"
    });
    let shape: Vec<(&str, Subject, Option<&str>, Vec<&str>)> = checked
        .checks
        .iter()
        .map(|c| {
            (
                c.name.as_str(),
                c.subject,
                c.creates.as_deref(),
                c.reads.iter().map(String::as_str).collect(),
            )
        })
        .collect();
    assert_eq!(
        shape,
        vec![
            ("orders", Subject::Landing, Some("stb_check_1"), vec![]),
            ("parsed", Subject::Query, None, vec!["stb_check_1"]),
            ("parsed", Subject::Storage, Some("stb_check_2"), vec![]),
            ("totals", Subject::Query, None, vec!["stb_check_2"]),
            ("totals", Subject::Storage, Some("stb_check_3"), vec![]),
            ("report", Subject::Query, None, vec!["stb_check_3"]),
            ("report", Subject::Storage, Some("stb_check_4"), vec![]),
        ]
    );
    assert_eq!(
        checked.checks[3].sql,
        "EXPLAIN SELECT id, sum(amount) AS amount FROM stb_check_2 FINAL GROUP BY id"
    );
}

#[test]
fn queries_are_also_rendered_with_their_stand_ins_inline() {
    let (models, sources) = project();
    let checked = validation(&["parsed", "totals"], &models, &sources, &|r| {
        r != "raw__orders"
    });
    let structure = "null('id UInt64, amount UInt64')";
    assert_eq!(
        checked.checks[1].inline_query(),
        Some(
            format!("SELECT id, amount FROM {structure} AS o -- the author's comment;\n").as_str()
        )
    );
    assert_eq!(
        checked.checks[3].inline_query(),
        Some(
            format!("SELECT id, sum(amount) AS amount FROM {structure} FINAL GROUP BY id").as_str()
        )
    );
    assert_eq!(checked.checks[2].inline_query(), None);
    // A type with quotes in it is escaped inside the structure's string.
    let (mut models, sources) = project();
    models[0]
        .deployable
        .table
        .as_mut()
        .expect("a table")
        .columns[0]
        .data_type = "DateTime64(3, 'UTC')".into();
    let checked = validation(&["parsed", "totals"], &models, &sources, &|_| true);
    assert!(
        checked.checks[2]
            .inline_query()
            .is_some_and(|q| q.contains("null('id DateTime64(3, \\'UTC\\'), amount UInt64')")),
        "{:?}",
        checked.checks[2].inline
    );
}

#[test]
fn tables_of_one_definition_are_one_shape() {
    let (mut models, sources) = project();
    // `again` has the definition of `parsed` under another name; `report` is a view.
    let mut again = models[0].clone();
    again.name = "again".into();
    again.deployable.table = Some(table("again", "MergeTree"));
    models.push(again);
    let scope = ["parsed", "totals", "report", "again"];
    let checked = validation(&scope, &models, &sources, &|r| r != "raw__orders");
    let storage: Vec<(usize, &str)> = checked
        .checks
        .iter()
        .enumerate()
        .filter(|(_, c)| c.creates.is_some())
        .map(|(i, c)| (i, c.name.as_str()))
        .collect();
    assert_eq!(
        storage,
        vec![
            (0, "orders"),
            (2, "parsed"),
            (4, "totals"),
            (6, "report"),
            (8, "again")
        ]
    );
    // The landing's table is a MergeTree of the same columns as `parsed` and `again`.
    assert_eq!(
        shapes(&checked.checks),
        vec![
            Shape {
                check: 0,
                checks: vec![0, 2, 8]
            },
            Shape {
                check: 4,
                checks: vec![4]
            },
            Shape {
                check: 6,
                checks: vec![6]
            },
        ]
    );
}
