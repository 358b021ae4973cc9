//! Lexical extraction of `__source(...)` / `__ref(...)` calls from model SQL, outside strings
//! and comments, with 1-based positions.

use stb_diagnostics::Position;

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum RefKind {
    Source,
    Ref,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum RefType {
    Reference,
    Mutable,
}

/// One call as written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RelationRef {
    pub kind: RefKind,
    pub name: String,
    pub ref_type: Option<RefType>,
    pub position: Position,
    /// Byte span of the whole call, for splicing.
    pub span: (usize, usize),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RefError {
    pub message: String,
    pub position: Position,
}

/// Every reference call in `sql`, in authored order.
///
/// # Errors
/// An unclosed string, comment or call, or a malformed argument list.
pub fn extract(sql: &str) -> Result<Vec<RelationRef>, RefError> {
    let bytes = sql.as_bytes();
    let mut refs = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'\'' | b'"' | b'`' => i = skip_quoted(sql, i)?,
            b'-' if bytes.get(i + 1) == Some(&b'-') => i = skip_line(bytes, i),
            b'#' => i = skip_line(bytes, i),
            b'/' if bytes.get(i + 1) == Some(&b'*') => i = skip_block(sql, i)?,
            b'_' if at_boundary(bytes, i) => {
                let kind = if sql[i..].starts_with("__source")
                    && !is_ident(bytes.get(i + 8).copied())
                {
                    Some((RefKind::Source, 8))
                } else if sql[i..].starts_with("__ref") && !is_ident(bytes.get(i + 5).copied()) {
                    Some((RefKind::Ref, 5))
                } else {
                    None
                };
                match kind {
                    Some((kind, len)) => {
                        if let Some((reference, end)) = call(sql, i, i + len, kind)? {
                            refs.push(reference);
                            i = end;
                        } else {
                            i += len;
                        }
                    }
                    None => i += 1,
                }
            }
            _ => i += 1,
        }
    }
    Ok(refs)
}

fn is_ident(byte: Option<u8>) -> bool {
    byte.is_some_and(|b| b.is_ascii_alphanumeric() || b == b'_')
}

fn at_boundary(bytes: &[u8], i: usize) -> bool {
    i == 0 || !is_ident(Some(bytes[i - 1]))
}

fn error(sql: &str, at: usize, message: impl Into<String>) -> RefError {
    RefError {
        message: message.into(),
        position: Position::of_offset(sql, at),
    }
}

pub(crate) fn skip_quoted(sql: &str, start: usize) -> Result<usize, RefError> {
    stb_sql::lexer::quoted_end(sql, start).map_err(|_| error(sql, start, "unclosed quote"))
}

fn skip_line(bytes: &[u8], start: usize) -> usize {
    bytes[start..]
        .iter()
        .position(|&b| b == b'\n')
        .map_or(bytes.len(), |p| start + p)
}

fn skip_block(sql: &str, start: usize) -> Result<usize, RefError> {
    sql[start + 2..]
        .find("*/")
        .map(|p| start + 2 + p + 2)
        .ok_or_else(|| error(sql, start, "unclosed block comment"))
}

fn skip_trivia(sql: &str, mut i: usize) -> Result<usize, RefError> {
    let bytes = sql.as_bytes();
    loop {
        match bytes.get(i) {
            Some(b) if b.is_ascii_whitespace() => i += 1,
            Some(b'-') if bytes.get(i + 1) == Some(&b'-') => i = skip_line(bytes, i),
            Some(b'#') => i = skip_line(bytes, i),
            Some(b'/') if bytes.get(i + 1) == Some(&b'*') => i = skip_block(sql, i)?,
            _ => return Ok(i),
        }
    }
}

