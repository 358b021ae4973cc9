//! `@name(args)` calls in model SQL, expanded through the Python macro worker.
//!
//! A call is `@` (not preceded by an identifier character, so `owner@x()` is an email),
//! an identifier, then `(`, outside strings and comments. Arguments are Python literals or
//! nested calls; the result is spliced in verbatim and never expanded again.

use serde_json::Value as Json;
use stb_sql::lexer::{Kind, Token, lex};

use crate::macros::{MacroError, MacroRuntime};

/// One top-level call: `@` offset, name, the argument text's span, and the call's end.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MacroCall {
    pub start: usize,
    pub name: String,
    pub args: (usize, usize),
    pub end: usize,
}

/// A problem with a call, at a byte offset of the text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExpansionError {
    pub message: String,
    pub offset: usize,
    /// Where in a macro file the failure happened, when it did.
    pub macro_location: Option<(String, u32)>,
}

fn significant(text: &str) -> Result<Vec<Token<'_>>, ExpansionError> {
    lex(text)
        .map(|tokens| tokens.into_iter().filter(|t| !t.is_trivia()).collect())
        .map_err(|e| ExpansionError {
            message: e.message,
            offset: e.offset,
            macro_location: None,
        })
}

fn is_call_at(text: &str, tokens: &[Token<'_>], i: usize) -> bool {
    let (Some(at), Some(name), Some(open)) = (tokens.get(i), tokens.get(i + 1), tokens.get(i + 2))
    else {
        return false;
    };
    let before_ok = at.start == 0
        || !text.as_bytes()[at.start - 1].is_ascii_alphanumeric()
            && text.as_bytes()[at.start - 1] != b'_';
    at.is_punct("@")
        && name.kind == Kind::Word
        && name.start == at.end
        && open.is_punct("(")
        && before_ok
}

/// Top-level calls in `text[from..]` (calls nested in another call's arguments are part of
/// that call).
///
/// # Errors
/// An unterminated string or comment, or a call without its closing parenthesis.
pub fn find_calls(text: &str, from: usize) -> Result<Vec<MacroCall>, ExpansionError> {
    let tokens = significant(text)?;
    let mut calls = Vec::new();
    let mut i = 0;
    while i < tokens.len() {
        if tokens[i].start < from || !is_call_at(text, &tokens, i) {
            i += 1;
            continue;
        }
        let open = i + 2;
        let close = stb_sql::lexer::matching_close(&tokens, open);
        let Some(close) = close else {
            return Err(ExpansionError {
                message: "Macro call contains an unclosed parenthesis".to_owned(),
                offset: tokens[i].start,
                macro_location: None,
            });
        };
        calls.push(MacroCall {
            start: tokens[i].start,
            name: tokens[i + 1].text.to_owned(),
            args: (tokens[open].end, tokens[close].start),
            end: tokens[close].end,
        });
        i = close + 1;
    }
    Ok(calls)
}

/// The argument text with nested `@inner(` renamed to the worker's nested-call marker.
fn mark_nested(args: &str) -> Result<String, ExpansionError> {
    let tokens = significant(args)?;
    let mut out = String::with_capacity(args.len() + 16);
    let mut last = 0;
    for i in 0..tokens.len() {
        if is_call_at(args, &tokens, i) {
            out.push_str(&args[last..tokens[i].start]);
            out.push_str("__stb_macro__");
            last = tokens[i].end;
        }
    }
    out.push_str(&args[last..]);
    Ok(out)
}

/// Expands every top-level call in `text[from..]`.
///
/// # Errors
/// An unknown macro, invalid arguments, a failing macro, or output that contains a call.
pub fn expand(
    text: &str,
    from: usize,
    runtime: &mut MacroRuntime,
    context: &Json,
) -> Result<String, ExpansionError> {
    let calls = find_calls(text, from)?;
    if calls.is_empty() {
        return Ok(text.to_owned());
    }
    let mut out = String::with_capacity(text.len() + 256);
    let mut last = 0;
    for call in calls {
        let fail = |message: String, macro_location| ExpansionError {
            message,
            offset: call.start,
            macro_location,
        };
        if runtime.find(&call.name).is_none() {
            let names: Vec<&str> = runtime.macros.iter().map(|m| m.name.as_str()).collect();
            return Err(fail(
                format!(
                    "Unknown macro '@{}'. Available macros: {}",
                    call.name,
                    if names.is_empty() {
                        "none".to_owned()
                    } else {
                        names.join(", ")
                    }
                ),
                None,
            ));
        }
        let args = mark_nested(&text[call.args.0..call.args.1])?;
        let value = runtime
            .expand(&call.name, &args, context)
            .map_err(|error| match error {
                MacroError::Python(python) => {
                    let location = python.file.clone().zip(python.line);
                    let message = match python.kind.as_deref() {
                        Some("arguments") => {
                            format!("Macro '@{}' arguments {}", call.name, python.message)
                        }
                        _ => format!("Macro '@{}' failed: {}", call.name, python.message),
                    };
                    fail(message, location)
                }
                MacroError::Timeout(limit) => fail(
                    format!(
                        "Macro '@{}' did not return within {}s",
                        call.name,
                        limit.as_secs_f32()
                    ),
                    None,
                ),
                MacroError::Worker(detail) => fail(
                    format!("Macro '@{}' could not run: {detail}", call.name),
                    None,
                ),
            })?;
        let produced = find_calls(&value, 0).unwrap_or_default();
        if let Some(nested) = produced.first() {
            return Err(fail(
                format!(
                    "Macro '@{}' produced output containing unexpanded macro call '@{}('. Compose macros in Python instead.",
                    call.name, nested.name
                ),
                None,
            ));
        }
        out.push_str(&text[last..call.start]);
        out.push_str(&value);
        last = call.end;
    }
    out.push_str(&text[last..]);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_top_level_calls_only() {
        let text =
            "SELECT @a(1, @b('x)'))::String AS v, 'me@c()' AS mail, owner@d() -- @e()\nFROM t";
        let calls = find_calls(text, 0).expect("valid");
        assert_eq!(calls.len(), 1, "{calls:?}");
        assert_eq!(calls[0].name, "a");
        assert_eq!(&text[calls[0].args.0..calls[0].args.1], "1, @b('x)')");
        assert_eq!(&text[calls[0].start..calls[0].end], "@a(1, @b('x)'))");
        assert!(
            find_calls("@column is not a call", 0)
                .expect("valid")
                .is_empty()
        );
        assert!(find_calls("SELECT @a(1", 0).is_err());
        assert!(
            find_calls("MODEL (d '@a(1)'); SELECT @b()", 18)
                .expect("valid")
                .iter()
                .all(|c| c.name == "b")
        );
    }

    #[test]
    fn nested_calls_are_marked() {
        assert_eq!(
            mark_nested("1, @b('@c()'), x@y()").expect("valid"),
            "1, __stb_macro__b('@c()'), x@y()"
        );
    }
}
