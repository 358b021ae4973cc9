//! Secrets that compiled SQL holds only as placeholders (`__streambuild_secret__<ENV>__`,
//! e.g. a Postgres password): filled from the environment just before a statement runs,
//! so the recorded statements and artifacts never hold them.

const OPEN: &str = "__streambuild_secret__";
const CLOSE: &str = "__";

/// `sql` with every placeholder replaced by its environment variable's value, quoted for
/// the string literal it sits in.
///
/// # Errors
/// A placeholder whose variable is not set.
pub(crate) fn resolve_secrets(sql: &str) -> Result<String, String> {
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
        out.push_str(&literal[1..literal.len() - 1]);
        rest = &after[end + CLOSE.len()..];
    }
    out.push_str(rest);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_are_filled_and_escaped_and_missing_ones_named() {
        assert_eq!(resolve_secrets("SELECT 1").as_deref(), Ok("SELECT 1"));
        // PATH is set in every test environment; its value has no quotes to escape.
        let path = std::env::var("PATH").expect("PATH");
        assert_eq!(
            resolve_secrets("postgresql('h', '__streambuild_secret__PATH__')"),
            Ok(format!("postgresql('h', '{path}')"))
        );
        let missing =
            resolve_secrets("'__streambuild_secret__STB_SURELY_UNSET_VAR__'").expect_err("unset");
        assert!(missing.contains("STB_SURELY_UNSET_VAR"));
    }
}
