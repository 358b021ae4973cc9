//! SQL tests (`tests/**/*.sql`), model mode: mocks as CTEs, the real model chain rebuilt
//! as CTEs on top of them, and one bag-comparison statement per test.
//!
//! ```sql
//! TEST (name totals_add_up);
//! WITH
//!   __ref__orders_clean AS (SELECT 'o1' AS order_id, 2.5 AS amount),
//!   __expected__order_totals AS (SELECT 'o1' AS order_id, 2.5 AS amount)
//! SELECT 1
//! ```
//!
//! The statement returns one row per difference (`missing` or `unexpected`, with the row's
//! values and how many copies differ), so a passing test returns nothing. Duplicates count
//! and NULL equals NULL.

use std::collections::{BTreeMap, BTreeSet};

use stb_diagnostics::Diagnostic;
use stb_sql::lexer::{Kind, Token, lex};

use crate::model::AnalysedModel;

mod macro_mode;

pub(crate) const CODE: &str = "STB-COMPILE-008";

/// One test, compiled.
#[derive(Debug, Clone)]
pub(crate) struct CompiledTest {
    pub name: String,
    pub file: String,
    /// `compiled/tests/<folder>/<name>.sql`
    pub path: String,
    /// Expected models, in the order written.
    pub targets: Vec<String>,
    /// `__assert__<label>` labels, in the order written.
    pub assertions: Vec<String>,
    pub statement: String,
    /// `model` or `macro`
    pub mode: &'static str,
    /// Mocks nothing in the rebuilt chains reads.
    pub warnings: Vec<Diagnostic>,
    /// The models whose queries the statement embeds (the rebuilt chains): an edit to any
    /// of them changes the test, which an incremental compile must know.
    pub reads: Vec<String>,
}

struct Cte<'a> {
    name: String,
    /// The whole definition as written: `name AS (...)`.
    definition: &'a str,
    /// The query inside the parentheses.
    body: &'a str,
    body_offset: usize,
}

struct Block<'a> {
    name: Option<String>,
    /// `TEST (mode macro)`
    macro_mode: bool,
    body: &'a str,
    body_offset: usize,
    header_offset: usize,
}

fn fail(
    file: &str,
    text: &str,
    offset: usize,
    message: impl Into<String>,
    hint: &str,
) -> Diagnostic {
    crate::blocks::diagnostic_at(CODE, file, text, offset, message, hint)
}

/// Splits a file into `TEST (...);` blocks and reads their headers.
fn blocks<'a>(file: &str, text: &'a str) -> Result<Vec<Block<'a>>, Diagnostic> {
    let split = crate::blocks::split(text, "TEST").map_err(|e| {
        e.into_diagnostic(
            CODE,
            file,
            text,
            "SQL test",
            "write TEST (name my_test); then WITH ... SELECT 1",
        )
    })?;
    let mut out = Vec::new();
    for block in split {
        let mut name = None;
        let mut macro_mode = false;
        for (key, value) in &block.entries {
            let key_at = block.header_offset + key.offset;
            match (key.value.as_str(), &value.value) {
                ("name", stb_model::header::HeaderValue::Str(text_value))
                    if !text_value.trim().is_empty() =>
                {
                    name = Some(text_value.clone());
                }
                ("mode", stb_model::header::HeaderValue::Str(mode))
                    if mode == "model" || mode == "macro" =>
                {
                    macro_mode = mode == "macro";
                }
                ("mode", _) => {
                    return Err(fail(
                        file,
                        text,
                        key_at,
                        format!("TEST() in '{file}' mode must be model or macro"),
                        "write TEST (name my_test, mode macro); or leave mode out",
                    ));
                }
                _ => {
                    return Err(fail(
                        file,
                        text,
                        key_at,
                        format!("TEST() in '{file}' only supports `name` and `mode`"),
                        "write TEST (name my_test);",
                    ));
                }
            }
        }
        out.push(Block {
            name,
            macro_mode,
            body: block.body,
            body_offset: block.body_offset,
            header_offset: block.keyword_offset,
        });
    }
    if out.len() > 1 {
        let mut seen = BTreeSet::new();
        for block in &out {
            let Some(name) = &block.name else {
                return Err(fail(
                    file,
                    text,
                    block.header_offset,
                    format!(
                        "SQL test '{file}' has several TEST blocks; every block needs a unique name"
                    ),
                    "add name ... to each TEST header",
                ));
            };
            if !seen.insert(name.clone()) {
                return Err(fail(
                    file,
                    text,
                    block.header_offset,
                    format!("SQL test '{file}' repeats the test name '{name}'"),
                    "give each block its own name",
                ));
            }
        }
    }
    Ok(out)
}

