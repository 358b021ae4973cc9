//! The shrink guard: before a rebuild drops anything, measure for each replay root how much
//! its live table holds and how much the replay window (retained history within the
//! boundary, from `--start-time` on) would restore, and name every root that would come
//! back smaller.
//!
//! Two queries per plan, whatever the number of models (per batch of 100 roots, past
//! that): first every root's live count, then every root's window. In that order, rows that arrive in between can only
//! make the window larger (a row reaches the driving input before any view feeds it on),
//! so concurrent ingestion never looks like a loss.
//!
//! What is counted depends on the table. A row-wise root into a plain `MergeTree` compares
//! rows: `count()` of the live table against `count()` of the model's query over the
//! window (ClickHouse prunes the columns nothing reads, so a pure projection counts the
//! window's rows without evaluating it). An aggregating root, or any table whose engine
//! merges rows by key (`Summing`, `Aggregating`, `Replacing`, ... `MergeTree`), holds a row
//! count that depends on background merges, so both sides count groups: distinct values of
//! the live table's sorting key.

use crate::direct::{PlanModel, PlanSource};
use crate::workflow::RootReplay;

/// What a root's numbers count.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Basis {
    Rows,
    /// Distinct values of the sorting key (empty: the whole table is one group).
    Groups {
        key: String,
    },
}

impl Basis {
    #[must_use]
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::Rows => "rows",
            Self::Groups { .. } => "groups",
        }
    }

    /// Counts `from` (a relation or a parenthesised query with an alias) on this basis.
    fn count(&self, from: &str) -> String {
        match self {
            Self::Rows => format!("SELECT count() FROM {from}"),
            Self::Groups { key } if key.trim().is_empty() => {
                format!("SELECT toUInt64(count() > 0) FROM {from}")
            }
            Self::Groups { key } => {
                format!("SELECT count() FROM (SELECT 1 FROM {from} GROUP BY {key})")
            }
        }
    }
}

/// What the catalog says about a relation the guard reads.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RelationFacts {
    pub engine: String,
    pub sorting_key: String,
}

/// One root to measure.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Probe {
    pub model: String,
    pub driving_input: String,
    pub basis: Basis,
    /// `None`: the root's table does not exist, so the build cannot lose anything of it.
    pub live_sql: Option<String>,
    /// `None`: the driving input does not exist, so nothing is replayable.
    pub window: Option<WindowSql>,
    /// The driving input's retention, as its live TTL says (`30d`, or the expression):
    /// filled when the guard measures ([`retention`] of the definition of
    /// `retention_source`), since the catalog a plan reads holds no table's definition.
    pub retention: Option<String>,
    /// The driving input's relation (unqualified, in the target's database) when it
    /// exists: where the retention is read.
    pub retention_source: Option<String>,
    /// The live table was filled by another query than the one the build creates.
    pub query_changed: bool,
    /// A fan-in that replays from an input this build rebuilds first: what it can restore
    /// is what that input's own root restores, measured there, so it is not measured.
    pub replays_rebuilt_input: bool,
}

/// The scalar subqueries that measure one root's window.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WindowSql {
    pub input_rows: String,
    /// Everything retained, through the query that filled the live table (its last
    /// build's, when the model changed since): what history can still give back of it.
    pub history: String,
    /// Everything retained (no `--start-time`), through the new query.
    pub retained: String,
    /// From `--start-time` on; `None` without one.
    pub bounded: Option<String>,
    /// The driving input's rows the replay reads: its window, from `--start-time` on (the
    /// replay's cost, [`crate::cost`]).
    pub replay_input: String,
    /// In offsets mode, the window's messages per Kafka partition (`partition`,
    /// `messages`, `first_offset`, `last_offset`).
    pub partitions: Option<String>,
}

