//! Column-level lineage of one query: for each output column, the columns of the
//! relations in its `FROM` clauses it is computed from, through CTEs, subqueries, joins and
//! aliases, with the JSON path when a column is read through a JSON function
//! (`JSONExtractString(kafka_value, 'customer', 'id')`).
//!
//! Read from the tokens of the author's text, never a re-printed tree. What cannot be
//! traced is said, not guessed: identifiers that no relation in scope can be shown to hold
//! are `unresolved`, functions that read data the query does not name (`dictGet`,
//! `joinGet`) are `opaque`, and `SELECT *` outside a CTE or subquery is the contract's to
//! refuse. Conditions (`WHERE`, `ON`, `GROUP BY`) decide which rows, not a value: they are
//! not inputs of a column.

use std::cell::Cell;
use std::collections::BTreeSet;
use std::rc::Rc;

use crate::lexer::{Kind, Token, lex, matching_close};

/// A column an output column is computed from.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Input {
    /// The relation as the query names it in `FROM` (`db.table`, a table function's text).
    pub relation: String,
    pub column: String,
    /// The keys (or `$.path` of `JSON_VALUE`) the column's text is read at, when it is read
    /// through a JSON function; empty when the column's value is used itself.
    pub json_path: Vec<String>,
}

/// How an output column comes from its inputs, from least to most transformed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Derivation {
    /// No input column: a literal or a function of none (`now()`).
    Constant,
    /// One input, its value unchanged but for a cast.
    Copied,
    /// Computed from its inputs row by row.
    Computed,
    /// Computed over a window of rows (`OVER`).
    Windowed,
    /// Aggregated over a group of rows.
    Aggregated,
}

impl Derivation {
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Constant => "constant",
            Self::Copied => "copied",
            Self::Computed => "computed",
            Self::Windowed => "windowed",
            Self::Aggregated => "aggregated",
        }
    }
}

/// The lineage of one output column.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ColumnLineage {
    pub column: String,
    pub derivation: Derivation,
    /// Sorted, each once.
    pub inputs: Vec<Input>,
    /// Functions whose result depends on data the query does not name.
    pub opaque: Vec<String>,
    /// Names no relation in scope could be shown to hold (several could, or none).
    pub unresolved: Vec<String>,
}

/// A query that cannot be read for lineage.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LineageError {
    pub message: String,
    pub offset: usize,
}

/// Functions that read data the query does not name.
const OPAQUE: &[&str] = &["dictget", "joinget", "dictgetordefault", "dicthas"];

/// Words in expressions that are never column names.
const EXPRESSION_WORDS: &[&str] = &[
    "and",
    "or",
    "not",
    "in",
    "is",
    "null",
    "true",
    "false",
    "case",
    "when",
    "then",
    "else",
    "end",
    "like",
    "ilike",
    "between",
    "interval",
    "distinct",
    "as",
    "over",
    "partition",
    "by",
    "order",
    "asc",
    "desc",
    "rows",
    "range",
    "unbounded",
    "preceding",
    "following",
    "current",
    "row",
    "nulls",
    "global",
    "exists",
    "any",
    "all",
    "from",
    "both",
    "leading",
    "trailing",
    "with",
    "ties",
    "filter",
    "where",
];

/// Interval units: words, not columns, right after a number or a string
/// (`INTERVAL 1 DAY`, `INTERVAL '1' HOUR`).
const UNITS: &[&str] = &[
    "nanosecond",
    "microsecond",
    "millisecond",
    "second",
    "minute",
    "hour",
    "day",
    "week",
    "month",
    "quarter",
    "year",
];

/// Keywords that end a `FROM` clause.
const AFTER_FROM: &[&str] = &[
    "where",
    "prewhere",
    "group",
    "having",
    "order",
    "limit",
    "settings",
    "window",
    "qualify",
    "format",
    "union",
    "intersect",
    "except",
];

/// Words of joins that cannot be a table alias (nor can [`AFTER_FROM`]'s).
const JOIN_WORDS: &[&str] = &[
    "left", "right", "inner", "full", "cross", "join", "on", "using", "any", "all", "global",
    "asof", "semi", "anti", "array", "final", "sample", "outer", "paste", "natural",
];

/// Whether `token` is a word of a join or one that ends a `FROM` clause: never an alias.
fn not_alias(token: &Token<'_>) -> bool {
    JOIN_WORDS
        .iter()
        .chain(AFTER_FROM)
        .any(|k| token.is_keyword(k))
}

