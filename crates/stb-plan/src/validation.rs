//! What a plan checks against the warehouse before a build may change anything: every
//! table the build creates (its columns, types, engine, keys, TTL and settings) and every
//! query its views run, each resolved to what the build will create.
//!
//! Each relation the build (re)creates becomes a session-scoped temporary table under a
//! name of its own, created from the same typed
//! definition the build renders, so the warehouse judges the DDL exactly as it will at
//! build time, while nobody else sees it; each query is `EXPLAIN`ed with its references to
//! rebuilt models (and to landings not created yet) pointing at those temporary tables.
//! `EXPLAIN` analyses the query (identifiers, functions, types) without reading any row.
//! Nothing here touches a relation the target holds.
//!
//! Checked one statement at a time, a large project would cost a request per model and
//! per table, so each query is also rendered with its stand-ins inline, as `null(...)`
//! table functions of the same columns and types ([`Check::inline`]): those need no table
//! and go many to a request, and only a query they refuse is checked again against real
//! stand-ins (a `FINAL` needs an engine that has it, say). Tables of the same definition
//! get the same verdict, so each definition is created once ([`shapes`]).

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
    /// A query check's statement with every stand-in inline, as a `null(...)` table
    /// function of its columns: checked without any table.
    pub inline: Option<String>,
}

impl Check {
    /// The query a [`Subject::Query`] check explains, its stand-ins inline.
    #[must_use]
    pub fn inline_query(&self) -> Option<&str> {
        self.inline.as_deref()?.strip_prefix("EXPLAIN ")
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
    let mut stand_ins: HashMap<String, StandIn> = HashMap::new();
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
            inline: None,
        });
        stand_ins.insert(source.name.clone(), StandIn::of(temporary, definition));
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
            let resolved = resolved_query(model, &by_name, &stand_ins);
            result.checks.push(Check {
                name: model.name.clone(),
                subject: Subject::Query,
                sql: format!("EXPLAIN {}", resolved.query),
                authored: true,
                creates: None,
                reads: resolved.reads,
                inline: Some(format!("EXPLAIN {}", resolved.inline)),
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
            inline: None,
        });
        stand_ins.insert(model.name.clone(), StandIn::of(temporary, &definition));
    }
    result
}

/// The storage and landing checks that create the same table under different names: one
/// statement judges them all. Each shape is listed with the checks it stands for (plan
/// order), the shapes in the order of their first check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shape {
    /// The statement of the shape's first check.
    pub check: usize,
    pub checks: Vec<usize>,
}

/// Groups the storage and landing checks of `checks` by the statement they run, the name
/// they create left out. One pass over the checks.
#[must_use]
pub fn shapes(checks: &[Check]) -> Vec<Shape> {
    let mut at: HashMap<String, usize> = HashMap::new();
    let mut shapes: Vec<Shape> = Vec::new();
    for (index, check) in checks.iter().enumerate() {
        let Some(name) = &check.creates else {
            continue;
        };
        let key = check.sql.replacen(name.as_str(), "", 1);
        match at.get(&key) {
            Some(&shape) => shapes[shape].checks.push(index),
            None => {
                at.insert(key, shapes.len());
                shapes.push(Shape {
                    check: index,
                    checks: vec![index],
                });
            }
        }
    }
    shapes
}

/// What stands in for a relation the build creates: a temporary table of that name, or
/// inline, the same columns as a `null(...)` table function.
struct StandIn {
    temporary: String,
    inline: String,
}

impl StandIn {
    fn of(temporary: String, definition: &Table) -> Self {
        let structure = definition
            .columns
            .iter()
            .map(|c| format!("{} {}", stb_ddl::identifier(&c.name), c.data_type))
            .collect::<Vec<_>>()
            .join(", ");
        Self {
            temporary,
            inline: format!("null({})", stb_ddl::string_literal(&structure)),
        }
    }
}

/// A model's query resolved for its check, both ways.
struct Resolved {
    /// Stand-ins as temporary tables.
    query: String,
    /// Stand-ins inline.
    inline: String,
    /// The temporary tables `query` reads.
    reads: Vec<String>,
}

/// The model's query, spliced: references to what the build creates point at their
/// stand-ins, every other reference at the relation it names now. The author's text
/// between references is kept byte for byte; a trailing `;` is left out (EXPLAIN wraps it).
fn resolved_query(
    model: &PlanModel,
    by_name: &crate::work::ModelIndex<'_>,
    stand_ins: &HashMap<String, StandIn>,
) -> Resolved {
    let mut query = String::new();
    let mut inline = String::new();
    let mut reads: Vec<String> = Vec::new();
    for part in &model.deployable.query_parts {
        let (stand_in, text) = match part {
            QueryPart::Text(piece) => (None, piece.as_str()),
            QueryPart::Model(name) | QueryPart::Source { name, .. }
                if stand_ins.contains_key(name) =>
            {
                (Some(&stand_ins[name]), "")
            }
            QueryPart::Model(name) => (
                None,
                by_name
                    .get(name.as_str())
                    .map_or(name.as_str(), |upstream| upstream.reference.as_str()),
            ),
            QueryPart::Source { relation, .. } => (None, relation.as_str()),
        };
        match stand_in {
            Some(stand_in) => {
                query.push_str(&stand_in.temporary);
                inline.push_str(&stand_in.inline);
                if !reads.contains(&stand_in.temporary) {
                    reads.push(stand_in.temporary.clone());
                }
            }
            None => {
                query.push_str(text);
                inline.push_str(text);
            }
        }
    }
    let without_semicolon = |text: &str| {
        let trimmed = text.trim_end();
        trimmed.strip_suffix(';').unwrap_or(trimmed).to_owned()
    };
    Resolved {
        query: without_semicolon(&query),
        inline: without_semicolon(&inline),
        reads,
    }
}

#[cfg(test)]
mod tests;