/// `WITH a AS (...), b AS (...) SELECT 1 [;]`
fn ctes<'a>(file: &str, text: &str, block: &Block<'a>) -> Result<Vec<Cte<'a>>, Diagnostic> {
    let body = block.body;
    let at = |offset: usize| block.body_offset + offset;
    let tokens: Vec<Token<'_>> = lex(body)
        .map_err(|e| {
            fail(
                file,
                text,
                at(e.offset),
                format!("SQL test '{file}': {}", e.message),
                "close the string or comment",
            )
        })?
        .into_iter()
        .filter(|t| !t.is_trivia())
        .collect();
    let shape = "a test body is WITH <mock and __expected__ CTEs> SELECT 1";
    if !tokens.first().is_some_and(|t| t.is_keyword("WITH")) {
        return Err(fail(
            file,
            text,
            at(0),
            format!(
                "SQL test '{file}' must declare mock CTEs and one __expected__<model> CTE before `SELECT 1`"
            ),
            shape,
        ));
    }
    let mut ctes = Vec::new();
    let mut i = 1;
    if tokens.get(i).is_some_and(|t| t.is_keyword("RECURSIVE")) {
        i += 1;
    }
    loop {
        let (Some(name), Some(as_kw), Some(open)) =
            (tokens.get(i), tokens.get(i + 1), tokens.get(i + 2))
        else {
            return Err(fail(
                file,
                text,
                at(body.len()),
                format!("SQL test '{file}' has an incomplete CTE list"),
                shape,
            ));
        };
        if !(matches!(name.kind, Kind::Word | Kind::QuotedIdent)
            && as_kw.is_keyword("AS")
            && open.is_punct("("))
        {
            return Err(fail(
                file,
                text,
                at(name.start),
                format!("SQL test '{file}' expects `name AS (query)` here"),
                shape,
            ));
        }
        let close = stb_sql::lexer::matching_close(&tokens, i + 2);
        let Some(close) = close else {
            return Err(fail(
                file,
                text,
                at(open.start),
                format!("SQL test '{file}' has an unclosed CTE"),
                "close the parenthesis",
            ));
        };
        let cte_name = name.text.trim_matches(['`', '"']).to_owned();
        if ctes.iter().any(|c: &Cte<'_>| c.name == cte_name) {
            return Err(fail(
                file,
                text,
                at(name.start),
                format!("SQL test '{file}' defines CTE '{cte_name}' twice"),
                "rename one of them",
            ));
        }
        ctes.push(Cte {
            name: cte_name,
            definition: &body[name.start..tokens[close].end],
            body: &body[open.end..tokens[close].start],
            body_offset: at(open.end),
        });
        i = close + 1;
        match tokens.get(i) {
            Some(t) if t.is_punct(",") => i += 1,
            _ => break,
        }
    }
    let rest: Vec<&str> = tokens[i..].iter().map(|t| t.text).collect();
    if !(rest == ["SELECT", "1"]
        || rest == ["SELECT", "1", ";"]
        || rest == ["select", "1"]
        || rest == ["select", "1", ";"])
    {
        return Err(fail(
            file,
            text,
            at(tokens.get(i).map_or(body.len(), |t| t.start)),
            format!(
                "SQL test '{file}' must end with a ceremonial top-level `SELECT 1` after its CTEs"
            ),
            shape,
        ));
    }
    Ok(ctes)
}

/// The test's name: its header `name`, else the file stem.
fn test_name(file: &str, block: &Block<'_>) -> String {
    block.name.clone().unwrap_or_else(|| {
        std::path::Path::new(file)
            .file_stem()
            .map_or_else(String::new, |s| s.to_string_lossy().into_owned())
    })
}

