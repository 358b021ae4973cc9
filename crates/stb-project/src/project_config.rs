//! `streambuild_project.toml`: strict keys at every level, typed values, positions.

use std::collections::BTreeMap;

use stb_diagnostics::Position;

use crate::codes;
use crate::interpolation::has_tokens;
use crate::policies;
use crate::reader::Reader;
use crate::tree::{Node, Value};

pub const FILE_NAME: &str = "streambuild_project.toml";

const TOP_KEYS: &[&str] = &[
    "name",
    "adapter",
    "default_target",
    "connection",
    "vars",
    "targets",
    "defaults",
    "naming",
    "audit_scheduler",
    "sensors",
    "build",
    "ui",
    "dependencies",
];
const TARGET_KEYS: &[&str] = &[
    "database",
    "connection",
    "vars",
    "audit_scheduler",
    "sensors",
    "build",
    "destruction",
    "production",
    "cluster",
];
const DEFAULTS_KEYS: &[&str] = &[
    "managed_source_ttl",
    "model_ttl",
    "kafka_broker_list",
    "pipeline_mode",
    "replay_on_change",
    "bounded_replay_fallback",
    "freshness",
    "audits",
    "deployment_readiness",
    "run_presumed_failed_after",
    "sources",
    "models",
];
pub(crate) const CONNECTION_KEYS: &[&str] = &["host", "port", "username", "password", "settings"];

/// Pipeline execution mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    #[default]
    Direct,
    Virtual,
}

impl Mode {
    #[must_use]
    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "direct" => Some(Self::Direct),
            "virtual" => Some(Self::Virtual),
            _ => None,
        }
    }

    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Direct => "direct",
            Self::Virtual => "virtual",
        }
    }
}

/// A target from the project file.
#[derive(Debug, Clone)]
pub struct TargetConfig {
    pub position: Position,
    /// Unresolved; may hold `${...}`.
    pub database: Option<Node>,
    pub vars: BTreeMap<String, Node>,
    pub max_pipelines: Option<u32>,
    /// `[targets.<name>.build] max_replay_rows` / `max_replay_bytes`.
    pub replay_budget: ReplayBudget,
    /// `[targets.<name>.build] replay_chunk_rows` and the replays' throttles.
    pub replay_pacing: ReplayPacing,
    pub production: bool,
    /// `[targets.<name>.destruction] max_table_size_to_drop`, in bytes.
    pub max_table_size_to_drop: Option<u64>,
    /// Unresolved `[targets.<name>.connection]`.
    pub connection: Option<Node>,
    /// `[targets.<name>.audit_scheduler] enabled`.
    pub audit_scheduler: Option<bool>,
    /// `[targets.<name>.sensors]`.
    pub sensors: SensorsConfig,
    /// `[targets.<name>.cluster]`, when valid.
    pub cluster: Option<crate::cluster::ClusterConfig>,
}

/// `[dependencies]`.
#[derive(Debug, Clone, Default)]
pub struct Dependencies {
    pub pipeline_scope: bool,
    /// (upstream, downstream, where written)
    pub allowed: Vec<(String, String, Position)>,
}

/// Raw (unresolved) naming values; resolved once the target's variables are known.
#[derive(Debug, Clone, Default)]
pub struct RawNaming {
    pub pipeline_prefix: Option<Node>,
    pub pipeline_naming_macro: Option<Node>,
    pub table_prefix: Option<Node>,
    pub view_prefix: Option<Node>,
}