/// What the planner knows around the roots.
pub struct Context<'a> {
    pub models: &'a [PlanModel],
    pub sources: &'a [PlanSource],
    /// The catalog, by unqualified relation name.
    pub facts: &'a dyn Fn(&str) -> Option<RelationFacts>,
    /// A model's compiled query at its last successful build, when recorded.
    pub baseline: &'a dyn Fn(&str) -> Option<String>,
    /// Where a model's rows are now, when not in its own table: a virtual deployment's
    /// copy starts empty, and what readers lose on promotion is what the active copy holds
    /// (unqualified relation name, in the same database).
    pub live_table: &'a dyn Fn(&str) -> Option<String>,
}

/// The probes for `roots`.
#[must_use]
pub fn probes(roots: &[RootReplay], context: &Context<'_>) -> Vec<Probe> {
    let Context {
        models,
        sources,
        facts,
        baseline,
        live_table,
    } = *context;
    // Found by name: a scan of every model per root grows with roots times models.
    let models_by_name = crate::work::ModelIndex::new(models);
    let sources_by_name: std::collections::HashMap<&str, &PlanSource> =
        sources.iter().map(|s| (s.name.as_str(), s)).collect();
    roots
        .iter()
        .map(|root| {
            if root.rebuilt_input {
                return Probe {
                    model: root.model.clone(),
                    driving_input: root.driving_input.clone(),
                    basis: Basis::Rows,
                    live_sql: None,
                    window: None,
                    retention: None,
                    retention_source: None,
                    query_changed: false,
                    replays_rebuilt_input: true,
                };
            }
            let model = models_by_name.get(&root.model);
            let table = live_table(&root.model)
                .or_else(|| model.and_then(|m| m.table()).map(str::to_owned));
            let live = table.as_deref().and_then(facts);
            // Counted where the rows are: the root's own table, or the active copy.
            let live_relation = match (&table, template_database(&root.template.target)) {
                (Some(table), Some(database)) => {
                    stb_ddl::QualifiedName::new(database, table).to_string()
                }
                _ => root.template.target.clone(),
            };
            let input = Input::find(&root.driving_input, &models_by_name, &sources_by_name);
            let input_relation = input.as_ref().and_then(Input::relation);
            let input_facts = input_relation.and_then(facts);
            let basis = match &live {
                Some(live) if model.is_some_and(|m| m.aggregate) || merges_rows(&live.engine) => {
                    Basis::Groups {
                        key: unwrap_parentheses(&live.sorting_key).to_owned(),
                    }
                }
                _ => Basis::Rows,
            };
            let template = &root.template;
            let window_count = |template: &crate::replay::ReplayTemplate, predicate: &str| {
                basis.count(&format!("({}) AS __stb_window", template.select(predicate)))
            };
            let previous = model.and_then(|m| {
                let old = baseline(&m.name).filter(|old| *old != m.query)?;
                let reference = input.as_ref().and_then(Input::reference)?;
                previous_template(template, m, &old, reference)
            });
            let history = previous.as_ref().unwrap_or(template);
            // An unbounded replay (a fan-in over an input rebuilt from paused landings)
            // reads all of its input.
            let everything = if root.bounded {
                crate::replay::window_now(&template.anchor, None)
            } else {
                "1".to_owned()
            };
            let anchor = &template.anchor;
            let replayed = if root.bounded {
                crate::replay::window_now(anchor, root.start_time.as_ref())
            } else {
                "1".to_owned()
            };
            let window = input_facts.as_ref().map(|_| WindowSql {
                input_rows: format!("SELECT count() FROM {}", anchor.relation),
                replay_input: format!("SELECT count() FROM {} WHERE {replayed}", anchor.relation),
                partitions: (anchor.mode == crate::replay::BoundaryMode::Offsets)
                    .then(|| crate::cost::partitions_sql(&anchor.relation, &replayed)),
                history: window_count(history, &everything),
                retained: window_count(template, &everything),
                // Each root's own start: a deployment bounds its roots one by one.
                bounded: root.start_time.as_ref().map(|s| {
                    window_count(
                        template,
                        &crate::replay::window_now(&template.anchor, Some(s)),
                    )
                }),
            });
            Probe {
                model: root.model.clone(),
                driving_input: root.driving_input.clone(),
                live_sql: live.as_ref().map(|_| basis.count(&live_relation)),
                basis,
                window,
                retention: None,
                retention_source: input_facts.as_ref().and(input_relation).map(str::to_owned),
                query_changed: previous.is_some(),
                replays_rebuilt_input: false,
            }
        })
        .collect()
}

