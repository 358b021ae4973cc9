//! Validation of the policy tables shared by the project, pipelines and sources: retention,
//! freshness, audit defaults, replay-on-change.

use crate::codes;
use crate::interpolation::has_tokens;
use crate::reader::{Reader, parse_duration};
use crate::tree::{Node, Value};

/// `false` or `{duration, timestamp = "broker", fallback = "landed", cap_at = "landed"}`.
/// Values holding `${...}` are checked once resolved, not here.
pub(crate) fn retention(reader: &mut Reader<'_>, node: &Node, what: &str) {
    match &node.value {
        Value::Bool(false) => {}
        Value::Str(text) if has_tokens(text) => {}
        Value::Table(_) => {
            reader.allowed_keys(node, what, &["duration", "timestamp", "fallback", "cap_at"]);
            match node.get("duration") {
                Some(duration) => {
                    positive_duration(reader, duration, &format!("{what}.duration"));
                }
                None => reader.missing(
                    node.position,
                    &format!("{what}.duration"),
                    "add duration = \"7d\" (for example)",
                ),
            }
            fixed_choice(reader, node, "timestamp", what, "broker");
            fixed_choice(reader, node, "fallback", what, "landed");
            fixed_choice(reader, node, "cap_at", what, "landed");
        }
        _ => reader.report(
            codes::CONFIG_TYPE,
            node.position,
            format!("{what} must be false or a mapping"),
            "write retention = false, or a table such as { duration = \"7d\" }",
        ),
    }
}

fn fixed_choice(reader: &mut Reader<'_>, node: &Node, key: &str, what: &str, only: &str) {
    if let Some(value) = node.get(key) {
        if let Value::Str(text) = &value.value
            && has_tokens(text)
        {
            return;
        }
        reader.choice(value, &format!("{what}.{key}"), &[only]);
    }
}

/// A model retention policy as written in TOML.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ModelRetention {
    Disabled,
    Policy {
        duration_seconds: u64,
        timestamp_column: String,
        cap_at_column: Option<String>,
        skip_when_missing: bool,
    },
}

/// `false` or `{ duration, timestamp_column, cap_at_column, when_missing = "error"|"skip" }`
/// for `[defaults.models] retention` (project or pipeline). Returns the typed policy when
/// it is complete and holds no `${...}`.
pub(crate) fn model_retention(
    reader: &mut Reader<'_>,
    node: &Node,
    what: &str,
) -> Option<ModelRetention> {
    match &node.value {
        Value::Bool(false) => return Some(ModelRetention::Disabled),
        Value::Str(text) if has_tokens(text) => return None,
        Value::Table(_) => {}
        _ => {
            reader.report(
                codes::CONFIG_TYPE,
                node.position,
                format!("{what} must be false or a mapping"),
                "write retention = false, or { duration = \"30d\", timestamp_column = \"event_time\" }",
            );
            return None;
        }
    }
    reader.allowed_keys(
        node,
        what,
        &[
            "duration",
            "timestamp_column",
            "cap_at_column",
            "when_missing",
        ],
    );
    let duration_seconds = match node.get("duration") {
        Some(duration) => {
            positive_duration(reader, duration, &format!("{what}.duration"));
            duration
                .as_str()
                .and_then(crate::reader::parse_duration)
                .filter(|s| *s > 0)
        }
        None => {
            reader.missing(
                node.position,
                &format!("{what}.duration"),
                "add duration = \"30d\" (for example)",
            );
            None
        }
    };
    let mut column = |key: &str, required: bool| -> Option<String> {
        let Some(value) = node.get(key) else {
            if required {
                reader.missing(
                    node.position,
                    &format!("{what}.{key}"),
                    "name an output column of type Date or DateTime",
                );
            }
            return None;
        };
        let text = reader.string(value, &format!("{what}.{key}"))?;
        if crate::reader::is_identifier(&text) {
            return Some(text);
        }
        reader.report(
            codes::CONFIG_VALUE,
            value.position,
            format!("{what}.{key} must be an unqualified column name, not '{text}'"),
            "use the output column's alias",
        );
        None
    };
    let timestamp_column = column("timestamp_column", true);
    let cap_at_column = column("cap_at_column", false);
    let skip_when_missing = node
        .get("when_missing")
        .and_then(|w| reader.choice(w, &format!("{what}.when_missing"), &["error", "skip"]))
        .as_deref()
        == Some("skip");
    Some(ModelRetention::Policy {
        duration_seconds: duration_seconds?,
        timestamp_column: timestamp_column?,
        cap_at_column,
        skip_when_missing,
    })
}

/// A duration strictly greater than zero (or a `${...}` to resolve later).
/// The duration in seconds when it is literal and positive.
pub(crate) fn positive_duration(reader: &mut Reader<'_>, node: &Node, what: &str) -> Option<u64> {
    if let Value::Str(text) = &node.value
        && has_tokens(text)
    {
        return None;
    }
    let seconds = reader.duration(node, what)?;
    if seconds == 0 {
        reader.report(
            codes::CONFIG_VALUE,
            node.position,
            format!("{what} must be greater than zero"),
            "use a duration such as '30s'",
        );
        return None;
    }
    Some(seconds)
}

