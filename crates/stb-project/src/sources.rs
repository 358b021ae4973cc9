//! `sources/*.yml`: managed Kafka sources, adopted stream tables and Postgres pulls.

use std::path::Path;

use stb_diagnostics::{Diagnostic, Diagnostics, Location, Position};

use crate::codes;
use crate::interpolation::{Scope, has_tokens};
use crate::policies;
use crate::reader::{Reader, is_identifier};
use crate::tree::{Node, Value, parse_yaml};

const ALLOWED_KEYS: &[&str] = &[
    "name",
    "kind",
    "broker_list",
    "topic",
    "consumer_group",
    "format",
    "ttl",
    "retention",
    "settings",
    "table_name",
    "replay_boundary",
    "freshness",
    "host",
    "port",
    "database",
    "table",
    "user",
    "password_env",
    "refresh",
    "append",
];
const POSTGRES_FIELDS: &[&str] = &[
    "host",
    "port",
    "database",
    "table",
    "user",
    "password_env",
    "refresh",
    "append",
];
const KAFKA_FIELDS: &[&str] = &[
    "broker_list",
    "topic",
    "consumer_group",
    "format",
    "ttl",
    "retention",
    "settings",
];
const TYPED_KAFKA_SETTINGS: &[&str] = &[
    "kafka_broker_list",
    "kafka_topic_list",
    "kafka_group_name",
    "kafka_format",
];
const ROLES: &[&str] = &[
    "_replay_partition",
    "_replay_offset",
    "_replay_timestamp",
    "_replay_landed_at",
    "_replay_cursor",
];

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SourceKind {
    Kafka,
    StreamTable,
    Postgres,
}

impl SourceKind {
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Kafka => "kafka",
            Self::StreamTable => "stream_table",
            Self::Postgres => "postgres",
        }
    }
}

/// A validated source.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Source {
    pub name: String,
    pub kind: SourceKind,
    /// Project-relative file.
    pub file: String,
    #[serde(skip)]
    pub position: Position,
    /// Kafka: the topic. Adopted: the table. Postgres: the remote table.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub topic: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub table_name: Option<String>,
    /// offsets | timestamp | landed_at | cursor; none for Postgres.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub replay_boundary: Option<String>,
    /// Adopted sources: role -> physical column.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub columns: Vec<(String, String)>,
    /// Its own `freshness` (it replaces `[defaults.freshness]` wholesale).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub freshness: Option<policies::Freshness>,
    /// Managed Kafka sources: what the landing objects are built from.
    #[serde(skip)]
    pub kafka: Option<KafkaConfig>,
    /// Postgres sources: where and how often to pull.
    #[serde(skip)]
    pub postgres: Option<PostgresConfig>,
}

/// A Postgres table pulled on a schedule by a refreshable materialized view.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PostgresConfig {
    pub host: String,
    pub port: u16,
    pub database: String,
    pub table: String,
    pub user: String,
    /// The *name* of the environment variable holding the password; its value is read
    /// only when DDL runs, never by compile.
    pub password_env: Option<String>,
    /// e.g. `5 MINUTE`
    pub refresh: String,
    pub append: bool,
}

/// A value resolved for use, and whether it came from the environment (a secret: artifacts
/// must not show it).
#[derive(Clone, PartialEq, Eq)]
pub struct Resolved {
    pub value: String,
    pub from_environment: bool,
}

/// A value from the environment prints as `***`: debug output reaches logs and, hashed,
/// the incremental compile's record, neither of which may carry a secret.
impl std::fmt::Debug for Resolved {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let value = if self.from_environment {
            "***"
        } else {
            self.value.as_str()
        };
        f.debug_struct("Resolved")
            .field("value", &value)
            .field("from_environment", &self.from_environment)
            .finish()
    }
}

/// Retention written on a source.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SourceRetention {
    Disabled,
    Policy {
        duration_seconds: u64,
        cap_at_landed: bool,
    },
}