/// What discovery needs from the project file; everything else is validated and dropped.
#[derive(Debug, Clone)]
pub struct ProjectConfig {
    pub name: String,
    pub default_target: String,
    pub default_target_position: Position,
    pub targets: BTreeMap<String, TargetConfig>,
    pub vars: BTreeMap<String, Node>,
    pub pipeline_mode: Mode,
    /// Where `[defaults] replay_on_change` / `bounded_replay_fallback` were set, if anywhere.
    pub virtual_only_defaults: Vec<(String, Position)>,
    pub naming: RawNaming,
    pub max_pipelines: Option<u32>,
    /// `[build] max_replay_rows` / `max_replay_bytes`: the targets' default.
    pub replay_budget: ReplayBudget,
    /// `[build] replay_chunk_rows` and the replays' throttles: the targets' default.
    pub replay_pacing: ReplayPacing,
    pub dependencies: Dependencies,
    pub timezone: String,
    pub kafka_broker_list: Option<Node>,
    pub kafka_naming_macro: Option<Node>,
    /// `[defaults.sources.kafka] retention` (validated; typed when it holds no `${...}`).
    pub kafka_retention: Option<Node>,
    /// `[defaults] managed_source_ttl`
    pub managed_source_ttl: Option<Node>,
    /// `[defaults.models] retention` and `[defaults] model_ttl`.
    pub model_retention: Option<Node>,
    pub model_ttl: Option<Node>,
    /// `[defaults.audits]`
    pub audit_defaults: Option<Node>,
    /// `[defaults.deployment_readiness]`
    pub deployment_readiness: Option<Node>,
    /// `[defaults] run_presumed_failed_after`, in seconds, when valid.
    pub run_presumed_failed_after: Option<u64>,
    /// `[audit_scheduler] enabled`.
    pub audit_scheduler: Option<bool>,
    /// `[sensors]`.
    pub sensors: SensorsConfig,
    /// `[defaults.freshness]`, as written (validated above).
    pub freshness: Option<Node>,
    /// `[defaults] replay_on_change` and `bounded_replay_fallback`.
    pub replay_on_change: Option<Node>,
    pub bounded_replay_fallback: Option<Node>,
    pub connection: Option<Node>,
}

/// Validates the whole file, reporting every independent problem.
pub(crate) fn read(reader: &mut Reader<'_>, root: &Node) -> Option<ProjectConfig> {
    reader.table(root, "the project file")?;
    reader.allowed_keys(root, "the project file", TOP_KEYS);
    let name = match root.get("name") {
        Some(node) => literal_string(reader, node, "name"),
        None => {
            reader.missing(
                Position::new(1, 1),
                "name",
                "add name = \"my_project\" at the top of the file",
            );
            None
        }
    };
    if let Some(adapter) = root.get("adapter") {
        adapter_name(reader, adapter);
    }
    let default_target = match root.get("default_target") {
        Some(node) => literal_string(reader, node, "default_target").map(|t| (t, node.position)),
        None => {
            reader.missing(
                Position::new(1, 1),
                "default_target",
                "add default_target = \"dev\" and a [targets.dev] table",
            );
            None
        }
    };
    let connection = root.get("connection").cloned();
    if let Some(node) = &connection {
        self::connection(reader, node, "[connection]");
    }
    let vars = root
        .get("vars")
        .map(|node| vars_table(reader, node, "[vars]"))
        .unwrap_or_default();
    let targets = root
        .get("targets")
        .map(|node| targets(reader, node))
        .unwrap_or_default();
    let defaults = root.get("defaults");
    let (pipeline_mode, virtual_only_defaults, kafka_broker_list, kafka_naming_macro) =
        match defaults {
            Some(node) => read_defaults(reader, node),
            None => (Mode::Direct, Vec::new(), None, None),
        };
    let naming = root
        .get("naming")
        .map(|node| naming(reader, node))
        .unwrap_or_default();
    let limits = root
        .get("build")
        .map(|node| build(reader, node, "[build]"))
        .unwrap_or_default();
    let max_pipelines = limits.max_pipelines;
    for (name, target) in &targets {
        if target.max_pipelines.is_some() && max_pipelines.is_none() {
            reader.report(
                codes::CONFIG_BUILD_LIMIT,
                target.position,
                format!("targets.{name}.build.max_pipelines requires build.max_pipelines as a project default"),
                "add [build] max_pipelines = N to the project file",
            );
        }
    }
    let timezone = root
        .get("ui")
        .and_then(|node| ui(reader, node))
        .unwrap_or_else(|| "UTC".to_owned());
    let dependencies = root
        .get("dependencies")
        .map(|node| dependencies(reader, node))
        .unwrap_or_default();
    let audit_scheduler = root
        .get("audit_scheduler")
        .and_then(|node| scheduler_table(reader, node, "audit_scheduler"));
    let sensors = root
        .get("sensors")
        .map(|node| sensors_table(reader, node, "sensors"))
        .unwrap_or_default();
    let (default_target, default_target_position) = default_target?;
    Some(ProjectConfig {
        name: name?,
        default_target,
        default_target_position,
        targets,
        vars,
        pipeline_mode,
        virtual_only_defaults,
        naming,
        max_pipelines,
        replay_budget: limits.replay_budget,
        replay_pacing: limits.replay_pacing,
        dependencies,
        timezone,
        kafka_broker_list,
        kafka_naming_macro,
        kafka_retention: defaults
            .and_then(|d| d.get("sources"))
            .and_then(|n| n.get("kafka"))
            .and_then(|n| n.get("retention"))
            .cloned(),
        managed_source_ttl: defaults.and_then(|d| d.get("managed_source_ttl")).cloned(),
        model_retention: defaults
            .and_then(|d| d.get("models"))
            .and_then(|n| n.get("retention"))
            .cloned(),
        model_ttl: defaults.and_then(|d| d.get("model_ttl")).cloned(),
        audit_defaults: defaults.and_then(|d| d.get("audits")).cloned(),
        deployment_readiness: defaults
            .and_then(|d| d.get("deployment_readiness"))
            .cloned(),
        run_presumed_failed_after: defaults
            .and_then(|d| d.get("run_presumed_failed_after"))
            .and_then(|node| node.as_str())
            .and_then(crate::parse_duration)
            .filter(|seconds| *seconds > 45),
        audit_scheduler,
        sensors,
        freshness: defaults.and_then(|d| d.get("freshness")).cloned(),
        replay_on_change: defaults.and_then(|d| d.get("replay_on_change")).cloned(),
        bounded_replay_fallback: defaults
            .and_then(|d| d.get("bounded_replay_fallback"))
            .cloned(),
        connection,
    })
}

