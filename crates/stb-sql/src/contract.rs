//! The output contract of a model query: one statement, one outermost SELECT whose every
//! projection is an explicitly typed, aliased expression. Types are the author's text.

use std::collections::BTreeSet;

use crate::lexer::{Kind, LexError, Token, lex};

/// One output column: alias, type as written (whitespace collapsed), where it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutputColumn {
    pub name: String,
    pub data_type: String,
    /// Byte offset of the projection in the query.
    pub offset: usize,
}

/// A violation of the contract, at a byte offset of the query.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContractError {
    pub message: String,
    pub offset: usize,
}

impl From<LexError> for ContractError {
    fn from(error: LexError) -> Self {
        Self {
            message: format!(
                "contains invalid SQL and could not be parsed: {}",
                error.message
            ),
            offset: error.offset,
        }
    }
}

/// What a query analysis must answer. The lexical implementation below is the default; a
/// full ClickHouse parser can stand behind the same trait.
pub trait QueryAnalyzer {
    /// The output columns of `sql`, or the first contract violation.
    ///
    /// # Errors
    /// When the query breaks the output contract.
    fn output_contract(&self, sql: &str) -> Result<Vec<OutputColumn>, ContractError>;
}

/// Analysis on tokens and nesting depth: it never rebuilds SQL, so types and positions are
/// exactly the author's.
#[derive(Debug, Clone, Copy, Default)]
pub struct LexicalAnalyzer;

/// The output column names of a query (its first outermost SELECT): each projection's
/// alias, or the column itself when it is a bare (possibly qualified) column. Used for
/// test expectations, which need not be typed.
///
/// # Errors
/// When a projection has no name to infer, or the text is not a SELECT.
pub fn output_names(sql: &str) -> Result<Vec<(String, usize)>, ContractError> {
    let all = lex(sql)?;
    let tokens: Vec<Token<'_>> = all.into_iter().filter(|t| !t.is_trivia()).collect();
    let statement = single_statement(&tokens)?;
    let depths = depths(statement)?;
    let select_at = first_select(statement, &depths).ok_or_else(|| {
        err(
            "must be a SELECT query",
            statement.first().map_or(0, |t| t.start),
        )
    })?;
    let (start, end) = projection_range(statement, &depths, select_at);
    let mut names = Vec::new();
    for projection in split_top_level(&statement[start..end], &depths[start..end]) {
        let (Some(first), Some(last)) = (projection.first(), projection.last()) else {
            continue;
        };
        let n = projection.len();
        // `expr AS name`, or a bare (possibly qualified) column: `t.c` is named `c`.
        let aliased = n >= 3 && projection[n - 2].is_keyword("AS");
        let bare_column = projection.iter().enumerate().all(|(i, t)| {
            if i % 2 == 0 {
                matches!(t.kind, Kind::Word | Kind::QuotedIdent)
            } else {
                t.is_punct(".")
            }
        });
        let name = if aliased || bare_column {
            alias_name(last)
        } else {
            None
        };
        let name = name.ok_or_else(|| {
            err(
                format!(
                    "cannot infer a column name for `{}`; add AS <name>",
                    collapse(&sql[first.start..last.end])
                ),
                first.start,
            )
        })?;
        names.push((name, first.start));
    }
    Ok(names)
}

