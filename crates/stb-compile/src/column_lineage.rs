//! Column-level lineage across the project: each output column of a model traced through
//! the models it reads down to its sources, a Kafka landing's `kafka_value` with the JSON
//! path each field is read at (`stb lineage <model>.<column>`, `target/manifest.json`).
//!
//! One query's lineage is `stb_sql::lineage`; this names its relations as the project
//! does (a model, a source) and follows them.

use std::collections::{BTreeMap, HashMap};

use serde::Serialize;
use stb_project::Project;
use stb_project::sources::SourceKind;
use stb_sql::lineage::{ColumnLineage, query_lineage};

use crate::Compiled;

/// What a relation a query reads is, in the project's words.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum InputKind {
    Model,
    Source,
    /// A relation the project does not define (a table function, a table read by name).
    Relation,
}

/// One column an output column is computed from, named as the project names it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NamedInput {
    pub kind: InputKind,
    pub name: String,
    pub column: String,
    /// The JSON keys the column is read at; empty when its value is used itself.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub json_path: Vec<String>,
}

/// One output column's lineage, one step up.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Step {
    pub derivation: &'static str,
    pub inputs: Vec<NamedInput>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub opaque: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub unresolved: Vec<String>,
}

/// A column traced down to where its values come from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Trace {
    pub kind: InputKind,
    pub name: String,
    pub column: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub json_path: Vec<String>,
    /// How the column is made from `inputs` (absent for a source's or an unknown
    /// relation's column: nothing in the project computes it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub derivation: Option<&'static str>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub opaque: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub unresolved: Vec<String>,
    /// The tree stopped here ([`MAX_NODES`] shown): the column's inputs are not listed.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub truncated: bool,
    pub inputs: Vec<Trace>,
}

/// Why a column cannot be traced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceError {
    pub code: &'static str,
    pub message: String,
    pub hint: String,
}

/// A column that is not there, or a query that cannot be read for lineage.
pub const TRACE_CODE: &str = "STB-LINEAGE-001";

/// The project's relations by the text a reference to them becomes.
pub struct Names {
    by_reference: HashMap<String, (InputKind, String)>,
    /// Columns of the relations whose columns are known (models; Kafka landings).
    columns: HashMap<String, Vec<String>>,
}

/// Adopted tables by their qualified name: a source whose reference renames its lineage
/// columns is read through a subquery over the table, which lineage then names.
fn adopted_tables(project: &Project) -> impl Iterator<Item = (String, (InputKind, String))> {
    let database = crate::database(project);
    project
        .sources
        .iter()
        .filter(|s| s.kind == SourceKind::StreamTable)
        .filter_map(move |s| {
            let table = stb_ddl::QualifiedName::new(database, s.table_name.as_deref()?);
            Some((table.to_string(), (InputKind::Source, s.name.clone())))
        })
}

impl Names {
    #[must_use]
    pub fn of(project: &Project, compiled: &Compiled) -> Self {
        let mut by_reference: HashMap<String, (InputKind, String)> =
            adopted_tables(project).collect();
        let mut columns = HashMap::new();
        for model in compiled.plan_models.iter() {
            by_reference.insert(
                model.reference.clone(),
                (InputKind::Model, model.name.clone()),
            );
            columns.insert(
                model.reference.clone(),
                model
                    .output_columns
                    .iter()
                    .map(|(c, _)| c.clone())
                    .collect(),
            );
        }
        for source in &compiled.plan_sources {
            if let Some(reference) = &source.reference {
                by_reference.insert(reference.clone(), (InputKind::Source, source.name.clone()));
                if source.landing.is_some() {
                    columns.insert(
                        reference.clone(),
                        stb_ddl::RAW_COLUMNS
                            .iter()
                            .map(|(c, _)| (*c).to_owned())
                            .collect(),
                    );
                }
            }
        }
        Self {
            by_reference,
            columns,
        }
    }

    /// Names from logical name to reference text alone (what a compile has before its
    /// plan models): no column is known, so only what a query itself says is traced. Each
    /// model's steps then depend on its own text and the names it reads only, as an
    /// incremental compile needs.
    #[must_use]
    pub fn of_references(project: &Project, relations: &BTreeMap<String, String>) -> Self {
        let mut by_reference: HashMap<String, (InputKind, String)> =
            adopted_tables(project).collect();
        let sources: std::collections::HashSet<&str> =
            project.sources.iter().map(|s| s.name.as_str()).collect();
        for (name, reference) in relations {
            let kind = if sources.contains(name.as_str()) {
                InputKind::Source
            } else {
                InputKind::Model
            };
            by_reference.insert(reference.clone(), (kind, name.clone()));
        }
        Self {
            by_reference,
            columns: HashMap::new(),
        }
    }

    fn named(&self, relation: &str) -> (InputKind, String) {
        self.by_reference
            .get(relation)
            .cloned()
            .unwrap_or_else(|| (InputKind::Relation, relation.to_owned()))
    }