/// The resolved settings of a managed Kafka source.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KafkaConfig {
    /// None: use `defaults.kafka_broker_list`.
    pub broker_list: Option<Resolved>,
    pub consumer_group: Option<String>,
    pub settings: Vec<(String, Resolved)>,
    pub ttl: Option<String>,
    pub retention: Option<SourceRetention>,
}

/// Derives a Kafka source's name from its topic (the project's source naming macro).
pub(crate) trait NameDeriver {
    fn derive(
        &mut self,
        topic: &str,
        file: &Path,
        position: Position,
    ) -> Result<String, Diagnostic>;
}

pub(crate) struct SourceContext<'a> {
    pub scope: &'a Scope<'a>,
    pub default_broker_list: bool,
    pub deriver: Option<&'a mut dyn NameDeriver>,
    /// Names of sources that were declared but failed validation (already reported), so
    /// models reading them do not also report an "unknown" input.
    pub invalid_names: Vec<String>,
}

/// Reads one sources file, appending its sources.
/// Stands in [`SourceContext::invalid_names`] for a file whose sources could not be read.
pub(crate) const UNREADABLE_FILE: &str = "*";

pub(crate) fn read_file(
    relative: &Path,
    text: &str,
    context: &mut SourceContext<'_>,
    diagnostics: &mut Diagnostics,
    out: &mut Vec<Source>,
) {
    let before = diagnostics.len();
    read_entries(relative, text, context, diagnostics, out);
    let file_level_problem = diagnostics
        .iter()
        .skip(before)
        .any(|d| d.code == codes::DISCOVER_SOURCE_YAML || d.code == codes::DISCOVER_SOURCE_SHAPE);
    if file_level_problem {
        context.invalid_names.push(UNREADABLE_FILE.to_owned());
    }
}

fn read_entries(
    relative: &Path,
    text: &str,
    context: &mut SourceContext<'_>,
    diagnostics: &mut Diagnostics,
    out: &mut Vec<Source>,
) {
    let root = match parse_yaml(text) {
        Ok(root) => root,
        Err(error) => {
            diagnostics.push(
                Diagnostic::new(
                    codes::DISCOVER_SOURCE_YAML,
                    format!(
                        "Source file '{}' contains invalid YAML: {}",
                        relative.display(),
                        error.message
                    ),
                    "fix the YAML syntax at this position",
                )
                .at(Location::at(relative, error.position)),
            );
            return;
        }
    };
    let mut reader = Reader::new(relative, diagnostics);
    let shape_hint =
        "a sources file is a mapping with one key, `sources`, holding a list of source mappings";
    let Some(entries) = root.as_table() else {
        reader.report(
            codes::DISCOVER_SOURCE_SHAPE,
            root.position,
            format!(
                "Source file '{}' must be a mapping with a 'sources' list",
                relative.display()
            ),
            shape_hint,
        );
        return;
    };
    let Some(list) = root.get("sources") else {
        let found: Vec<&str> = entries.iter().map(|(k, _)| k.name.as_str()).collect();
        reader.report(
            codes::DISCOVER_SOURCE_SHAPE,
            root.position,
            format!(
                "Source file '{}' has no 'sources' list (found: {})",
                relative.display(),
                found.join(", ")
            ),
            shape_hint,
        );
        return;
    };
    for (key, _) in entries.iter().filter(|(k, _)| k.name != "sources") {
        reader.report(
            codes::DISCOVER_SOURCE_SHAPE,
            key.position,
            format!(
                "Source file '{}' may only contain the key 'sources', not '{}'",
                relative.display(),
                key.name
            ),
            shape_hint,
        );
    }
    let Value::Array(items) = &list.value else {
        reader.report(
            codes::DISCOVER_SOURCE_SHAPE,
            list.position,
            "sources must be a list",
            shape_hint,
        );
        return;
    };
    for item in items {
        if item.as_table().is_none() {
            reader.report(
                codes::DISCOVER_SOURCE_SHAPE,
                item.position,
                format!("each source must be a mapping, not {}", item.value.kind()),
                shape_hint,
            );
            continue;
        }
        match read_source(&mut reader, item, context) {
            Some(source) => out.push(source),
            None => {
                if let Some(name) = item.get("name").and_then(Node::as_str) {
                    context.invalid_names.push(name.to_owned());
                }
            }
        }
    }
}