fn literal_string(reader: &mut Reader<'_>, node: &Node, key: &str) -> Option<String> {
    let text = reader.non_empty_string(node, key)?;
    if has_tokens(&text) {
        reader.report(
            codes::CONFIG_LITERAL,
            node.position,
            format!("{key} must be a committed literal and cannot be interpolated"),
            format!("write {key} as plain text"),
        );
        return None;
    }
    Some(text)
}

fn adapter_name(reader: &mut Reader<'_>, node: &Node) {
    if let Some(text) = reader.non_empty_string(node, "adapter")
        && !has_tokens(&text)
        && text != "clickhouse"
    {
        reader.report(
            codes::CONFIG_VALUE,
            node.position,
            format!("adapter '{text}' is not supported"),
            "StreamBuild supports adapter = \"clickhouse\"",
        );
    }
}

/// Keys and literal types of a connection table; `${...}` values are checked at connect time.
pub(crate) fn connection(reader: &mut Reader<'_>, node: &Node, what: &str) {
    if reader.table(node, what).is_none() {
        return;
    }
    reader.allowed_keys(node, what, CONNECTION_KEYS);
    let deferred = |n: &Node| matches!(&n.value, Value::Str(t) if has_tokens(t));
    for key in ["host", "username"] {
        if let Some(value) = node.get(key).filter(|n| !deferred(n)) {
            reader.non_empty_string(value, &format!("{what} {key}"));
        }
    }
    if let Some(value) = node.get("password").filter(|n| !deferred(n)) {
        reader.string(value, &format!("{what} password"));
    }
    if let Some(value) = node.get("port").filter(|n| !deferred(n)) {
        match value.value {
            Value::Int(port) if (1..=65_535).contains(&port) => {}
            Value::Int(_) => reader.report(
                codes::CONFIG_VALUE,
                value.position,
                format!("{what} port must be between 1 and 65535"),
                "use the server's HTTP port, usually 8123",
            ),
            _ => reader.type_error(value, &format!("{what} port"), "an integer"),
        }
    }
    if let Some(settings) = node.get("settings")
        && let Some(entries) = reader.table(settings, &format!("{what} settings"))
    {
        for (key, value) in entries {
            if !matches!(
                value.value,
                Value::Str(_) | Value::Int(_) | Value::Float(_) | Value::Bool(_)
            ) {
                reader.type_error(
                    value,
                    &format!("{what} settings.{}", key.name),
                    "a string, number or boolean",
                );
            }
        }
    }
}

