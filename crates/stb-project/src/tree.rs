//! One positioned value tree for both TOML and YAML, so every validation reports a
//! line and column whichever format the user wrote.

use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use stb_diagnostics::Position;

/// A value and where it was written.
#[derive(Debug, Clone, PartialEq)]
pub struct Node {
    pub value: Value,
    pub position: Position,
}

/// A key of a table and where it was written.
#[derive(Debug, Clone, PartialEq)]
pub struct Key {
    pub name: String,
    pub position: Position,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Null,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(String),
    /// A TOML date-time, kept as written.
    Datetime(String),
    Array(Vec<Node>),
    /// Entries in the order written.
    Table(Vec<(Key, Node)>),
}

impl Value {
    /// The word used in messages: "a string", "an integer", ...
    #[must_use]
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Null => "null",
            Self::Bool(_) => "a boolean",
            Self::Int(_) => "an integer",
            Self::Float(_) => "a float",
            Self::Str(_) => "a string",
            Self::Datetime(_) => "a date-time",
            Self::Array(_) => "an array",
            Self::Table(_) => "a table",
        }
    }
}

impl Node {
    #[must_use]
    pub fn as_str(&self) -> Option<&str> {
        match &self.value {
            Value::Str(text) => Some(text),
            _ => None,
        }
    }

    #[must_use]
    pub fn as_table(&self) -> Option<&[(Key, Node)]> {
        match &self.value {
            Value::Table(entries) => Some(entries),
            _ => None,
        }
    }

    /// The value of `key` in a table node.
    #[must_use]
    pub fn get(&self, key: &str) -> Option<&Node> {
        self.as_table()?
            .iter()
            .find(|(k, _)| k.name == key)
            .map(|(_, v)| v)
    }

    /// The key entry itself (for its position).
    #[must_use]
    pub fn key(&self, key: &str) -> Option<&Key> {
        self.as_table()?
            .iter()
            .find(|(k, _)| k.name == key)
            .map(|(k, _)| k)
    }
}

// --- TOML ------------------------------------------------------------------------------------

/// A TOML syntax error: message and where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyntaxError {
    pub message: String,
    pub position: Position,
}

/// Parses TOML text into a positioned tree.
///
/// # Errors
/// The first syntax error, with its position.
pub fn parse_toml(text: &str) -> Result<Node, SyntaxError> {
    match toml::de::DeTable::parse(text) {
        Ok(table) => {
            let span = table.span();
            Ok(Node {
                value: toml_table(text, table.get_ref()),
                position: Position::of_offset(text, span.start),
            })
        }
        Err(error) => Err(SyntaxError {
            message: first_line(error.message()),
            position: Position::of_offset(text, error.span().map_or(0, |span| span.start)),
        }),
    }
}

fn first_line(message: &str) -> String {
    message.lines().next().unwrap_or(message).trim().to_owned()
}

fn toml_table(text: &str, table: &toml::de::DeTable<'_>) -> Value {
    Value::Table(
        table
            .iter()
            .map(|(key, value)| {
                let key = Key {
                    name: key.get_ref().to_string(),
                    position: Position::of_offset(text, key.span().start),
                };
                (key, toml_node(text, value))
            })
            .collect(),
    )
}

fn toml_node(text: &str, node: &toml::Spanned<toml::de::DeValue<'_>>) -> Node {
    use toml::de::DeValue;
    let value = match node.get_ref() {
        DeValue::String(s) => Value::Str(s.to_string()),
        DeValue::Integer(i) => {
            let digits = i.as_str().replace('_', "");
            let digits = digits
                .trim_start_matches("0x")
                .trim_start_matches("0o")
                .trim_start_matches("0b");
            i64::from_str_radix(digits, i.radix())
                .map_or_else(|_| Value::Str(i.as_str().to_owned()), Value::Int)
        }
        DeValue::Float(f) => f
            .as_str()
            .replace('_', "")
            .parse()
            .map_or(Value::Null, Value::Float),
        DeValue::Boolean(b) => Value::Bool(*b),
        DeValue::Datetime(d) => Value::Datetime(d.to_string()),
        DeValue::Array(items) => {
            Value::Array(items.iter().map(|item| toml_node(text, item)).collect())
        }
        DeValue::Table(table) => toml_table(text, table),
    };
    Node {
        value,
        position: Position::of_offset(text, node.span().start),
    }
}

// --- YAML ------------------------------------------------------------------------------------

/// Parses YAML text into a positioned tree.
///
/// # Errors
/// The parser's error, with its position when it has one.
pub fn parse_yaml(text: &str) -> Result<Node, SyntaxError> {
    if text.trim().is_empty() {
        return Ok(Node {
            value: Value::Null,
            position: Position::new(1, 1),
        });
    }
    match serde_saphyr::from_str::<serde_saphyr::Spanned<YamlValue>>(text) {
        Ok(spanned) => Ok(yaml_node(spanned)),
        Err(error) => {
            let position = error.location().map_or(Position::new(1, 1), |l| {
                Position::new(clamp(l.line()), clamp(l.column()))
            });
            Err(SyntaxError {
                message: first_line(&error.to_string()),
                position,
            })
        }
    }
}

fn clamp(value: u64) -> u32 {
    u32::try_from(value).unwrap_or(u32::MAX).max(1)
}

