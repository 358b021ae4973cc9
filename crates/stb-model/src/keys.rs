//! The keys a MODEL header may hold, validated into a typed [`ModelHeader`].

use crate::text::{is_identifier, parse_duration as duration};

use crate::header::{HeaderValue, Spanned};

/// Keys every model may have; tables may also have [`TABLE_ONLY`].
const COMMON: &[&str] = &["kind", "description", "columns", "audits", "relation_name"];
/// Keys a view cannot have: it has no storage and is never replayed.
const TABLE_ONLY: &[&str] = &[
    "engine",
    "order_by",
    "partition_by",
    "ttl",
    "retention",
    "settings",
    "execution_settings",
    "replay_anchor",
    "replay_on_change",
    "bounded_replay_fallback",
    "sharding_key",
];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Table,
    View,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WhenMissing {
    Error,
    Skip,
}

/// `retention (duration "7d", timestamp_column c, cap_at_column c2, when_missing skip)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Retention {
    Disabled,
    Policy {
        duration_seconds: u64,
        timestamp_column: String,
        cap_at_column: Option<String>,
        when_missing: WhenMissing,
    },
}

#[derive(Debug, Clone, PartialEq)]
pub struct ColumnDoc {
    pub name: String,
    pub description: Option<String>,
    pub audits: Vec<Spanned<HeaderValue>>,
}

/// A validated header. Absent keys are `None`/empty; defaults are applied by the compiler.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelHeader {
    pub kind: Kind,
    pub description: Option<String>,
    pub columns: Vec<ColumnDoc>,
    pub audits: Vec<Spanned<HeaderValue>>,
    pub relation_name: Option<String>,
    pub engine: Option<String>,
    pub order_by: Option<Vec<String>>,
    pub partition_by: Option<String>,
    pub ttl: Option<String>,
    pub retention: Option<Retention>,
    /// Sorted by name; values as written (a bare `true` stays `true`).
    pub settings: Vec<(String, String)>,
    pub replay_settings: Vec<(String, String)>,
    pub replay_anchor_never: bool,
    pub replay_on_change: Option<(Option<String>, Option<String>)>,
    pub bounded_replay_fallback: Option<String>,
    /// The expression that places the model's rows on a sharded cluster's shards (a
    /// StreamBuild key: the reference has no clusters).
    pub sharding_key: Option<String>,
}

/// A problem with a header key, at a byte offset of the header body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyProblem {
    pub message: String,
    pub offset: usize,
}

struct Checker<'a> {
    file: &'a str,
    problems: Vec<KeyProblem>,
}

impl Checker<'_> {
    fn report(&mut self, offset: usize, message: impl Into<String>) {
        self.problems.push(KeyProblem {
            message: message.into(),
            offset,
        });
    }

    fn string(&mut self, value: &Spanned<HeaderValue>, key: &str) -> Option<String> {
        match &value.value {
            HeaderValue::Str(text) if !text.trim().is_empty() => Some(text.clone()),
            HeaderValue::Str(_) => {
                self.report(
                    value.offset,
                    format!(
                        "MODEL(...) in '{}' must define '{key}' as a non-empty string",
                        self.file
                    ),
                );
                None
            }
            other => {
                self.report(
                    value.offset,
                    format!(
                        "MODEL(...) in '{}' must define '{key}' as a string, not {}",
                        self.file,
                        other.kind()
                    ),
                );
                None
            }
        }
    }

    fn choice(
        &mut self,
        value: &Spanned<HeaderValue>,
        key: &str,
        choices: &[&str],
    ) -> Option<String> {
        let text = self.string(value, key)?;
        if choices.contains(&text.as_str()) {
            return Some(text);
        }
        let quoted: Vec<String> = choices.iter().map(|c| format!("'{c}'")).collect();
        self.report(
            value.offset,
            format!(
                "MODEL(...) in '{}' must define '{key}' as {}",
                self.file,
                quoted.join(" or ")
            ),
        );
        None
    }

    fn identifier(&mut self, value: &Spanned<HeaderValue>, key: &str) -> Option<String> {
        let text = self.string(value, key)?;
        if is_identifier(&text) {
            return Some(text);
        }
        self.report(
            value.offset,
            format!(
                "MODEL(...) in '{}' must define '{key}' as an unqualified identifier, not '{text}'",
                self.file
            ),
        );
        None
    }
}