fn read_source(
    reader: &mut Reader<'_>,
    item: &Node,
    context: &mut SourceContext<'_>,
) -> Option<Source> {
    reader.allowed_keys(item, "source", ALLOWED_KEYS);
    let Some(kind_node) = item.get("kind") else {
        reader.report(
            codes::DISCOVER_SOURCE,
            item.position,
            "source kind is required",
            "add kind: kafka, kind: stream_table or kind: postgres",
        );
        return None;
    };
    let kind = match reader.string(kind_node, "source kind").as_deref() {
        Some("kafka") => SourceKind::Kafka,
        Some("stream_table") => SourceKind::StreamTable,
        Some("postgres") => SourceKind::Postgres,
        Some(other) => {
            reader.report(codes::DISCOVER_SOURCE, kind_node.position, format!("source kind must be one of 'kafka', 'stream_table', 'postgres', not '{other}'"), "use kind: kafka for a topic StreamBuild lands, stream_table for a table you already have");
            return None;
        }
        None => return None,
    };
    let file = reader.file.to_string_lossy().replace('\\', "/");
    match kind {
        SourceKind::Kafka => kafka(reader, item, context, file),
        SourceKind::StreamTable => adopted(reader, item, context, file),
        SourceKind::Postgres => postgres(reader, item, context, file),
    }
}

/// A string field resolved through interpolation; must be non-empty.
fn field(
    reader: &mut Reader<'_>,
    item: &Node,
    key: &str,
    context: &SourceContext<'_>,
) -> Option<String> {
    let node = item.get(key)?;
    let raw = match &node.value {
        Value::Str(text) => text.clone(),
        _ => {
            reader.report(
                codes::DISCOVER_SOURCE,
                node.position,
                format!(
                    "source {key} must resolve to a non-empty string, not {}",
                    node.value.kind()
                ),
                format!("quote the value: {key}: \"...\""),
            );
            return None;
        }
    };
    let resolved = if has_tokens(&raw) {
        match context.scope.resolve_string(&raw) {
            Ok(text) => text,
            Err(error) => {
                let hint = error.hint();
                reader.report(
                    codes::CONFIG_INTERPOLATION,
                    node.position,
                    format!("source {key} {error}"),
                    hint,
                );
                return None;
            }
        }
    } else {
        raw
    };
    if resolved.trim().is_empty() {
        reader.report(
            codes::DISCOVER_SOURCE,
            node.position,
            format!("source {key} must resolve to a non-empty string"),
            format!("give {key} a value or remove it"),
        );
        return None;
    }
    Some(resolved)
}

fn source_name(
    reader: &mut Reader<'_>,
    item: &Node,
    context: &SourceContext<'_>,
) -> Option<String> {
    let name = field(reader, item, "name", context)?;
    if is_identifier(&name) {
        return Some(name);
    }
    let position = item.get("name").map_or(item.position, |n| n.position);
    reader.report(
        codes::DISCOVER_SOURCE_NAME,
        position,
        format!("source name '{name}' must resolve to an unqualified identifier using only letters, numbers, and underscores"),
        "rename it, e.g. orders_events",
    );
    None
}

fn forbid(reader: &mut Reader<'_>, item: &Node, keys: &[&str], message: &str, hint: &str) {
    let present: Vec<&str> = keys
        .iter()
        .copied()
        .filter(|k| item.get(k).is_some())
        .collect();
    if let Some(first) = present.first().and_then(|k| item.key(k)) {
        reader.report(
            codes::DISCOVER_SOURCE,
            first.position,
            format!("{message}: {}", present.join(", ")),
            hint,
        );
    }
}

