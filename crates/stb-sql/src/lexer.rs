//! A ClickHouse SQL lexer that keeps byte spans, so analyses can point into (and splice
//! into) the author's text without ever re-printing it.

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Word,
    QuotedIdent,
    String,
    Number,
    /// Punctuation; `::` is one token.
    Punct,
    Comment,
    Space,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Token<'a> {
    pub kind: Kind,
    pub text: &'a str,
    pub start: usize,
    pub end: usize,
}

impl Token<'_> {
    /// Case-insensitive keyword test for words.
    #[must_use]
    pub fn is_keyword(&self, keyword: &str) -> bool {
        self.kind == Kind::Word && self.text.eq_ignore_ascii_case(keyword)
    }

    #[must_use]
    pub fn is_punct(&self, punct: &str) -> bool {
        self.kind == Kind::Punct && self.text == punct
    }

    #[must_use]
    pub fn is_trivia(&self) -> bool {
        matches!(self.kind, Kind::Comment | Kind::Space)
    }
}

/// The index of the `)` that closes the `(` at `open` in significant `tokens`.
#[must_use]
pub fn matching_close(tokens: &[Token<'_>], open: usize) -> Option<usize> {
    let mut depth = 0_u32;
    for (index, token) in tokens.iter().enumerate().skip(open) {
        if token.is_punct("(") {
            depth += 1;
        } else if token.is_punct(")") {
            depth = depth.checked_sub(1)?;
            if depth == 0 {
                return Some(index);
            }
        }
    }
    None
}

/// An unterminated string, quoted name or comment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LexError {
    pub message: String,
    pub offset: usize,
}

/// All tokens of `sql`, trivia included.
///
/// # Errors
/// An unterminated string, quoted identifier or block comment.
pub fn lex(sql: &str) -> Result<Vec<Token<'_>>, LexError> {
    let bytes = sql.as_bytes();
    let mut tokens = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let start = i;
        let b = bytes[i];
        let kind = if b.is_ascii_whitespace() {
            while i < bytes.len() && bytes[i].is_ascii_whitespace() {
                i += 1;
            }
            Kind::Space
        } else if b == b'-' && bytes.get(i + 1) == Some(&b'-') || b == b'#' {
            while i < bytes.len() && bytes[i] != b'\n' {
                i += 1;
            }
            Kind::Comment
        } else if b == b'/' && bytes.get(i + 1) == Some(&b'*') {
            i = block_comment_end(sql, i)?;
            Kind::Comment
        } else if b == b'\'' {
            i = quoted_end(sql, i)?;
            Kind::String
        } else if b == b'"' || b == b'`' {
            i = quoted_end(sql, i)?;
            Kind::QuotedIdent
        } else if b.is_ascii_digit() {
            while i < bytes.len()
                && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'.' || bytes[i] == b'_')
            {
                i += 1;
            }
            Kind::Number
        } else if b.is_ascii_alphabetic() || b == b'_' || b >= 0x80 {
            while i < bytes.len()
                && (bytes[i].is_ascii_alphanumeric()
                    || bytes[i] == b'_'
                    || bytes[i] == b'$'
                    || bytes[i] >= 0x80)
            {
                i += 1;
            }
            Kind::Word
        } else {
            i += if b == b':' && bytes.get(i + 1) == Some(&b':') {
                2
            } else {
                1
            };
            Kind::Punct
        };
        tokens.push(Token {
            kind,
            text: &sql[start..i],
            start,
            end: i,
        });
    }
    Ok(tokens)
}

/// The offset just past the quoted run opened at `start` (`'`, `"` or `` ` ``), with
/// backslash and doubled-quote escapes.
///
/// # Errors
/// When the quote is never closed.
pub fn quoted_end(sql: &str, start: usize) -> Result<usize, LexError> {
    let bytes = sql.as_bytes();
    let quote = bytes[start];
    let mut i = start + 1;
    while i < bytes.len() {
        if bytes[i] == b'\\' {
            i += 2;
        } else if bytes[i] == quote {
            if bytes.get(i + 1) == Some(&quote) {
                i += 2;
            } else {
                return Ok(i + 1);
            }
        } else {
            i += 1;
        }
    }
    Err(LexError {
        message: if quote == b'\'' {
            "unterminated string literal".to_owned()
        } else {
            "unterminated quoted identifier".to_owned()
        },
        offset: start,
    })
}

/// ClickHouse block comments nest.
fn block_comment_end(sql: &str, start: usize) -> Result<usize, LexError> {
    let bytes = sql.as_bytes();
    let mut depth = 0_u32;
    let mut i = start;
    while i + 1 < bytes.len() {
        if bytes[i] == b'/' && bytes[i + 1] == b'*' {
            depth += 1;
            i += 2;
        } else if bytes[i] == b'*' && bytes[i + 1] == b'/' {
            depth -= 1;
            i += 2;
            if depth == 0 {
                return Ok(i);
            }
        } else {
            i += 1;
        }
    }
    Err(LexError {
        message: "unterminated block comment".to_owned(),
        offset: start,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kinds(sql: &str) -> Vec<(Kind, &str)> {
        lex(sql)
            .expect("valid")
            .into_iter()
            .filter(|t| !t.is_trivia())
            .map(|t| (t.kind, t.text))
            .collect()
    }

    #[test]
    fn tokens_with_spans() {
        assert_eq!(
            kinds("SELECT x::UInt8 AS `a b`, 'it''s' -- c\n/* /* nested */ */ FROM t"),
            vec![
                (Kind::Word, "SELECT"),
                (Kind::Word, "x"),
                (Kind::Punct, "::"),
                (Kind::Word, "UInt8"),
                (Kind::Word, "AS"),
                (Kind::QuotedIdent, "`a b`"),
                (Kind::Punct, ","),
                (Kind::String, "'it''s'"),
                (Kind::Word, "FROM"),
                (Kind::Word, "t"),
            ]
        );
        let tokens = lex("a  b").expect("valid");
        assert_eq!((tokens[2].start, tokens[2].end), (3, 4));
    }

    #[test]
    fn unterminated_things_are_errors() {
        assert_eq!(lex("SELECT 'x").expect_err("string").offset, 7);
        assert!(lex("SELECT `x").is_err());
        assert!(lex("SELECT /* /* */").is_err());
    }
}
