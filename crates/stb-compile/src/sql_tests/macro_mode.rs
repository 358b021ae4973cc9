//! Macro-mode tests: `TEST (mode macro)` compares what a macro produces with what the
//! author expects, without any model.
//!
//! ```sql
//! TEST (name cents_rounds, mode macro);
//! WITH
//!   __macro_actual__ AS (SELECT @cents("2.555") AS cents),
//!   __macro_expected__ AS (SELECT toInt64(256) AS cents)
//! SELECT 1
//! ```
//!
//! Macros may be called only inside `__macro_actual__`; the expected side is plain SQL, so
//! a macro cannot vouch for itself. Columns are compared without casts: types must match.

use std::collections::BTreeSet;

use stb_diagnostics::Diagnostic;

use super::{Block, CompiledTest, Cte, Target, comparison, ctes, fail, refuse_unsupported_ctes};

const ACTUAL: &str = "__macro_actual__";
const EXPECTED: &str = "__macro_expected__";
const MODEL_MODE_PREFIXES: &[&str] = &["__ref__", "__source__", "__expected__", "__assert__"];

/// In the file as written: every macro call of block `index` lies inside its
/// `__macro_actual__` CTE.
pub(super) fn calls_only_in_actual(
    file: &str,
    original: &str,
    index: usize,
) -> Result<(), Diagnostic> {
    let Ok(blocks) = super::blocks(file, original) else {
        return Ok(()); // the expanded text is checked and reported instead
    };
    let Some(block) = blocks.get(index) else {
        return Ok(());
    };
    let block_end = block.body_offset + block.body.len();
    let actual = ctes(file, original, block)
        .ok()
        .and_then(|ctes| ctes.into_iter().find(|c| c.name == ACTUAL))
        .map(|c| (c.body_offset, c.body_offset + c.body.len()));
    let calls =
        stb_project::sql_macros::find_calls(original, block.body_offset).unwrap_or_default();
    for call in calls.iter().filter(|c| c.start < block_end) {
        let inside = actual.is_some_and(|(start, end)| call.start >= start && call.start < end);
        if !inside {
            return Err(fail(
                file,
                original,
                call.start,
                format!(
                    "SQL test '{file}' calls macro '@{}' outside {ACTUAL}; macro tests may call macros only there",
                    call.name
                ),
                "state the expected rows as plain SQL in __macro_expected__",
            ));
        }
    }
    Ok(())
}

/// One macro-mode block: `__macro_actual__` against `__macro_expected__`.
pub(super) fn assemble(
    file: &str,
    text: &str,
    name: &str,
    ctes: &[Cte<'_>],
    block: &Block<'_>,
) -> Result<CompiledTest, Diagnostic> {
    refuse_unsupported_ctes(file, text, ctes, true)?;
    if let Some(cte) = ctes
        .iter()
        .find(|c| MODEL_MODE_PREFIXES.iter().any(|p| c.name.starts_with(p)))
    {
        return Err(fail(
            file,
            text,
            cte.body_offset,
            format!(
                "SQL test '{file}' CTE '{}' belongs to model-mode tests, not TEST (mode macro)",
                cte.name
            ),
            "macro tests use only __macro_actual__, __macro_expected__ and helper CTEs",
        ));
    }
    let find = |role: &str| ctes.iter().find(|c| c.name == role);
    let (Some(actual), Some(expected)) = (find(ACTUAL), find(EXPECTED)) else {
        return Err(fail(
            file,
            text,
            block.body_offset,
            format!(
                "SQL test '{file}' in macro mode needs exactly one {ACTUAL} and one {EXPECTED} CTE"
            ),
            "WITH __macro_actual__ AS (SELECT @my_macro(...) AS x), __macro_expected__ AS (SELECT ... AS x) SELECT 1",
        ));
    };
    let names = |cte: &Cte<'_>| {
        stb_sql::output_names(cte.body)
            .map(|names| names.into_iter().map(|(n, _)| n).collect::<Vec<_>>())
            .map_err(|e| {
                fail(
                    file,
                    text,
                    cte.body_offset + e.offset,
                    format!("SQL test '{file}': {} {}", cte.name, e.message),
                    "name every column",
                )
            })
    };
    let actual_columns = names(actual)?;
    let expected_columns = names(expected)?;
    let as_set = |c: &[String]| c.iter().cloned().collect::<BTreeSet<_>>();
    if as_set(&actual_columns) != as_set(&expected_columns) {
        return Err(fail(
            file,
            text,
            expected.body_offset,
            format!(
                "SQL test '{file}': {ACTUAL} and {EXPECTED} must project the same column names ({} vs {})",
                actual_columns.join(", "),
                expected_columns.join(", ")
            ),
            "name the expected columns exactly like the actual ones",
        ));
    }
    let label = format!("macro {name}");
    let target = Target::Expected {
        label: label.clone(),
        actual: ACTUAL.to_owned(),
        expected_cte: EXPECTED.to_owned(),
        columns: actual_columns.into_iter().map(|c| (c, None)).collect(),
    };
    Ok(CompiledTest {
        name: name.to_owned(),
        file: file.to_owned(),
        path: String::new(),
        targets: vec![label],
        assertions: Vec::new(),
        statement: comparison(ctes, &Default::default(), &[], &[target]),
        mode: "macro",
        warnings: Vec::new(),
        reads: Vec::new(),
    })
}