fn kafka(
    reader: &mut Reader<'_>,
    item: &Node,
    context: &mut SourceContext<'_>,
    file: String,
) -> Option<Source> {
    forbid(
        reader,
        item,
        &["table_name"],
        "a Kafka source must not mix Kafka and adopted table fields",
        "remove table_name, or use kind: stream_table",
    );
    forbid(
        reader,
        item,
        POSTGRES_FIELDS,
        "a Kafka source must not declare Postgres fields",
        "remove them, or use kind: postgres",
    );
    let topic = match item.get("topic") {
        Some(_) => field(reader, item, "topic", context),
        None => {
            reader.report(
                codes::DISCOVER_SOURCE,
                item.position,
                "a Kafka source requires topic",
                "add topic: <kafka topic name>",
            );
            None
        }
    };
    let name = if item.get("name").is_some() {
        source_name(reader, item, context)
    } else if let (Some(deriver), Some(topic)) = (context.deriver.as_deref_mut(), topic.as_deref())
    {
        match deriver.derive(topic, &reader.file, item.position) {
            Ok(name) if is_identifier(&name) => Some(name),
            Ok(name) => {
                reader.report(codes::DISCOVER_SOURCE_NAME, item.position, format!("the source naming macro returned '{name}', which is not an unqualified identifier"), "make the macro return letters, numbers and underscores only");
                None
            }
            Err(diagnostic) => {
                reader.diagnostics.push(diagnostic);
                None
            }
        }
    } else {
        if context.deriver.is_none() {
            reader.report(codes::DISCOVER_SOURCE, item.position, "source name must be a non-empty string or defaults.sources.kafka.naming_macro must be configured", "add name: <identifier>");
        }
        None
    };
    let broker_list = if item.get("broker_list").is_some() {
        field(reader, item, "broker_list", context).map(|value| Resolved {
            value,
            from_environment: uses_environment(item.get("broker_list")),
        })
    } else {
        None
    };
    if item.get("broker_list").is_none() && !context.default_broker_list {
        reader.report(
            codes::DISCOVER_SOURCE,
            item.position,
            "a Kafka source needs broker_list (or defaults.kafka_broker_list in the project file)",
            "add broker_list: host:9092",
        );
    }
    let consumer_group = if item.get("consumer_group").is_some() {
        field(reader, item, "consumer_group", context)
    } else {
        None
    };
    if item.get("format").is_some()
        && let Some(format) = field(reader, item, "format", context)
        && format != "JSONAsString"
    {
        let position = item.get("format").map_or(item.position, |n| n.position);
        reader.report(
            codes::DISCOVER_SOURCE,
            position,
            format!(
                "Kafka sources currently support only the 'JSONAsString' format, not '{format}'"
            ),
            "remove format (JSONAsString is the default); models parse kafka_value",
        );
    }
    let settings = item
        .get("settings")
        .map(|settings| kafka_settings(reader, settings, context))
        .unwrap_or_default();
    let mut ttl = None;
    if let (Some(_), Some(retention)) = (item.get("ttl"), item.get("retention")) {
        reader.report(
            codes::DISCOVER_SOURCE,
            retention.position,
            "a Kafka source cannot combine ttl and retention",
            "keep retention (typed) or ttl (raw expression), not both",
        );
    } else if item.get("ttl").is_some() {
        ttl = field(reader, item, "ttl", context);
    }
    if let Some(retention) = item.get("retention") {
        policies::retention(reader, retention, "source retention");
    }
    let retention = item.get("retention").and_then(retention_setting);
    let freshness = item
        .get("freshness")
        .and_then(|node| policies::freshness(reader, node, "source freshness"));
    let replay_boundary = boundary(reader, item, SourceKind::Kafka).map(|(mode, _)| mode);
    Some(Source {
        name: name?,
        kind: SourceKind::Kafka,
        file,
        position: item.position,
        topic,
        table_name: None,
        replay_boundary: Some(replay_boundary?),
        columns: Vec::new(),
        freshness,
        postgres: None,
        kafka: Some(KafkaConfig {
            broker_list,
            consumer_group,
            settings,
            ttl,
            retention,
        }),
    })
}

