//! What a plan checks against the warehouse before a build may change anything: every
//! table the build creates (its columns, types, engine, keys, TTL and settings) and every
//! query its views run, each resolved to what the build will create.
//!
//! The checks run in one warehouse session. Each relation the build (re)creates becomes a
//! session-scoped temporary table under a name of its own, created from the same typed
//! definition the build renders, so the warehouse judges the DDL exactly as it will at
//! build time, while nobody else sees it; each query is `EXPLAIN`ed with its references to
//! rebuilt models (and to landings not created yet) pointing at those temporary tables.
//! `EXPLAIN` analyses the query (identifiers, functions, types) without reading any row.
//! Nothing here touches a relation the target holds.
//!
//! A session with thousands of temporary tables makes each of its requests slower (the
//! engine's cost per statement grows with the tables the session holds), so a large
//! validation is split into sessions of a bounded size ([`sessions`]); a stand-in made in
//! one session and read in a later one is made again there.

use std::collections::{HashMap, HashSet};

use stb_ddl::Table;
use stb_model::planning::{PlanModel, PlanSource, QueryPart};

/// What a check is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Subject {
    /// A model's table (or, for a view model, the shape readers downstream see).
    Storage,
    /// A model's query, as its materialized view or view runs it.
    Query,
    /// A managed source's landing table, created by this build.
    Landing,
}

impl Subject {
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Storage => "storage",
            Self::Query => "query",
            Self::Landing => "landing",
        }
    }
}

/// One statement of the validation, in the order it must run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Check {
    /// The model (or, for [`Subject::Landing`], the source) it checks.
    pub name: String,
    pub subject: Subject,
    pub sql: String,
    /// True when its failure is the author's to fix in this object (false: a stand-in
    /// the validation made up, whose failure is only reported as "not checked").
    pub authored: bool,
    /// The temporary table this check creates (storage and landing checks).
    pub creates: Option<String>,
    /// The temporary tables this check reads (a query's references to stand-ins).
    pub reads: Vec<String>,
}

impl Check {
    /// The query a [`Subject::Query`] check explains.
    #[must_use]
    pub fn query(&self) -> Option<&str> {
        if self.subject == Subject::Query {
            self.sql.strip_prefix("EXPLAIN ")
        } else {
            None
        }
    }
}

/// A model the validation cannot check, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unchecked {
    pub name: String,
    pub reason: String,
}

/// The whole validation of a plan.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Validation {
    pub checks: Vec<Check>,
    pub unchecked: Vec<Unchecked>,
}

/// Engines a session's temporary table cannot have: they need coordination or other
/// servers. Their tables are checked for columns and types only.
fn engine_needs_cluster(engine: &str) -> bool {
    let name = engine.trim_start();
    ["Replicated", "Shared", "Distributed"]
        .iter()
        .any(|prefix| name.starts_with(prefix))
}

/// A stand-in with `columns` only: for view models (a temporary table cannot be a view)
/// and engines a temporary table cannot have.
fn plain_table(columns: &[(String, String)]) -> Table {
    Table {
        name: stb_ddl::QualifiedName::new("", ""),
        columns: columns
            .iter()
            .map(|(name, data_type)| stb_ddl::Column::new(name, data_type))
            .collect(),
        engine: "MergeTree".to_owned(),
        order_by: Vec::new(),
        partition_by: None,
        ttl: None,
        settings: Vec::new(),
    }
}