/// Compiles every block of one test file.
/// `original` is the file as written when discovery expanded macros in it.
pub(crate) fn compile_file(
    file: &str,
    text: &str,
    original: Option<&str>,
    models: &BTreeMap<&str, &AnalysedModel<'_>>,
    sources: &BTreeSet<&str>,
) -> Result<Vec<CompiledTest>, Diagnostic> {
    let mut compiled = Vec::new();
    for (index, block) in blocks(file, text)?.into_iter().enumerate() {
        let name = test_name(file, &block);
        let ctes = ctes(file, text, &block)?;
        if block.macro_mode {
            if let Some(original) = original {
                macro_mode::calls_only_in_actual(file, original, index)?;
            }
            compiled.push(macro_mode::assemble(file, text, &name, &ctes, &block)?);
            continue;
        }
        compiled.push(assemble(
            file,
            text,
            &name,
            &ctes,
            models,
            sources,
            block.body_offset,
        )?);
    }
    Ok(compiled)
}

fn mock_of<'c>(ctes: &'c [Cte<'_>], name: &str) -> Option<&'c str> {
    ctes.iter()
        .find(|c| c.name == format!("__ref__{name}") || c.name == format!("__source__{name}"))
        .map(|c| c.name.as_str())
}

/// Macro-mode CTEs in a model-mode test, and names reserved by the comparison.
fn refuse_unsupported_ctes(
    file: &str,
    text: &str,
    ctes: &[Cte<'_>],
    macro_mode: bool,
) -> Result<(), Diagnostic> {
    for cte in ctes {
        let name = cte.name.as_str();
        let macro_role =
            name.starts_with("__macro_actual__") || name.starts_with("__macro_expected__");
        let reason = if macro_role && !macro_mode {
            "macro CTEs belong to macro-mode tests; use TEST (mode macro)"
        } else if macro_role {
            continue;
        } else if [
            "__actual",
            "__expected__typed",
            "__actual__projected",
            "__missing__",
            "__unexpected__",
        ]
        .contains(&name)
            || [
                "__udf_actual__",
                "__udf_expected__",
                "__table_fn_actual__",
                "__table_fn_expected__",
                "__macro__",
                "__seed__",
                "__dbt_ref__",
                "__streambuild_",
            ]
            .iter()
            .any(|p| name.starts_with(p))
        {
            "this CTE name is reserved or unsupported in SQL tests"
        } else {
            continue;
        };
        return Err(fail(
            file,
            text,
            cte.body_offset,
            format!("SQL test '{file}' CTE '{name}': {reason}"),
            "rename the CTE or remove it",
        ));
    }
    Ok(())
}

fn assemble(
    file: &str,
    text: &str,
    name: &str,
    ctes: &[Cte<'_>],
    models: &BTreeMap<&str, &AnalysedModel<'_>>,
    sources: &BTreeSet<&str>,
    body_offset: usize,
) -> Result<CompiledTest, Diagnostic> {
    refuse_unsupported_ctes(file, text, ctes, false)?;
    let expected: Vec<&Cte<'_>> = ctes
        .iter()
        .filter(|c| c.name.starts_with("__expected__"))
        .collect();
    let assertions: Vec<&Cte<'_>> = ctes
        .iter()
        .filter(|c| c.name.starts_with("__assert__"))
        .collect();
    let mocks = ctes
        .iter()
        .filter(|c| c.name.starts_with("__ref__") || c.name.starts_with("__source__"))
        .count();
    if (expected.is_empty() && assertions.is_empty()) || mocks == 0 {
        return Err(fail(
            file,
            text,
            body_offset,
            format!(
                "SQL test '{file}' needs at least one __ref__/__source__ mock and one __expected__<model> or __assert__<label> CTE"
            ),
            "mock the inputs the model reads and state the rows you expect",
        ));
    }
    let chain = Chain {
        file,
        text,
        ctes,
        models,
        sources,
    };
    // Each tested model's chain is rebuilt once: post-order, mocks cut the chain.
    let mut assembled: Vec<(String, String)> = Vec::new();
    let mut targets = Vec::new();
    for cte in &expected {
        let model_name = &cte.name["__expected__".len()..];
        let Some(model) = models.get(model_name) else {
            return Err(fail(
                file,
                text,
                cte.body_offset,
                format!("SQL test '{file}' targets unknown model '{model_name}'"),
                &format!(
                    "{}name a model: __expected__<model name>",
                    stb_diagnostics::suggest::did_you_mean(model_name, models.keys().copied())
                ),
            ));
        };
        chain.rebuild(model_name, cte.body_offset, &mut assembled)?;
        let columns = stb_sql::output_names(cte.body).map_err(|e| {
            fail(
                file,
                text,
                cte.body_offset + e.offset,
                format!(
                    "SQL test '{file}': expected rows for '{model_name}' {}",
                    e.message
                ),
                "name every expected column",
            )
        })?;
        let unknown: Vec<&str> = columns
            .iter()
            .map(|(c, _)| c.as_str())
            .filter(|c| !model.columns.iter().any(|o| o.name == *c))
            .collect();
        if !unknown.is_empty() {
            return Err(fail(
                file,
                text,
                cte.body_offset,
                format!(
                    "SQL test '{file}' expects columns not produced by '{model_name}': {}",
                    unknown.join(", ")
                ),
                "compare only columns the model outputs",
            ));
        }
        let typed: Vec<(String, String)> = columns
            .iter()
            .map(|(c, _)| {
                (
                    c.clone(),
                    model
                        .columns
                        .iter()
                        .find(|o| o.name == *c)
                        .map(|o| o.data_type.clone())
                        .unwrap_or_default(),
                )
            })
            .collect();
        targets.push(Target::Expected {
            label: model_name.to_owned(),
            actual: format!("__model__{model_name}"),
            expected_cte: cte.name.clone(),
            columns: typed.into_iter().map(|(c, t)| (c, Some(t))).collect(),
        });
    }
    let mut rewritten = BTreeMap::new();
    for cte in &assertions {
        let (definition, columns) = chain.assertion(cte, &mut assembled)?;
        rewritten.insert(cte.name.clone(), definition);
        targets.push(Target::Assertion {
            cte: cte.name.clone(),
            columns,
        });
    }
    let statement = comparison(ctes, &rewritten, &assembled, &targets);
    let warnings = unreached_mocks(&chain, &assembled, &assertions);
    Ok(CompiledTest {
        name: name.to_owned(),
        file: file.to_owned(),
        path: String::new(),
        targets: targets
            .iter()
            .filter_map(|t| match t {
                Target::Expected { label, .. } => Some(label.clone()),
                Target::Assertion { .. } => None,
            })
            .collect(),
        assertions: assertions
            .iter()
            .map(|c| c.name["__assert__".len()..].to_owned())
            .collect(),
        statement,
        mode: "model",
        warnings,
        reads: assembled.iter().map(|(name, _)| name.clone()).collect(),
    })
}

/// Mocks that neither a rebuilt model nor an assertion reads: usually a typo in a name.
fn unreached_mocks(
    chain: &Chain<'_, '_, '_>,
    assembled: &[(String, String)],
    assertions: &[&Cte<'_>],
) -> Vec<Diagnostic> {
    let mut read: BTreeSet<String> = assembled
        .iter()
        .filter_map(|(name, _)| chain.models.get(name.as_str()))
        .flat_map(|item| item.model.refs.iter().map(|r| r.name.clone()))
        .collect();
    for cte in assertions {
        if let Ok(refs) = stb_project::refs::extract(cte.body) {
            read.extend(refs.into_iter().map(|r| r.name));
        }
    }
    chain
        .ctes
        .iter()
        .filter_map(|cte| {
            let target = cte
                .name
                .strip_prefix("__ref__")
                .or_else(|| cte.name.strip_prefix("__source__"))?;
            (!read.contains(target)).then(|| {
                fail(
                    chain.file,
                    chain.text,
                    cte.body_offset,
                    format!(
                        "SQL test '{}' never reaches mock '{}'",
                        chain.file, cte.name
                    ),
                    "remove the mock, or check the name against what the tested models read",
                )
            })
        })
        .collect()
}

/// What a test's chains are rebuilt from.
struct Chain<'t, 'a, 'm> {
    file: &'t str,
    text: &'t str,
    ctes: &'t [Cte<'a>],
    models: &'t BTreeMap<&'m str, &'m AnalysedModel<'m>>,
    sources: &'t BTreeSet<&'t str>,
}

impl Chain<'_, '_, '_> {
    fn fail(&self, offset: usize, message: String, hint: &str) -> Diagnostic {
        fail(self.file, self.text, offset, message, hint)
    }

    /// Appends `target` and everything it reads (not mocked) to `assembled`, dependencies
    /// first, each model once. Iterative, so long chains cannot overflow the stack.
    fn rebuild(
        &self,
        target: &str,
        anchor: usize,
        assembled: &mut Vec<(String, String)>,
    ) -> Result<(), Diagnostic> {
        let file = self.file;
        let mut stack = vec![(target.to_owned(), false)];
        let mut visiting = BTreeSet::new();
        while let Some((current, expanded)) = stack.pop() {
            if assembled.iter().any(|(n, _)| *n == current) {
                continue;
            }
            let Some(item) = self.models.get(current.as_str()) else {
                continue;
            };
            if expanded {
                assembled.push((current.clone(), chain_query(item, self.ctes)));
                continue;
            }
            if !visiting.insert(current.clone()) {
                return Err(self.fail(
                    anchor,
                    format!("SQL test '{file}' found a cycle through '{current}'"),
                    "models cannot read themselves",
                ));
            }
            stack.push((current.clone(), true));
            let deps = item
                .model
                .refs
                .iter()
                .map(|r| r.name.as_str())
                .filter(|d| mock_of(self.ctes, d).is_none());
            for dep in deps {
                if !self.models.contains_key(dep) {
                    let (prefix, hint) = if self.sources.contains(dep) {
                        ("__source__", "sources are never read by tests: mock them")
                    } else {
                        ("__ref__", "mock the dependency")
                    };
                    return Err(self.fail(
                        anchor,
                        format!(
                            "SQL test '{file}' targets '{target}', but dependency '{dep}' cannot be resolved. Add `{prefix}{dep}` to mock it directly."
                        ),
                        hint,
                    ));
                }
                stack.push((dep.to_owned(), false));
            }
        }
        Ok(())
    }

    /// An `__assert__` CTE with its references pointed at mocks or rebuilt models, and the
    /// columns it returns.
    fn assertion(
        &self,
        cte: &Cte<'_>,
        assembled: &mut Vec<(String, String)>,
    ) -> Result<(String, Vec<String>), Diagnostic> {
        let file = self.file;
        let refs = stb_project::refs::extract(cte.body).map_err(|e| {
            self.fail(
                cte.body_offset,
                format!("SQL test '{file}' assertion '{}': {}", cte.name, e.message),
                "fix the __ref(...) call",
            )
        })?;
        let mut body = String::with_capacity(cte.body.len() + 32);
        let mut last = 0;
        for reference in &refs {
            let replacement = if let Some(mock) = mock_of(self.ctes, &reference.name) {
                mock.to_owned()
            } else if self.models.contains_key(reference.name.as_str()) {
                self.rebuild(
                    &reference.name,
                    cte.body_offset + reference.span.0,
                    assembled,
                )?;
                format!("__model__{}", reference.name)
            } else {
                let prefix = if self.sources.contains(reference.name.as_str()) {
                    "__source__"
                } else {
                    "__ref__"
                };
                return Err(self.fail(
                    cte.body_offset + reference.span.0,
                    format!(
                        "SQL test '{file}' assertion '{}' reads '{}', which is neither a model nor mocked. Add `{prefix}{}` to mock it.",
                        cte.name, reference.name, reference.name
                    ),
                    "assertions read compiled models and mocks",
                ));
            };
            body.push_str(&cte.body[last..reference.span.0]);
            body.push_str(&replacement);
            last = reference.span.1;
        }
        body.push_str(&cte.body[last..]);
        let columns = stb_sql::output_names(cte.body).map_err(|e| {
            self.fail(
                cte.body_offset + e.offset,
                format!("SQL test '{file}': assertion '{}' {}", cte.name, e.message),
                "name every column the assertion returns",
            )
        })?;
        Ok((
            format!("{} AS ({body})", cte.name),
            columns.into_iter().map(|(c, _)| c).collect(),
        ))
    }
}

/// The model's query with each reference pointing at its mock or its rebuilt CTE.
fn chain_query(item: &AnalysedModel<'_>, ctes: &[Cte<'_>]) -> String {
    let out = crate::model::splice(item, |reference| {
        Some(
            mock_of(ctes, &reference.name)
                .map_or_else(|| format!("__model__{}", reference.name), str::to_owned),
        )
    });
    // A trailing `;` would break the CTE the query is wrapped in.
    let trimmed = out.trim_end();
    trimmed.strip_suffix(';').unwrap_or(trimmed).to_owned() + "\n"
}