/// Text of a scalar as written in the header.
fn scalar_text(value: &HeaderValue) -> Option<String> {
    match value {
        HeaderValue::Str(text) => Some(text.clone()),
        HeaderValue::Int(i) => Some(i.to_string()),
        HeaderValue::Float(f) => Some(f.to_string()),
        HeaderValue::Bool(b) => Some(b.to_string()),
        HeaderValue::Null | HeaderValue::List(_) | HeaderValue::Map(_) => None,
    }
}

/// Validates every key of `header`; `file` names the model in messages.
///
/// # Errors
/// Every problem found, with offsets into the header body.
pub fn validate(header: &Spanned<HeaderValue>, file: &str) -> Result<ModelHeader, Vec<KeyProblem>> {
    let mut check = Checker {
        file,
        problems: Vec::new(),
    };
    let HeaderValue::Map(entries) = &header.value else {
        return Err(vec![KeyProblem {
            message: format!("MODEL(...) in '{file}' must be a list of keys and values"),
            offset: header.offset,
        }]);
    };
    let allowed = |key: &str| COMMON.contains(&key) || TABLE_ONLY.contains(&key);
    let suggestion = |typed: &str| {
        stb_diagnostics::suggest::closest(typed, COMMON.iter().chain(TABLE_ONLY).copied())
            .map_or_else(String::new, |key| format!(" (did you mean '{key}'?)"))
    };
    let mut unknown: Vec<&str> = entries
        .iter()
        .map(|(k, _)| k.value.as_str())
        .filter(|k| !allowed(k))
        .collect();
    if let Some(first) = entries.iter().find(|(k, _)| !allowed(&k.value)) {
        unknown.sort_unstable();
        check.report(
            first.0.offset,
            format!(
                "MODEL(...) in '{file}' contains unsupported keys: {}{}",
                unknown.join(", "),
                suggestion(first.0.value.as_str())
            ),
        );
    }
    let get = |key: &str| header.value.get(key);
    let kind = match get("kind") {
        None => Kind::Table,
        Some(value) => match check.choice(value, "kind", &["table", "view"]).as_deref() {
            Some("view") => Kind::View,
            _ => Kind::Table,
        },
    };
    if kind == Kind::View {
        let mut table_keys: Vec<&str> = entries
            .iter()
            .map(|(k, _)| k.value.as_str())
            .filter(|k| TABLE_ONLY.contains(k))
            .collect();
        if let Some(first) = entries
            .iter()
            .find(|(k, _)| TABLE_ONLY.contains(&k.value.as_str()))
        {
            table_keys.sort_unstable();
            table_keys.dedup();
            check.report(
                first.0.offset,
                format!(
                    "View MODEL(...) in '{file}' cannot define table/replay fields: {}",
                    table_keys.join(", ")
                ),
            );
        }
    }
    let description = get("description").and_then(|v| check.string(v, "description"));
    let relation_name = get("relation_name").and_then(|v| check.string(v, "relation_name"));
    let engine = get("engine").and_then(|v| check.string(v, "engine"));
    let partition_by = get("partition_by").and_then(|v| check.string(v, "partition_by"));
    let ttl = get("ttl").and_then(|v| check.string(v, "ttl"));
    let sharding_key = get("sharding_key").and_then(|v| check.string(v, "sharding_key"));
    let order_by = get("order_by").and_then(|v| order_by(&mut check, v));
    let retention = get("retention").and_then(|v| retention(&mut check, v));
    if let (Some(_), Some(value)) = (&ttl, get("retention")) {
        check.report(
            value.offset,
            format!("MODEL(...) in '{file}' cannot combine ttl with typed retention"),
        );
    }
    let settings = get("settings")
        .map(|v| settings_map(&mut check, v, "settings"))
        .unwrap_or_default();
    let replay_settings = get("execution_settings")
        .map(|v| execution_settings(&mut check, v))
        .unwrap_or_default();
    let replay_anchor_never = get("replay_anchor")
        .and_then(|v| check.choice(v, "replay_anchor", &["auto", "never"]))
        .as_deref()
        == Some("never");
    let replay_on_change = get("replay_on_change").and_then(|v| replay_on_change(&mut check, v));
    let bounded_replay_fallback = get("bounded_replay_fallback").and_then(|v| {
        check.choice(
            v,
            "bounded_replay_fallback",
            &["full", "bounded_without_history"],
        )
    });
    let audits = get("audits")
        .map(|v| audit_list(&mut check, v, "audits"))
        .unwrap_or_default();
    let columns = get("columns")
        .map(|v| columns(&mut check, v))
        .unwrap_or_default();
    if !check.problems.is_empty() {
        return Err(check.problems);
    }
    Ok(ModelHeader {
        kind,
        description,
        columns,
        audits,
        relation_name,
        engine,
        order_by,
        partition_by,
        ttl,
        retention,
        settings,
        replay_settings,
        replay_anchor_never,
        replay_on_change,
        bounded_replay_fallback,
        sharding_key,
    })
}

