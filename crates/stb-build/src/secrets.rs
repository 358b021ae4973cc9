//! Secrets that compiled SQL holds only as placeholders (`__streambuild_secret__<ENV>__`,
//! e.g. a Postgres password): filled from the environment just before a statement runs,
//! so the recorded statements and artifacts never hold them.

const OPEN: &str = "__streambuild_secret__";
const CLOSE: &str = "__";

/// A statement ready to send, and the secret values it holds (to keep them out of error
/// messages the warehouse may echo the statement into).
pub(crate) struct Resolved {
    pub sql: String,
    pub secrets: Vec<String>,
}

/// The string literals of `runtime` that `recorded` (its redacted text) does not hold:
/// the secrets a step carries inline, such as Kafka credentials.
pub(crate) fn inline_secrets(runtime: &str, recorded: &str) -> Vec<String> {
    let kept = literals(recorded);
    literals(runtime)
        .into_iter()
        .filter(|literal| !literal.is_empty() && !kept.contains(literal))
        .collect()
}

/// Contents of the single-quoted literals of `sql`, escapes kept as written.
fn literals(sql: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut chars = sql.chars();
    while let Some(c) = chars.next() {
        if c != '\'' {
            continue;
        }
        let mut literal = String::new();
        while let Some(inner) = chars.next() {
            match inner {
                '\\' => {
                    literal.push(inner);
                    if let Some(escaped) = chars.next() {
                        literal.push(escaped);
                    }
                }
                '\'' => break,
                other => literal.push(other),
            }
        }
        found.push(literal);
    }
    found
}

/// `message` with every secret value masked.
pub(crate) fn scrub(message: &str, secrets: &[String]) -> String {
    secrets
        .iter()
        .filter(|secret| !secret.is_empty())
        .fold(message.to_owned(), |text, secret| {
            text.replace(secret.as_str(), "***")
        })
}

/// `sql` with every placeholder replaced by its environment variable's value, quoted for
/// the string literal it sits in.
///
/// # Errors
/// A placeholder whose variable is not set.
pub(crate) fn resolve_secrets(sql: &str) -> Result<Resolved, String> {
    let mut secrets = Vec::new();
    let mut out = String::with_capacity(sql.len());
    let mut rest = sql;
    while let Some(start) = rest.find(OPEN) {
        let after = &rest[start + OPEN.len()..];
        let Some(end) = after.find(CLOSE) else {
            break;
        };
        let name = &after[..end];
        let value = std::env::var(name).map_err(|_| {
            format!(
                "environment variable {name} is not set; it holds a secret this statement needs"
            )
        })?;
        out.push_str(&rest[..start]);
        // The placeholder sits inside a single-quoted literal: escape like one.
        let literal = stb_ddl::string_literal(&value);
        let inner = &literal[1..literal.len() - 1];
        out.push_str(inner);
        secrets.push(value.clone());
        secrets.push(inner.to_owned());
        rest = &after[end + CLOSE.len()..];
    }
    out.push_str(rest);
    Ok(Resolved { sql: out, secrets })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_are_filled_and_escaped_and_missing_ones_named() {
        let plain = resolve_secrets("SELECT 1").expect("no placeholder");
        assert_eq!((plain.sql.as_str(), plain.secrets.len()), ("SELECT 1", 0));
        // PATH is set in every test environment; its value has no quotes to escape.
        let path = std::env::var("PATH").expect("PATH");
        let resolved =
            resolve_secrets("postgresql('h', '__streambuild_secret__PATH__')").expect("set");
        assert_eq!(resolved.sql, format!("postgresql('h', '{path}')"));
        assert_eq!(
            scrub(&format!("bad: {path}!"), &resolved.secrets),
            "bad: ***!"
        );
        let Err(missing) = resolve_secrets("'__streambuild_secret__STB_SURELY_UNSET_VAR__'") else {
            panic!("an unset variable must be refused");
        };
        assert!(missing.contains("STB_SURELY_UNSET_VAR"));
    }

    #[test]
    fn inline_secrets_are_the_literals_the_recorded_text_redacts() {
        let runtime = "CREATE TABLE k SETTINGS kafka_topic_list = 'orders', kafka_sasl_password = 'it\\'s-s3cret'";
        let recorded =
            "CREATE TABLE k SETTINGS kafka_topic_list = 'orders', kafka_sasl_password = '***'";
        let secrets = inline_secrets(runtime, recorded);
        assert_eq!(secrets, ["it\\'s-s3cret"]);
        assert_eq!(
            scrub("Syntax error near 'it\\'s-s3cret'", &secrets),
            "Syntax error near '***'"
        );
    }
}
