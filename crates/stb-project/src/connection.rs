//! The target's warehouse connection: merged from the config files at discovery, resolved
//! (variables and `${ENV:...}` substituted, types checked) only when a command connects, so
//! `compile` never needs the password.

use std::collections::BTreeMap;

use stb_diagnostics::{Diagnostic, Location};

use crate::codes;
use crate::interpolation::Scope;
use crate::tree::{Node, Value};

/// Connection keys as merged, each with the file it came from, plus the variables needed to
/// resolve them.
#[derive(Debug, Clone, Default)]
pub struct ConnectionSpec {
    entries: BTreeMap<String, (&'static str, Node)>,
    vars: BTreeMap<String, Node>,
}

/// Connection values the project sets; unset keys fall back to flags, environment and
/// defaults in the adapter.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ResolvedConnection {
    pub host: Option<String>,
    pub port: Option<u16>,
    pub username: Option<String>,
    pub password: Option<String>,
    /// Sorted by name; booleans rendered `1`/`0`.
    pub settings: BTreeMap<String, String>,
}

impl ConnectionSpec {
    /// Whole-key merge, later layers win. Layers: (file, `[connection]` table).
    pub(crate) fn merge(
        layers: &[(&'static str, Option<&Node>)],
        vars: BTreeMap<String, Node>,
    ) -> Self {
        let mut entries = BTreeMap::new();
        for (file, layer) in layers {
            if let Some(entries_here) = layer.and_then(Node::as_table) {
                for (key, node) in entries_here {
                    entries.insert(key.name.clone(), (*file, node.clone()));
                }
            }
        }
        Self { entries, vars }
    }

    /// Substitutes variables and environment values and checks each value's type.
    ///
    /// # Errors
    /// An unresolvable `${...}` or a value of the wrong type, at the place it was written.
    pub fn resolve(
        &self,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<ResolvedConnection, Diagnostic> {
        let scope = Scope {
            vars: &self.vars,
            env,
        };
        let mut resolved = ResolvedConnection::default();
        for (key, (file, node)) in &self.entries {
            let at = Location::at(*file, node.position);
            let fail = |code: &'static str, message: String, hint: &str| {
                Diagnostic::new(code, message, hint).at(at.clone())
            };
            let value = match &node.value {
                Value::Str(text) => scope.resolve_text(text).map_err(|error| {
                    fail(
                        codes::CONFIG_INTERPOLATION,
                        format!("connection {key} {error}"),
                        error.hint(),
                    )
                })?,
                other => other.clone(),
            };
            let text = |value: &Value| match value {
                Value::Str(s) => Some(s.clone()),
                Value::Int(i) => Some(i.to_string()),
                _ => None,
            };
            match key.as_str() {
                "host" | "username" => {
                    let Some(found) = text(&value).filter(|s| !s.trim().is_empty()) else {
                        return Err(fail(
                            codes::CONFIG_VALUE,
                            format!("connection {key} must be a non-empty string"),
                            "set it in [connection] or pass the command-line flag",
                        ));
                    };
                    if key == "host" {
                        resolved.host = Some(found);
                    } else {
                        resolved.username = Some(found);
                    }
                }
                "password" => {
                    resolved.password = Some(text(&value).ok_or_else(|| {
                        fail(
                            codes::CONFIG_VALUE,
                            "connection password must be a string".to_owned(),
                            "write password = \"${ENV:CLICKHOUSE_PASSWORD}\"",
                        )
                    })?);
                }
                "port" => {
                    let port = text(&value).and_then(|p| p.trim().parse::<u16>().ok());
                    resolved.port = Some(port.filter(|p| *p > 0).ok_or_else(|| {
                        fail(
                            codes::CONFIG_VALUE,
                            "connection port must be a number between 1 and 65535".to_owned(),
                            "use the server's HTTP port, usually 8123",
                        )
                    })?);
                }
                "settings" => {
                    for (name, setting) in node.as_table().unwrap_or_default() {
                        let rendered = match &setting.value {
                            Value::Bool(b) => Some(if *b { "1" } else { "0" }.to_owned()),
                            Value::Int(i) => Some(i.to_string()),
                            Value::Float(f) => Some(f.to_string()),
                            Value::Str(s) => Some(scope.resolve_string(s).map_err(|error| {
                                Diagnostic::new(
                                    codes::CONFIG_INTERPOLATION,
                                    format!("connection setting {} {error}", name.name),
                                    error.hint(),
                                )
                                .at(Location::at(*file, setting.position))
                            })?),
                            _ => None,
                        };
                        let Some(rendered) = rendered else {
                            return Err(Diagnostic::new(
                                codes::CONFIG_TYPE,
                                format!(
                                    "connection setting {} must be a string, number or boolean",
                                    name.name
                                ),
                                "write the ClickHouse setting's value",
                            )
                            .at(Location::at(*file, setting.position)));
                        };
                        resolved.settings.insert(name.name.clone(), rendered);
                    }
                }
                // Unknown keys were refused by discovery.
                _ => {}
            }
        }
        Ok(resolved)
    }
}
