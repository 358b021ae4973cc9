//! `${name}` and `${ENV:NAME}` references in configuration values.
//!
//! A value that is exactly one token takes the referenced value's type; tokens inside text
//! are stringified. Variables may reference variables and are resolved on demand, so a
//! variable that reads a missing environment variable only fails when something uses it.

use std::collections::BTreeMap;

use crate::tree::{Node, Value};

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InterpolationError {
    UnsupportedNamespace(String),
    UnknownVariable(String),
    MissingEnvironment(String),
    ObjectIntoText(String),
    Cycle(Vec<String>),
}

impl std::fmt::Display for InterpolationError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::UnsupportedNamespace(ns) => {
                write!(f, "uses unsupported interpolation namespace '{ns}'")
            }
            Self::UnknownVariable(name) => {
                write!(f, "references unknown project variable '{name}'")
            }
            Self::MissingEnvironment(name) => {
                write!(f, "references missing environment variable '{name}'")
            }
            Self::ObjectIntoText(token) => write!(
                f,
                "cannot interpolate an object or array into text (${{{token}}}); consume the value through a macro"
            ),
            Self::Cycle(chain) => write!(f, "variable interpolation cycle: {}", chain.join(" -> ")),
        }
    }
}

impl InterpolationError {
    #[must_use]
    pub fn hint(&self) -> &'static str {
        match self {
            Self::UnsupportedNamespace(_) => {
                "use ${name} for a project variable or ${ENV:NAME} for an environment variable"
            }
            Self::UnknownVariable(_) => {
                "define it under [vars] (or a target's vars), or pass --vars"
            }
            Self::MissingEnvironment(_) => "export the variable before running stb",
            Self::ObjectIntoText(_) => {
                "make the whole value the ${...} token, or compute the text in a macro"
            }
            Self::Cycle(_) => {
                "break the cycle: one of these variables must not reference the others"
            }
        }
    }
}

/// The merged project variables (later layers already applied) and the environment.
pub struct Scope<'a> {
    pub vars: &'a BTreeMap<String, Node>,
    pub env: &'a dyn Fn(&str) -> Option<String>,
}

/// True if `text` holds at least one `${...}` token.
#[must_use]
pub fn has_tokens(text: &str) -> bool {
    !tokens(text).is_empty()
}

/// `(start, end, inner)` of every `${inner}` token, no nesting.
fn tokens(text: &str) -> Vec<(usize, usize, &str)> {
    let mut found = Vec::new();
    let mut from = 0;
    while let Some(start) = text[from..].find("${").map(|i| i + from) {
        let inner_start = start + 2;
        let Some(close) = text[inner_start..].find('}').map(|i| i + inner_start) else {
            break;
        };
        let inner = &text[inner_start..close];
        if inner.is_empty() || inner.contains('{') {
            from = inner_start;
            continue;
        }
        found.push((start, close + 1, inner));
        from = close + 1;
    }
    found
}

