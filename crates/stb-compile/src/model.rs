//! One model: header, output contract, relation, and the query with references spliced in.

use std::collections::BTreeMap;

use stb_ddl::{Column, MaterializedView, QualifiedName, Table, View};
use stb_diagnostics::{Diagnostic, Location, Position};
use stb_model::keys::{Kind, ModelHeader, Retention, WhenMissing};
use stb_project::pipelines::{Model, Pipeline};
use stb_sql::{LexicalAnalyzer, OutputColumn, QueryAnalyzer};

use crate::codes;
use crate::relations::check_relation_name;

/// A model after its header and query were analysed (first pass).
#[derive(Debug, Clone)]
pub(crate) struct AnalysedModel<'p> {
    pub model: &'p Model,
    pub pipeline: &'p Pipeline,
    pub header: ModelHeader,
    pub query: &'p str,
    pub query_offset: usize,
    pub columns: Vec<OutputColumn>,
    pub relation: String,
    /// Where the header's body starts.
    pub header_offset: usize,
    /// Where the header's `engine` value starts (the header's start without one): what a
    /// cluster's check of the engine points at.
    pub engine_offset: usize,
}

pub(crate) fn at(model: &Model, offset: usize) -> Location {
    Location::at(&model.file, Position::of_offset(&model.text, offset))
}

/// Header, keys, output contract and relation name of one model.
pub(crate) fn analyse<'p>(
    model: &'p Model,
    pipeline: &'p Pipeline,
    defaults: &stb_project::ProjectDefaults,
) -> Result<AnalysedModel<'p>, Vec<Diagnostic>> {
    let file = stb_model::file::split(&model.text).map_err(|e| {
        vec![
            Diagnostic::new(
                codes::HEADER,
                format!("Model '{}' {}", model.name, e.message),
                "start the file with MODEL ( ... ); then the SELECT",
            )
            .at(at(model, e.offset)),
        ]
    })?;
    let header = stb_model::keys::validate(&file.header, &model.file).map_err(|problems| {
        problems
            .into_iter()
            .map(|p| {
                Diagnostic::new(
                    codes::HEADER,
                    p.message,
                    "see docs/models.md for the MODEL header keys",
                )
                .at(at(model, file.header_offset + p.offset))
            })
            .collect::<Vec<_>>()
    })?;
    if header.kind == Kind::View
        && let Some(typed) = model.refs.iter().find(|r| r.ref_type.is_some())
    {
        return Err(vec![
            Diagnostic::new(
                codes::HEADER,
                format!(
                    "View MODEL(...) in '{}' cannot declare ref_type annotations for: {}",
                    model.file, typed.name
                ),
                "views read every reference plainly; remove ref_type",
            )
            .at(Location::at(&model.file, typed.position)),
        ]);
    }
    let columns = LexicalAnalyzer.output_contract(file.query).map_err(|e| {
        vec![
            Diagnostic::new(
                codes::CONTRACT,
                format!("Transform '{}' {}", model.name, e.message),
                "every outermost projection is expr::Type AS name or CAST(expr AS Type) AS name",
            )
            .at(at(model, file.query_offset + e.offset)),
        ]
    })?;
    let prefix = match header.kind {
        Kind::Table => pipeline
            .table_prefix
            .as_deref()
            .unwrap_or(&defaults.table_prefix),
        Kind::View => pipeline
            .view_prefix
            .as_deref()
            .unwrap_or(&defaults.view_prefix),
    };
    let relation = header
        .relation_name
        .clone()
        .unwrap_or_else(|| format!("{prefix}{}", model.name));
    check_relation_name(&model.name, &relation).map_err(|(code, message, hint)| {
        vec![Diagnostic::new(code, message, hint).at(Location::file(&model.file))]
    })?;
    let engine_offset = file
        .header
        .value
        .get("engine")
        .map_or(file.header_offset, |v| file.header_offset + v.offset);
    Ok(AnalysedModel {
        model,
        pipeline,
        engine_offset,
        header_offset: file.header_offset,
        header,
        query: file.query,
        query_offset: file.query_offset,
        columns,
        relation,
    })
}

