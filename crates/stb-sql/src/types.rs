//! ClickHouse type names in one spelling, so that two spellings of the same type compare
//! equal (`datetime64(3)` and `DateTime64(3)`, `BIGINT` and `Int64`, `Decimal(18,4)` and
//! `Decimal(18, 4)`) while a real change (`UInt32` to `UInt64`) still differs.
//!
//! The spelling is the one the server prints (`toTypeName`): families that ClickHouse
//! reads case-insensitively, and its SQL-standard and MySQL aliases, are mapped as
//! `system.data_type_families` lists them (26.9); nested types are spelled the same way;
//! arguments are separated by `", "`. A name this module does not know keeps its text,
//! with only its spacing normalised. Used to compare, never to rewrite what is deployed.

use crate::lexer::{Kind, Token, lex};

/// `(alias, lower case, as the server prints it)`: every family name the server reads
/// case-insensitively or as an alias of another, and what it stands for. Multi-word
/// aliases are listed with single spaces.
const FAMILIES: &[(&str, &str)] = &[
    ("bool", "Bool"),
    ("boolean", "Bool"),
    ("date", "Date"),
    ("date32", "Date32"),
    ("datetime", "DateTime"),
    ("datetime32", "DateTime"),
    ("datetime64", "DateTime64"),
    ("timestamp", "DateTime"),
    ("decimal", "Decimal"),
    ("dec", "Decimal"),
    ("fixed", "Decimal"),
    ("numeric", "Decimal"),
    ("decimal32", "Decimal32"),
    ("decimal64", "Decimal64"),
    ("decimal128", "Decimal128"),
    ("decimal256", "Decimal256"),
    ("enum", "Enum"),
    ("json", "JSON"),
    ("time", "Time"),
    ("time64", "Time64"),
    ("binary", "FixedString"),
    ("float", "Float32"),
    ("real", "Float32"),
    ("single", "Float32"),
    ("double", "Float64"),
    ("double precision", "Float64"),
    ("inet4", "IPv4"),
    ("inet6", "IPv6"),
    ("smallint", "Int16"),
    ("smallint signed", "Int16"),
    ("int", "Int32"),
    ("int signed", "Int32"),
    ("integer", "Int32"),
    ("integer signed", "Int32"),
    ("mediumint", "Int32"),
    ("mediumint signed", "Int32"),
    ("bigint", "Int64"),
    ("bigint signed", "Int64"),
    ("signed", "Int64"),
    ("byte", "Int8"),
    ("int1", "Int8"),
    ("int1 signed", "Int8"),
    ("tinyint", "Int8"),
    ("tinyint signed", "Int8"),
    ("binary large object", "String"),
    ("binary varying", "String"),
    ("blob", "String"),
    ("bytea", "String"),
    ("char", "String"),
    ("char large object", "String"),
    ("char varying", "String"),
    ("character", "String"),
    ("character large object", "String"),
    ("character varying", "String"),
    ("clob", "String"),
    ("longblob", "String"),
    ("longtext", "String"),
    ("mediumblob", "String"),
    ("mediumtext", "String"),
    ("national char", "String"),
    ("national char varying", "String"),
    ("national character", "String"),
    ("national character large object", "String"),
    ("national character varying", "String"),
    ("nchar", "String"),
    ("nchar large object", "String"),
    ("nchar varying", "String"),
    ("nvarchar", "String"),
    ("text", "String"),
    ("tinyblob", "String"),
    ("tinytext", "String"),
    ("varbinary", "String"),
    ("varchar", "String"),
    ("varchar2", "String"),
    ("smallint unsigned", "UInt16"),
    ("year", "UInt16"),
    ("int unsigned", "UInt32"),
    ("integer unsigned", "UInt32"),
    ("mediumint unsigned", "UInt32"),
    ("bigint unsigned", "UInt64"),
    ("bit", "UInt64"),
    ("set", "UInt64"),
    ("unsigned", "UInt64"),
    ("int1 unsigned", "UInt8"),
    ("tinyint unsigned", "UInt8"),
];

/// The longest word count of an alias in [`FAMILIES`].
const LONGEST_ALIAS: usize = 4;

/// Families whose arguments the server drops (`VARCHAR(255)` is `String`), and integer
/// aliases whose MySQL display width it ignores (`INT(11)` is `Int32`).
fn drops_arguments(alias: &str, family: &str) -> bool {
    family == "String"
        || (!alias.eq_ignore_ascii_case(family)
            && matches!(
                family,
                "Int8" | "Int16" | "Int32" | "Int64" | "UInt8" | "UInt16" | "UInt32" | "UInt64"
            ))
}