/// The first `SELECT` outside parentheses: the outermost query (after any CTEs).
fn first_select(statement: &[Token<'_>], depths: &[u32]) -> Option<usize> {
    statement
        .iter()
        .zip(depths)
        .position(|(t, d)| *d == 0 && t.is_keyword("SELECT"))
}

/// The token range of the outermost projection list that follows `select_at`.
fn projection_range(statement: &[Token<'_>], depths: &[u32], select_at: usize) -> (usize, usize) {
    let mut start = select_at + 1;
    while statement
        .get(start)
        .is_some_and(|t| t.is_keyword("DISTINCT") || t.is_keyword("ALL"))
    {
        start += 1;
    }
    let end = (start..statement.len())
        .find(|&i| depths[i] == 0 && CLAUSES.iter().any(|k| statement[i].is_keyword(k)))
        .unwrap_or(statement.len());
    (start, end)
}

/// Keywords that end the outermost projection list at depth 0.
const CLAUSES: &[&str] = &[
    "FROM",
    "WHERE",
    "PREWHERE",
    "GROUP",
    "HAVING",
    "ORDER",
    "LIMIT",
    "SETTINGS",
    "FORMAT",
    "WINDOW",
    "QUALIFY",
    "UNION",
    "INTERSECT",
    "EXCEPT",
    "INTO",
];
const SET_OPERATIONS: &[&str] = &["UNION", "INTERSECT", "EXCEPT"];

fn err(message: impl Into<String>, offset: usize) -> ContractError {
    ContractError {
        message: message.into(),
        offset,
    }
}

impl QueryAnalyzer for LexicalAnalyzer {
    fn output_contract(&self, sql: &str) -> Result<Vec<OutputColumn>, ContractError> {
        let all = lex(sql)?;
        let tokens: Vec<Token<'_>> = all.into_iter().filter(|t| !t.is_trivia()).collect();
        let statement = single_statement(&tokens)?;
        if let Some(prewhere) = statement.iter().find(|t| t.is_keyword("PREWHERE")) {
            return Err(err(
                "uses PREWHERE, which ClickHouse does not allow in materialized views",
                prewhere.start,
            ));
        }
        let first = statement
            .first()
            .ok_or_else(|| err("is empty: expected one SELECT query", 0))?;
        if !(first.is_keyword("SELECT") || first.is_keyword("WITH") || first.is_punct("(")) {
            return Err(err(
                format!(
                    "must end in one outermost SELECT, but found top-level statement type '{}'",
                    first.text.to_ascii_lowercase()
                ),
                first.start,
            ));
        }
        let depths = depths(statement)?;
        let select_at = first_select(statement, &depths)
            .ok_or_else(|| err("must end in one outermost SELECT", first.start))?;
        if let Some(set_op) = statement
            .iter()
            .zip(&depths)
            .skip(select_at)
            .find(|(t, d)| **d == 0 && SET_OPERATIONS.iter().any(|k| t.is_keyword(k)))
        {
            return Err(err(
                "Top-level set operations like UNION or UNION ALL are not allowed. Move the set operation into a CTE or subquery, then add a final SELECT with explicit typed aliases",
                set_op.0.start,
            ));
        }
        let (start, end) = projection_range(statement, &depths, select_at);
        let mut columns: Vec<OutputColumn> = Vec::new();
        let mut names = BTreeSet::new();
        for (index, projection) in split_top_level(&statement[start..end], &depths[start..end])
            .into_iter()
            .enumerate()
        {
            let column = projection_column(sql, projection, index + 1)?;
            if !names.insert(column.name.clone()) {
                return Err(err(
                    format!(
                        "Duplicate outermost SELECT alias '{}' is not allowed.",
                        column.name
                    ),
                    column.offset,
                ));
            }
            columns.push(column);
        }
        if columns.is_empty() {
            return Err(err(
                "must select at least one typed column",
                statement[select_at].start,
            ));
        }
        Ok(columns)
    }
}

/// The tokens of the one statement; a second non-empty statement is an error.
fn single_statement<'t, 'a>(tokens: &'t [Token<'a>]) -> Result<&'t [Token<'a>], ContractError> {
    let statements: Vec<&[Token<'a>]> = tokens
        .split(|t| t.is_punct(";"))
        .filter(|s| !s.is_empty())
        .collect();
    match statements.as_slice() {
        [one] => Ok(one),
        [] => Err(err("is empty: expected one SELECT query", 0)),
        [_, second, ..] => Err(err(
            format!(
                "must contain exactly one SQL statement, but found {}.",
                statements.len()
            ),
            second[0].start,
        )),
    }
}

/// Parenthesis depth before each token.
fn depths(tokens: &[Token<'_>]) -> Result<Vec<u32>, ContractError> {
    let mut depth = 0_u32;
    let mut out = Vec::with_capacity(tokens.len());
    for token in tokens {
        if token.is_punct(")") || token.is_punct("]") {
            depth = depth.checked_sub(1).ok_or_else(|| {
                err(
                    "contains invalid SQL and could not be parsed: unbalanced ')'",
                    token.start,
                )
            })?;
        }
        out.push(depth);
        if token.is_punct("(") || token.is_punct("[") {
            depth += 1;
        }
    }
    if depth != 0 {
        return Err(err(
            "contains invalid SQL and could not be parsed: unclosed '('",
            tokens.last().map_or(0, |t| t.start),
        ));
    }
    Ok(out)
}

fn split_top_level<'t, 'a>(tokens: &'t [Token<'a>], depths: &[u32]) -> Vec<&'t [Token<'a>]> {
    let mut parts = Vec::new();
    let mut from = 0;
    for (i, token) in tokens.iter().enumerate() {
        if depths[i] == 0 && token.is_punct(",") {
            parts.push(&tokens[from..i]);
            from = i + 1;
        }
    }
    if from < tokens.len() {
        parts.push(&tokens[from..]);
    }
    parts
}

