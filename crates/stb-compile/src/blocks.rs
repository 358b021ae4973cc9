//! Files made of header blocks, `TEST (...);` and `AUDIT (...);`, each followed by a body
//! that runs up to the next block.
//!
//! A block starts at the case-sensitive keyword outside strings and comments, with only
//! whitespace before it on its line, followed by `(`. Headers use the MODEL header grammar.

use stb_diagnostics::{Diagnostic, Location, Position};
use stb_model::header::{HeaderValue, Spanned};
use stb_sql::lexer::{Kind, lex};

/// One block as written.
pub(crate) struct Block<'a> {
    /// Header entries; their offsets are relative to `header_offset`.
    pub entries: Vec<(Spanned<String>, Spanned<HeaderValue>)>,
    /// File offset of the header's content (just after its `(`).
    pub header_offset: usize,
    /// File offset of the keyword.
    pub keyword_offset: usize,
    /// The body, trimmed; a trailing `;` is kept.
    pub body: &'a str,
    pub body_offset: usize,
}

/// Why a file does not split: a message without the file's name, and a file offset.
pub(crate) struct BlockError {
    pub message: String,
    pub offset: usize,
}

/// A diagnostic pointing at `offset` of `file`.
pub(crate) fn diagnostic_at(
    code: &'static str,
    file: &str,
    text: &str,
    offset: usize,
    message: impl Into<String>,
    hint: &str,
) -> Diagnostic {
    Diagnostic::new(code, message, hint).at(Location::at(file, Position::of_offset(text, offset)))
}

impl BlockError {
    /// As a diagnostic reading `<what> '<file>' <message>`.
    pub(crate) fn into_diagnostic(
        self,
        code: &'static str,
        file: &str,
        text: &str,
        what: &str,
        hint: &str,
    ) -> Diagnostic {
        diagnostic_at(
            code,
            file,
            text,
            self.offset,
            format!("{what} '{file}' {}", self.message),
            hint,
        )
    }
}

/// Splits `text` into `keyword` blocks. Nothing but whitespace may precede the first block.
pub(crate) fn split<'a>(text: &'a str, keyword: &str) -> Result<Vec<Block<'a>>, BlockError> {
    let tokens = lex(text).map_err(|e| BlockError {
        message: e.message,
        offset: e.offset,
    })?;
    let significant: Vec<_> = tokens.iter().filter(|t| !t.is_trivia()).collect();
    let mut starts = Vec::new();
    for (index, token) in significant.iter().enumerate() {
        let line_start = text[..token.start].rfind('\n').map_or(0, |n| n + 1);
        if token.kind == Kind::Word
            && token.text == keyword
            && text[line_start..token.start].trim().is_empty()
            && significant.get(index + 1).is_some_and(|t| t.is_punct("("))
        {
            starts.push(token.start);
        }
    }
    let Some(&first) = starts.first() else {
        let article = if keyword.starts_with(['A', 'E', 'I', 'O', 'U']) {
            "an"
        } else {
            "a"
        };
        return Err(BlockError {
            message: format!("must start with {article} {keyword} (...); header"),
            offset: 0,
        });
    };
    if !text[..first].trim().is_empty() {
        return Err(BlockError {
            message: format!("has content before its first {keyword} (...); header"),
            offset: 0,
        });
    }
    let mut blocks = Vec::new();
    for (index, &start) in starts.iter().enumerate() {
        let end = starts.get(index + 1).copied().unwrap_or(text.len());
        // Reuse the MODEL header splitter: `MODEL` replaces the keyword, so offsets into
        // the copy shift by the difference in length.
        let as_model = format!("MODEL{}", &text[start + keyword.len()..end]);
        let to_file = |offset: usize| (start + keyword.len() + offset).saturating_sub(5);
        let split = stb_model::file::split(&as_model).map_err(|e| BlockError {
            message: e.message.replace("MODEL(...)", &format!("{keyword}(...)")),
            offset: to_file(e.offset),
        })?;
        let entries = match split.header.value {
            HeaderValue::Map(entries) => entries,
            _ => Vec::new(),
        };
        blocks.push(Block {
            entries,
            header_offset: to_file(split.header_offset),
            keyword_offset: start,
            body: &text
                [to_file(split.query_offset)..to_file(split.query_offset) + split.query.len()],
            body_offset: to_file(split.query_offset),
        });
    }
    Ok(blocks)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_split_at_keywords_outside_strings_and_comments() {
        let text = "AUDIT (name a);\nSELECT 'AUDIT (x)' FROM t\n-- AUDIT (y)\n  AUDIT (name b);\nSELECT 2;\n";
        let blocks = split(text, "AUDIT").ok().expect("splits");
        assert_eq!(blocks.len(), 2);
        assert_eq!(blocks[0].body, "SELECT 'AUDIT (x)' FROM t\n-- AUDIT (y)");
        assert_eq!(blocks[1].body, "SELECT 2;");
        assert_eq!(&text[blocks[1].body_offset..][..6], "SELECT");
        assert_eq!(&text[blocks[1].keyword_offset..][..5], "AUDIT");
        let (key, _) = &blocks[1].entries[0];
        assert_eq!(&text[blocks[1].header_offset + key.offset..][..4], "name");
    }

    #[test]
    fn content_before_the_first_block_and_missing_semicolons_are_refused() {
        assert!(split("SELECT 1\nAUDIT (name a);\nSELECT 1", "AUDIT").is_err());
        let error = split("AUDIT (name a)\nSELECT 1", "AUDIT")
            .err()
            .expect("refused");
        assert!(error.message.contains("AUDIT(...)"), "{}", error.message);
        assert!(split("SELECT 1", "AUDIT").is_err());
        // A lower-case keyword is not a block.
        assert!(split("audit (name a);\nSELECT 1", "AUDIT").is_err());
    }
}