fn order_by(check: &mut Checker<'_>, value: &Spanned<HeaderValue>) -> Option<Vec<String>> {
    let message = format!(
        "MODEL(...) in '{}' must define 'order_by' as a non-empty list of strings",
        check.file
    );
    let HeaderValue::List(items) = &value.value else {
        check.report(value.offset, message);
        return None;
    };
    let strings: Option<Vec<String>> = items
        .iter()
        .map(|i| {
            i.value
                .as_str()
                .filter(|s| !s.trim().is_empty())
                .map(str::to_owned)
        })
        .collect();
    match strings {
        Some(list) if !list.is_empty() => Some(list),
        _ => {
            check.report(value.offset, message);
            None
        }
    }
}

fn retention(check: &mut Checker<'_>, value: &Spanned<HeaderValue>) -> Option<Retention> {
    let file = check.file.to_owned();
    match &value.value {
        HeaderValue::Bool(false) => return Some(Retention::Disabled),
        HeaderValue::Map(_) => {}
        _ => {
            check.report(value.offset, format!("MODEL(...) in '{file}' must define 'retention' as false or (duration ..., timestamp_column ...)"));
            return None;
        }
    }
    if let HeaderValue::Map(entries) = &value.value
        && let Some((key, _)) = entries.iter().find(|(k, _)| {
            ![
                "duration",
                "timestamp_column",
                "cap_at_column",
                "when_missing",
            ]
            .contains(&k.value.as_str())
        })
    {
        check.report(
            key.offset,
            format!(
                "MODEL(...) in '{file}' retention contains unsupported key '{}'",
                key.value
            ),
        );
    }
    let duration_seconds = match value.value.get("duration") {
        Some(d) => {
            let seconds = check
                .string(d, "retention.duration")
                .and_then(|t| duration(&t))
                .filter(|s| *s > 0);
            if seconds.is_none() {
                check.report(d.offset, format!("MODEL(...) in '{file}' retention.duration must be a positive duration such as \"7d\""));
            }
            seconds
        }
        None => {
            check.report(
                value.offset,
                format!("MODEL(...) in '{file}' retention requires duration"),
            );
            None
        }
    };
    let timestamp_column = match value.value.get("timestamp_column") {
        Some(c) => check.identifier(c, "retention.timestamp_column"),
        None => {
            check.report(
                value.offset,
                format!("MODEL(...) in '{file}' retention requires timestamp_column"),
            );
            None
        }
    };
    let cap_at_column = value
        .value
        .get("cap_at_column")
        .and_then(|c| check.identifier(c, "retention.cap_at_column"));
    let when_missing = match value.value.get("when_missing") {
        Some(w) => match check
            .choice(w, "retention.when_missing", &["error", "skip"])
            .as_deref()
        {
            Some("skip") => WhenMissing::Skip,
            _ => WhenMissing::Error,
        },
        None => WhenMissing::Error,
    };
    Some(Retention::Policy {
        duration_seconds: duration_seconds?,
        timestamp_column: timestamp_column?,
        cap_at_column,
        when_missing,
    })
}

fn settings_map(
    check: &mut Checker<'_>,
    value: &Spanned<HeaderValue>,
    what: &str,
) -> Vec<(String, String)> {
    let HeaderValue::Map(entries) = &value.value else {
        check.report(
            value.offset,
            format!(
                "MODEL(...) in '{}' must define '{what}' as a mapping like ({what} name value)",
                check.file
            ),
        );
        return Vec::new();
    };
    let mut settings = Vec::new();
    for (key, item) in entries {
        if !is_identifier(&key.value) {
            check.report(
                key.offset,
                format!(
                    "MODEL(...) in '{}' {what} name '{}' is not a setting name",
                    check.file, key.value
                ),
            );
            continue;
        }
        match scalar_text(&item.value) {
            Some(text) => settings.push((key.value.clone(), text)),
            None => check.report(
                item.offset,
                format!(
                    "MODEL(...) in '{}' {what}.{} must be a single value",
                    check.file, key.value
                ),
            ),
        }
    }
    settings.sort();
    settings
}