/// The lineage of every output column of `sql`, in output order. `columns_of` gives the
/// columns of a relation the query reads (by its name in `FROM`), when known: it decides
/// which relation an unqualified name belongs to when several are joined.
///
/// # Errors
/// A query whose text does not lex, or that is not a `SELECT` (with CTEs).
pub fn query_lineage(
    sql: &str,
    columns_of: &dyn Fn(&str) -> Option<Vec<String>>,
) -> Result<Vec<ColumnLineage>, LineageError> {
    let tokens = lex(sql).map_err(|e| LineageError {
        message: e.message,
        offset: e.offset,
    })?;
    let significant: Vec<Token<'_>> = tokens.into_iter().filter(|t| !t.is_trivia()).collect();
    let significant = trim_semicolons(&significant);
    check_depth(significant)?;
    let query = parse_query(significant, &[])?;
    let reader = Reader {
        columns_of,
        budget: Cell::new(WORK_BUDGET),
    };
    let lineage: Vec<ColumnLineage> = query
        .outputs()
        .iter()
        .map(|name| reader.column(&query, name, &mut Vec::new()))
        .collect();
    if reader.budget.get() == 0 {
        return Err(LineageError {
            message: format!(
                "the query is too intricate to trace (more than {WORK_BUDGET} expressions read through its aliases and CTEs)"
            ),
            offset: 0,
        });
    }
    Ok(lineage)
}

/// The deepest nesting of parentheses read: the analysis recurses once per level.
const MAX_DEPTH: usize = 64;
/// Expressions read for one query, through aliases and CTEs: far beyond any real model,
/// and a bound on queries whose aliases or CTEs reuse each other many times over.
const WORK_BUDGET: usize = 100_000;

fn check_depth(tokens: &[Token<'_>]) -> Result<(), LineageError> {
    let mut depth = 0_usize;
    for token in tokens {
        if token.is_punct("(") || token.is_punct("[") {
            depth += 1;
            if depth > MAX_DEPTH {
                return Err(LineageError {
                    message: format!("parentheses nested more than {MAX_DEPTH} deep"),
                    offset: token.start,
                });
            }
        } else if token.is_punct(")") || token.is_punct("]") {
            depth = depth.saturating_sub(1);
        }
    }
    Ok(())
}

fn trim_semicolons<'t, 'a>(mut tokens: &'t [Token<'a>]) -> &'t [Token<'a>] {
    while let Some((last, rest)) = tokens.split_last() {
        if !last.is_punct(";") {
            break;
        }
        tokens = rest;
    }
    tokens
}

/// A `SELECT` (or a `UNION` of them, read column by column) with the CTEs in scope.
#[derive(Debug, Clone)]
struct Query<'t, 'a> {
    branches: Vec<Select<'t, 'a>>,
}

#[derive(Debug, Clone)]
struct Select<'t, 'a> {
    items: Vec<Item<'t, 'a>>,
    /// Aliases of `WITH <expr> AS name` and `ARRAY JOIN <expr> AS name`.
    scalars: Vec<Item<'t, 'a>>,
    from: Vec<(String, Entry<'t, 'a>)>,
}

#[derive(Debug, Clone)]
struct Item<'t, 'a> {
    name: String,
    expression: &'t [Token<'a>],
    /// `*` or `alias.*`: the columns of what is in scope.
    star: Option<Option<String>>,
}

#[derive(Debug, Clone)]
enum Entry<'t, 'a> {
    Relation(String),
    /// A subquery or a CTE (shared: each use of a CTE is the same parsed query).
    Derived(Rc<Query<'t, 'a>>),
}

impl Query<'_, '_> {
    /// Output names, from the first branch.
    fn outputs(&self) -> Vec<String> {
        self.branches
            .first()
            .map(|b| b.items.iter().map(|i| i.name.clone()).collect())
            .unwrap_or_default()
    }
}

