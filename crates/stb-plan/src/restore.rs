//! How a build that does not finish gives the target back as it found it.
//!
//! ClickHouse resolves a materialized view's target and source tables by name, so an old
//! view cannot be renamed aside and kept writing: a new table under the old name would
//! receive its rows. A build therefore drops the old views (their definitions are
//! recorded first, exactly as the warehouse holds them) and moves the old *tables* aside
//! under [`aside_name`] with their rows; once the build has completed, the asides are
//! dropped. A build that stops before then is undone from what the target held when it
//! started: what it created is dropped, the tables come back under their names, and the
//! views are created again from their recorded definitions.
//!
//! The undo is computed from state, not from a step log (a killed process loses its last
//! events): a relation is the build's if it did not exist at the start, if its definition
//! differs from the one recorded, or, for a table moved aside, if its aside is there.
//! Running the undo twice is the same as running it once.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// What a table moved aside is called while its build runs.
pub const ASIDE_SUFFIX: &str = "__stb_prev";

/// The name `relation` has while a build runs beside it.
#[must_use]
pub fn aside_name(relation: &str) -> String {
    format!("{relation}{ASIDE_SUFFIX}")
}

/// True for a name only a build's aside has.
#[must_use]
pub fn is_aside(relation: &str) -> bool {
    relation.ends_with(ASIDE_SUFFIX)
}

/// What a build may have to undo, known before it starts.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Undo {
    pub database: String,
    /// Tables the build moves aside: (relation, aside), in teardown order.
    pub set_aside: Vec<(String, String)>,
    /// Views and materialized views the build drops (paused landing views included), in
    /// teardown order.
    pub dropped: Vec<String>,
    /// Relations the build creates, in creation order.
    pub created: Vec<String>,
}

impl Undo {
    /// Every relation whose state at the start the undo needs, asides included.
    #[must_use]
    pub fn relations(&self) -> Vec<String> {
        let mut all: Vec<String> = Vec::new();
        let names = self
            .set_aside
            .iter()
            .flat_map(|(relation, aside)| [relation, aside])
            .chain(&self.dropped)
            .chain(&self.created);
        for name in names {
            if !all.contains(name) {
                all.push(name.clone());
            }
        }
        all
    }

    /// True when the build changes nothing that exists (nothing to undo but creations).
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.set_aside.is_empty() && self.dropped.is_empty() && self.created.is_empty()
    }
}

/// A relation as the catalog describes it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Held {
    pub engine: String,
    /// `system.tables.create_table_query`, as the warehouse renders it.
    pub create: String,
}

impl Held {
    fn is_materialized_view(&self) -> bool {
        self.engine == "MaterializedView"
    }

    fn is_view(&self) -> bool {
        self.engine == "View"
    }
}

/// One statement of an undo.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UndoStatement {
    pub step_id: String,
    pub sql: String,
}

fn qualified(database: &str, relation: &str) -> String {
    stb_ddl::QualifiedName::new(database, relation).to_string()
}

/// The statements that give the target back as `before` describes it, from what it holds
/// `now`. Materialized views the build made go first (nothing then writes into what it
/// made), then its views and tables; the tables moved aside come back under their names;
/// the views it dropped are created again from their recorded definitions, materialized
/// views in teardown order (leaves first, so a row an upstream view writes reaches every
/// table downstream), then views.
#[must_use]
pub fn undo_statements(
    undo: &Undo,
    before: &BTreeMap<String, Held>,
    now: &BTreeMap<String, Held>,
) -> Vec<UndoStatement> {
    let database = &undo.database;
    let aside_of = |relation: &str| {
        undo.set_aside
            .iter()
            .find(|(r, _)| r == relation)
            .map(|(_, aside)| aside.as_str())
    };
    let is_old = |relation: &str, held: &Held| match before.get(relation) {
        None => false,
        Some(was) => match aside_of(relation) {
            // Moved aside: what holds the name now is the build's once the aside exists.
            Some(aside) => !now.contains_key(aside),
            None => was.create == held.create,
        },
    };
    let mut touched: Vec<&str> = Vec::new();
    for name in undo
        .created
        .iter()
        .chain(&undo.dropped)
        .chain(undo.set_aside.iter().map(|(r, _)| r))
    {
        if !touched.contains(&name.as_str()) {
            touched.push(name);
        }
    }
    let made: Vec<(&str, &Held)> = touched
        .iter()
        .filter_map(|name| now.get(*name).map(|held| (*name, held)))
        .filter(|(name, held)| !is_old(name, held))
        .collect();
    let mut statements = Vec::new();
    let ordered = made
        .iter()
        .filter(|(_, h)| h.is_materialized_view())
        .chain(made.iter().filter(|(_, h)| h.is_view()))
        .chain(
            made.iter()
                .filter(|(_, h)| !h.is_materialized_view() && !h.is_view()),
        );
    for (name, _) in ordered {
        statements.push(UndoStatement {
            step_id: format!("undo_drop_{name}"),
            sql: format!("DROP TABLE IF EXISTS {} SYNC", qualified(database, name)),
        });
    }
    for (relation, aside) in &undo.set_aside {
        if now.contains_key(aside) {
            statements.push(UndoStatement {
                step_id: format!("undo_restore_{relation}"),
                sql: format!(
                    "RENAME TABLE {} TO {}",
                    qualified(database, aside),
                    qualified(database, relation)
                ),
            });
        }
    }
    let gone = |name: &str| !now.contains_key(name) || made.iter().any(|(m, _)| *m == name);
    let recreated: Vec<(&String, &Held)> = undo
        .dropped
        .iter()
        .filter_map(|name| before.get(name).map(|held| (name, held)))
        .filter(|(name, held)| (held.is_materialized_view() || held.is_view()) && gone(name))
        .collect();
    let ordered = recreated
        .iter()
        .filter(|(_, h)| h.is_materialized_view())
        .chain(recreated.iter().filter(|(_, h)| h.is_view()));
    for (name, held) in ordered {
        statements.push(UndoStatement {
            step_id: format!("undo_recreate_{name}"),
            sql: held.create.clone(),
        });
    }
    statements
}

/// What a completed build still has to finish: dropping the asides left (a build killed
/// after its replays, or whose clean-up failed).
#[must_use]
pub fn finish_statements(undo: &Undo, now: &BTreeMap<String, Held>) -> Vec<UndoStatement> {
    undo.set_aside
        .iter()
        .filter(|(_, aside)| now.contains_key(aside))
        .map(|(relation, aside)| UndoStatement {
            step_id: format!("drop_previous_{relation}"),
            sql: format!(
                "DROP TABLE IF EXISTS {} SYNC",
                qualified(&undo.database, aside)
            ),
        })
        .collect()
}

#[cfg(test)]
mod tests;