/// The model's query with each reference call replaced by `replace(reference)`; a call
/// for which it returns `None` is kept as written (the caller reports it).
pub(crate) fn splice(
    analysed: &AnalysedModel<'_>,
    mut replace: impl FnMut(&stb_project::refs::RelationRef) -> Option<String>,
) -> String {
    let model = analysed.model;
    let query_end = analysed.query_offset + analysed.query.len();
    let mut refs: Vec<_> = model
        .refs
        .iter()
        .filter(|r| r.span.0 >= analysed.query_offset && r.span.1 <= query_end)
        .collect();
    refs.sort_by_key(|r| r.span.0);
    let mut query = String::with_capacity(analysed.query.len() + 64);
    let mut last = analysed.query_offset;
    for reference in refs {
        if let Some(text) = replace(reference) {
            query.push_str(&model.text[last..reference.span.0]);
            query.push_str(&text);
            last = reference.span.1;
        }
    }
    query.push_str(&model.text[last..query_end]);
    query
}

/// True when a reference points at a model whose own analysis failed.
fn failed_reference(
    analysed: &AnalysedModel<'_>,
    relations: &BTreeMap<String, String>,
    failed: &std::collections::BTreeSet<String>,
) -> bool {
    analysed
        .model
        .refs
        .iter()
        .any(|r| !relations.contains_key(&r.name) && failed.contains(&r.name))
}

/// What a model compiles to.
#[derive(Debug, Clone)]
pub(crate) struct CompiledModel {
    pub query: String,
    pub table: Option<Table>,
    pub materialized_view: Option<MaterializedView>,
    pub view: Option<View>,
    pub retention: Option<AppliedRetention>,
    /// Table models: whether replay can restart this table from its lineage columns.
    pub replay: Option<ReplayFacts>,
    /// Table models: the query split at each reference to the driving input, which a
    /// replay replaces with the bounded input.
    pub replay_query: Vec<String>,
    /// The query cut at every model reference, for virtual deployments.
    pub query_parts: Vec<stb_model::planning::QueryPart>,
}

/// What decides whether a table model can anchor a replay.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ReplayFacts {
    /// The output keeps the lineage columns of the pipeline's replay mode.
    pub lineage_preserved: bool,
    /// The query groups or aggregates, or the engine merges rows.
    pub aggregate: bool,
    pub mutable_references: bool,
    pub anchor_eligible: bool,
}

/// The retention a table model ended up with, where it came from, and whether it applied
/// (false: `when_missing = skip` left the table without a TTL).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct AppliedRetention {
    pub retention: Retention,
    pub origin: &'static str,
    pub applied: bool,
}

/// What a model's references may name.
pub(crate) struct Names<'a> {
    /// Every source and model, by name: the relation text a reference becomes.
    pub(crate) relations: &'a BTreeMap<String, String>,
    /// The names that are sources (`__ref("x")` may name one, as `__source("x")` does).
    pub(crate) sources: &'a std::collections::BTreeSet<String>,
    /// Models whose own analysis failed (already reported): a reference to one is not
    /// reported again as unknown.
    pub(crate) failed: &'a std::collections::BTreeSet<String>,
}