/// A driving input: a source, or a model that is not rebuilt.
enum Input<'a> {
    Source(&'a PlanSource),
    Model(&'a PlanModel),
}

impl<'a> Input<'a> {
    fn find(
        name: &str,
        models: &crate::work::ModelIndex<'a>,
        sources: &std::collections::HashMap<&str, &'a PlanSource>,
    ) -> Option<Self> {
        match sources.get(name) {
            Some(source) => Some(Self::Source(source)),
            None => models.get(name).map(Self::Model),
        }
    }

    /// The text a reference to it becomes in compiled SQL.
    fn reference(&self) -> Option<&'a str> {
        match self {
            Self::Source(source) => source.reference.as_deref(),
            Self::Model(model) => Some(model.reference.as_str()),
        }
    }

    /// The relation it names: a landing or adopted table, or a model's table.
    fn relation(&self) -> Option<&'a str> {
        match self {
            Self::Source(source) => source.relation.as_deref(),
            Self::Model(model) => model.table(),
        }
    }
}

/// The replay of the model's previous query: the recorded compiled text cut at the driving
/// input's reference, the way the compiler cuts the current one. Only when cutting the
/// current query that way gives exactly the compiler's parts (the reference text occurs
/// nowhere else) and the previous text references the input at all.
fn previous_template(
    template: &crate::replay::ReplayTemplate,
    model: &PlanModel,
    previous: &str,
    reference: &str,
) -> Option<crate::replay::ReplayTemplate> {
    let cut = |text: &str| -> Vec<String> { text.split(reference).map(str::to_owned).collect() };
    let parts = cut(previous);
    (cut(&model.query) == model.replay_query && parts.len() > 1).then(|| {
        crate::replay::ReplayTemplate {
            query_parts: parts,
            ..template.clone()
        }
    })
}

/// The database of a qualified `database.relation` target (bare or back-quoted).
fn template_database(target: &str) -> Option<&str> {
    let database = if let Some(rest) = target.strip_prefix('`') {
        let end = rest.find("`.")?;
        &rest[..end]
    } else {
        target.split_once('.')?.0
    };
    (!database.is_empty() && !database.contains('\\')).then_some(database)
}

/// `a, b` for `(a, b)`; anything else as it is.
fn unwrap_parentheses(key: &str) -> &str {
    let key = key.trim();
    let Some(inner) = key.strip_prefix('(').and_then(|k| k.strip_suffix(')')) else {
        return key;
    };
    let mut depth = 0_i32;
    for byte in inner.bytes() {
        match byte {
            b'(' => depth += 1,
            b')' => depth -= 1,
            _ => {}
        }
        if depth < 0 {
            return key;
        }
    }
    if depth == 0 { inner.trim() } else { key }
}

/// Engines whose parts merge rows that share a sorting key, so `count()` moves with merges.
pub fn merges_rows(engine: &str) -> bool {
    let base = engine
        .strip_prefix("Replicated")
        .or_else(|| engine.strip_prefix("Shared"))
        .unwrap_or(engine);
    base.ends_with("MergeTree") && base != "MergeTree"
}

/// A table's retention, from its `CREATE TABLE` statement as ClickHouse prints it: `30d`
/// for a TTL of whole days (hours, minutes, seconds), else the TTL expression; `None`
/// without a TTL.
#[must_use]
pub fn retention(create_table_query: &str) -> Option<String> {
    ttl_clause(create_table_query).map(|ttl| retention_label(&ttl))
}

/// The `TTL` clause of a `CREATE TABLE` statement as ClickHouse prints it.
fn ttl_clause(create: &str) -> Option<String> {
    let start = create.find(" TTL ")? + " TTL ".len();
    let rest = &create[start..];
    let end = rest.find(" SETTINGS ").unwrap_or(rest.len());
    Some(rest[..end].trim().to_owned())
}