fn vars_table(reader: &mut Reader<'_>, node: &Node, what: &str) -> BTreeMap<String, Node> {
    let Some(entries) = reader.table(node, what) else {
        return BTreeMap::new();
    };
    let mut vars = BTreeMap::new();
    for (key, value) in entries {
        if !reader.literal_key(key, what, "variable names are literal") {
            continue;
        }
        vars.insert(key.name.clone(), value.clone());
    }
    vars
}

fn targets(reader: &mut Reader<'_>, node: &Node) -> BTreeMap<String, TargetConfig> {
    let Some(entries) = reader.table(node, "[targets]") else {
        return BTreeMap::new();
    };
    let mut targets = BTreeMap::new();
    for (key, target) in entries {
        let what = format!("[targets.{}]", key.name);
        if reader.table(target, &what).is_none() {
            continue;
        }
        reader.allowed_keys(target, &what, TARGET_KEYS);
        let database = target.get("database").cloned();
        if let Some(db) = &database {
            reader.non_empty_string(db, &format!("targets.{}.database", key.name));
        }
        if let Some(conn) = target.get("connection") {
            connection(reader, conn, &format!("[targets.{}.connection]", key.name));
        }
        let vars = target
            .get("vars")
            .map(|v| vars_table(reader, v, &format!("[targets.{}.vars]", key.name)))
            .unwrap_or_default();
        let limits = target
            .get("build")
            .map(|b| build(reader, b, &format!("[targets.{}.build]", key.name)))
            .unwrap_or_default();
        let production = target
            .get("production")
            .and_then(|p| reader.bool(p, &format!("targets.{}.production", key.name)))
            .unwrap_or(false);
        let max_table_size_to_drop = target.get("destruction").and_then(|destruction| {
            self::destruction(
                reader,
                destruction,
                &format!("[targets.{}.destruction]", key.name),
            )
        });
        let audit_scheduler = target.get("audit_scheduler").and_then(|table| {
            scheduler_table(
                reader,
                table,
                &format!("targets.{}.audit_scheduler", key.name),
            )
        });
        let cluster = target
            .get("cluster")
            .and_then(|table| crate::cluster::cluster(reader, table, &key.name));
        let sensors = target
            .get("sensors")
            .map(|table| sensors_table(reader, table, &format!("targets.{}.sensors", key.name)))
            .unwrap_or_default();
        targets.insert(
            key.name.clone(),
            TargetConfig {
                position: key.position,
                database,
                vars,
                max_pipelines: limits.max_pipelines,
                replay_budget: limits.replay_budget,
                replay_pacing: limits.replay_pacing,
                production,
                max_table_size_to_drop,
                connection: target.get("connection").cloned(),
                audit_scheduler,
                sensors,
                cluster,
            },
        );
    }
    targets
}

pub use stb_model::planning::{ReplayBudget, ReplayPacing};

/// `[build]` or `[targets.<name>.build]`.
#[derive(Debug, Clone, Copy, Default)]
struct BuildLimits {
    max_pipelines: Option<u32>,
    replay_budget: ReplayBudget,
    replay_pacing: ReplayPacing,
}

fn build(reader: &mut Reader<'_>, node: &Node, what: &str) -> BuildLimits {
    if reader.table(node, what).is_none() {
        return BuildLimits::default();
    }
    reader.allowed_keys(
        node,
        what,
        &[
            "max_pipelines",
            "max_replay_rows",
            "max_replay_bytes",
            "replay_chunk_rows",
            "replay_max_threads",
            "replay_max_memory_usage",
            "replay_max_rows_per_second",
        ],
    );
    let max_pipelines = node
        .get("max_pipelines")
        .and_then(|value| reader.positive_int(value, &format!("{what} max_pipelines")));
    let mut count = |key: &str, hint: &str| {
        let value = node.get(key)?;
        match value.value {
            Value::Int(number) if number > 0 => u64::try_from(number).ok(),
            _ => {
                reader.report(
                    codes::CONFIG_VALUE,
                    value.position,
                    format!("{what} {key} must be a positive integer"),
                    hint,
                );
                None
            }
        }
    };
    let max_rows = count(
        "max_replay_rows",
        "write the most rows a build's replays may read, such as 100000000",
    );
    let chunk_rows = count(
        "replay_chunk_rows",
        "write the rows one replay statement may cover, such as 10000000",
    );
    let max_threads = count(
        "replay_max_threads",
        "write the threads one replay statement may use, such as 4",
    );
    let max_rows_per_second = count(
        "replay_max_rows_per_second",
        "write the rows a replay statement may read per second, such as 2000000",
    );
    let mut bytes = |key: &str, example: &str| {
        let value = node.get(key)?;
        let bytes = match &value.value {
            Value::Int(bytes) if *bytes > 0 => u64::try_from(*bytes).ok(),
            Value::Str(text) => parse_byte_size(text).filter(|bytes| *bytes > 0),
            _ => None,
        };
        if bytes.is_none() {
            reader.report(
                codes::CONFIG_VALUE,
                value.position,
                format!("{what} {key} must be a positive byte size such as '{example}'"),
                "write a number and a unit: B, KB, MB, GB, TB, KiB, MiB, GiB, TiB",
            );
        }
        bytes
    };
    let max_bytes = bytes("max_replay_bytes", "50GiB");
    let max_memory_usage = bytes("replay_max_memory_usage", "8GiB");
    BuildLimits {
        max_pipelines,
        replay_budget: ReplayBudget {
            max_rows,
            max_bytes,
        },
        replay_pacing: ReplayPacing {
            chunk_rows,
            max_threads,
            max_memory_usage,
            max_rows_per_second,
        },
    }
}