fn error(tokens: &[Token<'_>], at: usize, message: &str) -> LineageError {
    LineageError {
        message: message.to_owned(),
        offset: tokens.get(at).or(tokens.last()).map_or(0, |t| t.start),
    }
}

/// An identifier's name without its quotes.
fn name_of(token: &Token<'_>) -> String {
    match token.kind {
        Kind::QuotedIdent => token.text[1..token.text.len() - 1].to_owned(),
        _ => token.text.to_owned(),
    }
}

/// A string literal's text without its quotes (escapes left as written).
fn string_of(token: &Token<'_>) -> String {
    token.text[1..token.text.len() - 1].to_owned()
}

fn is_name(token: &Token<'_>) -> bool {
    matches!(token.kind, Kind::Word | Kind::QuotedIdent)
}

/// Indexes of the top-level (depth 0) tokens of `tokens` that `split` picks.
fn top_level(tokens: &[Token<'_>], mut split: impl FnMut(&Token<'_>) -> bool) -> Vec<usize> {
    let mut depth = 0_i32;
    let mut found = Vec::new();
    for (index, token) in tokens.iter().enumerate() {
        if token.is_punct("(") || token.is_punct("[") {
            depth += 1;
        } else if token.is_punct(")") || token.is_punct("]") {
            depth -= 1;
        } else if depth == 0 && split(token) {
            found.push(index);
        }
    }
    found
}

/// `tokens` cut at the top-level tokens `split` picks (which are dropped).
fn pieces<'t, 'a>(
    tokens: &'t [Token<'a>],
    split: impl FnMut(&Token<'_>) -> bool,
) -> Vec<&'t [Token<'a>]> {
    cut(tokens, &top_level(tokens, split))
}

/// `tokens` cut at the indexes `at` (whose tokens are dropped).
fn cut<'t, 'a>(tokens: &'t [Token<'a>], at: &[usize]) -> Vec<&'t [Token<'a>]> {
    let mut out = Vec::new();
    let mut start = 0;
    for &index in at {
        out.push(&tokens[start..index]);
        start = index + 1;
    }
    out.push(&tokens[start..]);
    out
}

/// A query: optional `WITH`, then one or more `SELECT`s joined by `UNION`.
fn parse_query<'t, 'a>(
    tokens: &'t [Token<'a>],
    outer_ctes: &[(String, Rc<Query<'t, 'a>>)],
) -> Result<Query<'t, 'a>, LineageError> {
    let mut ctes: Vec<(String, Rc<Query<'t, 'a>>)> = outer_ctes.to_vec();
    let mut scalars = Vec::new();
    let mut rest = tokens;
    if rest.first().is_some_and(|t| t.is_keyword("WITH")) {
        let select_at = top_level(rest, |t| t.is_keyword("SELECT"))
            .into_iter()
            .next()
            .ok_or_else(|| error(rest, 0, "a WITH clause without a SELECT"))?;
        for definition in pieces(&rest[1..select_at], |t| t.is_punct(",")) {
            // `name AS (query)` is a CTE; `expression AS name` a scalar.
            if definition.len() >= 3
                && is_name(&definition[0])
                && definition[1].is_keyword("AS")
                && definition[2].is_punct("(")
            {
                let close = matching_close(definition, 2)
                    .ok_or_else(|| error(definition, 2, "an unclosed CTE"))?;
                let query = parse_query(&definition[3..close], &ctes)?;
                ctes.push((name_of(&definition[0]), Rc::new(query)));
            } else if let Some(item) = item(definition) {
                scalars.push(item);
            }
        }
        rest = &rest[select_at..];
    }
    let mut branches = Vec::new();
    // `* EXCEPT (c)` drops columns from a star; any other EXCEPT joins two SELECTs.
    let joins: Vec<usize> = top_level(rest, |t| {
        t.is_keyword("UNION") || t.is_keyword("INTERSECT") || t.is_keyword("EXCEPT")
    })
    .into_iter()
    .filter(|&i| !(rest[i].is_keyword("EXCEPT") && i > 0 && rest[i - 1].is_punct("*")))
    .collect();
    for branch in cut(rest, &joins) {
        let branch = match branch.first() {
            Some(t) if t.is_keyword("ALL") || t.is_keyword("DISTINCT") => &branch[1..],
            _ => branch,
        };
        // A parenthesised branch: `(SELECT ...) UNION ALL (SELECT ...)`.
        if branch.first().is_some_and(|t| t.is_punct("("))
            && matching_close(branch, 0) == Some(branch.len() - 1)
        {
            let inner = parse_query(&branch[1..branch.len() - 1], &ctes)?;
            branches.extend(inner.branches);
            continue;
        }
        let mut select = parse_select(branch, &ctes)?;
        select.scalars.extend(scalars.iter().cloned());
        branches.push(select);
    }
    Ok(Query { branches })
}