    fn step(&self, lineage: &ColumnLineage) -> Step {
        Step {
            derivation: lineage.derivation.as_str(),
            inputs: lineage
                .inputs
                .iter()
                .map(|input| {
                    let (kind, name) = self.named(&input.relation);
                    NamedInput {
                        kind,
                        name,
                        column: input.column.clone(),
                        json_path: input.json_path.clone(),
                    }
                })
                .collect(),
            opaque: lineage.opaque.clone(),
            unresolved: lineage.unresolved.clone(),
        }
    }

    /// Every output column of `query`, one step up.
    ///
    /// # Errors
    /// The query cannot be read for lineage.
    pub fn query(&self, query: &str) -> Result<Vec<(String, Step)>, TraceError> {
        let columns_of = |relation: &str| self.columns.get(relation).cloned();
        let lineage = query_lineage(query, &columns_of).map_err(|e| TraceError {
            code: TRACE_CODE,
            message: format!("the query cannot be read for lineage: {}", e.message),
            hint: "run `stb compile` to see whether the model itself is valid".to_owned(),
        })?;
        Ok(lineage
            .iter()
            .map(|l| (l.column.clone(), self.step(l)))
            .collect())
    }
}

/// `model.column` traced through the project's models down to its sources.
///
/// # Errors
/// [`TRACE_CODE`]: no such model or column, or a query on the way that cannot be read.
pub fn trace(
    project: &Project,
    compiled: &Compiled,
    model: &str,
    column: &str,
) -> Result<Trace, TraceError> {
    let names = Names::of(project, compiled);
    let models: HashMap<&str, &stb_model::planning::PlanModel> = compiled
        .plan_models
        .iter()
        .map(|m| (m.name.as_str(), m))
        .collect();
    let Some(start) = models.get(model) else {
        return Err(TraceError {
            code: TRACE_CODE,
            message: format!("no model '{model}' in the project"),
            hint: format!(
                "{}name a model as <model>.<column>",
                stb_diagnostics::suggest::did_you_mean(model, models.keys().copied())
            ),
        });
    };
    if !start.output_columns.iter().any(|(c, _)| c == column) {
        return Err(TraceError {
            code: TRACE_CODE,
            message: format!("model '{model}' has no column '{column}'"),
            hint: format!(
                "{}its columns: {}",
                stb_diagnostics::suggest::did_you_mean(
                    column,
                    start.output_columns.iter().map(|(c, _)| c.as_str())
                ),
                start
                    .output_columns
                    .iter()
                    .map(|(c, _)| c.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        });
    }
    let mut steps: HashMap<String, HashMap<String, Step>> = HashMap::new();
    let mut walker = Walker {
        names: &names,
        models: &models,
        steps: &mut steps,
        shown: 0,
    };
    walker.walk(InputKind::Model, model, column, &[], 0)
}

/// The deepest chain of models followed (a project's graph has no cycles; this bounds a
/// broken one).
const MAX_DEPTH: usize = 256;
/// The most columns one trace shows: a column that meets the same upstream column along
/// many paths (diamonds in the graph) lists it once per path, which grows fast.
pub const MAX_NODES: usize = 2_000;

struct Walker<'w> {
    names: &'w Names,
    models: &'w HashMap<&'w str, &'w stb_model::planning::PlanModel>,
    /// Each model's steps, read once.
    steps: &'w mut HashMap<String, HashMap<String, Step>>,
    /// Columns in the tree so far.
    shown: usize,
}

impl Walker<'_> {
    fn walk(
        &mut self,
        kind: InputKind,
        name: &str,
        column: &str,
        json_path: &[String],
        depth: usize,
    ) -> Result<Trace, TraceError> {
        let leaf = || Trace {
            kind,
            name: name.to_owned(),
            column: column.to_owned(),
            json_path: json_path.to_vec(),
            derivation: None,
            opaque: Vec::new(),
            unresolved: Vec::new(),
            truncated: false,
            inputs: Vec::new(),
        };
        self.shown += 1;
        if self.shown > MAX_NODES {
            return Ok(Trace {
                truncated: true,
                ..leaf()
            });
        }
        let model = match (kind, self.models.get(name)) {
            (InputKind::Model, Some(model)) if depth < MAX_DEPTH => *model,
            _ => return Ok(leaf()),
        };
        if !self.steps.contains_key(name) {
            let read = self.names.query(&model.query).map_err(|e| TraceError {
                message: format!("model '{name}': {}", e.message),
                ..e
            })?;
            self.steps
                .insert(name.to_owned(), read.into_iter().collect());
        }
        let Some(step) = self.steps.get(name).and_then(|s| s.get(column)).cloned() else {
            return Ok(leaf());
        };
        let mut inputs = Vec::new();
        for input in &step.inputs {
            // Read at this column's path: what the input holds there, further down.
            let mut path = input.json_path.clone();
            path.extend(json_path.iter().cloned());
            inputs.push(self.walk(input.kind, &input.name, &input.column, &path, depth + 1)?);
        }
        Ok(Trace {
            derivation: Some(step.derivation),
            opaque: step.opaque,
            unresolved: step.unresolved,
            inputs,
            ..leaf()
        })
    }
}

#[cfg(test)]
mod tests;