fn execution_settings(
    check: &mut Checker<'_>,
    value: &Spanned<HeaderValue>,
) -> Vec<(String, String)> {
    let file = check.file.to_owned();
    let HeaderValue::Map(entries) = &value.value else {
        check.report(value.offset, format!("MODEL(...) in '{file}' must define 'execution_settings' as (replay (name value, ...))"));
        return Vec::new();
    };
    if let Some((key, _)) = entries.iter().find(|(k, _)| k.value != "replay") {
        check.report(
            key.offset,
            format!(
                "MODEL(...) in '{file}' execution_settings supports only 'replay', not '{}'",
                key.value
            ),
        );
    }
    let Some(replay) = value.value.get("replay") else {
        return Vec::new();
    };
    let settings = settings_map(check, replay, "execution_settings.replay");
    if settings.is_empty() && matches!(replay.value, HeaderValue::Map(_)) {
        check.report(
            replay.offset,
            format!("MODEL(...) in '{file}' execution_settings.replay must not be empty"),
        );
    }
    settings
}

fn replay_on_change(
    check: &mut Checker<'_>,
    value: &Spanned<HeaderValue>,
) -> Option<(Option<String>, Option<String>)> {
    let file = check.file.to_owned();
    let HeaderValue::Map(entries) = &value.value else {
        check.report(value.offset, format!("MODEL(...) in '{file}' must define 'replay_on_change' as (breaking ..., non_breaking ...)"));
        return None;
    };
    if let Some((key, _)) = entries
        .iter()
        .find(|(k, _)| k.value != "breaking" && k.value != "non_breaking")
    {
        check.report(
            key.offset,
            format!(
                "MODEL(...) in '{file}' replay_on_change contains unsupported key '{}'",
                key.value
            ),
        );
    }
    let mut read = |key: &str| {
        let item = value.value.get(key)?;
        let text = check.string(item, &format!("replay_on_change.{key}"))?;
        let valid = text == "full"
            || text
                .strip_prefix("bounded-")
                .and_then(duration)
                .is_some_and(|s| s > 0);
        if !valid {
            check.report(item.offset, format!("MODEL(...) in '{file}' replay_on_change.{key} must be 'full' or 'bounded-<duration>', not '{text}'"));
            return None;
        }
        Some(text)
    };
    Some((read("breaking"), read("non_breaking")))
}

fn audit_list(
    check: &mut Checker<'_>,
    value: &Spanned<HeaderValue>,
    what: &str,
) -> Vec<Spanned<HeaderValue>> {
    match &value.value {
        HeaderValue::List(items) => items.clone(),
        _ => {
            check.report(value.offset, format!("MODEL(...) in '{}' must define '{what}' as a list like [not_null, accepted_values (values [...])]", check.file));
            Vec::new()
        }
    }
}

