//! Typed reads from a positioned tree that report problems instead of stopping at the first.

use std::path::{Path, PathBuf};

use stb_diagnostics::{Diagnostic, Diagnostics, Location, Position};

use crate::codes;
use crate::tree::{Key, Node, Value};

/// Reads values out of one file's tree, collecting diagnostics located in that file.
pub(crate) struct Reader<'d> {
    pub file: PathBuf,
    pub diagnostics: &'d mut Diagnostics,
}

impl<'d> Reader<'d> {
    pub(crate) fn new(file: impl AsRef<Path>, diagnostics: &'d mut Diagnostics) -> Self {
        Self {
            file: file.as_ref().to_path_buf(),
            diagnostics,
        }
    }

    pub(crate) fn location(&self, position: Position) -> Location {
        Location::at(&self.file, position)
    }

    pub(crate) fn report(
        &mut self,
        code: &'static str,
        position: Position,
        message: impl Into<String>,
        hint: impl Into<String>,
    ) {
        let diagnostic = Diagnostic::new(code, message, hint).at(self.location(position));
        self.diagnostics.push(diagnostic);
    }

    /// The entries of `node` if it is a table; reports otherwise.
    pub(crate) fn table<'n>(&mut self, node: &'n Node, what: &str) -> Option<&'n [(Key, Node)]> {
        if let Some(entries) = node.as_table() {
            return Some(entries);
        }
        self.report(
            codes::CONFIG_TYPE,
            node.position,
            format!("{what} must be a table, not {}", node.value.kind()),
            format!("write {what} as a table of keys and values"),
        );
        None
    }

    /// False (and reported) when a mapping key holds `${...}`: keys are never interpolated.
    pub(crate) fn literal_key(&mut self, key: &Key, what: &str, hint: &str) -> bool {
        if !key.name.contains("${") {
            return true;
        }
        self.report(
            codes::CONFIG_LITERAL,
            key.position,
            format!("{what} must not interpolate mapping keys: '{}'", key.name),
            hint,
        );
        false
    }

    /// Reports every key of `node` not in `allowed` (at the key), and keys that interpolate.
    pub(crate) fn allowed_keys(&mut self, node: &Node, what: &str, allowed: &[&str]) {
        let Some(entries) = node.as_table() else {
            return;
        };
        for (key, _) in entries {
            if !self.literal_key(
                key,
                what,
                "keys are always literal; move the ${...} into the value",
            ) {
                continue;
            }
            if !allowed.contains(&key.name.as_str()) {
                self.report(
                    codes::CONFIG_UNKNOWN_KEY,
                    key.position,
                    format!("{what} contains unsupported key '{}'", key.name),
                    format!(
                        "{}allowed keys: {}",
                        stb_diagnostics::suggest::did_you_mean(&key.name, allowed.iter().copied()),
                        allowed.join(", ")
                    ),
                );
            }
        }
    }

    pub(crate) fn string(&mut self, node: &Node, what: &str) -> Option<String> {
        if let Value::Str(text) = &node.value {
            return Some(text.clone());
        }
        self.type_error(node, what, "a string");
        None
    }

    pub(crate) fn non_empty_string(&mut self, node: &Node, what: &str) -> Option<String> {
        let text = self.string(node, what)?;
        if text.trim().is_empty() {
            self.report(
                codes::CONFIG_VALUE,
                node.position,
                format!("{what} must be a non-empty string"),
                format!("give {what} a value or remove the key"),
            );
            return None;
        }
        Some(text)
    }

    pub(crate) fn bool(&mut self, node: &Node, what: &str) -> Option<bool> {
        if let Value::Bool(value) = node.value {
            return Some(value);
        }
        self.type_error(node, what, "a boolean");
        None
    }

    pub(crate) fn positive_int(&mut self, node: &Node, what: &str) -> Option<u32> {
        match node.value {
            Value::Int(value) if value > 0 => u32::try_from(value).ok().or_else(|| {
                self.report(
                    codes::CONFIG_VALUE,
                    node.position,
                    format!("{what} is too large"),
                    "use a smaller number",
                );
                None
            }),
            Value::Int(_) => {
                self.report(
                    codes::CONFIG_VALUE,
                    node.position,
                    format!("{what} must be a positive integer"),
                    "use a whole number of 1 or more",
                );
                None
            }
            _ => {
                self.type_error(node, what, "a positive integer");
                None
            }
        }
    }

    pub(crate) fn choice(&mut self, node: &Node, what: &str, choices: &[&str]) -> Option<String> {
        let text = self.string(node, what)?;
        if choices.contains(&text.as_str()) {
            return Some(text);
        }
        let quoted: Vec<String> = choices.iter().map(|c| format!("'{c}'")).collect();
        self.report(
            codes::CONFIG_VALUE,
            node.position,
            format!("{what} must be {}, not '{text}'", join_or(&quoted)),
            format!("use one of {}", quoted.join(", ")),
        );
        None
    }

    /// A compact duration such as `10m`; `min_exclusive_s` is the smallest value refused.
    pub(crate) fn duration(&mut self, node: &Node, what: &str) -> Option<u64> {
        let text = self.string(node, what)?;
        if let Some(seconds) = parse_duration(&text) {
            return Some(seconds);
        }
        self.report(
            codes::CONFIG_VALUE,
            node.position,
            format!("{what} must be a duration such as '30s', '10m', '2h' or '7d', not '{text}'"),
            "write one whole number followed by d, h, m or s, with no spaces",
        );
        None
    }

    pub(crate) fn type_error(&mut self, node: &Node, what: &str, expected: &str) {
        self.report(
            codes::CONFIG_TYPE,
            node.position,
            format!("{what} must be {expected}, not {}", node.value.kind()),
            format!("write {what} as {expected}"),
        );
    }

    pub(crate) fn missing(&mut self, position: Position, what: &str, hint: &str) {
        self.report(
            codes::CONFIG_MISSING,
            position,
            format!("{what} is required"),
            hint.to_owned(),
        );
    }
}

fn join_or(items: &[String]) -> String {
    match items {
        [] => String::new(),
        [one] => one.clone(),
        [init @ .., last] => format!("{} or {last}", init.join(", ")),
    }
}

pub use stb_model::text::{is_identifier, parse_duration};