fn destruction(reader: &mut Reader<'_>, node: &Node, what: &str) -> Option<u64> {
    reader.table(node, what)?;
    reader.allowed_keys(node, what, &["max_table_size_to_drop"]);
    let size = node.get("max_table_size_to_drop")?;
    let bytes = size
        .as_str()
        .and_then(parse_byte_size)
        .filter(|bytes| *bytes > 0);
    if bytes.is_none() {
        reader.report(
            codes::CONFIG_VALUE,
            size.position,
            format!("{what} max_table_size_to_drop must be a finite positive byte-size string such as '100GiB'"),
            "write a number and a unit: B, KB, MB, GB, TB, KiB, MiB, GiB, TiB",
        );
    }
    bytes
}

/// `100GiB`, `1.5 GB`, `512` (bytes). None when malformed or above 2^64-1.
#[must_use]
pub fn parse_byte_size(text: &str) -> Option<u64> {
    let text = text.trim();
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let number: f64 = number.parse().ok()?;
    let scale: f64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1.0,
        "kb" => 1e3,
        "mb" => 1e6,
        "gb" => 1e9,
        "tb" => 1e12,
        "pb" => 1e15,
        "eb" => 1e18,
        "kib" => 1024.0,
        "mib" => 1024.0 * 1024.0,
        "gib" => 1024.0 * 1024.0 * 1024.0,
        "tib" => 1024.0_f64.powi(4),
        "pib" => 1024.0_f64.powi(5),
        "eib" => 1024.0_f64.powi(6),
        _ => return None,
    };
    let bytes = (number * scale).floor();
    // u64::MAX as f64 rounds up to 2^64, which is out of range.
    #[allow(
        clippy::cast_precision_loss,
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss
    )]
    if bytes.is_finite() && bytes >= 0.0 && bytes < u64::MAX as f64 {
        Some(bytes as u64)
    } else {
        None
    }
}

/// Validates an `[audit_scheduler]` table; its `enabled`, when set.
pub(crate) fn scheduler_table(reader: &mut Reader<'_>, node: &Node, what: &str) -> Option<bool> {
    reader.table(node, what)?;
    reader.allowed_keys(node, what, &["enabled"]);
    node.get("enabled")
        .and_then(|enabled| reader.bool(enabled, &format!("{what}.enabled")))
}

/// One `[sensors]` table as written (project, project target or local target): each key
/// when set, so a more specific table overrides key by key.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct SensorsConfig {
    pub enabled: Option<bool>,
    pub tick_retention_days: Option<u64>,
    /// `maximum_event_age`, in seconds.
    pub maximum_event_age_seconds: Option<u64>,
}

impl SensorsConfig {
    /// Each key from `self` when set, else from `fallback`.
    #[must_use]
    pub fn or(self, fallback: Self) -> Self {
        Self {
            enabled: self.enabled.or(fallback.enabled),
            tick_retention_days: self.tick_retention_days.or(fallback.tick_retention_days),
            maximum_event_age_seconds: self
                .maximum_event_age_seconds
                .or(fallback.maximum_event_age_seconds),
        }
    }
}