/// `text`, a ClickHouse type, spelled as the server prints it. Text that does not lex or
/// parse as a type comes back with its spacing normalised only.
#[must_use]
pub fn canonical_type(text: &str) -> String {
    let Ok(tokens) = lex(text) else {
        return squeeze(text);
    };
    let tokens: Vec<Token<'_>> = tokens.into_iter().filter(|t| !t.is_trivia()).collect();
    let mut parser = Parser {
        tokens: &tokens,
        at: 0,
    };
    match parser.data_type() {
        Some(canonical) if parser.at == tokens.len() => canonical,
        _ => squeeze(text),
    }
}

/// True when `a` and `b` name the same type ([`canonical_type`] of each).
#[must_use]
pub fn same_type(a: &str, b: &str) -> bool {
    a == b || canonical_type(a) == canonical_type(b)
}

/// `sql` with the type of every cast (`expr::Type`, `CAST(expr AS Type)`,
/// `TRY_CAST(expr AS Type)`) in [`canonical_type`] spelling and every other byte as
/// written: two queries that differ only in how they spell their types compare equal.
/// Text that does not lex comes back unchanged.
#[must_use]
pub fn canonical_query_types(sql: &str) -> String {
    let Ok(tokens) = lex(sql) else {
        return sql.to_owned();
    };
    let significant: Vec<Token<'_>> = tokens.into_iter().filter(|t| !t.is_trivia()).collect();
    let mut spans: Vec<(usize, usize)> = Vec::new();
    for (index, token) in significant.iter().enumerate() {
        let cast =
            token.is_punct("::") || (token.is_keyword("AS") && inside_cast(&significant, index));
        if cast && let Some(end) = type_extent(&significant, index + 1) {
            spans.push((significant[index + 1].start, significant[end].end));
        }
    }
    let mut text = String::with_capacity(sql.len());
    let mut copied = 0;
    for (start, end) in spans {
        if start < copied {
            continue;
        }
        text.push_str(&sql[copied..start]);
        text.push_str(&canonical_type(&sql[start..end]));
        copied = end;
    }
    text.push_str(&sql[copied..]);
    text
}

