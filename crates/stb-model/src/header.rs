//! The header value grammar shared by MODEL, TEST and AUDIT headers ("SQLBuild syntax").
//!
//! ```text
//! header   := map-body
//! map-body := (key value [,])*          commas optional and repeatable
//! key      := word
//! value    := string | word ['(' map-body ')'] | '[' (value [,])* ']' | '(' map-body ')'
//! ```
//!
//! Strings are `'...'` or `"..."` with a backslash escaping the next character. A word is a
//! maximal run of anything but whitespace, quotes and `( ) [ ] , : { }`. A word followed by
//! `(` is a one-entry map (`accepted_values (values [...])`). Bare words become booleans,
//! null, integers or floats when they look like one.

/// A parsed value and the byte offset (in the text given to [`parse`]) where it starts.
#[derive(Debug, Clone, PartialEq)]
pub struct Spanned<T> {
    pub value: T,
    pub offset: usize,
}

#[derive(Debug, Clone, PartialEq)]
pub enum HeaderValue {
    Null,
    Bool(bool),
    Int(i64),
    Float(f64),
    /// A quoted string, or a bare word that is not a number, boolean or null.
    Str(String),
    List(Vec<Spanned<HeaderValue>>),
    /// Entries in written order; a repeated key keeps its last value.
    Map(Vec<(Spanned<String>, Spanned<HeaderValue>)>),
}

impl HeaderValue {
    #[must_use]
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Null => "null",
            Self::Bool(_) => "a boolean",
            Self::Int(_) => "an integer",
            Self::Float(_) => "a number",
            Self::Str(_) => "a string",
            Self::List(_) => "a list",
            Self::Map(_) => "a mapping",
        }
    }

    #[must_use]
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Self::Str(text) => Some(text),
            _ => None,
        }
    }

    /// The entry for `key` in a map.
    #[must_use]
    pub fn get(&self, key: &str) -> Option<&Spanned<HeaderValue>> {
        match self {
            Self::Map(entries) => entries
                .iter()
                .rev()
                .find(|(k, _)| k.value == key)
                .map(|(_, v)| v),
            _ => None,
        }
    }
}

/// A syntax error in a header, at a byte offset of the header text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeaderError {
    pub message: String,
    pub offset: usize,
}

#[derive(Debug, Clone, PartialEq)]
enum Token {
    Open,
    Close,
    OpenList,
    CloseList,
    Comma,
    Colon,
    Quoted(String),
    Word(String),
}

fn tokenize(text: &str) -> Result<Vec<(Token, usize)>, HeaderError> {
    let mut tokens = Vec::new();
    let mut chars = text.char_indices().peekable();
    while let Some(&(offset, ch)) = chars.peek() {
        let symbol = match ch {
            c if c.is_whitespace() => {
                chars.next();
                continue;
            }
            '(' => Some(Token::Open),
            ')' => Some(Token::Close),
            '[' => Some(Token::OpenList),
            ']' => Some(Token::CloseList),
            ',' => Some(Token::Comma),
            ':' => Some(Token::Colon),
            '{' | '}' => {
                return Err(HeaderError {
                    message: format!(
                        "YAML-like brace mappings are not supported at position {offset}; use SQLBuild parenthesized mapping syntax"
                    ),
                    offset,
                });
            }
            _ => None,
        };
        if let Some(symbol) = symbol {
            chars.next();
            tokens.push((symbol, offset));
            continue;
        }
        if ch == '\'' || ch == '"' {
            chars.next();
            let mut value = String::new();
            let mut closed = false;
            while let Some((_, c)) = chars.next() {
                if c == '\\' {
                    if let Some((_, escaped)) = chars.next() {
                        value.push(escaped);
                    }
                } else if c == ch {
                    closed = true;
                    break;
                } else {
                    value.push(c);
                }
            }
            if !closed {
                let kind = if ch == '"' { "double" } else { "single" };
                return Err(HeaderError {
                    message: format!("unterminated {kind}-quoted string"),
                    offset,
                });
            }
            tokens.push((Token::Quoted(value), offset));
            continue;
        }
        let mut word = String::new();
        while let Some(&(at, c)) = chars.peek() {
            if c.is_whitespace() || "()[],:{}".contains(c) {
                break;
            }
            if c == '\'' || c == '"' {
                return Err(HeaderError {
                    message: format!(
                        "unexpected quote inside bare word '{word}'; quote the whole value"
                    ),
                    offset: at,
                });
            }
            word.push(c);
            chars.next();
        }
        tokens.push((Token::Word(word), offset));
    }
    Ok(tokens)
}

/// Parses a header body (the text between `MODEL (` and its closing `)`).
///
/// # Errors
/// The first syntax error, with its offset.
pub fn parse(text: &str) -> Result<Spanned<HeaderValue>, HeaderError> {
    let tokens = tokenize(text)?;
    let mut parser = Parser {
        tokens,
        at: 0,
        end: text.len(),
    };
    // At the top level the body runs to the end of the text: a stray closer is an error
    // inside map_body.
    let body = parser.map_body(None)?;
    Ok(Spanned {
        value: body,
        offset: 0,
    })
}