/// Validates a `[sensors]` table and reads its keys.
pub(crate) fn sensors_table(reader: &mut Reader<'_>, node: &Node, what: &str) -> SensorsConfig {
    let mut config = SensorsConfig::default();
    if reader.table(node, what).is_none() {
        return config;
    }
    reader.allowed_keys(
        node,
        what,
        &["enabled", "tick_retention_days", "maximum_event_age"],
    );
    if let Some(days) = node.get("tick_retention_days") {
        match days.value {
            Value::Int(d) if d >= 0 => config.tick_retention_days = u64::try_from(d).ok(),
            _ => reader.type_error(
                days,
                &format!("{what}.tick_retention_days"),
                "a whole number of 0 or more",
            ),
        }
    }
    if let Some(age) = node.get("maximum_event_age") {
        config.maximum_event_age_seconds =
            policies::positive_duration(reader, age, &format!("{what}.maximum_event_age"));
    }
    config.enabled = node
        .get("enabled")
        .and_then(|enabled| reader.bool(enabled, &format!("{what}.enabled")));
    config
}

type DefaultsRead = (Mode, Vec<(String, Position)>, Option<Node>, Option<Node>);

fn read_defaults(reader: &mut Reader<'_>, node: &Node) -> DefaultsRead {
    let mut result: DefaultsRead = (Mode::Direct, Vec::new(), None, None);
    if reader.table(node, "[defaults]").is_none() {
        return result;
    }
    reader.allowed_keys(node, "[defaults]", DEFAULTS_KEYS);
    if let Some(mode) = node.get("pipeline_mode") {
        result.0 = reader
            .choice(mode, "defaults.pipeline_mode", &["direct", "virtual"])
            .and_then(|m| Mode::parse(&m))
            .unwrap_or(Mode::Direct);
    }
    if let Some(after) = node.get("run_presumed_failed_after")
        && let Some(seconds) = reader.duration(after, "defaults.run_presumed_failed_after")
        && seconds <= 45
    {
        reader.report(
            codes::CONFIG_VALUE,
            after.position,
            "defaults.run_presumed_failed_after must be longer than 45s",
            "a run is already 'unresponsive' after 45s of silence; use 2m or more",
        );
    }
    if let Some(brokers) = node.get("kafka_broker_list") {
        reader.non_empty_string(brokers, "defaults.kafka_broker_list");
        result.2 = Some(brokers.clone());
    }
    for key in ["managed_source_ttl", "model_ttl"] {
        if let Some(ttl) = node.get(key) {
            reader.non_empty_string(ttl, &format!("defaults.{key}"));
        }
    }
    if let Some(replay) = node.get("replay_on_change") {
        let _ = policies::replay_on_change(reader, replay, "defaults.replay_on_change");
        result
            .1
            .push(("replay_on_change".to_owned(), replay.position));
    }
    if let Some(fallback) = node.get("bounded_replay_fallback") {
        let _ =
            policies::bounded_replay_fallback(reader, fallback, "defaults.bounded_replay_fallback");
        result
            .1
            .push(("bounded_replay_fallback".to_owned(), fallback.position));
    }
    if let Some(freshness) = node.get("freshness") {
        let _ = policies::freshness(reader, freshness, "defaults.freshness");
    }
    if let Some(audits) = node.get("audits") {
        let _ = policies::audit_defaults(reader, audits, "defaults.audits");
    }
    if let Some(readiness) = node.get("deployment_readiness") {
        let _ = deployment_readiness(reader, readiness);
    }
    if let Some(sources) = node.get("sources") {
        result.3 = source_defaults(reader, sources, node.get("managed_source_ttl"));
    }
    if let Some(models) = node.get("models")
        && reader.table(models, "defaults.models").is_some()
    {
        reader.allowed_keys(models, "defaults.models", &["retention"]);
        if let Some(retention) = models.get("retention") {
            policies::model_retention(reader, retention, "defaults.models.retention");
            if node.get("model_ttl").is_some() {
                reader.report(
                    codes::CONFIG_VALUE,
                    retention.position,
                    "defaults.models.retention cannot be combined with defaults.model_ttl",
                    "keep one of the two",
                );
            }
        }
    }
    result
}