/// One `SELECT ... FROM ...`.
fn parse_select<'t, 'a>(
    tokens: &'t [Token<'a>],
    ctes: &[(String, Rc<Query<'t, 'a>>)],
) -> Result<Select<'t, 'a>, LineageError> {
    if !tokens.first().is_some_and(|t| t.is_keyword("SELECT")) {
        return Err(error(tokens, 0, "not a SELECT"));
    }
    let mut start = 1;
    if tokens.get(1).is_some_and(|t| t.is_keyword("DISTINCT")) {
        start = 2;
    }
    let body = &tokens[start..];
    let from_at = top_level(body, |t| t.is_keyword("FROM")).into_iter().next();
    let list = &body[..from_at.unwrap_or(body.len())];
    let items = pieces(list, |t| t.is_punct(","))
        .into_iter()
        .filter(|piece| !piece.is_empty())
        .filter_map(item)
        .collect();
    let mut select = Select {
        items,
        scalars: Vec::new(),
        from: Vec::new(),
    };
    if let Some(from_at) = from_at {
        let after = &body[from_at + 1..];
        let end = top_level(after, |t| AFTER_FROM.iter().any(|k| t.is_keyword(k)))
            .into_iter()
            .next()
            .unwrap_or(after.len());
        read_from(&after[..end], ctes, &mut select)?;
    }
    Ok(select)
}

/// A select item: `expression [AS] name`, `*`, `alias.*`.
fn item<'t, 'a>(tokens: &'t [Token<'a>]) -> Option<Item<'t, 'a>> {
    match tokens {
        [] => None,
        // `*`, with its modifiers (`EXCEPT (c)`, `REPLACE (...)`) read as the star.
        [star, ..] if star.is_punct("*") => Some(Item {
            name: "*".to_owned(),
            expression: tokens,
            star: Some(None),
        }),
        [qualifier, dot, star, ..] if dot.is_punct(".") && star.is_punct("*") => Some(Item {
            name: "*".to_owned(),
            expression: tokens,
            star: Some(Some(name_of(qualifier))),
        }),
        [expression @ .., as_, name] if as_.is_keyword("AS") && is_name(name) => Some(Item {
            name: name_of(name),
            expression,
            star: None,
        }),
        // A bare (possibly qualified) column is named after itself.
        _ if tokens.last().is_some_and(is_name)
            && tokens.iter().enumerate().all(|(i, t)| {
                if i % 2 == 0 {
                    is_name(t)
                } else {
                    t.is_punct(".")
                }
            }) =>
        {
            Some(Item {
                name: tokens.last().map(name_of).unwrap_or_default(),
                expression: tokens,
                star: None,
            })
        }
        // `expression name`, the alias without AS: a name after a closing parenthesis
        // or a literal (not a type after `::`, nor an interval's unit).
        [expression @ .., before, name]
            if is_name(name)
                && (before.is_punct(")") || matches!(before.kind, Kind::String | Kind::Number))
                && !is_unit(tokens, tokens.len() - 1) =>
        {
            Some(Item {
                name: name_of(name),
                expression: &tokens[..=expression.len()],
                star: None,
            })
        }
        _ => Some(Item {
            name: tokens.iter().map(|t| t.text).collect::<Vec<_>>().join(""),
            expression: tokens,
            star: None,
        }),
    }
}