/// `30d` for a TTL that ends in a whole number of days (hours, minutes, seconds), else the
/// expression itself.
fn retention_label(ttl: &str) -> String {
    let units = [
        ("toIntervalDay(", "d"),
        ("toIntervalHour(", "h"),
        ("toIntervalMinute(", "m"),
        ("toIntervalSecond(", "s"),
    ];
    for (function, unit) in units {
        if let Some(at) = ttl.rfind(function) {
            let number = ttl[at + function.len()..].trim_end_matches(')');
            if !number.is_empty() && number.bytes().all(|b| b.is_ascii_digit()) {
                return format!("{number}{unit}");
            }
        }
    }
    ttl.to_owned()
}

/// Roots per measuring query, and its SQL size: a query stays well inside ClickHouse's
/// default `max_query_size` (256 KiB) and `max_ast_elements` (50,000).
const BATCH_ROOTS: usize = 100;
const BATCH_BYTES: usize = 192 * 1024;

/// The measured roots cut into batches, one query each per phase: a plan sends two
/// queries for every project whose roots fit one batch, and one more per batch beyond.
#[must_use]
pub fn batches(probes: &[Probe]) -> Vec<Vec<usize>> {
    let mut batches: Vec<Vec<usize>> = Vec::new();
    let mut bytes = 0;
    for (index, probe) in probes.iter().enumerate() {
        if probe.live_sql.is_none() {
            continue;
        }
        let size = probe.window.as_ref().map_or(0, |w| {
            w.input_rows.len()
                + w.history.len()
                + w.retained.len()
                + w.bounded.as_ref().map_or(0, String::len)
        });
        match batches.last_mut() {
            Some(batch) if batch.len() < BATCH_ROOTS && bytes + size <= BATCH_BYTES => {
                batch.push(index);
                bytes += size;
            }
            _ => {
                batches.push(vec![index]);
                bytes = size;
            }
        }
    }
    batches
}

/// The query that reads the live counts of the roots `indices`: `root`, `live_rows`.
#[must_use]
pub fn live_query(probes: &[Probe], indices: &[usize]) -> Option<String> {
    union(indices.iter().filter_map(|&index| {
        probes
            .get(index)?
            .live_sql
            .as_ref()
            .map(|sql| format!("SELECT {index} AS root, ({sql}) AS live_rows"))
    }))
}

/// Which columns a window query reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WindowColumns {
    /// `input_rows`, `history_rows`, `retained_rows`, `replayable_rows`.
    All,
    /// `input_rows`, `history_rows`: what the loss needs, without the new query (which can
    /// fail to run, and then fails the build itself, not the guard).
    History,
}

/// The query that reads the windows of the roots `indices` (`root` and the columns).
#[must_use]
pub fn window_query(probes: &[Probe], indices: &[usize], columns: WindowColumns) -> Option<String> {
    union(
        indices
            .iter()
            .filter_map(|&index| probes.get(index).map(|probe| (index, probe)))
            .filter(|(_, probe)| probe.needs_window())
            .filter_map(|(index, probe)| {
                let window = probe.window.as_ref()?;
                let mut select = format!(
                    "SELECT {index} AS root, ({}) AS input_rows",
                    window.input_rows
                );
                if columns == WindowColumns::History {
                    select.push_str(&format!(", ({}) AS history_rows", window.history));
                    return Some(select);
                }
                // Each distinct count runs once: an unchanged query's history is the
                // retained count, and without a start time so is the replayable one.
                select.push_str(&format!(", ({}) AS retained_rows", window.retained));
                if window.history == window.retained {
                    select.push_str(", retained_rows AS history_rows");
                } else {
                    select.push_str(&format!(", ({}) AS history_rows", window.history));
                }
                match &window.bounded {
                    Some(bounded) => {
                        select.push_str(&format!(", ({bounded}) AS replayable_rows"));
                    }
                    None => select.push_str(", retained_rows AS replayable_rows"),
                }
                Some(select)
            }),
    )
}