/// What one block of the comparison checks.
enum Target {
    /// Rows of `actual` against `expected_cte`, over the columns named, each cast to its
    /// type when one is given (a model's output type; macro tests compare uncast).
    Expected {
        label: String,
        actual: String,
        expected_cte: String,
        columns: Vec<(String, Option<String>)>,
    },
    /// An `__assert__` CTE, which must return no rows.
    Assertion { cte: String, columns: Vec<String> },
}

fn column_list(names: &[&str]) -> String {
    names
        .iter()
        .map(|c| stb_ddl::identifier(c))
        .collect::<Vec<_>>()
        .join(", ")
}

/// `SELECT ... FROM <primary>_counts_i AS p`: the rows of one side as `_row_values`.
fn difference_rows(
    index: usize,
    diff: &str,
    names: &[&str],
    primary: &str,
    multiplicity: &str,
) -> String {
    let values = names
        .iter()
        .map(|c| format!("CAST(p.{} AS Nullable(String))", stb_ddl::identifier(c)))
        .collect::<Vec<_>>()
        .join(", ");
    format!(
        "SELECT {index} AS _case_index, '{diff}' AS _diff_type, [{values}] AS _row_values, {multiplicity} AS _multiplicity\nFROM __streambuild_{primary}_counts_{index} AS p"
    )
}