/// Splices every reference in the query with its relation text; builds the objects.
pub(crate) fn realise(
    analysed: &AnalysedModel<'_>,
    database: &str,
    names: &Names<'_>,
    defaults: &stb_project::ProjectDefaults,
    lineage_mode: Option<&str>,
    refresh: Option<stb_ddl::Refresh>,
) -> Result<CompiledModel, Vec<Diagnostic>> {
    let Names {
        relations, failed, ..
    } = *names;
    let model = analysed.model;
    let mut problems = Vec::new();
    let query = splice(analysed, |reference| {
        if let Some(relation) = relations.get(&reference.name) {
            return Some(relation.clone());
        }
        if !failed.contains(&reference.name) {
            problems.push(
                Diagnostic::new(
                    codes::GRAPH,
                    format!(
                        "Model '{}' references unknown logical resource '{}'",
                        model.name, reference.name
                    ),
                    format!(
                        "{}reference a source from sources/*.yml or a model by its file name",
                        stb_diagnostics::suggest::did_you_mean(
                            &reference.name,
                            relations.keys().map(String::as_str)
                        )
                    ),
                )
                .at(Location::at(&model.file, reference.position)),
            );
        }
        None
    });
    if failed_reference(analysed, relations, failed) {
        return Err(Vec::new()); // an upstream model failed; it was reported
    }
    if !problems.is_empty() {
        return Err(problems);
    }
    let header = &analysed.header;
    if header.kind == Kind::View {
        return Ok(CompiledModel {
            view: Some(View {
                name: QualifiedName::new(database, &analysed.relation),
                query: query.clone(),
            }),
            query,
            table: None,
            materialized_view: None,
            retention: None,
            replay: None,
            replay_query: Vec::new(),
            query_parts: split_at_model_references(analysed, names),
        });
    }
    let column_names: Vec<&str> = analysed.columns.iter().map(|c| c.name.as_str()).collect();
    let order_by = header
        .order_by
        .clone()
        .unwrap_or_else(|| vec!["_replay_timestamp".to_owned()]);
    let (ttl, retention) = table_ttl(analysed, defaults)?;
    let mut storage = vec![("ORDER BY", order_by.join(", "))];
    storage.extend(header.partition_by.clone().map(|p| ("PARTITION BY", p)));
    storage.extend(ttl.clone().map(|t| ("TTL", t)));
    for (clause, expression) in storage {
        let missing: Vec<String> = referenced_columns(&expression)
            .into_iter()
            .filter(|c| !column_names.contains(&c.as_str()))
            .collect();
        if !missing.is_empty() {
            problems.push(
                Diagnostic::new(
                    codes::CONTRACT,
                    format!("Transform '{}' has an invalid {clause} expression `{expression}`. Referenced output columns not found in the derived schema: {}. Available columns: {}.", model.name, missing.join(", "), column_names.join(", ")),
                    "storage expressions may only use the model's output columns",
                )
                .at(Location::file(&model.file)),
            );
        }
    }
    if !problems.is_empty() {
        return Err(problems);
    }
    let lineage_preserved = lineage_mode.is_some_and(|mode| {
        stb_model::planning::lineage_columns(mode)
            .iter()
            .all(|c| column_names.contains(c))
    });
    let aggregate = stb_sql::aggregates::has_aggregate_semantics(analysed.query)
        || header
            .engine
            .as_deref()
            .is_some_and(stb_sql::aggregates::is_aggregating_engine);
    let mutable_references = model
        .refs
        .iter()
        .any(|r| r.ref_type == Some(stb_project::refs::RefType::Mutable));
    let replay = ReplayFacts {
        lineage_preserved,
        aggregate,
        mutable_references,
        anchor_eligible: lineage_preserved
            && !aggregate
            && !mutable_references
            && !header.replay_anchor_never,
    };
    let table_name = QualifiedName::new(database, &analysed.relation);
    let table = Table {
        name: table_name.clone(),
        columns: analysed
            .columns
            .iter()
            .map(|c| Column::new(&c.name, &c.data_type))
            .collect(),
        engine: header
            .engine
            .clone()
            .unwrap_or_else(|| "MergeTree()".to_owned()),
        order_by,
        partition_by: header.partition_by.clone(),
        ttl,
        settings: header.settings.clone(),
    };
    let materialized_view = MaterializedView {
        name: QualifiedName::new(database, &format!("mv__{}", model.name)),
        target: table_name,
        query: query.clone(),
        // Models fed by a Postgres pull refresh on its schedule instead of on insert.
        refresh,
    };
    Ok(CompiledModel {
        replay_query: split_at_driving_input(analysed, relations),
        query_parts: split_at_model_references(analysed, names),
        query,
        table: Some(table),
        materialized_view: Some(materialized_view),
        view: None,
        retention,
        replay: Some(replay),
    })
}

/// The spliced query cut at every reference to the model's driving input.
fn split_at_driving_input(
    analysed: &AnalysedModel<'_>,
    relations: &BTreeMap<String, String>,
) -> Vec<String> {
    // NUL cannot occur in model text (discovery reads UTF-8 SQL), so it marks the cuts.
    const CUT: &str = "\u{0}";
    let driving = analysed.model.driving_input.as_deref();
    let text = splice(analysed, |reference| {
        if Some(reference.name.as_str()) == driving {
            Some(CUT.to_owned())
        } else {
            relations.get(&reference.name).cloned()
        }
    });
    text.split(CUT).map(str::to_owned).collect()
}