impl Probe {
    /// Only a root whose table exists has anything to lose.
    #[must_use]
    pub fn needs_window(&self) -> bool {
        self.live_sql.is_some() && self.window.is_some()
    }
}

fn union(parts: impl Iterator<Item = String>) -> Option<String> {
    let parts: Vec<String> = parts.collect();
    (!parts.is_empty()).then(|| parts.join(" UNION ALL "))
}

/// The window numbers read for one root.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WindowCounts {
    pub input_rows: u64,
    pub history_rows: u64,
    pub retained_rows: u64,
    pub replayable_rows: u64,
}

/// Why a root's retained history holds less than its table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShrinkReason {
    /// The driving input has a TTL.
    Retention,
    /// The driving input holds no rows and has no TTL.
    EmptySource,
    /// The driving input does not exist.
    MissingSource,
    /// Rows were removed from the driving input some other way.
    HistoryRemoved,
}

impl ShrinkReason {
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Retention => "retention",
            Self::EmptySource => "empty_source",
            Self::MissingSource => "missing_source",
            Self::HistoryRemoved => "history_removed",
        }
    }
}

/// One root's measurement and what the guard concludes.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ReplayWindow {
    pub model: String,
    pub driving_input: String,
    /// `rows` or `groups`.
    pub basis: &'static str,
    /// The sorting key groups are counted by.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub group_key: Option<String>,
    /// False when the root's table does not exist yet (nothing to lose).
    pub live_table_exists: bool,
    pub live_rows: u64,
    /// Rows the driving input holds.
    pub input_rows: u64,
    /// What the whole retained history gives back through the query that filled the
    /// table: the part of `live_rows` history still holds.
    pub history_rows: u64,
    /// What the whole retained history gives through the new query.
    pub retained_rows: u64,
    /// What the replay restores (from `--start-time` on, when given).
    pub replayable_rows: u64,
    /// `live_rows - history_rows` when positive: history that no longer exists.
    pub lost_rows: u64,
    /// The model's query changed since the table was built: `history_rows` counts the
    /// previous query over the window, so a new filter is not mistaken for lost history.
    pub query_changed: bool,
    /// What `--start-time` leaves out of the retained history, on purpose.
    pub discarded_by_start_time: u64,
    /// Why `lost_rows` is not zero.
    pub reason: Option<&'static str>,
    /// The driving input's TTL (`30d` or the expression).
    pub retention: Option<String>,
    /// Why the window could not be measured (the guard then treats the root as a loss).
    pub error: Option<String>,
    /// Why the new query's counts (`retained_rows`, `replayable_rows`) could not be read;
    /// the loss is still measured. The build will meet the same error.
    pub new_query_error: Option<String>,
    /// A fan-in replayed from an input this build rebuilds: not measured itself (its
    /// input's root is).
    pub replays_rebuilt_input: bool,
}

impl ReplayWindow {
    /// The build must not drop this root's table without the user's consent.
    #[must_use]
    pub fn needs_consent(&self) -> bool {
        self.live_table_exists && self.live_rows > 0 && (self.lost_rows > 0 || self.error.is_some())
    }