/// A source's freshness expectation: how old its newest row may be before it is lagging
/// (`warn_after`) or stalled (`error_after`), in seconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
pub struct Freshness {
    pub warn_after_seconds: Option<u64>,
    pub error_after_seconds: Option<u64>,
}

/// `{warn_after, error_after}`: at least one, both durations > 0, warn ≤ error.
pub(crate) fn freshness(reader: &mut Reader<'_>, node: &Node, what: &str) -> Option<Freshness> {
    let before = reader.diagnostics.len();
    reader.table(node, what)?;
    reader.allowed_keys(node, what, &["warn_after", "error_after"]);
    let warn = node
        .get("warn_after")
        .and_then(|n| reader.duration(n, &format!("{what}.warn_after")));
    let error = node
        .get("error_after")
        .and_then(|n| reader.duration(n, &format!("{what}.error_after")));
    if node.get("warn_after").is_none() && node.get("error_after").is_none() {
        reader.report(
            codes::CONFIG_MISSING,
            node.position,
            format!("{what} needs warn_after, error_after or both"),
            "add warn_after = \"1m\" (for example)",
        );
    }
    if let (Some(warn), Some(error)) = (warn, error)
        && warn > error
    {
        reader.report(
            codes::CONFIG_VALUE,
            node.get("warn_after").map_or(node.position, |n| n.position),
            format!("{what}.warn_after must not be longer than error_after"),
            "warn before you fail: make warn_after the shorter one",
        );
    }
    (reader.diagnostics.len() == before).then_some(Freshness {
        warn_after_seconds: warn,
        error_after_seconds: error,
    })
}

/// Audit defaults of a project or pipeline: unset keys inherit.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AuditDefaults {
    /// `error` or `warning`
    pub severity: Option<String>,
    pub every_seconds: Option<u64>,
    pub warmup_seconds: Option<u64>,
}

/// `{severity, every, warmup}` as in `[defaults.audits]` and `[audit_defaults]`.
pub(crate) fn audit_defaults(reader: &mut Reader<'_>, node: &Node, what: &str) -> AuditDefaults {
    let mut defaults = AuditDefaults::default();
    if reader.table(node, what).is_none() {
        return defaults;
    }
    reader.allowed_keys(node, what, &["severity", "every", "warmup"]);
    if let Some(severity) = node.get("severity") {
        defaults.severity =
            reader.choice(severity, &format!("{what}.severity"), &["error", "warning"]);
    }
    if let Some(every) = node.get("every") {
        defaults.every_seconds = positive_duration(reader, every, &format!("{what}.every"));
    }
    if let Some(warmup) = node.get("warmup") {
        defaults.warmup_seconds = reader.duration(warmup, &format!("{what}.warmup"));
    }
    defaults
}

/// `{breaking, non_breaking}`, each `"full"` or `"bounded-<duration>"`.
pub(crate) fn replay_on_change(
    reader: &mut Reader<'_>,
    node: &Node,
    what: &str,
) -> (Option<String>, Option<String>) {
    if reader.table(node, what).is_none() {
        return (None, None);
    }
    reader.allowed_keys(node, what, &["breaking", "non_breaking"]);
    let mut read = |key: &str| {
        let value = node.get(key)?;
        let text = reader.string(value, &format!("{what}.{key}"))?;
        let valid = text == "full"
            || text
                .strip_prefix("bounded-")
                .and_then(parse_duration)
                .is_some_and(|s| s > 0);
        if !valid {
            reader.report(
                codes::CONFIG_VALUE,
                value.position,
                format!("{what}.{key} must be 'full' or 'bounded-<duration>', not '{text}'"),
                "write 'full' or, for example, 'bounded-30m'",
            );
            return None;
        }
        Some(text)
    };
    let breaking = read("breaking");
    (breaking, read("non_breaking"))
}

pub(crate) fn bounded_replay_fallback(
    reader: &mut Reader<'_>,
    node: &Node,
    what: &str,
) -> Option<String> {
    reader.choice(node, what, &["full", "bounded_without_history"])
}

/// A `replay_on_change` table and a `bounded_replay_fallback` value, as one policy.
pub(crate) fn replay_policy(
    reader: &mut Reader<'_>,
    replay: Option<&Node>,
    fallback: Option<&Node>,
    prefix: &str,
) -> stb_model::planning::ReplayPolicy {
    let (breaking, non_breaking) = replay.map_or((None, None), |node| {
        replay_on_change(reader, node, &format!("{prefix}replay_on_change"))
    });
    stb_model::planning::ReplayPolicy {
        breaking,
        non_breaking,
        fallback: fallback.and_then(|node| {
            bounded_replay_fallback(reader, node, &format!("{prefix}bounded_replay_fallback"))
        }),
    }
}