pub(crate) fn uses_environment(node: Option<&Node>) -> bool {
    node.and_then(Node::as_str)
        .is_some_and(|text| text.contains("${ENV:"))
}

/// A validated retention value as a typed setting (`${...}` retention is not typed here).
pub(crate) fn retention_setting(node: &Node) -> Option<SourceRetention> {
    match &node.value {
        Value::Bool(false) => Some(SourceRetention::Disabled),
        Value::Table(_) => Some(SourceRetention::Policy {
            duration_seconds: node
                .get("duration")
                .and_then(Node::as_str)
                .and_then(crate::reader::parse_duration)?,
            cap_at_landed: node.get("cap_at").and_then(Node::as_str) == Some("landed"),
        }),
        _ => None,
    }
}

fn kafka_settings(
    reader: &mut Reader<'_>,
    settings: &Node,
    context: &SourceContext<'_>,
) -> Vec<(String, Resolved)> {
    let mut resolved = Vec::new();
    let Some(entries) = reader.table(settings, "source settings") else {
        return resolved;
    };
    for (key, value) in entries {
        if TYPED_KAFKA_SETTINGS.contains(&key.name.as_str()) {
            reader.report(
                codes::DISCOVER_SOURCE,
                key.position,
                format!(
                    "source settings cannot redefine typed Kafka settings: {}",
                    key.name
                ),
                "use broker_list, topic, consumer_group or format instead",
            );
            continue;
        }
        let value_text = match &value.value {
            Value::Str(text) if has_tokens(text) => context
                .scope
                .resolve_string(text)
                .ok()
                .filter(|t| !t.is_empty()),
            Value::Str(text) => Some(text.clone()).filter(|t| !t.is_empty()),
            _ => None,
        };
        if let Some(text) = value_text {
            resolved.push((
                key.name.clone(),
                Resolved {
                    value: text,
                    from_environment: uses_environment(Some(value)),
                },
            ));
        } else {
            reader.report(
                codes::DISCOVER_SOURCE,
                value.position,
                format!(
                    "source setting {} must resolve to a non-empty string",
                    key.name
                ),
                "quote it: \"...\" (numbers too)",
            );
        }
    }
    resolved
}