fn describe(token: &Token) -> String {
    match token {
        Token::Open => "'('".to_owned(),
        Token::Close => "')'".to_owned(),
        Token::OpenList => "'['".to_owned(),
        Token::CloseList => "']'".to_owned(),
        Token::Comma => "','".to_owned(),
        Token::Colon => "':'".to_owned(),
        Token::Quoted(text) => format!("string \"{text}\""),
        Token::Word(word) => format!("token '{word}'"),
    }
}

struct Parser {
    tokens: Vec<(Token, usize)>,
    at: usize,
    end: usize,
}

impl Parser {
    fn peek(&self) -> Option<&Token> {
        self.tokens.get(self.at).map(|(t, _)| t)
    }

    fn offset(&self) -> usize {
        self.tokens.get(self.at).map_or(self.end, |(_, o)| *o)
    }

    /// Entries until `closer` (or the end when `closer` is None).
    fn map_body(&mut self, closer: Option<Token>) -> Result<HeaderValue, HeaderError> {
        let mut entries: Vec<(Spanned<String>, Spanned<HeaderValue>)> = Vec::new();
        loop {
            match self.peek() {
                None if closer.is_none() => return Ok(HeaderValue::Map(entries)),
                None => {
                    return Err(HeaderError {
                        message: "unclosed '(' in header".to_owned(),
                        offset: self.end,
                    });
                }
                Some(token) if Some(token) == closer.as_ref() => {
                    self.at += 1;
                    return Ok(HeaderValue::Map(entries));
                }
                Some(Token::Comma) => self.at += 1,
                Some(Token::Word(word)) => {
                    let key = word.clone();
                    let offset = self.offset();
                    self.at += 1;
                    match self.peek() {
                        Some(Token::Colon) => {
                            return Err(HeaderError {
                                message: format!(
                                    "unexpected ':' after key '{key}'; use SQLBuild syntax '{key} value'"
                                ),
                                offset: self.offset(),
                            });
                        }
                        None | Some(Token::Comma | Token::Close | Token::CloseList) => {
                            return Err(HeaderError {
                                message: format!(
                                    "unexpected token '{key}' without a value; quote values with spaces"
                                ),
                                offset,
                            });
                        }
                        Some(_) => {}
                    }
                    let value = self.value()?;
                    entries.retain(|(k, _)| k.value != key);
                    entries.push((Spanned { value: key, offset }, value));
                }
                Some(other) => {
                    return Err(HeaderError {
                        message: format!("expected a key, found {}", describe(other)),
                        offset: self.offset(),
                    });
                }
            }
        }
    }

    fn value(&mut self) -> Result<Spanned<HeaderValue>, HeaderError> {
        let offset = self.offset();
        let Some((token, _)) = self.tokens.get(self.at).cloned() else {
            return Err(HeaderError {
                message: "expected a value".to_owned(),
                offset,
            });
        };
        self.at += 1;
        let value = match token {
            Token::Quoted(text) => HeaderValue::Str(text),
            Token::Word(word) if self.peek() == Some(&Token::Open) => {
                self.at += 1;
                let inner = self.map_body(Some(Token::Close))?;
                HeaderValue::Map(vec![(
                    Spanned {
                        value: word,
                        offset,
                    },
                    Spanned {
                        value: inner,
                        offset,
                    },
                )])
            }
            Token::Word(word) => bare_word(&word),
            Token::Open => self.map_body(Some(Token::Close))?,
            Token::OpenList => {
                let mut items = Vec::new();
                loop {
                    match self.peek() {
                        Some(Token::CloseList) => {
                            self.at += 1;
                            break;
                        }
                        Some(Token::Comma) => self.at += 1,
                        None => {
                            return Err(HeaderError {
                                message: "unclosed '[' in header".to_owned(),
                                offset,
                            });
                        }
                        Some(_) => items.push(self.value()?),
                    }
                }
                HeaderValue::List(items)
            }
            other => {
                return Err(HeaderError {
                    message: format!("expected a value, found {}", describe(&other)),
                    offset,
                });
            }
        };
        Ok(Spanned { value, offset })
    }
}