/// The validation of a build that (re)creates `scope` (model names, in plan order, each a
/// compiled model of `models`). `present` says whether a relation exists in the target now:
/// a landing the build creates is checked, and models read it through its stand-in.
#[must_use]
pub fn validation(
    scope: &[&str],
    models: &[PlanModel],
    sources: &[PlanSource],
    present: &dyn Fn(&str) -> bool,
) -> Validation {
    let by_name = crate::work::ModelIndex::new(models);
    let sources_by_name: HashMap<&str, &PlanSource> =
        sources.iter().map(|s| (s.name.as_str(), s)).collect();
    // Every input the scope reads, collected once (not a scan of the scope per source).
    let read_by_scope: HashSet<&str> = scope
        .iter()
        .filter_map(|name| by_name.get(name))
        .flat_map(|m| m.reads.iter().map(String::as_str))
        .collect();
    let mut stand_ins: HashMap<String, String> = HashMap::new();
    let mut result = Validation::default();
    let mut made = 0_usize;
    let mut next_name = || {
        made += 1;
        format!("stb_check_{made}")
    };
    // Landings the build creates: read by a model in scope and absent now.
    for source in sources {
        let Some(landing) = &source.landing else {
            continue;
        };
        if !read_by_scope.contains(source.name.as_str()) || present(&landing.raw_table) {
            continue;
        }
        let Some(definition) = &landing.raw_definition else {
            continue;
        };
        let temporary = next_name();
        result.checks.push(Check {
            name: source.name.clone(),
            subject: Subject::Landing,
            sql: definition.render_temporary(&temporary),
            authored: true,
            creates: Some(temporary.clone()),
            reads: Vec::new(),
        });
        stand_ins.insert(source.name.clone(), temporary);
    }
    for name in scope {
        let Some(model) = by_name.get(name) else {
            continue;
        };
        let inputs = || {
            model
                .reads
                .iter()
                .filter_map(|read| sources_by_name.get(read.as_str()).copied())
        };
        if inputs().any(|s| s.relation.is_none()) {
            result.unchecked.push(Unchecked {
                name: model.name.clone(),
                reason: "it reads a table function (a PostgreSQL pull), which a check would have to connect to".into(),
            });
        } else if let Some((source, relation)) = inputs().find_map(|source| {
            let relation = source.relation.as_deref()?;
            let unknown = !stand_ins.contains_key(&source.name) && !present(relation);
            unknown.then_some((source.name.as_str(), relation))
        }) {
            result.unchecked.push(Unchecked {
                name: model.name.clone(),
                reason: format!(
                    "it reads {relation} (source '{source}'), whose columns only the target's warehouse knows"
                ),
            });
        } else {
            let (query, reads) = resolved_query(model, &by_name, &stand_ins);
            result.checks.push(Check {
                name: model.name.clone(),
                subject: Subject::Query,
                sql: format!("EXPLAIN {query}"),
                authored: true,
                creates: None,
                reads,
            });
        }
        let temporary = next_name();
        let (definition, authored) = match &model.deployable.table {
            Some(table) if model.is_table && !engine_needs_cluster(&table.engine) => {
                (table.clone(), true)
            }
            Some(table) if model.is_table => {
                result.unchecked.push(Unchecked {
                    name: model.name.clone(),
                    reason: format!(
                        "engine {} is checked at build time only (a session's temporary table cannot have it); its columns and types are checked",
                        table.engine
                    ),
                });
                (plain_table(&model.output_columns), true)
            }
            _ => (plain_table(&model.output_columns), false),
        };
        result.checks.push(Check {
            name: model.name.clone(),
            subject: Subject::Storage,
            sql: definition.render_temporary(&temporary),
            authored,
            creates: Some(temporary.clone()),
            reads: Vec::new(),
        });
        stand_ins.insert(model.name.clone(), temporary);
    }
    result
}

/// One warehouse session's share of a validation, as indices into
/// [`Validation::checks`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SessionPlan {
    /// Checks of earlier sessions whose stand-ins this session's checks read: their
    /// statements run again here first, to make the stand-in, and are not counted again.
    pub setup: Vec<usize>,
    /// This session's own checks, in plan order.
    pub checks: Vec<usize>,
}

/// Splits `checks` (a [`Validation`]'s) into sessions that each hold at most about `stand_ins_per_session`
/// temporary tables: the checks in plan order, a new session whenever the current one has
/// made that many, each session making again the stand-ins of earlier sessions it reads.
/// One pass over the checks and their reads.
#[must_use]
pub fn sessions(checks: &[Check], stand_ins_per_session: usize) -> Vec<SessionPlan> {
    let limit = stand_ins_per_session.max(1);
    let made_by: HashMap<&str, usize> = checks
        .iter()
        .enumerate()
        .filter_map(|(index, check)| check.creates.as_deref().map(|name| (name, index)))
        .collect();
    let mut sessions: Vec<SessionPlan> = Vec::new();
    let mut current = SessionPlan::default();
    let mut held: HashSet<&str> = HashSet::new();
    for (index, check) in checks.iter().enumerate() {
        if held.len() >= limit && check.creates.is_some() {
            sessions.push(std::mem::take(&mut current));
            held.clear();
        }
        for read in &check.reads {
            if held.insert(read.as_str())
                && let Some(&maker) = made_by.get(read.as_str())
            {
                current.setup.push(maker);
            }
        }
        if let Some(name) = &check.creates {
            held.insert(name.as_str());
        }
        current.checks.push(index);
    }
    if !current.checks.is_empty() {
        sessions.push(current);
    }
    sessions
}

/// The model's query, spliced: references to what the build creates point at their
/// stand-ins, every other reference at the relation it names now. The author's text
/// between references is kept byte for byte; a trailing `;` is left out (EXPLAIN wraps it).
fn resolved_query(
    model: &PlanModel,
    by_name: &crate::work::ModelIndex<'_>,
    stand_ins: &HashMap<String, String>,
) -> (String, Vec<String>) {
    let mut text = String::new();
    let mut reads: Vec<String> = Vec::new();
    for part in &model.deployable.query_parts {
        match part {
            QueryPart::Text(piece) => text.push_str(piece),
            QueryPart::Model(name) | QueryPart::Source { name, .. }
                if stand_ins.contains_key(name) =>
            {
                let stand_in = &stand_ins[name];
                text.push_str(stand_in);
                if !reads.contains(stand_in) {
                    reads.push(stand_in.clone());
                }
            }
            QueryPart::Model(name) => match by_name.get(name.as_str()) {
                Some(upstream) => text.push_str(&upstream.reference),
                None => text.push_str(name),
            },
            QueryPart::Source { relation, .. } => text.push_str(relation),
        }
    }
    let trimmed = text.trim_end();
    (
        trimmed.strip_suffix(';').unwrap_or(trimmed).to_owned(),
        reads,
    )
}

#[cfg(test)]
mod tests;