/// `replay_boundary`: returns (mode, role mapping).
fn boundary(
    reader: &mut Reader<'_>,
    item: &Node,
    kind: SourceKind,
) -> Option<(String, Vec<(String, String)>)> {
    let Some(node) = item.get("replay_boundary") else {
        reader.report(
            codes::DISCOVER_SOURCE,
            item.position,
            "source replay_boundary is required",
            "add replay_boundary: { mode: offsets } (or timestamp, landed_at)",
        );
        return None;
    };
    reader.table(node, "replay_boundary")?;
    reader.allowed_keys(node, "replay_boundary", &["mode", "columns"]);
    let Some(mode_node) = node.get("mode") else {
        reader.report(
            codes::DISCOVER_SOURCE,
            node.position,
            "replay_boundary.mode is required",
            "add mode: offsets",
        );
        return None;
    };
    let modes: &[&str] = match kind {
        SourceKind::Kafka => &["offsets", "timestamp", "landed_at"],
        _ => &["offsets", "timestamp", "cursor"],
    };
    let mode = reader.string(mode_node, "replay_boundary.mode")?;
    if !modes.contains(&mode.as_str()) {
        let extra = if kind == SourceKind::Kafka && mode == "cursor" {
            " (cursor is only for adopted sources)"
        } else if kind != SourceKind::Kafka && mode == "landed_at" {
            " (landed_at is not allowed for adopted sources)"
        } else {
            ""
        };
        reader.report(
            codes::DISCOVER_SOURCE,
            mode_node.position,
            format!(
                "replay_boundary.mode must be one of {}, not '{mode}'{extra}",
                modes.join(", ")
            ),
            "offsets keeps per-partition positions; timestamp cuts by event time",
        );
        return None;
    }
    if kind == SourceKind::Kafka {
        if let Some(columns) = node.key("columns") {
            reader.report(
                codes::DISCOVER_SOURCE,
                columns.position,
                "replay_boundary.columns is only valid for adopted sources",
                "managed Kafka sources land into fixed _replay_* columns; remove columns",
            );
            return None;
        }
        return Some((mode, Vec::new()));
    }
    let Some(columns) = node.get("columns") else {
        reader.report(
            codes::DISCOVER_SOURCE,
            node.position,
            "an adopted source's replay_boundary requires columns",
            "map roles to your table's columns, e.g. columns: { _replay_timestamp: event_time }",
        );
        return None;
    };
    let entries = reader.table(columns, "replay_boundary.columns")?;
    let mut mapping = Vec::new();
    for (key, value) in entries {
        if !ROLES.contains(&key.name.as_str()) {
            reader.report(
                codes::CONFIG_UNKNOWN_KEY,
                key.position,
                format!(
                    "replay_boundary.columns contains unsupported role '{}'",
                    key.name
                ),
                format!(
                    "{}roles: {}",
                    stb_diagnostics::suggest::did_you_mean(&key.name, ROLES.iter().copied()),
                    ROLES.join(", ")
                ),
            );
            continue;
        }
        if let Some(column) =
            reader.non_empty_string(value, &format!("replay_boundary.columns.{}", key.name))
        {
            mapping.push((key.name.clone(), column));
        }
    }
    let (required, forbidden): (&[&str], &[&str]) = match mode.as_str() {
        "offsets" => (
            &["_replay_partition", "_replay_offset", "_replay_timestamp"],
            &["_replay_cursor", "_replay_landed_at"],
        ),
        "timestamp" => (
            &["_replay_timestamp"],
            &[
                "_replay_partition",
                "_replay_offset",
                "_replay_cursor",
                "_replay_landed_at",
            ],
        ),
        _ => (
            &["_replay_cursor", "_replay_timestamp"],
            &["_replay_partition", "_replay_offset", "_replay_landed_at"],
        ),
    };
    let has = |role: &str| mapping.iter().any(|(r, _)| r == role);
    let missing: Vec<&str> = required.iter().copied().filter(|r| !has(r)).collect();
    if !missing.is_empty() {
        reader.report(
            codes::DISCOVER_SOURCE,
            columns.position,
            format!(
                "replay_boundary mode '{mode}' requires columns for {}",
                missing.join(", ")
            ),
            "map each required role to a column of the adopted table",
        );
    }
    let extra: Vec<&str> = forbidden.iter().copied().filter(|r| has(r)).collect();
    if !extra.is_empty() {
        reader.report(
            codes::DISCOVER_SOURCE,
            columns.position,
            format!(
                "replay_boundary mode '{mode}' does not allow {}",
                extra.join(", ")
            ),
            "remove the roles this mode does not use",
        );
    }
    (missing.is_empty() && extra.is_empty()).then_some((mode, mapping))
}