/// The relations of a `FROM` clause (tables, CTEs, subqueries, table functions) and its
/// `ARRAY JOIN` aliases, into `select`.
fn read_from<'t, 'a>(
    tokens: &'t [Token<'a>],
    ctes: &[(String, Rc<Query<'t, 'a>>)],
    select: &mut Select<'t, 'a>,
) -> Result<(), LineageError> {
    let mut at = 0;
    while at < tokens.len() {
        let token = &tokens[at];
        if token.is_keyword("ARRAY") && tokens.get(at + 1).is_some_and(|t| t.is_keyword("JOIN")) {
            // `ARRAY JOIN expression AS alias, ...` up to the next join.
            let rest = &tokens[at + 2..];
            let end = top_level(rest, |t| {
                t.is_keyword("JOIN")
                    || t.is_keyword("LEFT")
                    || t.is_keyword("INNER")
                    || t.is_keyword("ARRAY")
            })
            .into_iter()
            .next()
            .unwrap_or(rest.len());
            for piece in pieces(&rest[..end], |t| t.is_punct(",")) {
                select.scalars.extend(item(piece));
            }
            at += 2 + end;
            continue;
        }
        if token.is_punct(",") || token.is_keyword("JOIN") {
            at += 1;
            continue;
        }
        if not_alias(token) {
            // Join kinds and the conditions after ON/USING, up to the next relation.
            if token.is_keyword("ON") || token.is_keyword("USING") {
                let rest = &tokens[at + 1..];
                let skip = top_level(rest, |t| t.is_keyword("JOIN") || t.is_punct(","))
                    .into_iter()
                    .next()
                    .map_or(rest.len(), |next| {
                        // Back over the join's kind words (`LEFT ANY JOIN`).
                        let mut back = next;
                        while back > 0 && not_alias(&rest[back - 1]) {
                            back -= 1;
                        }
                        back
                    });
                at += 1 + skip;
            } else {
                at += 1;
            }
            continue;
        }
        let (entry, default_alias, next) = if token.is_punct("(") {
            let close = matching_close(tokens, at)
                .ok_or_else(|| error(tokens, at, "an unclosed subquery"))?;
            let query = parse_query(&tokens[at + 1..close], ctes)?;
            (Entry::Derived(Rc::new(query)), String::new(), close + 1)
        } else if is_name(token) {
            // `db.table`, `table`, a CTE's name, or a table function `f(...)`.
            let mut end = at + 1;
            while end + 1 < tokens.len() && tokens[end].is_punct(".") && is_name(&tokens[end + 1]) {
                end += 2;
            }
            let text: String = tokens[at..end].iter().map(|t| t.text).collect();
            if tokens.get(end).is_some_and(|t| t.is_punct("(")) {
                let close = matching_close(tokens, end)
                    .ok_or_else(|| error(tokens, end, "an unclosed table function"))?;
                let text: String = tokens[at..=close].iter().map(|t| t.text).collect();
                (Entry::Relation(text), name_of(token), close + 1)
            } else {
                let last = name_of(&tokens[end - 1]);
                let entry = match ctes
                    .iter()
                    .rev()
                    .find(|(name, _)| end == at + 1 && *name == last)
                {
                    Some((_, query)) => Entry::Derived(Rc::clone(query)),
                    None => Entry::Relation(text),
                };
                (entry, last, end)
            }
        } else {
            at += 1;
            continue;
        };
        // `[AS] alias`, then FINAL / SAMPLE ... are not aliases.
        let mut next = next;
        let mut alias = default_alias;
        if tokens.get(next).is_some_and(|t| t.is_keyword("AS")) {
            next += 1;
        }
        if let Some(candidate) = tokens.get(next)
            && is_name(candidate)
            && !not_alias(candidate)
        {
            alias = name_of(candidate);
            next += 1;
        }
        select.from.push((alias, entry));
        at = next;
    }
    Ok(())
}

struct Reader<'f> {
    columns_of: &'f dyn Fn(&str) -> Option<Vec<String>>,
    /// Expressions still allowed to be read ([`WORK_BUDGET`]); at 0 every read answers
    /// nothing and the query is refused.
    budget: Cell<usize>,
}

impl Reader<'_> {
    /// Takes one unit of work; false once the budget is spent.
    fn spend(&self) -> bool {
        let left = self.budget.get();
        if left == 0 {
            return false;
        }
        self.budget.set(left - 1);
        true
    }
}

/// What an expression reads, before it is summed up for a column.
#[derive(Default)]
struct Found {
    derivation: Option<Derivation>,
    inputs: BTreeSet<Input>,
    opaque: BTreeSet<String>,
    unresolved: BTreeSet<String>,
}

impl Found {
    fn raise(&mut self, derivation: Derivation) {
        self.derivation = Some(self.derivation.map_or(derivation, |d| d.max(derivation)));
    }

    fn absorb(&mut self, lineage: &ColumnLineage, json_path: &[String]) {
        self.raise(lineage.derivation);
        for input in &lineage.inputs {
            let mut input = input.clone();
            input.json_path.extend(json_path.iter().cloned());
            self.inputs.insert(input);
        }
        self.opaque.extend(lineage.opaque.iter().cloned());
        self.unresolved.extend(lineage.unresolved.iter().cloned());
    }
}

