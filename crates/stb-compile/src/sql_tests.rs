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

use stb_diagnostics::{Diagnostic, Location, Position};
use stb_sql::lexer::{Kind, Token, lex};

use crate::model::AnalysedModel;

pub(crate) const CODE: &str = "STB-COMPILE-008";

/// One test, compiled.
#[derive(Debug, Clone)]
pub(crate) struct CompiledTest {
    pub name: String,
    pub file: String,
    /// `compiled/tests/<folder>/<name>.sql`
    pub path: String,
    pub targets: Vec<String>,
    pub statement: String,
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
    Diagnostic::new(CODE, message, hint).at(Location::at(file, Position::of_offset(text, offset)))
}

/// Splits a file into `TEST (...);` blocks and reads their headers.
fn blocks<'a>(file: &str, text: &'a str) -> Result<Vec<Block<'a>>, Diagnostic> {
    let split = crate::blocks::split(text, "TEST").map_err(|e| {
        fail(
            file,
            text,
            e.offset,
            format!("SQL test '{file}' {}", e.message),
            "write TEST (name my_test); then WITH ... SELECT 1",
        )
    })?;
    let mut out = Vec::new();
    for block in split {
        let mut name = None;
        for (key, value) in &block.entries {
            let key_at = block.header_offset + key.offset;
            match (key.value.as_str(), &value.value) {
                ("name", stb_model::header::HeaderValue::Str(text_value))
                    if !text_value.trim().is_empty() =>
                {
                    name = Some(text_value.clone());
                }
                ("mode", stb_model::header::HeaderValue::Str(mode)) if mode == "model" => {}
                ("mode", _) => {
                    return Err(fail(
                        file,
                        text,
                        key_at,
                        format!(
                            "SQL test '{file}' uses a mode this edition does not compile yet (only mode model)"
                        ),
                        "macro-mode tests arrive with stb test",
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
pub(crate) fn compile_file(
    file: &str,
    text: &str,
    models: &BTreeMap<&str, &AnalysedModel<'_>>,
    sources: &BTreeSet<&str>,
) -> Result<Vec<CompiledTest>, Diagnostic> {
    let mut compiled = Vec::new();
    for block in blocks(file, text)? {
        let name = test_name(file, &block);
        let ctes = ctes(file, text, &block)?;
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

/// CTE roles this edition does not compile yet, and names reserved by the comparison.
fn refuse_unsupported_ctes(file: &str, text: &str, ctes: &[Cte<'_>]) -> Result<(), Diagnostic> {
    for cte in ctes {
        let name = cte.name.as_str();
        let reason = if name.starts_with("__assert__") {
            "`__assert__` CTEs are not compiled by this edition yet; state expected rows with __expected__<model>"
        } else if name.starts_with("__macro_actual__") || name.starts_with("__macro_expected__") {
            "macro CTEs belong to TEST (mode macro), which this edition does not compile yet"
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
    refuse_unsupported_ctes(file, text, ctes)?;
    let expected: Vec<&Cte<'_>> = ctes
        .iter()
        .filter(|c| c.name.starts_with("__expected__"))
        .collect();
    let mocks = ctes
        .iter()
        .filter(|c| c.name.starts_with("__ref__") || c.name.starts_with("__source__"))
        .count();
    if expected.is_empty() || mocks == 0 {
        return Err(fail(
            file,
            text,
            body_offset,
            format!(
                "SQL test '{file}' needs at least one __ref__/__source__ mock and one __expected__<model> CTE"
            ),
            "mock the inputs the model reads and state the rows you expect",
        ));
    }
    // Rebuild each tested model's chain: post-order, each model once, mocks cut the chain.
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
                "name a model: __expected__<model name>",
            ));
        };
        let mut stack = vec![(model_name.to_owned(), false)];
        let mut visiting = BTreeSet::new();
        while let Some((current, expanded)) = stack.pop() {
            if assembled.iter().any(|(n, _)| *n == current) {
                continue;
            }
            let Some(item) = models.get(current.as_str()) else {
                continue;
            };
            let deps: Vec<&str> = item
                .model
                .refs
                .iter()
                .map(|r| r.name.as_str())
                .filter(|d| mock_of(ctes, d).is_none())
                .collect();
            if expanded {
                assembled.push((current.clone(), chain_query(item, ctes)));
                continue;
            }
            if !visiting.insert(current.clone()) {
                return Err(fail(
                    file,
                    text,
                    cte.body_offset,
                    format!("SQL test '{file}' found a cycle through '{current}'"),
                    "models cannot read themselves",
                ));
            }
            stack.push((current.clone(), true));
            for dep in deps {
                if sources.contains(dep) {
                    return Err(fail(
                        file,
                        text,
                        cte.body_offset,
                        format!(
                            "SQL test '{file}' targets '{model_name}', but dependency '{dep}' cannot be resolved. Add `__source__{dep}` to mock it directly."
                        ),
                        "sources are never read by tests: mock them",
                    ));
                }
                if !models.contains_key(dep) {
                    return Err(fail(
                        file,
                        text,
                        cte.body_offset,
                        format!(
                            "SQL test '{file}' targets '{model_name}', but dependency '{dep}' cannot be resolved. Add `__ref__{dep}` to mock it directly."
                        ),
                        "mock the dependency",
                    ));
                }
                stack.push((dep.to_owned(), false));
            }
        }
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
        targets.push(Target {
            model: model_name.to_owned(),
            expected_cte: cte.name.clone(),
            columns: typed,
        });
    }
    let statement = comparison(ctes, &assembled, &targets);
    Ok(CompiledTest {
        name: name.to_owned(),
        file: file.to_owned(),
        path: String::new(),
        targets: targets.iter().map(|t| t.model.clone()).collect(),
        statement,
    })
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

/// One tested model: its expected CTE and the (column, type) pairs compared.
struct Target {
    model: String,
    expected_cte: String,
    columns: Vec<(String, String)>,
}

fn comparison(ctes: &[Cte<'_>], assembled: &[(String, String)], targets: &[Target]) -> String {
    let mut with: Vec<String> = ctes.iter().map(|c| c.definition.to_owned()).collect();
    for (model, query) in assembled {
        with.push(format!("__model__{model} AS (\n{query})"));
    }
    let mut branches = Vec::new();
    for (
        index,
        Target {
            model,
            expected_cte,
            columns,
        },
    ) in targets.iter().enumerate()
    {
        let names: Vec<&str> = columns.iter().map(|(c, _)| c.as_str()).collect();
        let list = names
            .iter()
            .map(|c| stb_ddl::identifier(c))
            .collect::<Vec<_>>()
            .join(", ");
        let casts = columns
            .iter()
            .map(|(c, t)| {
                format!(
                    "CAST({} AS {t}) AS {}",
                    stb_ddl::identifier(c),
                    stb_ddl::identifier(c)
                )
            })
            .collect::<Vec<_>>()
            .join(", ");
        with.push(format!("__streambuild_expected_{index} AS (SELECT {casts} FROM {expected_cte} AS expected_source)"));
        with.push(format!(
            "__streambuild_actual_{index} AS (SELECT {list} FROM __model__{model})"
        ));
        for side in ["expected", "actual"] {
            with.push(format!("__streambuild_{side}_counts_{index} AS (SELECT {list}, count() AS __streambuild_multiplicity FROM __streambuild_{side}_{index} GROUP BY {list})"));
        }
        for (diff, primary, secondary) in [
            ("missing", "expected", "actual"),
            ("unexpected", "actual", "expected"),
        ] {
            let values = names
                .iter()
                .map(|c| format!("CAST(p.{} AS Nullable(String))", stb_ddl::identifier(c)))
                .collect::<Vec<_>>()
                .join(", ");
            let on = names
                .iter()
                .map(|c| format!("isNotDistinctFrom(p.{0}, s.{0})", stb_ddl::identifier(c)))
                .collect::<Vec<_>>()
                .join(" AND ");
            branches.push(format!(
                "SELECT {index} AS _case_index, '{diff}' AS _diff_type, [{values}] AS _row_values, p.__streambuild_multiplicity - s.__streambuild_multiplicity AS _multiplicity\nFROM __streambuild_{primary}_counts_{index} AS p\nALL LEFT JOIN __streambuild_{secondary}_counts_{index} AS s ON {on}\nWHERE p.__streambuild_multiplicity > s.__streambuild_multiplicity"
            ));
        }
    }
    format!(
        "WITH\n{}\nSELECT * FROM (\n{}\n)\nSETTINGS join_use_nulls = 0\n",
        with.join(",\n"),
        branches.join("\nUNION ALL\n")
    )
}
