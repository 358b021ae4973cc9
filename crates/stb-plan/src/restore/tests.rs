use std::collections::BTreeMap;

use super::*;

fn held(engine: &str, create: &str) -> Held {
    Held {
        engine: engine.into(),
        create: create.into(),
    }
}

fn undo() -> Undo {
    Undo {
        database: "db".into(),
        set_aside: vec![("tbl__a".into(), "tbl__a__stb_prev".into())],
        dropped: vec!["view__r".into(), "mv__a".into(), "mv__s".into()],
        created: vec!["tbl__a".into(), "mv__a".into(), "view__r".into()],
    }
}

/// The target before the build: the table, its view, a report view, a landing view.
fn before() -> BTreeMap<String, Held> {
    BTreeMap::from([
        (
            "tbl__a".into(),
            held(
                "MergeTree",
                "CREATE TABLE db.tbl__a (x UInt8) ENGINE = MergeTree ORDER BY x",
            ),
        ),
        (
            "mv__a".into(),
            held(
                "MaterializedView",
                "CREATE MATERIALIZED VIEW db.mv__a TO db.tbl__a (x UInt8) AS SELECT x FROM db.src",
            ),
        ),
        (
            "view__r".into(),
            held(
                "View",
                "CREATE VIEW db.view__r (x UInt8) AS SELECT x FROM db.tbl__a",
            ),
        ),
        (
            "mv__s".into(),
            held(
                "MaterializedView",
                "CREATE MATERIALIZED VIEW db.mv__s TO db.raw__s AS SELECT 1",
            ),
        ),
    ])
}

/// Applies `statements` to `state` the way the warehouse would.
fn apply(
    state: &mut BTreeMap<String, Held>,
    statements: &[UndoStatement],
    before: &BTreeMap<String, Held>,
) {
    for statement in statements {
        if let Some(name) = statement.step_id.strip_prefix("undo_drop_") {
            state.remove(name);
        } else if let Some(name) = statement.step_id.strip_prefix("undo_restore_") {
            let aside = state.remove(&aside_name(name)).expect("aside");
            state.insert(name.to_owned(), aside);
        } else if let Some(name) = statement.step_id.strip_prefix("undo_recreate_") {
            state.insert(name.to_owned(), before[name].clone());
        }
    }
}

fn ids(statements: &[UndoStatement]) -> Vec<&str> {
    statements.iter().map(|s| s.step_id.as_str()).collect()
}

#[test]
fn a_build_stopped_after_creating_is_undone_views_first_and_the_table_comes_back() {
    let before = before();
    let mut now = before.clone();
    // Teardown and realization ran; the landing view is paused.
    now.remove("mv__s");
    let old_table = now.remove("tbl__a").expect("table");
    now.insert("tbl__a__stb_prev".into(), old_table.clone());
    now.insert(
        "tbl__a".into(),
        held(
            "MergeTree",
            "CREATE TABLE db.tbl__a (y UInt8) ENGINE = MergeTree ORDER BY y",
        ),
    );
    now.insert(
        "mv__a".into(),
        held(
            "MaterializedView",
            "CREATE MATERIALIZED VIEW db.mv__a TO db.tbl__a (y UInt8) AS SELECT y FROM db.src",
        ),
    );
    now.insert(
        "view__r".into(),
        held(
            "View",
            "CREATE VIEW db.view__r (y UInt8) AS SELECT y FROM db.tbl__a",
        ),
    );
    let statements = undo_statements(&undo(), &before, &now);
    assert_eq!(
        ids(&statements),
        vec![
            "undo_drop_mv__a",
            "undo_drop_view__r",
            "undo_drop_tbl__a",
            "undo_restore_tbl__a",
            "undo_recreate_mv__a",
            "undo_recreate_mv__s",
            "undo_recreate_view__r",
        ]
    );
    assert_eq!(
        statements[3].sql,
        "RENAME TABLE db.tbl__a__stb_prev TO db.tbl__a"
    );
    assert_eq!(statements[4].sql, before["mv__a"].create);
    apply(&mut now, &statements, &before);
    assert_eq!(now, before);
    // Twice is once.
    assert!(undo_statements(&undo(), &before, &now).is_empty());
}

#[test]
fn every_point_a_build_can_stop_at_is_undone_to_the_same_target() {
    let before = before();
    // Each prefix of the build's own statements, as a state.
    let mut states = vec![before.clone()];
    let mut state = before.clone();
    state.remove("mv__s");
    states.push(state.clone());
    state.remove("view__r");
    states.push(state.clone());
    state.remove("mv__a");
    states.push(state.clone());
    let table = state.remove("tbl__a").expect("table");
    state.insert("tbl__a__stb_prev".into(), table);
    states.push(state.clone());
    state.insert("tbl__a".into(), held("MergeTree", "new table"));
    states.push(state.clone());
    state.insert("mv__a".into(), held("MaterializedView", "new view"));
    states.push(state.clone());
    state.insert("view__r".into(), held("View", "new report"));
    states.push(state.clone());
    for (at, state) in states.into_iter().enumerate() {
        let mut now = state;
        let statements = undo_statements(&undo(), &before, &now);
        apply(&mut now, &statements, &before);
        assert_eq!(now, before, "stopped after statement {at}");
    }
}

#[test]
fn a_first_build_is_undone_by_dropping_what_it_made_and_nothing_else() {
    let undo = Undo {
        database: "db".into(),
        set_aside: Vec::new(),
        dropped: Vec::new(),
        created: vec!["raw__s".into(), "tbl__a".into(), "mv__a".into()],
    };
    let before = BTreeMap::from([("tbl__a".into(), held("MergeTree", "someone else's"))]);
    let now = BTreeMap::from([
        ("raw__s".into(), held("MergeTree", "landing")),
        // It existed before: the build's own creation failed on it, so it stays.
        ("tbl__a".into(), held("MergeTree", "someone else's")),
    ]);
    assert_eq!(
        ids(&undo_statements(&undo, &before, &now)),
        vec!["undo_drop_raw__s"]
    );
}

#[test]
fn a_finished_build_only_drops_the_asides_left() {
    let now = BTreeMap::from([("tbl__a__stb_prev".into(), held("MergeTree", "old"))]);
    let finish = finish_statements(&undo(), &now);
    assert_eq!(ids(&finish), vec!["drop_previous_tbl__a"]);
    assert_eq!(
        finish[0].sql,
        "DROP TABLE IF EXISTS db.tbl__a__stb_prev SYNC"
    );
    assert!(finish_statements(&undo(), &BTreeMap::new()).is_empty());
    assert!(is_aside("tbl__a__stb_prev") && !is_aside("tbl__a"));
}
