//! Managed-source drift: how a landing that exists differs from what the project declares.
//!
//! A direct build never drops a landing table or its rows. Kafka settings that changed
//! (brokers, topic, format, extra settings) are repaired by recreating only the Kafka
//! table; a changed consumer group, landing table or landing view cannot be repaired
//! without losing offsets or rows, so the build stops before it touches anything.

use crate::direct::{Landing, PlanError};

/// A landing as it exists in the warehouse.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LiveLanding {
    /// `CREATE TABLE` text of `kafka__S`, when it exists.
    pub kafka_create: Option<String>,
    /// Columns of `raw__S` (name, type), when it exists.
    pub raw_columns: Option<Vec<(String, String)>>,
    /// `CREATE MATERIALIZED VIEW` text of `mv__S`, when it exists.
    pub view_create: Option<String>,
}

/// What a build must do about one source's landing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Drift {
    None,
    /// The Kafka table's settings differ: recreate it, keep the landing table.
    Settings(Vec<String>),
}

/// The `SETTINGS` of a `CREATE TABLE` text as (name, value) pairs, values unquoted.
#[must_use]
pub fn create_settings(create: &str) -> Vec<(String, String)> {
    let Some(start) = create.rfind("SETTINGS ") else {
        return Vec::new();
    };
    let mut settings = Vec::new();
    let mut rest = &create[start + "SETTINGS ".len()..];
    loop {
        rest = rest.trim_start_matches([' ', ',', '\n']);
        let Some((name, after)) = rest.split_once('=') else {
            break;
        };
        let name = name.trim().to_owned();
        let after = after.trim_start();
        let (value, remaining) = if let Some(quoted) = after.strip_prefix('\'') {
            let mut value = String::new();
            let mut chars = quoted.char_indices();
            let mut end = quoted.len();
            while let Some((index, c)) = chars.next() {
                match c {
                    '\\' => {
                        if let Some((_, escaped)) = chars.next() {
                            value.push(escaped);
                        }
                    }
                    '\'' => {
                        end = index + 1;
                        break;
                    }
                    other => value.push(other),
                }
            }
            (value, &quoted[end..])
        } else {
            let end = after.find([',', '\n']).unwrap_or(after.len());
            (after[..end].trim().to_owned(), &after[end..])
        };
        settings.push((name, value));
        rest = remaining;
        if rest.trim().is_empty() {
            break;
        }
    }
    settings
}

/// The pieces of a landing that is there (its landing table exists) but incomplete: its
/// Kafka table (`kafka_table`) or its landing view (`landing_view`) was dropped by hand or
/// lost with a server. A build recreates exactly these from the declaration and never
/// touches the landing table; the consumer group resumes from its committed offsets.
#[must_use]
pub fn missing_pieces(live: &LiveLanding) -> Vec<&'static str> {
    if live.raw_columns.is_none() {
        return Vec::new();
    }
    let mut missing = Vec::new();
    if live.kafka_create.is_none() {
        missing.push("kafka_table");
    }
    if live.view_create.is_none() {
        missing.push("landing_view");
    }
    missing
}

/// ClickHouse shows secret settings as this in `CREATE TABLE` text.
const HIDDEN: &str = "[HIDDEN]";

fn refuse(source: &str, what: String) -> PlanError {
    PlanError {
        message: format!(
            "Direct build preserves managed source infrastructure and cannot continue while it has drifted: source '{source}': {what}"
        ),
        hint: "recreate the source explicitly (drop its kafka__, raw__ and mv__ relations, or restore the declared settings) before rebuilding",
    }
}

/// Compares source `source`'s live landing with the declared one.
///
/// # Errors
/// Drift a build cannot repair: the consumer group, the landing table's columns, or the
/// landing view's target.
pub fn landing_drift(
    source: &str,
    declared: &Landing,
    live: &LiveLanding,
) -> Result<Drift, PlanError> {
    landing_drift_into(source, declared, live, &declared.raw_table)
}

/// [`landing_drift`] of a landing whose view writes into `written` (on a sharded cluster
/// the landing table's local part, `raw__<source>_local`).
///
/// # Errors
/// As [`landing_drift`].
pub fn landing_drift_into(
    source: &str,
    declared: &Landing,
    live: &LiveLanding,
    written: &str,
) -> Result<Drift, PlanError> {
    if let Some(columns) = &live.raw_columns {
        let expected: Vec<(String, String)> = stb_ddl::RAW_COLUMNS
            .iter()
            .map(|(name, data_type)| ((*name).to_owned(), (*data_type).to_owned()))
            .collect();
        if *columns != expected {
            return Err(refuse(
                source,
                format!(
                    "landing table {} has columns ({}), expected ({})",
                    declared.raw_table,
                    columns
                        .iter()
                        .map(|(n, t)| format!("{n} {t}"))
                        .collect::<Vec<_>>()
                        .join(", "),
                    expected
                        .iter()
                        .map(|(n, t)| format!("{n} {t}"))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            ));
        }
    }
    if let Some(view) = &live.view_create
        && view_target(view).as_deref() != Some(written)
    {
        return Err(refuse(
            source,
            format!("landing view {} does not write to {written}", declared.view),
        ));
    }
    let Some(kafka) = &live.kafka_create else {
        return Ok(Drift::None);
    };
    let live_settings = create_settings(kafka);
    let declared_settings = create_settings(&declared.create_kafka);
    let value = |settings: &[(String, String)], name: &str| {
        settings
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.clone())
    };
    let group = value(&live_settings, "kafka_group_name");
    if group.as_deref() != Some(declared.consumer_group.as_str()) {
        return Err(refuse(
            source,
            format!(
                "Kafka table {} consumes as group '{}', the project declares '{}'; recreating it would not resume from the committed offsets",
                declared.kafka_table,
                group.unwrap_or_default(),
                declared.consumer_group
            ),
        ));
    }
    let mut changed = Vec::new();
    for (name, wanted) in &declared_settings {
        if name == "kafka_group_name" {
            continue;
        }
        match value(&live_settings, name) {
            Some(live) if live == *wanted || live == HIDDEN => {}
            Some(_) => changed.push(format!("{name} differs")),
            None => changed.push(format!("{name} is not set")),
        }
    }
    for (name, _) in &live_settings {
        if value(&declared_settings, name).is_none() {
            changed.push(format!("{name} is no longer declared"));
        }
    }
    Ok(if changed.is_empty() {
        Drift::None
    } else {
        Drift::Settings(changed)
    })
}

/// The unqualified table a `CREATE MATERIALIZED VIEW ... TO db.table` text writes to.
fn view_target(create: &str) -> Option<String> {
    let mut words = create.split_whitespace();
    words.find(|w| *w == "TO")?;
    let target = words.next()?;
    let name = target.rsplit('.').next().unwrap_or(target);
    Some(name.trim_matches(['`', '"']).to_owned())
}

#[cfg(test)]
mod tests;