/// The spliced query cut at every reference, each cut naming the model or source. A
/// `__ref` that names a source reads it as `__source` does (the reference's fixtures
/// write `FROM __ref("order_events")` for a Kafka source).
fn split_at_model_references(
    analysed: &AnalysedModel<'_>,
    names: &Names<'_>,
) -> Vec<stb_model::planning::QueryPart> {
    let relations = names.relations;
    use stb_model::planning::QueryPart;
    // NUL never occurs in model text: it brackets each reference, `m:` a model, `s:` a
    // source.
    const MARK: char = '\u{0}';
    let text = splice(analysed, |reference| match reference.kind {
        stb_project::refs::RefKind::Ref if names.sources.contains(&reference.name) => relations
            .contains_key(&reference.name)
            .then(|| format!("{MARK}s:{}{MARK}", reference.name)),
        stb_project::refs::RefKind::Ref => Some(format!("{MARK}m:{}{MARK}", reference.name)),
        stb_project::refs::RefKind::Source => relations
            .contains_key(&reference.name)
            .then(|| format!("{MARK}s:{}{MARK}", reference.name)),
    });
    text.split(MARK)
        .enumerate()
        .filter(|(at, piece)| at % 2 == 1 || !piece.is_empty())
        .map(|(at, piece)| {
            if at % 2 == 0 {
                return QueryPart::Text(piece.to_owned());
            }
            match piece.split_once(':') {
                Some(("s", name)) => QueryPart::Source {
                    name: name.to_owned(),
                    relation: relations.get(name).cloned().unwrap_or_default(),
                },
                _ => QueryPart::Model(piece.get(2..).unwrap_or_default().to_owned()),
            }
        })
        .collect()
}

type TtlChoice = (Option<String>, Option<AppliedRetention>);

fn from_default(retention: &stb_project::policies::ModelRetention) -> Retention {
    match retention {
        stb_project::policies::ModelRetention::Disabled => Retention::Disabled,
        stb_project::policies::ModelRetention::Policy {
            duration_seconds,
            timestamp_column,
            cap_at_column,
            skip_when_missing,
        } => Retention::Policy {
            duration_seconds: *duration_seconds,
            timestamp_column: timestamp_column.clone(),
            cap_at_column: cap_at_column.clone(),
            when_missing: if *skip_when_missing {
                WhenMissing::Skip
            } else {
                WhenMissing::Error
            },
        },
    }
}

/// The table TTL. Precedence: the model's `ttl`, the model's retention, the pipeline's
/// `[defaults.models] retention`, the project's, then the legacy project `model_ttl`.
fn table_ttl(
    analysed: &AnalysedModel<'_>,
    defaults: &stb_project::ProjectDefaults,
) -> Result<TtlChoice, Vec<Diagnostic>> {
    let header = &analysed.header;
    if let Some(ttl) = &header.ttl {
        return Ok((Some(ttl.clone()), None));
    }
    let chosen = header
        .retention
        .clone()
        .map(|r| (r, "model"))
        .or_else(|| {
            analysed
                .pipeline
                .model_retention
                .as_ref()
                .map(|r| (from_default(r), "pipeline"))
        })
        .or_else(|| {
            defaults
                .model_retention
                .as_ref()
                .map(|r| (from_default(r), "project"))
        });
    let Some((retention, origin)) = chosen else {
        return Ok((defaults.model_ttl.clone(), None));
    };
    let Retention::Policy {
        duration_seconds,
        timestamp_column,
        cap_at_column,
        when_missing,
    } = &retention
    else {
        return Ok((
            None,
            Some(AppliedRetention {
                retention,
                origin,
                applied: false,
            }),
        ));
    };
    let wanted: Vec<&str> = std::iter::once(timestamp_column.as_str())
        .chain(cap_at_column.as_deref())
        .collect();
    let missing: Vec<&str> = wanted
        .iter()
        .copied()
        .filter(|c| !analysed.columns.iter().any(|o| o.name == *c))
        .collect();
    let model = analysed.model;
    if !missing.is_empty() {
        if *when_missing == WhenMissing::Skip {
            return Ok((
                None,
                Some(AppliedRetention {
                    retention: retention.clone(),
                    origin,
                    applied: false,
                }),
            ));
        }
        return Err(vec![
            Diagnostic::new(
                codes::CONTRACT,
                format!(
                    "Model '{}' retention requires missing output columns: {}",
                    model.name,
                    missing.join(", ")
                ),
                "output the retention columns, or set when_missing skip",
            )
            .at(Location::file(&model.file)),
        ]);
    }
    let bad: Vec<String> = wanted
        .iter()
        .filter_map(|c| analysed.columns.iter().find(|o| o.name == *c))
        .filter(|o| !is_non_null_temporal(&o.data_type))
        .map(|o| format!("{} ({})", o.name, o.data_type))
        .collect();
    if !bad.is_empty() {
        return Err(vec![
            Diagnostic::new(
                codes::CONTRACT,
                format!(
                    "Model '{}' retention columns must be non-null Date or DateTime values: {}",
                    model.name,
                    bad.join(", ")
                ),
                "cast the retention column to Date or DateTime64(3)",
            )
            .at(Location::file(&model.file)),
        ]);
    }
    let ttl = stb_ddl::model_retention_ttl(
        timestamp_column,
        cap_at_column.as_deref(),
        *duration_seconds,
    );
    Ok((
        Some(ttl),
        Some(AppliedRetention {
            retention: retention.clone(),
            origin,
            applied: true,
        }),
    ))
}