fn columns(check: &mut Checker<'_>, value: &Spanned<HeaderValue>) -> Vec<ColumnDoc> {
    let file = check.file.to_owned();
    let HeaderValue::Map(entries) = &value.value else {
        check.report(
            value.offset,
            format!(
                "MODEL(...) in '{file}' must define 'columns' as (name (description \"...\"), ...)"
            ),
        );
        return Vec::new();
    };
    let mut docs = Vec::new();
    for (name, doc) in entries {
        if !matches!(doc.value, HeaderValue::Map(_)) {
            check.report(doc.offset, format!("MODEL(...) in '{file}' column '{}' must be a mapping like (description \"...\")", name.value));
            continue;
        }
        if let HeaderValue::Map(keys) = &doc.value
            && let Some((key, _)) = keys
                .iter()
                .find(|(k, _)| k.value != "description" && k.value != "audits")
        {
            check.report(key.offset, format!("MODEL(...) in '{file}' column '{}' supports only description and audits, not '{}'", name.value, key.value));
        }
        docs.push(ColumnDoc {
            name: name.value.clone(),
            description: doc
                .value
                .get("description")
                .and_then(|d| check.string(d, "description")),
            audits: doc
                .value
                .get("audits")
                .map(|a| audit_list(check, a, "audits"))
                .unwrap_or_default(),
        });
    }
    docs
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::header::parse;

    fn ok(text: &str) -> ModelHeader {
        validate(&parse(text).expect("syntax"), "m.sql").unwrap_or_else(|p| panic!("{text}: {p:?}"))
    }

    fn problems(text: &str) -> Vec<String> {
        validate(&parse(text).expect("syntax"), "m.sql")
            .expect_err(text)
            .into_iter()
            .map(|p| p.message)
            .collect()
    }

    #[test]
    fn a_full_table_header() {
        let header = ok(r#"
            engine "ReplacingMergeTree(updated_at)",
            order_by ["order_id", "_replay_offset"],
            partition_by "toYYYYMM(_replay_timestamp)",
            retention (duration "7d", timestamp_column updated_at, when_missing skip),
            settings (index_granularity 8192, allow_nullable_key true),
            execution_settings (replay (max_threads 4)),
            replay_anchor never,
            description "Orders, cleaned",
            columns (order_id (description "key", audits [not_null])),
            audits [expression_is_true (expression "amount >= 0")],
        "#);
        assert_eq!(header.kind, Kind::Table);
        assert_eq!(
            header.engine.as_deref(),
            Some("ReplacingMergeTree(updated_at)")
        );
        assert_eq!(
            header.order_by,
            Some(vec!["order_id".to_owned(), "_replay_offset".to_owned()])
        );
        assert_eq!(
            header.retention,
            Some(Retention::Policy {
                duration_seconds: 604_800,
                timestamp_column: "updated_at".to_owned(),
                cap_at_column: None,
                when_missing: WhenMissing::Skip
            })
        );
        assert_eq!(
            header.settings,
            vec![
                ("allow_nullable_key".to_owned(), "true".to_owned()),
                ("index_granularity".to_owned(), "8192".to_owned())
            ]
        );
        assert_eq!(
            header.replay_settings,
            vec![("max_threads".to_owned(), "4".to_owned())]
        );
        assert!(header.replay_anchor_never);
        assert_eq!(header.columns[0].audits.len(), 1);
        assert_eq!(header.audits.len(), 1);
    }

    #[test]
    fn view_headers_refuse_storage_keys() {
        assert_eq!(ok("kind view, description \"daily\"").kind, Kind::View);
        assert_eq!(
            problems("kind view, engine \"MergeTree()\", ttl \"x\", order_by [\"a\"]"),
            ["View MODEL(...) in 'm.sql' cannot define table/replay fields: engine, order_by, ttl"]
        );
    }

    #[test]
    fn key_errors() {
        assert_eq!(
            problems("kind stream"),
            ["MODEL(...) in 'm.sql' must define 'kind' as 'table' or 'view'"]
        );
        assert_eq!(
            problems("zeta 1, alpha 2"),
            ["MODEL(...) in 'm.sql' contains unsupported keys: alpha, zeta"]
        );
        assert_eq!(
            problems("descripton \"x\""),
            [
                "MODEL(...) in 'm.sql' contains unsupported keys: descripton (did you mean 'description'?)"
            ]
        );
        assert_eq!(
            problems("order_by []"),
            ["MODEL(...) in 'm.sql' must define 'order_by' as a non-empty list of strings"]
        );
        assert_eq!(
            problems("ttl \"x\", retention false"),
            ["MODEL(...) in 'm.sql' cannot combine ttl with typed retention"]
        );
        assert_eq!(
            problems("retention (duration 0s, timestamp_column t)"),
            ["MODEL(...) in 'm.sql' retention.duration must be a positive duration such as \"7d\""]
        );
        assert_eq!(
            problems("retention (duration 7d)"),
            ["MODEL(...) in 'm.sql' retention requires timestamp_column"]
        );
        assert_eq!(
            problems("retention true"),
            [
                "MODEL(...) in 'm.sql' must define 'retention' as false or (duration ..., timestamp_column ...)"
            ]
        );
        assert_eq!(
            problems("execution_settings (replay ())"),
            ["MODEL(...) in 'm.sql' execution_settings.replay must not be empty"]
        );
        assert_eq!(
            problems("execution_settings (insert (a 1))"),
            ["MODEL(...) in 'm.sql' execution_settings supports only 'replay', not 'insert'"]
        );
        assert_eq!(
            problems("replay_anchor sometimes"),
            ["MODEL(...) in 'm.sql' must define 'replay_anchor' as 'auto' or 'never'"]
        );
        assert_eq!(
            problems("replay_on_change (breaking \"bounded(7d)\")").len(),
            1,
            "the old spelling is refused"
        );
        assert_eq!(
            problems("description \"\""),
            ["MODEL(...) in 'm.sql' must define 'description' as a non-empty string"]
        );
        assert_eq!(
            problems("columns (a \"x\")"),
            ["MODEL(...) in 'm.sql' column 'a' must be a mapping like (description \"...\")"]
        );
    }

    #[test]
    fn problems_point_at_the_key_or_value() {
        let text = "kind table, weird 1";
        let found = validate(&parse(text).expect("syntax"), "m.sql").expect_err("unknown key");
        assert_eq!(found[0].offset, text.find("weird").expect("present"));
    }
}
