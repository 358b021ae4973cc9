//! `streambuild_local.toml`: a developer's own target and connection overrides (gitignored).

use std::collections::BTreeMap;

use stb_diagnostics::Position;

use crate::codes;
use crate::project_config::{Mode, connection};
use crate::reader::Reader;
use crate::tree::Node;

pub const FILE_NAME: &str = "streambuild_local.toml";

const TOP_KEYS: &[&str] = &[
    "target",
    "adapter",
    "defaults",
    "connection",
    "vars",
    "targets",
];
const TARGET_KEYS: &[&str] = &[
    "database",
    "connection",
    "vars",
    "audit_scheduler",
    "sensors",
];
/// Reported by [`build_limit_here`] with their own message, so not as unknown keys.
const BUILD_KEYS: &[&str] = &["build", "max_pipelines"];

#[derive(Debug, Clone)]
pub struct LocalTarget {
    pub position: Position,
    pub database: Option<Node>,
    pub vars: BTreeMap<String, Node>,
    /// Unresolved `[targets.<name>.connection]`.
    pub connection: Option<Node>,
    /// `[targets.<name>.audit_scheduler] enabled`: beats the project file's.
    pub audit_scheduler: Option<bool>,
    /// `[targets.<name>.sensors]`: each key beats the project file's.
    pub sensors: crate::project_config::SensorsConfig,
}

#[derive(Debug, Clone, Default)]
pub struct LocalConfig {
    pub target: Option<(String, Position)>,
    pub pipeline_mode: Option<Mode>,
    pub vars: BTreeMap<String, Node>,
    pub targets: BTreeMap<String, LocalTarget>,
    /// Unresolved top-level `[connection]`; beats every target's.
    pub connection: Option<Node>,
}

pub(crate) fn read(reader: &mut Reader<'_>, root: &Node) -> LocalConfig {
    let mut local = LocalConfig::default();
    if reader.table(root, "streambuild_local.toml").is_none() {
        return local;
    }
    build_limit_here(reader, root, "streambuild_local.toml");
    reader.allowed_keys(
        root,
        "streambuild_local.toml",
        &[TOP_KEYS, BUILD_KEYS].concat(),
    );
    if let Some(target) = root.get("target") {
        local.target = reader
            .non_empty_string(target, "target")
            .map(|t| (t, target.position));
    }
    if let Some(adapter) = root.get("adapter") {
        reader.non_empty_string(adapter, "adapter");
    }
    if let Some(defaults) = root.get("defaults")
        && reader
            .table(defaults, "streambuild_local.toml [defaults]")
            .is_some()
    {
        reader.allowed_keys(
            defaults,
            "streambuild_local.toml [defaults] (only pipeline_mode may be overridden locally)",
            &["pipeline_mode"],
        );
        if let Some(mode) = defaults.get("pipeline_mode") {
            local.pipeline_mode = reader
                .choice(mode, "defaults.pipeline_mode", &["direct", "virtual"])
                .and_then(|m| Mode::parse(&m));
        }
    }
    if let Some(conn) = root.get("connection") {
        connection(reader, conn, "streambuild_local.toml [connection]");
        local.connection = Some(conn.clone());
    }
    if let Some(vars) = root.get("vars") {
        local.vars = string_keyed(reader, vars, "streambuild_local.toml [vars]");
    }
    let Some(targets) = root.get("targets") else {
        return local;
    };
    let Some(entries) = reader.table(targets, "streambuild_local.toml [targets]") else {
        return local;
    };
    for (key, target) in entries {
        let what = format!("streambuild_local.toml targets.{}", key.name);
        if reader.table(target, &what).is_none() {
            continue;
        }
        build_limit_here(reader, target, &what);
        reader.allowed_keys(target, &what, &[TARGET_KEYS, BUILD_KEYS].concat());
        if let Some(conn) = target.get("connection") {
            connection(reader, conn, &format!("{what}.connection"));
        }
        let database = target.get("database").cloned();
        if let Some(db) = &database {
            reader.non_empty_string(db, &format!("{what}.database"));
        }
        let vars = target
            .get("vars")
            .map(|v| string_keyed(reader, v, &format!("{what}.vars")))
            .unwrap_or_default();
        let audit_scheduler = target.get("audit_scheduler").and_then(|table| {
            crate::project_config::scheduler_table(
                reader,
                table,
                &format!("{what}.audit_scheduler"),
            )
        });
        let sensors = target
            .get("sensors")
            .map(|table| {
                crate::project_config::sensors_table(reader, table, &format!("{what}.sensors"))
            })
            .unwrap_or_default();
        local.targets.insert(
            key.name.clone(),
            LocalTarget {
                position: key.position,
                database,
                vars,
                connection: target.get("connection").cloned(),
                audit_scheduler,
                sensors,
            },
        );
    }
    local
}

/// `max_pipelines` is a team decision: it lives in the committed project file only.
fn build_limit_here(reader: &mut Reader<'_>, node: &Node, what: &str) {
    for key in BUILD_KEYS {
        if let Some(entry) = node.key(key) {
            reader.report(
                codes::CONFIG_BUILD_LIMIT,
                entry.position,
                format!(
                    "{what} cannot set {key}: build limits are set in streambuild_project.toml"
                ),
                "move [build] max_pipelines to the project file (or its [targets.<name>.build])",
            );
        }
    }
}

fn string_keyed(reader: &mut Reader<'_>, node: &Node, what: &str) -> BTreeMap<String, Node> {
    let Some(entries) = reader.table(node, what) else {
        return BTreeMap::new();
    };
    entries
        .iter()
        .map(|(k, v)| (k.name.clone(), v.clone()))
        .collect()
}
