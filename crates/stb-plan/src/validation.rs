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

use std::collections::BTreeMap;

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
    let by_name: BTreeMap<&str, &PlanModel> = models.iter().map(|m| (m.name.as_str(), m)).collect();
    let mut stand_ins: BTreeMap<String, String> = BTreeMap::new();
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
        let read = scope.iter().any(|name| {
            by_name
                .get(name)
                .is_some_and(|m| m.reads.contains(&source.name))
        });
        if !read || present(&landing.raw_table) {
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
        });
        stand_ins.insert(source.name.clone(), temporary);
    }
    for name in scope {
        let Some(model) = by_name.get(name) else {
            continue;
        };
        if reads_table_function(model, sources) {
            result.unchecked.push(Unchecked {
                name: model.name.clone(),
                reason: "it reads a table function (a PostgreSQL pull), which a check would have to connect to".into(),
            });
        } else if let Some((source, relation)) = unknown_input(model, sources, &stand_ins, present)
        {
            result.unchecked.push(Unchecked {
                name: model.name.clone(),
                reason: format!(
                    "it reads {relation} (source '{source}'), whose columns only the target's warehouse knows"
                ),
            });
        } else {
            let query = resolved_query(model, &by_name, &stand_ins);
            result.checks.push(Check {
                name: model.name.clone(),
                subject: Subject::Query,
                sql: format!("EXPLAIN {query}"),
                authored: true,
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
        });
        stand_ins.insert(model.name.clone(), temporary);
    }
    result
}

/// A source `model` reads that is neither made for the check nor there to read (an
/// adopted table, offline): its name and relation.
fn unknown_input<'s>(
    model: &PlanModel,
    sources: &'s [PlanSource],
    stand_ins: &BTreeMap<String, String>,
    present: &dyn Fn(&str) -> bool,
) -> Option<(&'s str, &'s str)> {
    sources.iter().find_map(|source| {
        let relation = source.relation.as_deref()?;
        let unknown = model.reads.contains(&source.name)
            && !stand_ins.contains_key(&source.name)
            && !present(relation);
        unknown.then_some((source.name.as_str(), relation))
    })
}

fn reads_table_function(model: &PlanModel, sources: &[PlanSource]) -> bool {
    sources
        .iter()
        .any(|s| s.relation.is_none() && model.reads.contains(&s.name))
}

/// The model's query, spliced: references to what the build creates point at their
/// stand-ins, every other reference at the relation it names now. The author's text
/// between references is kept byte for byte; a trailing `;` is left out (EXPLAIN wraps it).
fn resolved_query(
    model: &PlanModel,
    by_name: &BTreeMap<&str, &PlanModel>,
    stand_ins: &BTreeMap<String, String>,
) -> String {
    let mut text = String::new();
    for part in &model.deployable.query_parts {
        match part {
            QueryPart::Text(piece) => text.push_str(piece),
            QueryPart::Model(name) | QueryPart::Source { name, .. }
                if stand_ins.contains_key(name) =>
            {
                text.push_str(&stand_ins[name]);
            }
            QueryPart::Model(name) => match by_name.get(name.as_str()) {
                Some(upstream) => text.push_str(&upstream.reference),
                None => text.push_str(name),
            },
            QueryPart::Source { relation, .. } => text.push_str(relation),
        }
    }
    let trimmed = text.trim_end();
    trimmed.strip_suffix(';').unwrap_or(trimmed).to_owned()
}

#[cfg(test)]
mod tests;