fn adopted(
    reader: &mut Reader<'_>,
    item: &Node,
    context: &SourceContext<'_>,
    file: String,
) -> Option<Source> {
    forbid(
        reader,
        item,
        KAFKA_FIELDS,
        "an adopted source must not mix adopted and Kafka fields",
        "remove them, or use kind: kafka",
    );
    forbid(
        reader,
        item,
        POSTGRES_FIELDS,
        "an adopted source must not declare Postgres fields",
        "remove them",
    );
    let name = match item.get("name") {
        Some(_) => source_name(reader, item, context),
        None => {
            reader.report(
                codes::DISCOVER_SOURCE,
                item.position,
                "an adopted source requires name",
                "add name: <identifier>",
            );
            None
        }
    };
    let table_name = match item.get("table_name") {
        Some(_) => field(reader, item, "table_name", context),
        None => {
            reader.report(
                codes::DISCOVER_SOURCE,
                item.position,
                "an adopted source requires table_name",
                "add table_name: <existing table in the target database>",
            );
            None
        }
    };
    let freshness = item
        .get("freshness")
        .and_then(|node| policies::freshness(reader, node, "source freshness"));
    let (mode, columns) = boundary(reader, item, SourceKind::StreamTable)?;
    Some(Source {
        name: name?,
        kind: SourceKind::StreamTable,
        file,
        position: item.position,
        topic: None,
        table_name: Some(table_name?),
        replay_boundary: Some(mode),
        columns,
        freshness,
        kafka: None,
        postgres: None,
    })
}

fn postgres(
    reader: &mut Reader<'_>,
    item: &Node,
    context: &SourceContext<'_>,
    file: String,
) -> Option<Source> {
    forbid(
        reader,
        item,
        &[KAFKA_FIELDS, &["table_name", "replay_boundary"]].concat(),
        "a Postgres source must not declare streaming fields",
        "remove them, or use kind: kafka / stream_table",
    );
    let name = match item.get("name") {
        Some(_) => source_name(reader, item, context),
        None => {
            reader.report(
                codes::DISCOVER_SOURCE,
                item.position,
                "a Postgres source requires name",
                "add name: <identifier>",
            );
            None
        }
    };
    let freshness = item
        .get("freshness")
        .and_then(|node| policies::freshness(reader, node, "source freshness"));
    let mut complete = true;
    let mut values = std::collections::BTreeMap::new();
    for key in ["host", "database", "table", "user", "refresh"] {
        if item.get(key).is_none() {
            reader.report(
                codes::DISCOVER_SOURCE,
                item.position,
                format!("a Postgres source requires {key}"),
                format!("add {key}: ..."),
            );
            complete = false;
        } else if let Some(value) = field(reader, item, key, context) {
            values.insert(key, value);
        } else {
            complete = false;
        }
    }
    if let Some(refresh) = item.get("refresh").and_then(Node::as_str)
        && !is_refresh(refresh)
    {
        let position = item.get("refresh").map_or(item.position, |n| n.position);
        reader.report(
            codes::DISCOVER_SOURCE,
            position,
            format!("Postgres refresh must look like '5 MINUTE', not '{refresh}'"),
            "a whole number and SECOND, MINUTE, HOUR or DAY",
        );
        complete = false;
    }
    if let Some(port) = item.get("port") {
        let ok = match &port.value {
            Value::Int(p) => (1..=65_535).contains(p),
            Value::Str(text) => text.parse::<u16>().is_ok_and(|p| p > 0),
            _ => false,
        };
        if !ok {
            reader.report(
                codes::DISCOVER_SOURCE,
                port.position,
                "Postgres port must be a port number",
                "for example 5432",
            );
            complete = false;
        }
    }
    if let Some(append) = item.get("append") {
        let ok = match &append.value {
            Value::Bool(_) => true,
            Value::Str(text) => ["true", "yes", "1", "false", "no", "0"]
                .contains(&text.to_ascii_lowercase().as_str()),
            _ => false,
        };
        if !ok {
            reader.report(
                codes::DISCOVER_SOURCE,
                append.position,
                "Postgres append must be true or false",
                "write append: true",
            );
            complete = false;
        }
    }
    let password_env = if item.get("password_env").is_some() {
        field(reader, item, "password_env", context)
    } else {
        None
    };
    let port = match item.get("port").map(|n| &n.value) {
        Some(Value::Int(p)) => u16::try_from(*p).unwrap_or(5432),
        Some(Value::Str(text)) => text.parse().unwrap_or(5432),
        _ => 5432,
    };
    let append = match item.get("append").map(|n| &n.value) {
        Some(Value::Bool(b)) => *b,
        Some(Value::Str(text)) => {
            ["true", "yes", "1"].contains(&text.to_ascii_lowercase().as_str())
        }
        _ => true,
    };
    let table = item.get("table").and_then(Node::as_str).map(str::to_owned);
    let name = name?;
    let mut take = |key: &str| values.remove(key).unwrap_or_default();
    let postgres = PostgresConfig {
        host: take("host"),
        port,
        database: take("database"),
        table: take("table"),
        user: take("user"),
        password_env,
        refresh: normalise_refresh(&take("refresh")),
        append,
    };
    complete.then(|| Source {
        name,
        kind: SourceKind::Postgres,
        file,
        position: item.position,
        topic: None,
        table_name: table,
        replay_boundary: None,
        columns: Vec::new(),
        freshness,
        kafka: None,
        postgres: Some(postgres),
    })
}