fn source_defaults(
    reader: &mut Reader<'_>,
    node: &Node,
    managed_ttl: Option<&Node>,
) -> Option<Node> {
    reader.table(node, "defaults.sources")?;
    reader.allowed_keys(node, "defaults.sources", &["kafka"]);
    let kafka = node.get("kafka")?;
    reader.table(kafka, "defaults.sources.kafka")?;
    reader.allowed_keys(
        kafka,
        "defaults.sources.kafka",
        &["naming_macro", "retention"],
    );
    if let Some(retention) = kafka.get("retention") {
        policies::retention(reader, retention, "defaults.sources.kafka.retention");
        if managed_ttl.is_some() {
            reader.report(
                codes::CONFIG_VALUE,
                retention.position,
                "defaults.sources.kafka.retention cannot be combined with defaults.managed_source_ttl",
                "keep one of the two",
            );
        }
    }
    let macro_name = kafka.get("naming_macro")?;
    reader.non_empty_string(macro_name, "defaults.sources.kafka.naming_macro")?;
    Some(macro_name.clone())
}

/// `[defaults.deployment_readiness]`: the thresholds `stb deployment audit` judges a
/// staged deployment by.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct DeploymentReadiness {
    /// A staged root further behind its source than this is `not_ready`.
    pub maximum_lag_seconds: u64,
    /// A staged root with fewer rows than this share of the active one's is `caution`.
    pub minimum_staged_row_ratio: f64,
}

impl Default for DeploymentReadiness {
    fn default() -> Self {
        Self {
            maximum_lag_seconds: 30,
            minimum_staged_row_ratio: 0.5,
        }
    }
}

pub(crate) fn deployment_readiness(reader: &mut Reader<'_>, node: &Node) -> DeploymentReadiness {
    let what = "defaults.deployment_readiness";
    let mut readiness = DeploymentReadiness::default();
    if reader.table(node, what).is_none() {
        return readiness;
    }
    reader.allowed_keys(node, what, &["maximum_lag", "minimum_staged_row_ratio"]);
    if let Some(lag) = node.get("maximum_lag")
        && let Some(seconds) = reader.duration(lag, &format!("{what}.maximum_lag"))
    {
        readiness.maximum_lag_seconds = seconds;
    }
    if let Some(ratio) = node.get("minimum_staged_row_ratio") {
        let value = match ratio.value {
            Value::Int(i) => i32::try_from(i).ok().map(f64::from),
            Value::Float(f) => Some(f),
            _ => None,
        };
        match value.filter(|v| (0.0..=1.0).contains(v)) {
            Some(value) => readiness.minimum_staged_row_ratio = value,
            None => reader.report(
                codes::CONFIG_VALUE,
                ratio.position,
                format!("{what}.minimum_staged_row_ratio must be a number from 0 to 1"),
                "for example 0.5",
            ),
        }
    }
    readiness
}

fn naming(reader: &mut Reader<'_>, node: &Node) -> RawNaming {
    if reader.table(node, "[naming]").is_none() {
        return RawNaming::default();
    }
    reader.allowed_keys(
        node,
        "[naming]",
        &[
            "pipeline_prefix",
            "pipeline_naming_macro",
            "table_prefix",
            "view_prefix",
        ],
    );
    let mut naming = RawNaming::default();
    for (key, slot) in [
        ("pipeline_prefix", &mut naming.pipeline_prefix),
        ("table_prefix", &mut naming.table_prefix),
        ("view_prefix", &mut naming.view_prefix),
    ] {
        if let Some(value) = node.get(key)
            && reader.string(value, &format!("naming.{key}")).is_some()
        {
            *slot = Some(value.clone());
        }
    }
    if let Some(value) = node.get("pipeline_naming_macro")
        && reader
            .non_empty_string(value, "naming.pipeline_naming_macro")
            .is_some()
    {
        naming.pipeline_naming_macro = Some(value.clone());
    }
    naming
}