    /// `order_events: 450 rows now, 0 replayable (history expired by retention 30d)`.
    #[must_use]
    pub fn describe(&self) -> String {
        // `450 rows`, `1 group`: the basis names the plural.
        let unit = |n: u64| {
            let word = self.basis.strip_suffix('s').filter(|_| n == 1);
            format!("{n} {}", word.unwrap_or(self.basis))
        };
        if self.replays_rebuilt_input {
            return format!(
                "{}: replays from {}, rebuilt first by this build (measured at its root)",
                self.model, self.driving_input
            );
        }
        if !self.live_table_exists {
            return format!("{}: new table, nothing to lose", self.model);
        }
        let mut text = format!(
            "{}: {} now, {} replayable",
            self.model,
            unit(self.live_rows),
            self.replayable_rows
        );
        if let Some(error) = &self.error {
            text.push_str(&format!(" (could not be measured: {error})"));
            return text;
        }
        if let Some(error) = &self.new_query_error {
            text = format!(
                "{}: {} now, history keeps {} (the new query could not be counted: {error})",
                self.model,
                unit(self.live_rows),
                self.history_rows
            );
        }
        let mut notes = Vec::new();
        if self.lost_rows > 0 {
            notes.push(format!("{} lost: {}", self.lost_rows, self.cause()));
        }
        if self.query_changed && self.retained_rows != self.history_rows {
            notes.push(format!(
                "the changed query gives {} where the current one gives {}",
                self.retained_rows, self.history_rows
            ));
        }
        if self.discarded_by_start_time > 0 {
            notes.push(format!(
                "{} before --start-time discarded",
                self.discarded_by_start_time
            ));
        }
        if let Some(key) = &self.group_key {
            notes.push(format!(
                "counted as groups of ({}): an aggregate's or a merging table's row count moves with merges",
                if key.is_empty() {
                    "the whole table"
                } else {
                    key
                }
            ));
        }
        if !notes.is_empty() {
            text.push_str(&format!(" ({})", notes.join("; ")));
        }
        text
    }

    fn cause(&self) -> String {
        match (self.reason, &self.retention) {
            (Some("retention"), Some(retention)) => {
                format!("history expired by retention {retention}")
            }
            (Some("missing_source"), _) => format!("{} does not exist", self.driving_input),
            (Some("empty_source"), _) => format!("{} is empty", self.driving_input),
            _ => format!("history no longer in {}", self.driving_input),
        }
    }
}

/// What was read, indexed like the probes.
pub struct Readings<'a> {
    pub live: &'a dyn Fn(usize) -> Option<u64>,
    pub windows: &'a dyn Fn(usize) -> Option<WindowCounts>,
    /// Roots whose history could not be measured.
    pub errors: &'a dyn Fn(usize) -> Option<String>,
    /// Roots whose new query could not be counted (their history was).
    pub new_query_errors: &'a dyn Fn(usize) -> Option<String>,
}

/// Combines what was read into each root's window and the guard's conclusion.
#[must_use]
pub fn assess(probes: &[Probe], readings: &Readings<'_>) -> Vec<ReplayWindow> {
    let Readings {
        live,
        windows,
        errors,
        new_query_errors,
    } = *readings;
    probes
        .iter()
        .enumerate()
        .map(|(index, probe)| {
            let live_rows = live(index).unwrap_or(0);
            let counts = windows(index).unwrap_or_default();
            let lost_rows = live_rows.saturating_sub(counts.history_rows);
            let reason = (lost_rows > 0).then(|| {
                if probe.window.is_none() {
                    ShrinkReason::MissingSource
                } else if probe.retention.is_some() {
                    ShrinkReason::Retention
                } else if counts.input_rows == 0 {
                    ShrinkReason::EmptySource
                } else {
                    ShrinkReason::HistoryRemoved
                }
                .as_str()
            });
            ReplayWindow {
                model: probe.model.clone(),
                driving_input: probe.driving_input.clone(),
                basis: probe.basis.as_str(),
                group_key: match &probe.basis {
                    Basis::Groups { key } => Some(key.clone()),
                    Basis::Rows => None,
                },
                live_table_exists: probe.live_sql.is_some(),
                live_rows,
                input_rows: counts.input_rows,
                history_rows: counts.history_rows,
                retained_rows: counts.retained_rows,
                replayable_rows: counts.replayable_rows,
                lost_rows,
                query_changed: probe.query_changed,
                discarded_by_start_time: counts
                    .retained_rows
                    .saturating_sub(counts.replayable_rows),
                reason,
                retention: probe.retention.clone(),
                error: errors(index),
                new_query_error: new_query_errors(index),
                replays_rebuilt_input: probe.replays_rebuilt_input,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests;