fn bare_word(word: &str) -> HeaderValue {
    match word {
        "true" => return HeaderValue::Bool(true),
        "false" => return HeaderValue::Bool(false),
        "null" => return HeaderValue::Null,
        _ => {}
    }
    let digits = word.strip_prefix(['+', '-']).unwrap_or(word);
    if !digits.is_empty()
        && digits.chars().all(|c| c.is_ascii_digit())
        && let Ok(number) = word.parse::<i64>()
    {
        return HeaderValue::Int(number);
    }
    let decimal = digits.split_once('.').is_some_and(|(whole, fraction)| {
        (!whole.is_empty() || !fraction.is_empty())
            && whole.chars().all(|c| c.is_ascii_digit())
            && fraction.chars().all(|c| c.is_ascii_digit())
    });
    if decimal && let Ok(number) = word.parse::<f64>() {
        return HeaderValue::Float(number);
    }
    HeaderValue::Str(word.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn value(text: &str) -> HeaderValue {
        parse(text)
            .unwrap_or_else(|e| panic!("{text}: {e:?}"))
            .value
    }

    fn error(text: &str) -> HeaderError {
        parse(text).expect_err(text)
    }

    #[test]
    fn keys_values_and_optional_commas() {
        let header = value(
            "kind view, description \"Orders; daily\" engine 'MergeTree()',, order_by [\"a\", b]",
        );
        assert_eq!(
            header.get("kind").map(|v| &v.value),
            Some(&HeaderValue::Str("view".to_owned()))
        );
        assert_eq!(
            header.get("description").map(|v| &v.value),
            Some(&HeaderValue::Str("Orders; daily".to_owned()))
        );
        assert_eq!(
            header.get("engine").map(|v| &v.value),
            Some(&HeaderValue::Str("MergeTree()".to_owned()))
        );
        let Some(HeaderValue::List(items)) = header.get("order_by").map(|v| &v.value) else {
            panic!("a list");
        };
        assert_eq!(items.len(), 2);
        assert_eq!(items[1].value, HeaderValue::Str("b".to_owned()));
    }

    #[test]
    fn bare_words_are_typed() {
        let header = value("a true b false c null d 42 e -7 f 1.5 g bounded-8s h a.b i 1.2.3 j .5");
        let get = |k: &str| header.get(k).map(|v| v.value.clone());
        assert_eq!(get("a"), Some(HeaderValue::Bool(true)));
        assert_eq!(get("b"), Some(HeaderValue::Bool(false)));
        assert_eq!(get("c"), Some(HeaderValue::Null));
        assert_eq!(get("d"), Some(HeaderValue::Int(42)));
        assert_eq!(get("e"), Some(HeaderValue::Int(-7)));
        assert_eq!(get("f"), Some(HeaderValue::Float(1.5)));
        assert_eq!(get("g"), Some(HeaderValue::Str("bounded-8s".to_owned())));
        assert_eq!(get("h"), Some(HeaderValue::Str("a.b".to_owned())));
        assert_eq!(get("i"), Some(HeaderValue::Str("1.2.3".to_owned())));
        assert_eq!(get("j"), Some(HeaderValue::Float(0.5)));
    }

    #[test]
    fn parenthesised_maps_and_word_calls() {
        let header = value(
            "columns (id (description \"key\", audits [not_null]))\naudits [accepted_values (column status, values ['a', 'b'])]",
        );
        let id = header
            .get("columns")
            .and_then(|c| c.value.get("id"))
            .expect("id");
        assert_eq!(
            id.value.get("description").map(|v| &v.value),
            Some(&HeaderValue::Str("key".to_owned()))
        );
        let Some(HeaderValue::List(audits)) = header.get("audits").map(|v| &v.value) else {
            panic!("a list");
        };
        let call = audits[0]
            .value
            .get("accepted_values")
            .expect("a one-entry map");
        assert!(
            matches!(call.value.get("values").map(|v| &v.value), Some(HeaderValue::List(items)) if items.len() == 2)
        );
    }

    #[test]
    fn escapes_and_repeated_keys() {
        let header = value("description \"say \\\"hi\\\" ); now\" kind table kind view");
        assert_eq!(
            header.get("description").map(|v| &v.value),
            Some(&HeaderValue::Str("say \"hi\" ); now".to_owned()))
        );
        assert_eq!(
            header.get("kind").map(|v| &v.value),
            Some(&HeaderValue::Str("view".to_owned())),
            "last wins"
        );
        let HeaderValue::Map(entries) = header else {
            panic!("map")
        };
        assert_eq!(entries.len(), 2);
    }

    #[test]
    fn errors_say_what_to_write_instead() {
        assert_eq!(
            error("kind: view").message,
            "unexpected ':' after key 'kind'; use SQLBuild syntax 'kind value'"
        );
        assert_eq!(error("kind: view").offset, 4);
        assert!(
            error("settings {a 1}")
                .message
                .starts_with("YAML-like brace mappings are not supported at position 9")
        );
        assert_eq!(
            error("description").message,
            "unexpected token 'description' without a value; quote values with spaces"
        );
        assert_eq!(
            error("description \"open").message,
            "unterminated double-quoted string"
        );
        assert_eq!(error("engine Merge'Tree").offset, 12);
        assert_eq!(
            error("columns (a (description \"x\")").message,
            "unclosed '(' in header"
        );
        assert_eq!(error("order_by [a, b").message, "unclosed '[' in header");
        assert_eq!(error("kind view )").message, "expected a key, found ')'");
        assert_eq!(error("[a]").message, "expected a key, found '['");
    }

    proptest::proptest! {
        #[test]
        fn never_panics(text in ".{0,200}") {
            let _ = parse(&text);
        }
    }
}
