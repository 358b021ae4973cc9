//! Splitting a model file into its `MODEL ( ... );` header and its query.
//!
//! The header ends at the `)` that closes `MODEL (`, found with quotes and nesting
//! respected, so a `);` inside a quoted value does not end it (the reference stopped at the
//! first `)` followed by `;`).

use crate::header::{self, HeaderError, HeaderValue, Spanned};

/// The parts of a model file, with byte offsets into the file.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelFile<'a> {
    pub header: Spanned<HeaderValue>,
    /// Offset of the header body (just after `MODEL (`).
    pub header_offset: usize,
    /// The query, without surrounding whitespace.
    pub query: &'a str,
    pub query_offset: usize,
}

/// Splits `text`. Header offsets in errors are file offsets.
///
/// # Errors
/// A missing or malformed header, or an empty query.
pub fn split(text: &str) -> Result<ModelFile<'_>, HeaderError> {
    let start = text.len() - text.trim_start().len();
    let missing = || HeaderError {
        message: "must start with a MODEL(...) header as the first non-whitespace content"
            .to_owned(),
        offset: start,
    };
    let after_keyword = text[start..].strip_prefix("MODEL").ok_or_else(missing)?;
    let open_at = start + 5 + (after_keyword.len() - after_keyword.trim_start().len());
    if !text[open_at..].starts_with('(') {
        return Err(missing());
    }
    let body_start = open_at + 1;
    let close_at = closing_paren(text, body_start)?;
    let header = header::parse(&text[body_start..close_at]).map_err(|error| HeaderError {
        message: error.message,
        offset: body_start + error.offset,
    })?;
    let rest = &text[close_at + 1..];
    let semicolon = close_at + 1 + (rest.len() - rest.trim_start().len());
    if !text[semicolon..].starts_with(';') {
        return Err(HeaderError {
            message: "MODEL(...) header must be followed by ';'".to_owned(),
            offset: semicolon,
        });
    }
    let after = &text[semicolon + 1..];
    let query_offset = semicolon + 1 + (after.len() - after.trim_start().len());
    let query = after.trim();
    if query.is_empty() {
        return Err(HeaderError {
            message: "must contain a SELECT query after MODEL(...)".to_owned(),
            offset: query_offset,
        });
    }
    Ok(ModelFile {
        header,
        header_offset: body_start,
        query,
        query_offset,
    })
}

/// The offset of the `)` closing a header whose body starts at `from`.
fn closing_paren(text: &str, from: usize) -> Result<usize, HeaderError> {
    let mut depth = 0_u32;
    let mut chars = text[from..].char_indices();
    while let Some((i, c)) = chars.next() {
        match c {
            '\'' | '"' => {
                let quote = c;
                let mut closed = false;
                while let Some((_, inner)) = chars.next() {
                    if inner == '\\' {
                        chars.next();
                    } else if inner == quote {
                        closed = true;
                        break;
                    }
                }
                if !closed {
                    let kind = if quote == '"' { "double" } else { "single" };
                    return Err(HeaderError {
                        message: format!("unterminated {kind}-quoted string"),
                        offset: from + i,
                    });
                }
            }
            '(' => depth += 1,
            ')' if depth == 0 => return Ok(from + i),
            ')' => depth -= 1,
            _ => {}
        }
    }
    Err(HeaderError {
        message: "MODEL(...) header is not closed".to_owned(),
        offset: from.saturating_sub(1),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_header_and_query() {
        let text =
            "\n  MODEL (\n  kind table,\n  description \"a ); b\",\n);\n\nSELECT 1::UInt8 AS x\n";
        let file = split(text).expect("valid");
        assert_eq!(file.query, "SELECT 1::UInt8 AS x");
        assert_eq!(&text[file.query_offset..file.query_offset + 6], "SELECT");
        assert_eq!(
            file.header.value.get("description").map(|v| &v.value),
            Some(&HeaderValue::Str("a ); b".to_owned())),
            "a ); inside quotes does not end the header"
        );
        assert!(
            split("MODEL(kind view);SELECT 1").is_ok(),
            "no whitespace needed"
        );
    }

    #[test]
    fn header_errors() {
        assert_eq!(
            split("-- c\nMODEL (kind view);\nSELECT 1")
                .expect_err("comment first")
                .offset,
            0
        );
        assert!(
            split("model (kind view); SELECT 1").is_err(),
            "keywords are case-sensitive"
        );
        assert_eq!(
            split("MODEL (kind view)\nSELECT 1")
                .expect_err("no ;")
                .message,
            "MODEL(...) header must be followed by ';'"
        );
        assert_eq!(
            split("MODEL (kind view);\n  \n")
                .expect_err("empty")
                .message,
            "must contain a SELECT query after MODEL(...)"
        );
        assert_eq!(
            split("MODEL (description \"x);")
                .expect_err("open quote")
                .message,
            "unterminated double-quoted string"
        );
        assert_eq!(
            split("MODEL (kind view").expect_err("open").message,
            "MODEL(...) header is not closed"
        );
        let inner = split("MODEL (kind: view); SELECT 1").expect_err("grammar");
        assert_eq!(inner.offset, 11, "offsets are file offsets");
    }

    proptest::proptest! {
        #[test]
        fn never_panics(text in "(MODEL ?\\(.{0,80}\\) ?;)?.{0,80}") {
            let _ = split(&text);
        }
    }
}