fn comparison(
    ctes: &[Cte<'_>],
    rewritten: &BTreeMap<String, String>,
    assembled: &[(String, String)],
    targets: &[Target],
) -> String {
    // Authored CTEs first (mocks and helpers), then the rebuilt models, then assertions,
    // which read both.
    let mut with: Vec<String> = ctes
        .iter()
        .filter(|c| !rewritten.contains_key(&c.name))
        .map(|c| c.definition.to_owned())
        .collect();
    for (model, query) in assembled {
        with.push(format!("__model__{model} AS (\n{query})"));
    }
    with.extend(rewritten.values().cloned());
    let mut branches = Vec::new();
    for (index, target) in targets.iter().enumerate() {
        let count = |with: &mut Vec<String>, side: &str, list: &str| {
            with.push(format!("__streambuild_{side}_counts_{index} AS (SELECT {list}, count() AS __streambuild_multiplicity FROM __streambuild_{side}_{index} GROUP BY {list})"));
        };
        match target {
            Target::Expected {
                label: _,
                actual,
                expected_cte,
                columns,
            } => {
                let names: Vec<&str> = columns.iter().map(|(c, _)| c.as_str()).collect();
                let list = column_list(&names);
                let casts = columns
                    .iter()
                    .map(|(c, t)| {
                        let c = stb_ddl::identifier(c);
                        match t {
                            Some(t) => format!("CAST({c} AS {t}) AS {c}"),
                            None => c,
                        }
                    })
                    .collect::<Vec<_>>()
                    .join(", ");
                with.push(format!("__streambuild_expected_{index} AS (SELECT {casts} FROM {expected_cte} AS expected_source)"));
                with.push(format!(
                    "__streambuild_actual_{index} AS (SELECT {list} FROM {actual})"
                ));
                count(&mut with, "expected", &list);
                count(&mut with, "actual", &list);
                for (diff, primary, secondary) in [
                    ("missing", "expected", "actual"),
                    ("unexpected", "actual", "expected"),
                ] {
                    let on = names
                        .iter()
                        .map(|c| format!("isNotDistinctFrom(p.{0}, s.{0})", stb_ddl::identifier(c)))
                        .collect::<Vec<_>>()
                        .join(" AND ");
                    let rows = difference_rows(
                        index,
                        diff,
                        &names,
                        primary,
                        "p.__streambuild_multiplicity - s.__streambuild_multiplicity",
                    );
                    branches.push(format!(
                        "{rows}\nALL LEFT JOIN __streambuild_{secondary}_counts_{index} AS s ON {on}\nWHERE p.__streambuild_multiplicity > s.__streambuild_multiplicity"
                    ));
                }
            }
            Target::Assertion { cte, columns } => {
                let names: Vec<&str> = columns.iter().map(String::as_str).collect();
                let list = column_list(&names);
                with.push(format!(
                    "__streambuild_actual_{index} AS (SELECT {list} FROM {cte})"
                ));
                count(&mut with, "actual", &list);
                // Nothing is expected: every returned row is unexpected.
                branches.push(difference_rows(
                    index,
                    "unexpected",
                    &names,
                    "actual",
                    "p.__streambuild_multiplicity",
                ));
            }
        }
    }
    format!(
        "WITH\n{}\nSELECT * FROM (\n{}\n)\nSETTINGS join_use_nulls = 0\n",
        with.join(",\n"),
        branches.join("\nUNION ALL\n")
    )
}