/// Parses `( args )` after a marker. None when no `(` follows (not a call).
fn call(
    sql: &str,
    start: usize,
    after_marker: usize,
    kind: RefKind,
) -> Result<Option<(RelationRef, usize)>, RefError> {
    let bytes = sql.as_bytes();
    let open = skip_trivia(sql, after_marker)?;
    if bytes.get(open) != Some(&b'(') {
        return Ok(None);
    }
    // Split arguments on top-level commas, respecting quotes and nested parentheses.
    let mut depth = 0_u32;
    let mut args = Vec::new();
    let mut arg_start = open + 1;
    let mut i = open + 1;
    let close = loop {
        match bytes.get(i) {
            None => return Err(error(sql, start, "unclosed parenthesis in relation call")),
            Some(b'\'' | b'"' | b'`') => i = skip_quoted(sql, i)?,
            Some(b'(') => {
                depth += 1;
                i += 1;
            }
            Some(b')') if depth == 0 => {
                args.push(sql[arg_start..i].trim());
                break i;
            }
            Some(b')') => {
                depth -= 1;
                i += 1;
            }
            Some(b',') if depth == 0 => {
                args.push(sql[arg_start..i].trim());
                i += 1;
                arg_start = i;
            }
            Some(_) => i += 1,
        }
    };
    let marker = if kind == RefKind::Source {
        "__source"
    } else {
        "__ref"
    };
    if args.is_empty() || args.len() > 2 || args.iter().any(|a| a.is_empty()) {
        return Err(error(
            sql,
            start,
            format!("{marker}(...) must contain one name argument and optional ref_type"),
        ));
    }
    let name = unquote(args[0]).filter(|n| !n.is_empty()).ok_or_else(|| {
        error(
            sql,
            start,
            format!("{marker}(...) name must be a quoted string or an identifier"),
        )
    })?;
    let ref_type = match args.get(1) {
        None => None,
        Some(_) if kind == RefKind::Source => {
            return Err(error(sql, start, "__source(...) does not accept ref_type"));
        }
        Some(arg) => {
            let value = arg
                .strip_prefix("ref_type")
                .map(str::trim_start)
                .and_then(|rest| rest.strip_prefix('='))
                .map(str::trim)
                .and_then(unquote);
            match value.as_deref() {
                Some("reference") => Some(RefType::Reference),
                Some("mutable") => Some(RefType::Mutable),
                _ => {
                    return Err(error(
                        sql,
                        start,
                        "__ref(...) second argument must be ref_type='reference' or ref_type='mutable'",
                    ));
                }
            }
        }
    };
    Ok(Some((
        RelationRef {
            kind,
            name,
            ref_type,
            position: Position::of_offset(sql, start),
            span: (start, close + 1),
        },
        close + 1,
    )))
}

fn unquote(arg: &str) -> Option<String> {
    let first = arg.chars().next()?;
    if matches!(first, '\'' | '"' | '`') {
        let inner = arg.strip_prefix(first)?.strip_suffix(first)?;
        return Some(inner.to_owned());
    }
    crate::reader::is_identifier(arg).then(|| arg.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(sql: &str) -> Vec<(RefKind, String, Option<RefType>)> {
        extract(sql)
            .expect("valid")
            .into_iter()
            .map(|r| (r.kind, r.name, r.ref_type))
            .collect()
    }

    #[test]
    fn finds_calls_outside_strings_and_comments() {
        let sql = "SELECT '__ref(\"no\")' -- __ref('no')\n# __source(no)\n/* __ref(x) */ FROM __source(\"orders\") o JOIN __ref('dim', ref_type='reference') d";
        assert_eq!(
            names(sql),
            vec![
                (RefKind::Source, "orders".to_owned(), None),
                (RefKind::Ref, "dim".to_owned(), Some(RefType::Reference)),
            ]
        );
    }

    #[test]
    fn bare_identifiers_and_boundaries() {
        assert_eq!(
            names("FROM __ref(stg)"),
            vec![(RefKind::Ref, "stg".to_owned(), None)]
        );
        assert!(names("SELECT a__ref('x'), __refs").is_empty());
        assert_eq!(
            names("FROM __ref /* c */ ( `m` , ref_type = mutable )")[0].2,
            Some(RefType::Mutable)
        );
    }

    #[test]
    fn positions_are_one_based() {
        let refs = extract("SELECT 1\nFROM  __ref('a')").expect("valid");
        assert_eq!(refs[0].position, Position::new(2, 7));
        assert_eq!(refs[0].span, (15, 25));
    }

    #[test]
    fn errors() {
        assert!(extract("FROM __ref('a'").is_err());
        assert!(extract("FROM __ref()").is_err());
        assert!(extract("FROM __source('a', ref_type='reference')").is_err());
        assert!(extract("FROM __ref('a', kind='x')").is_err());
        assert!(extract("SELECT 'open").is_err());
        assert!(extract("SELECT /* open").is_err());
    }
}