impl Reader<'_> {
    /// The lineage of output `name` of `query` (every branch of a union).
    fn column(
        &self,
        query: &Query<'_, '_>,
        name: &str,
        visiting: &mut Vec<String>,
    ) -> ColumnLineage {
        let mut found = Found::default();
        for (branch_index, branch) in query.branches.iter().enumerate() {
            // A union's later branches are read by position.
            let position = query
                .branches
                .first()
                .and_then(|first| first.items.iter().position(|i| i.name == name));
            let item = if branch_index == 0 {
                branch.items.iter().find(|i| i.name == name)
            } else {
                position.and_then(|p| branch.items.get(p))
            };
            match item {
                Some(item) if item.star.is_none() => {
                    // Inside its own expression, the name is the column it is made from
                    // (`x::String AS x`), not the alias.
                    visiting.push(item.name.clone());
                    let lineage = self.expression(branch, item.expression, visiting);
                    visiting.pop();
                    found.absorb(&lineage, &[]);
                }
                _ => {
                    // Not listed by name: a `*` brings it from what is in scope.
                    if let Some(lineage) = self.starred(branch, name, visiting) {
                        found.absorb(&lineage, &[]);
                    } else {
                        found.unresolved.insert(name.to_owned());
                    }
                }
            }
        }
        summary(name, found)
    }

    /// `name` brought by a `*` of `select`, when one brings it.
    fn starred(
        &self,
        select: &Select<'_, '_>,
        name: &str,
        visiting: &mut Vec<String>,
    ) -> Option<ColumnLineage> {
        let star = select.items.iter().find_map(|i| i.star.clone())?;
        let entries: Vec<&(String, Entry<'_, '_>)> = select
            .from
            .iter()
            .filter(|(alias, _)| star.as_ref().is_none_or(|q| q == alias))
            .collect();
        let holder = entries
            .iter()
            .find(|(_, entry)| self.holds(entry, name).unwrap_or(entries.len() == 1))?;
        Some(self.entry_column(&holder.1, name, &[], visiting))
    }

    /// Whether `entry` has a column `name`: `None` when its columns are not known.
    fn holds(&self, entry: &Entry<'_, '_>, name: &str) -> Option<bool> {
        match entry {
            Entry::Relation(relation) => {
                (self.columns_of)(relation).map(|columns| columns.iter().any(|c| c == name))
            }
            Entry::Derived(query) => Some(
                query.outputs().iter().any(|c| c == name)
                    || query
                        .branches
                        .first()
                        .is_some_and(|b| b.items.iter().any(|i| i.star.is_some())),
            ),
        }
    }

    /// Column `name` of a `FROM` entry, read at `json_path`.
    fn entry_column(
        &self,
        entry: &Entry<'_, '_>,
        name: &str,
        json_path: &[String],
        visiting: &mut Vec<String>,
    ) -> ColumnLineage {
        match entry {
            Entry::Relation(relation) => ColumnLineage {
                column: name.to_owned(),
                derivation: Derivation::Copied,
                inputs: vec![Input {
                    relation: relation.clone(),
                    column: name.to_owned(),
                    json_path: json_path.to_vec(),
                }],
                opaque: Vec::new(),
                unresolved: Vec::new(),
            },
            Entry::Derived(query) => {
                // Names being read in this query are not aliases in the one below.
                let _ = visiting;
                let mut lineage = self.column(query, name, &mut Vec::new());
                for input in &mut lineage.inputs {
                    input.json_path.extend(json_path.iter().cloned());
                }
                lineage
            }
        }
    }

    /// The lineage of an expression of `select`.
    fn expression(
        &self,
        select: &Select<'_, '_>,
        tokens: &[Token<'_>],
        visiting: &mut Vec<String>,
    ) -> ColumnLineage {
        let mut found = Found::default();
        if !self.spend() {
            return summary("", found);
        }
        let lambdas = lambda_parameters(tokens);
        let mut references = 0_usize;
        let mut transformed = false;
        let mut at = 0;
        while at < tokens.len() {
            let token = &tokens[at];
            // `::Type`, and `AS Type` inside CAST: the type is not a column.
            if token.is_punct("::") || (token.is_keyword("AS") && at > 0) {
                at = skip_type(tokens, at + 1);
                continue;
            }
            if token.is_keyword("OVER") {
                found.raise(Derivation::Windowed);
                transformed = true;
            }
            // A subquery inside an expression (`x IN (SELECT ...)`, a scalar subquery):
            // its value comes from relations this SELECT does not join; not followed.
            if token.is_punct("(")
                && tokens
                    .get(at + 1)
                    .is_some_and(|t| t.is_keyword("SELECT") || t.is_keyword("WITH"))
            {
                found.opaque.insert("(subquery)".to_owned());
                transformed = true;
                at = matching_close(tokens, at).map_or(tokens.len(), |close| close + 1);
                continue;
            }
            if token.kind == Kind::Word && tokens.get(at + 1).is_some_and(|t| t.is_punct("(")) {
                let function = token.text.to_ascii_lowercase();
                // A cast keeps the value; any other function computes a new one.
                transformed |= function != "cast";
                if OPAQUE.iter().any(|o| function.starts_with(o)) {
                    found.opaque.insert(token.text.to_owned());
                }
                let windowed = matching_close(tokens, at + 1)
                    .and_then(|close| tokens.get(close + 1))
                    .is_some_and(|t| t.is_keyword("OVER"));
                if crate::aggregates::is_aggregate(&function) && !windowed {
                    found.raise(Derivation::Aggregated);
                }
                if let Some((column_at, path)) = json_read(tokens, at)
                    && !lambdas.contains(&name_of(&tokens[column_at]))
                {
                    let end = column_at + column_tokens(&tokens[column_at..]);
                    self.reference(select, &tokens[column_at..end], &path, &mut found, visiting);
                    references += 1;
                    // The keys after it are read on: a key given by a column is an input.
                    at = end;
                    continue;
                }
                // `IN (SELECT ...)`: the parenthesis opens a subquery, read as one next.
                let subquery = tokens
                    .get(at + 2)
                    .is_some_and(|t| t.is_keyword("SELECT") || t.is_keyword("WITH"));
                at += if subquery { 1 } else { 2 };
                continue;
            }
            let unit = is_unit(tokens, at);
            let word =
                token.kind == Kind::Word && EXPRESSION_WORDS.iter().any(|w| token.is_keyword(w));
            let qualified_tail = at > 0 && tokens[at - 1].is_punct(".");
            if is_name(token)
                && !(unit || word || qualified_tail || lambdas.contains(&name_of(token)))
            {
                let length = column_tokens(&tokens[at..]);
                self.reference(select, &tokens[at..at + length], &[], &mut found, visiting);
                references += 1;
                at += length;
                continue;
            }
            if !token.is_punct("(") && !token.is_punct(")") {
                transformed |= matches!(token.kind, Kind::Punct | Kind::Number | Kind::String)
                    && !token.is_punct(".");
            }
            at += 1;
        }
        if references == 1 && !transformed {
            found.raise(Derivation::Copied);
        } else if references > 0 || !found.opaque.is_empty() {
            found.raise(Derivation::Computed);
        } else {
            found.raise(Derivation::Constant);
        }
        summary("", found)
    }

    /// A column reference (`c`, `t.c`, `db.t.c`) read at `json_path`, into `found`.
    fn reference(
        &self,
        select: &Select<'_, '_>,
        tokens: &[Token<'_>],
        json_path: &[String],
        found: &mut Found,
        visiting: &mut Vec<String>,
    ) {
        let names: Vec<String> = tokens.iter().filter(|t| is_name(t)).map(name_of).collect();
        let Some((column, qualifier)) = names.split_last() else {
            return;
        };
        let qualifier = qualifier.join(".");
        if qualifier.is_empty() {
            // An alias of this SELECT (ClickHouse lets expressions use them) or a scalar.
            let alias = select
                .items
                .iter()
                .chain(&select.scalars)
                .find(|i| i.star.is_none() && i.name == *column && !is_plain(i.expression, column))
                .filter(|_| !visiting.contains(column));
            if let Some(alias) = alias {
                visiting.push(column.clone());
                let lineage = self.expression(select, alias.expression, visiting);
                visiting.pop();
                found.absorb(&lineage, json_path);
                return;
            }
        }
        // A qualifier names an alias first; a table's own name only when no alias is it.
        let by_alias = select.from.iter().any(|(alias, _)| *alias == qualifier);
        let candidates: Vec<&(String, Entry<'_, '_>)> = select
            .from
            .iter()
            .filter(|(alias, entry)| {
                qualifier.is_empty()
                    || *alias == qualifier
                    || (!by_alias
                        && matches!(entry, Entry::Relation(r) if *r == qualifier
                            || r.rsplit('.').next() == Some(qualifier.as_str())))
            })
            .collect();
        let holders: Vec<&&(String, Entry<'_, '_>)> = if candidates.len() <= 1 {
            candidates.iter().collect()
        } else {
            candidates
                .iter()
                .filter(|(_, entry)| self.holds(entry, column) == Some(true))
                .collect()
        };
        match holders.as_slice() {
            [holder] => {
                let lineage = self.entry_column(&holder.1, column, json_path, visiting);
                found.absorb(&lineage, &[]);
            }
            _ => {
                let shown = if qualifier.is_empty() {
                    column.clone()
                } else {
                    format!("{qualifier}.{column}")
                };
                found.unresolved.insert(shown);
            }
        }
    }
}

/// Whether `expression` is the bare column `name` (an item named after the column it
/// copies refers to that column, not to itself).
fn is_plain(expression: &[Token<'_>], name: &str) -> bool {
    expression
        .last()
        .is_some_and(|t| is_name(t) && name_of(t) == name)
        && expression.iter().all(|t| is_name(t) || t.is_punct("."))
}

fn summary(column: &str, found: Found) -> ColumnLineage {
    ColumnLineage {
        column: column.to_owned(),
        derivation: found.derivation.unwrap_or(Derivation::Constant),
        inputs: found.inputs.into_iter().collect(),
        opaque: found.opaque.into_iter().collect(),
        unresolved: found.unresolved.into_iter().collect(),
    }
}

/// How many tokens a column reference at the start of `tokens` spans (`a`, `t.a`, `d.t.a`).
fn column_tokens(tokens: &[Token<'_>]) -> usize {
    let mut length = 1;
    while length + 1 < tokens.len()
        && tokens[length].is_punct(".")
        && is_name(&tokens[length + 1])
        && !tokens.get(length + 2).is_some_and(|t| t.is_punct("("))
    {
        length += 2;
    }
    length
}

/// Whether the word at `at` is an interval unit, not a column: after a literal or after
/// `INTERVAL <name>`, or before `FROM` (`EXTRACT(YEAR FROM ts)`).
fn is_unit(tokens: &[Token<'_>], at: usize) -> bool {
    if !UNITS.iter().any(|u| tokens[at].is_keyword(u)) {
        return false;
    }
    let before = at.checked_sub(1).map(|b| &tokens[b]);
    before.is_some_and(|t| matches!(t.kind, Kind::Number | Kind::String))
        || (before.is_some_and(is_name)
            && at
                .checked_sub(2)
                .is_some_and(|b| tokens[b].is_keyword("INTERVAL")))
        || tokens.get(at + 1).is_some_and(|t| t.is_keyword("FROM"))
}

/// The index past a type after `::` or `AS` (a name, possibly with arguments).
fn skip_type(tokens: &[Token<'_>], at: usize) -> usize {
    if !tokens.get(at).is_some_and(is_name) {
        return at;
    }
    if tokens.get(at + 1).is_some_and(|t| t.is_punct("(")) {
        matching_close(tokens, at + 1).map_or(tokens.len(), |close| close + 1)
    } else {
        at + 1
    }
}

/// Names bound by lambdas (`x -> ...`, `(x, y) -> ...`) anywhere in `tokens`.
fn lambda_parameters(tokens: &[Token<'_>]) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for at in 0..tokens.len() {
        let arrow = tokens.get(at + 1).is_some_and(|t| t.is_punct("-"))
            && tokens.get(at + 2).is_some_and(|t| t.is_punct(">"));
        if !arrow {
            continue;
        }
        if is_name(&tokens[at]) {
            names.insert(name_of(&tokens[at]));
        } else if tokens[at].is_punct(")") {
            let open = (0..at)
                .rev()
                .find(|&o| matching_close(tokens, o) == Some(at));
            if let Some(open) = open {
                names.extend(tokens[open..at].iter().filter(|t| is_name(t)).map(name_of));
            }
        }
    }
    names
}

/// For a JSON function call at `at` whose first argument is a column: where the column
/// starts and the path it is read at.
fn json_read(tokens: &[Token<'_>], at: usize) -> Option<(usize, Vec<String>)> {
    let function = tokens[at].text.to_ascii_lowercase();
    let keyed = function.starts_with("jsonextract")
        || function.starts_with("simplejsonextract")
        || function.starts_with("visitparamextract")
        || function == "jsonhas"
        || function == "jsonlength"
        || function == "jsontype";
    let pathed = matches!(
        function.as_str(),
        "json_value" | "json_query" | "json_exists"
    );
    if !keyed && !pathed {
        return None;
    }
    let close = matching_close(tokens, at + 1)?;
    let arguments = pieces(&tokens[at + 2..close], |t| t.is_punct(","));
    let first = arguments.first()?;
    if first.is_empty() || !is_name(&first[0]) || column_tokens(first) != first.len() {
        return None;
    }
    let column_at = at + 2;
    let mut path: Vec<String> = arguments[1..]
        .iter()
        .map_while(|argument| match argument {
            [literal] if literal.kind == Kind::String => Some(string_of(literal)),
            [number] if number.kind == Kind::Number => Some(number.text.to_owned()),
            _ => None,
        })
        .collect();
    // `JSONExtract(json, keys..., 'Type')`: the last string is the type, not a key.
    if matches!(
        function.as_str(),
        "jsonextract" | "jsonextractkeysandvalues"
    ) && arguments.len() > 1
        && path.len() == arguments.len() - 1
    {
        path.pop();
    }
    Some((column_at, path))
}

#[cfg(test)]
mod tests;