impl Scope<'_> {
    /// Resolves every token in `text`.
    ///
    /// # Errors
    /// The first reference that cannot be resolved.
    pub fn resolve_text(&self, text: &str) -> Result<Value, InterpolationError> {
        self.resolve_text_in(text, &mut Vec::new())
    }

    /// Like [`Self::resolve_text`] but the result must be text.
    ///
    /// # Errors
    /// An unresolved reference, or a whole-value token that is not a scalar.
    pub fn resolve_string(&self, text: &str) -> Result<String, InterpolationError> {
        match self.resolve_text(text)? {
            Value::Str(s) => Ok(s),
            other => scalar_text(&other)
                .ok_or_else(|| InterpolationError::ObjectIntoText(text.to_owned())),
        }
    }

    fn resolve_text_in(
        &self,
        text: &str,
        stack: &mut Vec<String>,
    ) -> Result<Value, InterpolationError> {
        let found = tokens(text);
        if let [(0, end, inner)] = found.as_slice()
            && *end == text.len()
        {
            return self.resolve_token(inner, stack);
        }
        let mut out = String::new();
        let mut last = 0;
        for (start, end, inner) in found {
            out.push_str(&text[last..start]);
            let value = self.resolve_token(inner, stack)?;
            out.push_str(
                &scalar_text(&value)
                    .ok_or_else(|| InterpolationError::ObjectIntoText(inner.to_owned()))?,
            );
            last = end;
        }
        out.push_str(&text[last..]);
        Ok(Value::Str(out))
    }

    fn resolve_token(
        &self,
        inner: &str,
        stack: &mut Vec<String>,
    ) -> Result<Value, InterpolationError> {
        if let Some((namespace, name)) = inner.split_once(':') {
            if namespace != "ENV" {
                return Err(InterpolationError::UnsupportedNamespace(
                    namespace.to_owned(),
                ));
            }
            return (self.env)(name)
                .map(Value::Str)
                .ok_or_else(|| InterpolationError::MissingEnvironment(name.to_owned()));
        }
        let name = inner.trim();
        if let Some(position) = stack.iter().position(|entry| entry == name) {
            let mut chain = stack[position..].to_vec();
            chain.push(name.to_owned());
            return Err(InterpolationError::Cycle(chain));
        }
        let node = self
            .vars
            .get(name)
            .ok_or_else(|| InterpolationError::UnknownVariable(name.to_owned()))?;
        stack.push(name.to_owned());
        let resolved = self.resolve_value(&node.value, stack);
        stack.pop();
        resolved
    }

    fn resolve_value(
        &self,
        value: &Value,
        stack: &mut Vec<String>,
    ) -> Result<Value, InterpolationError> {
        Ok(match value {
            Value::Str(text) => self.resolve_text_in(text, stack)?,
            Value::Array(items) => Value::Array(
                items
                    .iter()
                    .map(|item| {
                        Ok(Node {
                            value: self.resolve_value(&item.value, stack)?,
                            position: item.position,
                        })
                    })
                    .collect::<Result<_, InterpolationError>>()?,
            ),
            Value::Table(entries) => Value::Table(
                entries
                    .iter()
                    .map(|(key, item)| {
                        Ok((
                            key.clone(),
                            Node {
                                value: self.resolve_value(&item.value, stack)?,
                                position: item.position,
                            },
                        ))
                    })
                    .collect::<Result<_, InterpolationError>>()?,
            ),
            other => other.clone(),
        })
    }
}

fn scalar_text(value: &Value) -> Option<String> {
    match value {
        Value::Null => Some("null".to_owned()),
        Value::Bool(b) => Some(b.to_string()),
        Value::Int(i) => Some(i.to_string()),
        Value::Float(f) => Some(f.to_string()),
        Value::Str(s) | Value::Datetime(s) => Some(s.clone()),
        Value::Array(_) | Value::Table(_) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tree::parse_toml;

    fn vars(text: &str) -> BTreeMap<String, Node> {
        let root = parse_toml(text).expect("toml");
        root.as_table()
            .expect("table")
            .iter()
            .map(|(k, v)| (k.name.clone(), v.clone()))
            .collect()
    }

    fn env(name: &str) -> Option<String> {
        (name == "HOME_DB").then(|| "prod_db".to_owned())
    }

    #[test]
    fn whole_tokens_keep_types_and_embedded_ones_become_text() {
        let vars = vars("port = 9000\nregion = \"eu\"\nname = \"db_${region}\"\nlist = [1, 2]\n");
        let scope = Scope {
            vars: &vars,
            env: &env,
        };
        assert_eq!(scope.resolve_text("${port}"), Ok(Value::Int(9000)));
        assert_eq!(
            scope.resolve_text("p${port}"),
            Ok(Value::Str("p9000".to_owned()))
        );
        assert_eq!(scope.resolve_string("${name}_x"), Ok("db_eu_x".to_owned()));
        assert_eq!(
            scope.resolve_string("${ENV:HOME_DB}"),
            Ok("prod_db".to_owned())
        );
        assert!(matches!(
            scope.resolve_text("a ${list}"),
            Err(InterpolationError::ObjectIntoText(_))
        ));
        assert_eq!(
            scope.resolve_text("plain"),
            Ok(Value::Str("plain".to_owned()))
        );
    }

    #[test]
    fn errors_name_what_is_wrong() {
        let vars = vars("a = \"${b}\"\nb = \"${a}\"\nc = \"${ENV:NOPE}\"\n");
        let scope = Scope {
            vars: &vars,
            env: &env,
        };
        assert_eq!(
            scope.resolve_text("${x}"),
            Err(InterpolationError::UnknownVariable("x".to_owned()))
        );
        assert_eq!(
            scope.resolve_text("${SECRET:x}"),
            Err(InterpolationError::UnsupportedNamespace(
                "SECRET".to_owned()
            ))
        );
        assert_eq!(
            scope.resolve_text("${a}"),
            Err(InterpolationError::Cycle(vec![
                "a".to_owned(),
                "b".to_owned(),
                "a".to_owned()
            ]))
        );
        assert_eq!(
            scope.resolve_text("${c}"),
            Err(InterpolationError::MissingEnvironment("NOPE".to_owned()))
        );
    }
}