fn ui(reader: &mut Reader<'_>, node: &Node) -> Option<String> {
    reader.table(node, "[ui]")?;
    reader.allowed_keys(node, "[ui]", &["timezone"]);
    let zone = node.get("timezone")?;
    let text = reader.string(zone, "ui.timezone")?;
    if is_timezone(&text) {
        return Some(text);
    }
    reader.report(
        codes::CONFIG_VALUE,
        zone.position,
        format!("ui.timezone must be a valid IANA timezone such as 'Europe/London', not '{text}'"),
        "use a name from the tz database, e.g. 'UTC' or 'America/New_York'",
    );
    None
}

/// An IANA zone name: checked against the system tz database when there is one.
fn is_timezone(name: &str) -> bool {
    let shaped = !name.is_empty()
        && !name.starts_with('/')
        && !name.contains("..")
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "/_+-".contains(c));
    if !shaped {
        return false;
    }
    if name == "UTC" {
        return true;
    }
    let database = std::path::Path::new("/usr/share/zoneinfo");
    !database.is_dir() || database.join(name).is_file()
}

fn dependencies(reader: &mut Reader<'_>, node: &Node) -> Dependencies {
    let mut result = Dependencies::default();
    if reader.table(node, "[dependencies]").is_none() {
        return result;
    }
    reader.allowed_keys(
        node,
        "[dependencies]",
        &["model_reference_scope", "allowed_cross_pipeline_references"],
    );
    if let Some(scope) = node.get("model_reference_scope") {
        result.pipeline_scope = reader
            .choice(
                scope,
                "dependencies.model_reference_scope",
                &["project", "pipeline"],
            )
            .as_deref()
            == Some("pipeline");
    }
    let Some(allowed) = node.get("allowed_cross_pipeline_references") else {
        return result;
    };
    let Value::Array(items) = &allowed.value else {
        reader.report(
            codes::CONFIG_DEPENDENCIES,
            allowed.position,
            "dependencies.allowed_cross_pipeline_references must be an array of tables",
            "write [[dependencies.allowed_cross_pipeline_references]] entries with upstream_pipeline and downstream_pipeline",
        );
        return result;
    };
    for item in items {
        let what = "dependencies.allowed_cross_pipeline_references entry";
        if item.as_table().is_none() {
            reader.report(
                codes::CONFIG_DEPENDENCIES,
                item.position,
                "dependencies.allowed_cross_pipeline_references must be an array of tables",
                "each entry is { upstream_pipeline = \"..\", downstream_pipeline = \"..\" }",
            );
            continue;
        }
        reader.allowed_keys(item, what, &["upstream_pipeline", "downstream_pipeline"]);
        let up = item
            .get("upstream_pipeline")
            .and_then(|n| reader.non_empty_string(n, "upstream_pipeline"));
        let down = item
            .get("downstream_pipeline")
            .and_then(|n| reader.non_empty_string(n, "downstream_pipeline"));
        let (Some(up), Some(down)) = (up, down) else {
            if item.get("upstream_pipeline").is_none() || item.get("downstream_pipeline").is_none()
            {
                reader.missing(
                    item.position,
                    "upstream_pipeline and downstream_pipeline",
                    "name both pipelines of the allowed reference",
                );
            }
            continue;
        };
        if up == down {
            reader.report(
                codes::CONFIG_DEPENDENCIES,
                item.position,
                format!("dependencies cannot allow a pipeline to reference itself ({up})"),
                "references inside one pipeline are always allowed; remove the entry",
            );
        } else if result
            .allowed
            .iter()
            .any(|(u, d, _)| *u == up && *d == down)
        {
            reader.report(
                codes::CONFIG_DEPENDENCIES,
                item.position,
                format!("dependencies.allowed_cross_pipeline_references duplicates {up} -> {down}"),
                "remove the repeated entry",
            );
        } else {
            result.allowed.push((up, down, item.position));
        }
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_sizes() {
        assert_eq!(parse_byte_size("100GiB"), Some(100 * 1024 * 1024 * 1024));
        assert_eq!(parse_byte_size("1.5 kb"), Some(1500));
        assert_eq!(parse_byte_size("512"), Some(512));
        assert_eq!(parse_byte_size("lots"), None);
        assert_eq!(parse_byte_size("99999999EiB"), None);
    }

    #[test]
    fn timezones() {
        assert!(is_timezone("UTC"));
        assert!(is_timezone("Europe/London"));
        assert!(!is_timezone("Mars/Olympus"));
        assert!(!is_timezone("../etc/passwd"));
    }
}