fn yaml_node(spanned: serde_saphyr::Spanned<YamlValue>) -> Node {
    let position = Position::new(
        clamp(spanned.referenced.line()),
        clamp(spanned.referenced.column()),
    );
    Node {
        value: spanned.value.0,
        position,
    }
}

/// Deserialises any YAML node, keeping the position of every child.
struct YamlValue(Value);

impl<'de> Deserialize<'de> for YamlValue {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(YamlVisitor).map(YamlValue)
    }
}

struct YamlVisitor;

impl<'de> Visitor<'de> for YamlVisitor {
    type Value = Value;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("any YAML value")
    }

    fn visit_unit<E: de::Error>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_none<E: de::Error>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        deserializer.deserialize_any(self)
    }

    fn visit_bool<E: de::Error>(self, value: bool) -> Result<Value, E> {
        Ok(Value::Bool(value))
    }

    fn visit_i64<E: de::Error>(self, value: i64) -> Result<Value, E> {
        Ok(Value::Int(value))
    }

    fn visit_u64<E: de::Error>(self, value: u64) -> Result<Value, E> {
        Ok(i64::try_from(value).map_or_else(|_| Value::Str(value.to_string()), Value::Int))
    }

    fn visit_i128<E: de::Error>(self, value: i128) -> Result<Value, E> {
        Ok(i64::try_from(value).map_or_else(|_| Value::Str(value.to_string()), Value::Int))
    }

    fn visit_u128<E: de::Error>(self, value: u128) -> Result<Value, E> {
        Ok(i64::try_from(value).map_or_else(|_| Value::Str(value.to_string()), Value::Int))
    }

    fn visit_f64<E: de::Error>(self, value: f64) -> Result<Value, E> {
        Ok(Value::Float(value))
    }

    fn visit_str<E: de::Error>(self, value: &str) -> Result<Value, E> {
        Ok(Value::Str(value.to_owned()))
    }

    fn visit_string<E: de::Error>(self, value: String) -> Result<Value, E> {
        Ok(Value::Str(value))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element::<serde_saphyr::Spanned<YamlValue>>()? {
            items.push(yaml_node(item));
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut entries = Vec::new();
        while let Some(key) = map.next_key::<serde_saphyr::Spanned<YamlValue>>()? {
            let key_node = yaml_node(key);
            let name = match key_node.value {
                Value::Str(text) => text,
                Value::Int(i) => i.to_string(),
                Value::Bool(b) => b.to_string(),
                Value::Float(f) => f.to_string(),
                Value::Null => "null".to_owned(),
                other => {
                    return Err(de::Error::custom(format!(
                        "mapping keys must be scalars, not {}",
                        other.kind()
                    )));
                }
            };
            let value = yaml_node(map.next_value::<serde_saphyr::Spanned<YamlValue>>()?);
            entries.push((
                Key {
                    name,
                    position: key_node.position,
                },
                value,
            ));
        }
        Ok(Value::Table(entries))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn toml_positions_point_at_values_and_keys() {
        let text = "name = \"x\"\n\n[build]\nmax_pipelines = 3\n";
        let root = parse_toml(text).expect("valid");
        let build = root.get("build").expect("build");
        let max = build.get("max_pipelines").expect("max");
        assert_eq!(max.value, Value::Int(3));
        assert_eq!(max.position, Position::new(4, 17));
        assert_eq!(
            build.key("max_pipelines").expect("key").position,
            Position::new(4, 1)
        );
    }

    #[test]
    fn toml_syntax_errors_have_positions() {
        let error = parse_toml("a = 1\nb = = 2\n").expect_err("invalid");
        assert_eq!(error.position.line, 2);
    }

    #[test]
    fn yaml_positions_point_at_nested_values() {
        let text = "sources:\n  - name: orders\n    kind: kafka\n    replay_boundary:\n      mode: offsets\n";
        let root = parse_yaml(text).expect("valid");
        let Some(Value::Array(items)) = root.get("sources").map(|n| &n.value) else {
            panic!("sources is a list");
        };
        let mode = items[0]
            .get("replay_boundary")
            .and_then(|b| b.get("mode"))
            .expect("mode");
        assert_eq!(mode.as_str(), Some("offsets"));
        assert_eq!(mode.position, Position::new(5, 13));
        assert_eq!(
            items[0].key("kind").expect("kind").position,
            Position::new(3, 5)
        );
    }

    #[test]
    fn yaml_scalars_keep_their_types() {
        let root = parse_yaml("a: 1\nb: true\nc: \"1\"\nd: ~\ne: 1.5\n").expect("valid");
        assert_eq!(root.get("a").map(|n| &n.value), Some(&Value::Int(1)));
        assert_eq!(root.get("b").map(|n| &n.value), Some(&Value::Bool(true)));
        assert_eq!(
            root.get("c").map(|n| &n.value),
            Some(&Value::Str("1".to_owned()))
        );
        assert_eq!(root.get("d").map(|n| &n.value), Some(&Value::Null));
        assert_eq!(root.get("e").map(|n| &n.value), Some(&Value::Float(1.5)));
    }

    #[test]
    fn yaml_syntax_errors_have_positions() {
        let error = parse_yaml("sources:\n  - name: [unclosed\n").expect_err("invalid");
        assert!(error.position.line >= 2, "{error:?}");
    }
}