/// True when the `AS` at `index` separates a `CAST(` / `TRY_CAST(`'s expression from its
/// type (directly inside its parentheses).
fn inside_cast(tokens: &[Token<'_>], index: usize) -> bool {
    let mut depth = 0_i32;
    for at in (0..index).rev() {
        let token = &tokens[at];
        if token.is_punct(")") {
            depth += 1;
        } else if token.is_punct("(") {
            if depth == 0 {
                return at > 0
                    && (tokens[at - 1].is_keyword("CAST")
                        || tokens[at - 1].is_keyword("TRY_CAST"));
            }
            depth -= 1;
        }
    }
    false
}

/// The longest run of words at `at` (up to [`LONGEST_ALIAS`]) that is a known family
/// name or alias: the alias in lower case, the family it stands for, and its word count.
fn known_alias(tokens: &[Token<'_>], at: usize) -> Option<(String, &'static str, usize)> {
    let words = tokens
        .get(at..)?
        .iter()
        .take(LONGEST_ALIAS)
        .take_while(|t| t.kind == Kind::Word)
        .count();
    (1..=words).rev().find_map(|count| {
        let alias = tokens[at..at + count]
            .iter()
            .map(|t| t.text.to_ascii_lowercase())
            .collect::<Vec<_>>()
            .join(" ");
        FAMILIES
            .iter()
            .find(|(a, _)| *a == alias)
            .map(|(_, family)| (alias, *family, count))
    })
}

/// The last token of the type that starts at `at`: its family's words (a known alias of
/// several words, or one word) and its balanced argument list.
fn type_extent(tokens: &[Token<'_>], at: usize) -> Option<usize> {
    let first = tokens.get(at)?;
    if first.kind != Kind::Word {
        return None;
    }
    let count = known_alias(tokens, at).map_or(1, |(_, _, count)| count);
    let last = at + count - 1;
    match tokens.get(last + 1) {
        Some(open) if open.is_punct("(") => crate::lexer::matching_close(tokens, last + 1),
        _ => Some(last),
    }
}

/// `text` with runs of spacing outside string literals made one space: a literal's own
/// spacing is its value. Text that does not lex is kept as it is.
fn squeeze(text: &str) -> String {
    let Ok(tokens) = lex(text) else {
        return text.to_owned();
    };
    let mut squeezed = String::with_capacity(text.len());
    for token in tokens.iter().filter(|t| t.kind != Kind::Comment) {
        if token.kind == Kind::Space {
            squeezed.push(' ');
        } else {
            squeezed.push_str(token.text);
        }
    }
    squeezed.trim().to_owned()
}

struct Parser<'t, 'a> {
    tokens: &'t [Token<'a>],
    at: usize,
}

impl<'t, 'a> Parser<'t, 'a> {
    fn peek(&self) -> Option<&'t Token<'a>> {
        self.tokens.get(self.at)
    }

    fn words_ahead(&self) -> usize {
        self.tokens[self.at..]
            .iter()
            .take_while(|t| t.kind == Kind::Word)
            .count()
    }

    /// A family (its words) with its arguments, canonical.
    fn data_type(&mut self) -> Option<String> {
        if self.words_ahead() == 0 {
            return None;
        }
        // The longest run of words that is a known alias; otherwise one word.
        let (alias, name, count) = known_alias(self.tokens, self.at).map_or_else(
            || {
                let word = self.tokens[self.at].text;
                (word.to_ascii_lowercase(), word.to_owned(), 1)
            },
            |(alias, family, count)| (alias, family.to_owned(), count),
        );
        self.at += count;
        let arguments = if self.peek().is_some_and(|t| t.is_punct("(")) {
            self.at += 1;
            let arguments = self.arguments(&name)?;
            Some(arguments)
        } else {
            None
        };
        if drops_arguments(&alias, &name) {
            return Some(name);
        }
        Some(with_arguments(&name, arguments))
    }

    /// The arguments up to and including the closing `)`.
    fn arguments(&mut self, family: &str) -> Option<Vec<String>> {
        let mut arguments = Vec::new();
        if self.peek().is_some_and(|t| t.is_punct(")")) {
            self.at += 1;
            return Some(arguments);
        }
        loop {
            let first = arguments.is_empty();
            arguments.push(self.argument(family, first)?);
            let next = self.peek()?;
            if next.is_punct(",") {
                self.at += 1;
            } else if next.is_punct(")") {
                self.at += 1;
                return Some(arguments);
            } else {
                return None;
            }
        }
    }

    /// One argument: a type, a named element (`name Type` in a Tuple or Nested), an
    /// aggregate function (the first argument of `AggregateFunction`), or a literal.
    fn argument(&mut self, family: &str, first: bool) -> Option<String> {
        let token = *self.peek()?;
        let aggregate = matches!(family, "AggregateFunction" | "SimpleAggregateFunction");
        if aggregate && first {
            return self.verbatim_until_comma();
        }
        match token.kind {
            Kind::Word | Kind::QuotedIdent => {
                let words = self.words_ahead();
                // As the server reads it: two words in a tuple are a name and a type.
                let named = matches!(family, "Tuple" | "Nested")
                    && (token.kind == Kind::QuotedIdent || words >= 2);
                if named {
                    self.at += 1;
                    let element = self.data_type()?;
                    Some(format!("{} {element}", token.text))
                } else {
                    self.data_type()
                }
            }
            _ => self.verbatim_until_comma(),
        }
    }

    /// Literal tokens (a number, a string, an enum item `'a' = 1`) up to the next `,` or
    /// `)` at this depth, joined as the server prints them.
    fn verbatim_until_comma(&mut self) -> Option<String> {
        let mut depth = 0_u32;
        let mut pieces: Vec<&'a str> = Vec::new();
        while let Some(token) = self.peek() {
            if depth == 0 && (token.is_punct(",") || token.is_punct(")")) {
                break;
            }
            if token.is_punct("(") {
                depth += 1;
            } else if token.is_punct(")") {
                depth -= 1;
            }
            pieces.push(token.text);
            self.at += 1;
        }
        if pieces.is_empty() {
            return None;
        }
        let mut text = String::new();
        for (index, piece) in pieces.iter().enumerate() {
            let previous = index.checked_sub(1).map(|i| pieces[i]);
            let spaced = *piece == "=" || matches!(previous, Some("=" | ","));
            if index > 0 && spaced {
                text.push(' ');
            }
            text.push_str(piece);
        }
        Some(text)
    }
}

/// `family(arguments)` as the server prints it, decimal defaults filled in.
fn with_arguments(family: &str, arguments: Option<Vec<String>>) -> String {
    let decimal_precision = match family {
        "Decimal32" => Some("9"),
        "Decimal64" => Some("18"),
        "Decimal128" => Some("38"),
        "Decimal256" => Some("76"),
        _ => None,
    };
    match (family, arguments) {
        ("Decimal", None) => "Decimal(10, 0)".to_owned(),
        ("Decimal", Some(arguments)) if arguments.len() == 1 => {
            format!("Decimal({}, 0)", arguments[0])
        }
        (_, Some(arguments)) if decimal_precision.is_some() && arguments.len() == 1 => {
            format!(
                "Decimal({}, {})",
                decimal_precision.unwrap_or_default(),
                arguments[0]
            )
        }
        ("Enum8" | "Enum16", Some(mut arguments)) => {
            // The server lists an enum's items by value.
            arguments.sort_by_key(|item| {
                item.rsplit_once('=')
                    .and_then(|(_, value)| value.trim().parse::<i64>().ok())
            });
            format!("{family}({})", arguments.join(", "))
        }
        (_, Some(arguments)) => format!("{family}({})", arguments.join(", ")),
        (_, None) => family.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spellings_of_one_type_are_one_type() {
        for (written, canonical) in [
            ("DateTime64(3)", "DateTime64(3)"),
            ("datetime64(3)", "DateTime64(3)"),
            ("DATETIME64( 3 , 'UTC' )", "DateTime64(3, 'UTC')"),
            ("Nullable(datetime64(3))", "Nullable(DateTime64(3))"),
            ("BIGINT", "Int64"),
            ("bigint unsigned", "UInt64"),
            ("INT(11)", "Int32"),
            ("VARCHAR(255)", "String"),
            ("text", "String"),
            ("double precision", "Float64"),
            ("Decimal(18,4)", "Decimal(18, 4)"),
            ("decimal", "Decimal(10, 0)"),
            ("Decimal(12)", "Decimal(12, 0)"),
            ("Decimal64(4)", "Decimal(18, 4)"),
            ("BINARY(3)", "FixedString(3)"),
            ("boolean", "Bool"),
            (
                "Array(LowCardinality(varchar))",
                "Array(LowCardinality(String))",
            ),
            ("Map(text,  bigint)", "Map(String, Int64)"),
            (
                "Tuple(a bigint, b Nullable(text))",
                "Tuple(a Int64, b Nullable(String))",
            ),
            ("Tuple(double, int)", "Tuple(Float64, Int32)"),
            ("Enum8('a'=1,'b' = -2)", "Enum8('b' = -2, 'a' = 1)"),
            (
                "AggregateFunction(quantiles(0.5,0.9), bigint)",
                "AggregateFunction(quantiles(0.5, 0.9), Int64)",
            ),
            ("DateTime32", "DateTime"),
            (
                "SimpleAggregateFunction(sum, uint64)",
                "SimpleAggregateFunction(sum, uint64)",
            ),
        ] {
            assert_eq!(canonical_type(written), canonical, "{written}");
        }
    }

    #[test]
    fn a_query_s_cast_types_are_respelt_and_nothing_else() {
        let written = "SELECT x::datetime64(3) AS at, CAST(y AS bigint) AS n,\n  TRY_CAST(z AS Nullable( text )) AS s, 'a::text' AS l, w::double precision AS d FROM t AS u";
        assert_eq!(
            canonical_query_types(written),
            "SELECT x::DateTime64(3) AS at, CAST(y AS Int64) AS n,\n  TRY_CAST(z AS Nullable(String)) AS s, 'a::text' AS l, w::Float64 AS d FROM t AS u"
        );
        assert_eq!(
            canonical_query_types("SELECT a::DateTime64(3) AS a"),
            canonical_query_types("SELECT a::datetime64( 3 ) AS a")
        );
        assert_ne!(
            canonical_query_types("SELECT a::UInt32 AS a"),
            canonical_query_types("SELECT a::UInt64 AS a")
        );
    }

    #[test]
    fn a_real_change_still_differs_and_unknown_text_is_kept() {
        assert!(!same_type("UInt32", "UInt64"));
        assert!(!same_type("DateTime64(3)", "DateTime64(6)"));
        assert!(!same_type("Nullable(String)", "String"));
        assert!(same_type("datetime64(3)", "DateTime64(3)"));
        // Case-sensitive families are left as written: a wrong case is the server's error.
        assert_eq!(canonical_type("uint64"), "uint64");
        assert_eq!(canonical_type("Some  Thing("), "Some Thing(");
        // A literal's spacing is its value, even in a type this module cannot read.
        assert!(!same_type(
            "JSON(SKIP REGEXP 'a  b')",
            "JSON(SKIP REGEXP 'a b')"
        ));
        assert_eq!(canonical_type(""), "");
    }
}