fn is_non_null_temporal(data_type: &str) -> bool {
    let lower = data_type.trim().to_ascii_lowercase();
    !lower.starts_with("nullable")
        && ["date", "date32", "datetime", "datetime64"]
            .iter()
            .any(|t| lower == *t || lower.starts_with(&format!("{t}(")))
}

const EXPRESSION_KEYWORDS: &[&str] = &[
    "INTERVAL",
    "SECOND",
    "MINUTE",
    "HOUR",
    "DAY",
    "WEEK",
    "MONTH",
    "QUARTER",
    "YEAR",
    "AND",
    "OR",
    "NOT",
    "NULL",
    "TRUE",
    "FALSE",
    "AS",
    "IS",
    "IN",
    "CASE",
    "WHEN",
    "THEN",
    "ELSE",
    "END",
    "TO",
    "DELETE",
    "RECOMPRESS",
    "CODEC",
    "GROUP",
    "BY",
    "SET",
    "WHERE",
    "DISK",
    "VOLUME",
    "ASC",
    "DESC",
    "LIKE",
    "BETWEEN",
];

/// Column identifiers an expression reads: words that are not functions, keywords or
/// qualified parts.
fn referenced_columns(expression: &str) -> Vec<String> {
    let Ok(tokens) = stb_sql::lexer::lex(expression) else {
        return Vec::new();
    };
    let tokens: Vec<_> = tokens.into_iter().filter(|t| !t.is_trivia()).collect();
    let mut found = Vec::new();
    for (i, token) in tokens.iter().enumerate() {
        let name = match token.kind {
            stb_sql::lexer::Kind::Word => token.text.to_owned(),
            stb_sql::lexer::Kind::QuotedIdent if token.text.starts_with('`') => {
                token.text[1..token.text.len() - 1].to_owned()
            }
            _ => continue,
        };
        let call = tokens.get(i + 1).is_some_and(|t| t.is_punct("("));
        let member = i > 0 && tokens[i - 1].is_punct(".");
        let cast_type = i > 0 && tokens[i - 1].is_punct("::");
        if call || member || cast_type || EXPRESSION_KEYWORDS.iter().any(|k| token.is_keyword(k)) {
            continue;
        }
        if !found.contains(&name) {
            found.push(name);
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn storage_expressions_read_columns() {
        assert_eq!(referenced_columns("toYYYYMM(ts)"), ["ts"]);
        assert_eq!(referenced_columns("ts + INTERVAL 7 DAY"), ["ts"]);
        assert_eq!(
            referenced_columns("least(a, `b`) + INTERVAL 1 HOUR DELETE"),
            ["a", "b"]
        );
        assert_eq!(referenced_columns("(a, b)"), ["a", "b"]);
        assert_eq!(referenced_columns("'const'"), Vec::<String>::new());
    }

    #[test]
    fn temporal_types() {
        assert!(is_non_null_temporal("DateTime64(3)"));
        assert!(is_non_null_temporal("Date"));
        assert!(!is_non_null_temporal("Nullable(DateTime)"));
        assert!(!is_non_null_temporal("String"));
    }
}