/// `5 minutes` -> `5 MINUTE`: ClickHouse's REFRESH EVERY spelling.
fn normalise_refresh(text: &str) -> String {
    let mut parts = text.split_whitespace();
    let number = parts.next().unwrap_or_default();
    let unit = parts.next().unwrap_or_default().to_ascii_uppercase();
    format!("{number} {}", unit.strip_suffix('S').unwrap_or(&unit))
}

/// `^\d+\s+(SECOND|MINUTE|HOUR|DAY)S?$`, case-insensitive.
fn is_refresh(text: &str) -> bool {
    let mut parts = text.split_whitespace();
    let (Some(number), Some(unit), None) = (parts.next(), parts.next(), parts.next()) else {
        return false;
    };
    let unit = unit.to_ascii_uppercase();
    let unit = unit.strip_suffix('S').unwrap_or(&unit);
    number.chars().all(|c| c.is_ascii_digit())
        && text.trim_start().starts_with(number)
        && ["SECOND", "MINUTE", "HOUR", "DAY"].contains(&unit)
}

/// Duplicate names and adopted tables mapped two ways, across all files.
pub(crate) fn check_across_files(sources: &[Source], diagnostics: &mut Diagnostics) {
    for (index, source) in sources.iter().enumerate() {
        if let Some(first) = sources[..index].iter().find(|s| s.name == source.name) {
            diagnostics.push(
                Diagnostic::new(
                    codes::DISCOVER_DUPLICATE_SOURCE,
                    format!(
                        "Duplicate source name '{}' found in '{}' and '{}'",
                        source.name, first.file, source.file
                    ),
                    "source names are unique across sources/*.yml; rename one",
                )
                .at(Location::at(&source.file, source.position))
                .with_related(
                    "first defined here",
                    Location::at(&first.file, first.position),
                ),
            );
        }
        if source.kind == SourceKind::StreamTable
            && let Some(other) = sources[..index].iter().find(|s| {
                s.kind == SourceKind::StreamTable
                    && s.table_name == source.table_name
                    && (s.replay_boundary != source.replay_boundary || s.columns != source.columns)
            })
        {
            diagnostics.push(
                Diagnostic::new(
                    codes::DISCOVER_ADOPTED_CONFLICT,
                    format!("adopted sources '{}' and '{}' both read table '{}' with conflicting replay mappings", other.name, source.name, source.table_name.as_deref().unwrap_or_default()),
                    "give both the same replay_boundary, or point them at different tables",
                )
                .at(Location::at(&source.file, source.position))
                .with_related("the other mapping", Location::at(&other.file, other.position)),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refresh_intervals() {
        assert!(is_refresh("5 MINUTE"));
        assert!(is_refresh("1 hours"));
        assert!(!is_refresh("5MINUTE"));
        assert!(!is_refresh("five MINUTE"));
        assert!(!is_refresh("5 WEEK"));
    }
}