fn collapse(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn alias_name(token: &Token<'_>) -> Option<String> {
    match token.kind {
        Kind::Word => Some(token.text.to_owned()),
        Kind::QuotedIdent => Some(token.text[1..token.text.len() - 1].to_owned()),
        _ => None,
    }
}

fn projection_column(
    sql: &str,
    projection: &[Token<'_>],
    index: usize,
) -> Result<OutputColumn, ContractError> {
    let (Some(first), Some(last)) = (projection.first(), projection.last()) else {
        return Err(err(
            format!("has an empty outermost projection at column {index}"),
            0,
        ));
    };
    let text = &sql[first.start..last.end];
    if last.is_punct("*") {
        return Err(err(
            "Wildcard projections like '*' are not allowed in the outermost SELECT; list each column with an explicit typed alias",
            last.start,
        ));
    }
    let invalid = || {
        err(
            format!(
                "has an invalid output contract at column {index}. Expected outermost projection {index} to use an explicit typed alias like CAST(expr AS Type) AS name or expr::Type AS name, but found `{}`",
                collapse(text)
            ),
            first.start,
        )
    };
    let local = depths(projection).map_err(|_| invalid())?;
    // CAST(e AS T) [AS] alias  |  TRY_CAST(e AS T) [AS] alias
    if (first.is_keyword("CAST") || first.is_keyword("TRY_CAST"))
        && projection.get(1).is_some_and(|t| t.is_punct("("))
    {
        let close = (2..projection.len())
            .find(|&i| local[i] == 0 && projection[i].is_punct(")"))
            .ok_or_else(invalid)?;
        let alias_tokens = &projection[close + 1..];
        let alias = match alias_tokens {
            [name] => alias_name(name),
            [as_kw, name] if as_kw.is_keyword("AS") => alias_name(name),
            _ => None,
        }
        .ok_or_else(invalid)?;
        let as_at = (2..close)
            .rev()
            .find(|&i| local[i] == 1 && projection[i].is_keyword("AS"))
            .ok_or_else(invalid)?;
        if as_at == 2 || as_at + 1 >= close {
            return Err(invalid());
        }
        return Ok(OutputColumn {
            name: alias,
            data_type: collapse(&sql[projection[as_at + 1].start..projection[close - 1].end]),
            offset: first.start,
        });
    }
    // e::T AS alias
    let n = projection.len();
    if n >= 5 && projection[n - 2].is_keyword("AS") && local[n - 2] == 0 {
        let alias = alias_name(&projection[n - 1]).ok_or_else(invalid)?;
        let cast_at = (1..n - 2)
            .rev()
            .find(|&i| local[i] == 0 && projection[i].is_punct("::"))
            .ok_or_else(invalid)?;
        if cast_at + 1 >= n - 2 {
            return Err(invalid());
        }
        return Ok(OutputColumn {
            name: alias,
            data_type: collapse(&sql[projection[cast_at + 1].start..projection[n - 3].end]),
            offset: first.start,
        });
    }
    Err(invalid())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn columns(sql: &str) -> Vec<(String, String)> {
        LexicalAnalyzer
            .output_contract(sql)
            .unwrap_or_else(|e| panic!("{sql}: {e:?}"))
            .into_iter()
            .map(|c| (c.name, c.data_type))
            .collect()
    }

    fn problem(sql: &str) -> String {
        LexicalAnalyzer.output_contract(sql).expect_err(sql).message
    }

    fn pairs(items: &[(&str, &str)]) -> Vec<(String, String)> {
        items
            .iter()
            .map(|(a, b)| ((*a).to_owned(), (*b).to_owned()))
            .collect()
    }

    #[test]
    fn typed_projections_keep_the_authors_types() {
        let sql = "WITH base AS (SELECT * FROM t)\nSELECT\n  CAST(a AS Decimal(18,4)) AS amount,\n  TRY_CAST(b AS Nullable(  Int64 )) b2,\n  x::BIGINT AS big,\n  (y + 1)::DateTime64(3, 'UTC') AS `at`,\n  JSONExtractString(v, 'k')::LowCardinality(String) AS k\nFROM base\nWHERE a > 0";
        assert_eq!(
            columns(sql),
            pairs(&[
                ("amount", "Decimal(18,4)"),
                ("b2", "Nullable( Int64 )"),
                ("big", "BIGINT"),
                ("at", "DateTime64(3, 'UTC')"),
                ("k", "LowCardinality(String)")
            ])
        );
        assert_eq!(
            columns("SELECT 1::UInt8 AS v"),
            pairs(&[("v", "UInt8")]),
            "no FROM needed"
        );
        assert_eq!(
            columns("SELECT DISTINCT a::String AS a FROM t; "),
            pairs(&[("a", "String")]),
            "a trailing ; is fine"
        );
    }

    #[test]
    fn contract_violations() {
        assert!(
            problem("SELECT a::String AS a FROM t; SELECT 1")
                .starts_with("must contain exactly one SQL statement, but found 2")
        );
        assert!(
            problem("SELECT a::String AS a FROM t UNION ALL SELECT b::String AS a FROM u")
                .starts_with("Top-level set operations")
        );
        assert!(
            problem("INSERT INTO t SELECT 1").contains("found top-level statement type 'insert'")
        );
        assert!(problem("SELECT * FROM t").starts_with("Wildcard projections"));
        assert!(problem("SELECT a::String AS a, t.* FROM t").starts_with("Wildcard projections"));
        assert!(
            problem("SELECT toString(a) AS a FROM t")
                .contains("invalid output contract at column 1")
        );
        assert!(
            problem("SELECT a::String AS a, b FROM t").contains("at column 2")
                && problem("SELECT a::String AS a, b FROM t").contains("found `b`")
        );
        assert!(problem("SELECT CAST(a, 'String') AS a FROM t").contains("column 1"));
        assert!(
            problem("SELECT a::String FROM t").contains("column 1"),
            "an alias is required"
        );
        assert_eq!(
            problem("SELECT a::String AS a, b::UInt8 AS a FROM t"),
            "Duplicate outermost SELECT alias 'a' is not allowed."
        );
        assert!(problem("SELECT a::String AS a FROM t PREWHERE a = 'x'").contains("PREWHERE"));
        assert!(problem("SELECT 'open").contains("could not be parsed"));
        assert!(problem("SELECT (a::String AS a FROM t").contains("could not be parsed"));
    }

    #[test]
    fn output_names_of_untyped_queries() {
        let names: Vec<String> = output_names("SELECT 'o1' AS order_id, t.amount, `x y`, 2 AS n FROM t UNION ALL SELECT 'o2', 1, 2, 3").expect("names").into_iter().map(|(n, _)| n).collect();
        assert_eq!(names, ["order_id", "amount", "x y", "n"]);
        assert!(output_names("SELECT 1 + 2 FROM t").is_err());
    }

    #[test]
    fn unions_inside_subqueries_are_fine() {
        assert_eq!(
            columns("SELECT u.a::String AS a FROM (SELECT 1 AS a UNION ALL SELECT 2 AS a) AS u"),
            pairs(&[("a", "String")])
        );
    }

    #[test]
    fn error_offsets_point_at_the_problem() {
        let sql = "SELECT a::String AS a,\n  b FROM t";
        let error = LexicalAnalyzer.output_contract(sql).expect_err("bare b");
        assert_eq!(&sql[error.offset..error.offset + 1], "b");
    }

    proptest::proptest! {
        #[test]
        fn never_panics(sql in ".{0,160}") {
            let _ = LexicalAnalyzer.output_contract(&sql);
        }

        #[test]
        fn never_panics_on_sql_like_text(parts in proptest::collection::vec(proptest::sample::select(vec![
            "SELECT ", "WITH ", "x", "::", "UInt8", " AS ", "a", ",", "(", ")", "CAST", "FROM ", "t", ";", "*", "'s'", "UNION ", "PREWHERE ", "--c\n", "/*", "*/", "`q`",
        ]), 0..30)) {
            let _ = LexicalAnalyzer.output_contract(&parts.concat());
        }
    }
}
