//! Scheduled audits (`stb dev`'s audit scheduler): which audits with an `every` are due on
//! the warehouse's clock, and running a due batch as a recorded `audit` run.
//!
//! Slots are aligned to the epoch: an audit every 300 s is due at each multiple of 300 s,
//! so two schedulers agree on the slot without sharing state, and a server that was down
//! runs the current slot once rather than every slot it missed. A slot is done when the
//! records hold a `scheduled` result for it. `warmup` holds an audit back after the latest
//! successful build (its relations are still filling).

use std::collections::BTreeMap;

use serde::Serialize;
use stb_compile::{Audit, Compiled};
use stb_warehouse::Client;

use crate::EngineError;
use crate::audits::{AuditResult, Placement};

/// An audit with a cadence, and the models it reads that are not built.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scheduled<'a> {
    pub name: &'a str,
    pub every_seconds: u64,
    pub warmup_seconds: u64,
    pub models: &'a [String],
    pub unbuilt: Vec<String>,
}

/// What the records and the clock say.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Observed {
    /// The warehouse's clock, ms since the epoch.
    pub now_ms: i64,
    /// Each audit's latest scheduled slot and that run's status.
    pub last: BTreeMap<String, (i64, String)>,
    /// When the latest successful build ended: warmup counts from it.
    pub last_build_ms: Option<i64>,
}

/// One audit's place in the schedule.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Slot {
    pub name: String,
    /// `due` (runs this tick), `idle` (its slot is ahead), `warming_up` (due, held back by
    /// warmup after a build) or `not_materialized` (a model it reads is not built).
    pub state: &'static str,
    /// The slot it runs for next (ms since the epoch).
    pub scheduled_for_ms: i64,
    /// When it may run: its slot, or the end of warmup when that is later.
    pub eligible_at_ms: i64,
    pub cadence_seconds: u64,
    pub warmup_seconds: u64,
    pub last_status: Option<String>,
    pub referenced_models: Vec<String>,
    pub unbuilt_models: Vec<String>,
}

fn seconds_ms(seconds: u64) -> i64 {
    i64::try_from(seconds.saturating_mul(1000)).unwrap_or(i64::MAX)
}

/// Where each audit stands at `observed.now_ms`. Pure.
#[must_use]
pub fn plan(audits: &[Scheduled<'_>], observed: &Observed) -> Vec<Slot> {
    audits
        .iter()
        .map(|audit| {
            let cadence = seconds_ms(audit.every_seconds).max(1000);
            let current = observed.now_ms.div_euclid(cadence) * cadence;
            let last = observed.last.get(audit.name);
            let done = last.is_some_and(|(slot, _)| *slot >= current);
            let scheduled_for = if done { current + cadence } else { current };
            let warm_at = observed.last_build_ms.map_or(i64::MIN, |built| {
                built.saturating_add(seconds_ms(audit.warmup_seconds))
            });
            let eligible_at = scheduled_for.max(warm_at);
            let state = if !audit.unbuilt.is_empty() {
                "not_materialized"
            } else if done {
                "idle"
            } else if observed.now_ms < eligible_at {
                "warming_up"
            } else {
                "due"
            };
            Slot {
                name: audit.name.to_owned(),
                state,
                scheduled_for_ms: scheduled_for,
                eligible_at_ms: eligible_at,
                cadence_seconds: audit.every_seconds,
                warmup_seconds: audit.warmup_seconds,
                last_status: last.map(|(_, status)| status.clone()),
                referenced_models: audit.models.to_vec(),
                unbuilt_models: audit.unbuilt.clone(),
            }
        })
        .collect()
}

fn engine(error: &stb_warehouse::WarehouseError) -> EngineError {
    EngineError::from(error)
}

/// Reads the warehouse's clock, the latest scheduled slot of each audit and the end of
/// the latest successful build.
///
/// # Errors
/// A read failed.
pub fn observe(client: &Client, database: &str, target: &str) -> Result<Observed, EngineError> {
    let now = crate::deployments::warehouse_now(client)?;
    let now_ms = stb_plan::deployment::parse_utc_text(&now).unwrap_or_default();
    let mut observed = Observed {
        now_ms,
        ..Observed::default()
    };
    observed.last = stb_warehouse::results::scheduled_slots(client, database, target)
        .map_err(|e| engine(&e))?;
    observed.last_build_ms =
        stb_warehouse::results::last_successful_build_ms(client, database, target)
            .map_err(|e| engine(&e))?;
    Ok(observed)
}

/// The project's audits with a cadence, each with the models it reads that are not built.
///
/// # Errors
/// The catalog could not be read.
pub fn scheduled<'a>(
    client: &Client,
    database: &str,
    compiled: &'a Compiled,
) -> Result<Vec<Scheduled<'a>>, EngineError> {
    let with_cadence: Vec<&Audit> = compiled
        .audits
        .iter()
        .filter(|a| a.every_seconds.is_some())
        .collect();
    if with_cadence.is_empty() {
        return Ok(Vec::new());
    }
    let catalog = client.load_catalog(database).map_err(|e| engine(&e))?;
    Ok(with_cadence
        .into_iter()
        .map(|audit| Scheduled {
            name: &audit.name,
            every_seconds: audit.every_seconds.unwrap_or_default(),
            warmup_seconds: audit.warmup_seconds,
            models: &audit.models,
            unbuilt: crate::audits::unbuilt_models(&catalog, compiled, audit, &Placement::live)
                .into_iter()
                .map(str::to_owned)
                .collect(),
        })
        .collect())
}

/// Runs the `due` slots' audits against the live relations and records them as one
/// `audit` run whose results carry their slot and cadence (trigger `scheduled`).
///
/// # Errors
/// The audits could not run, or their records could not be written (a slot whose run is
/// not recorded runs again on the next tick).
pub fn run_due(
    client: &Client,
    database: &str,
    project: &stb_project::Project,
    compiled: &Compiled,
    due: &[&Slot],
) -> Result<Vec<AuditResult>, EngineError> {
    let started = std::time::SystemTime::now();
    let chosen: Vec<&Audit> = compiled
        .audits
        .iter()
        .filter(|a| due.iter().any(|slot| slot.name == a.name))
        .collect();
    let (results, _) = crate::audits::run_set(client, database, compiled, &chosen)?;
    let records: Vec<_> = results
        .iter()
        .map(|result| {
            let mut record = result.node_result();
            record.schedule = due.iter().find(|s| s.name == result.name).map(|slot| {
                (
                    u128::try_from(slot.scheduled_for_ms).unwrap_or_default(),
                    slot.cadence_seconds,
                )
            });
            record
        })
        .collect();
    crate::quality::record_run(
        client,
        database,
        project,
        &crate::quality::RecordedRun {
            command: "audit",
            trigger: "scheduled",
            deployment_id: None,
        },
        !results.iter().any(AuditResult::is_error),
        &records,
        started,
    )
    .map_err(|e| engine(&e))?;
    Ok(results)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn audit<'a>(name: &'a str, every: u64, warmup: u64, models: &'a [String]) -> Scheduled<'a> {
        Scheduled {
            name,
            every_seconds: every,
            warmup_seconds: warmup,
            models,
            unbuilt: Vec::new(),
        }
    }

    #[test]
    fn a_never_run_audit_is_due_for_the_slot_that_holds_now() {
        let models = vec!["m".to_owned()];
        let observed = Observed {
            now_ms: 1_000_123_456,
            ..Observed::default()
        };
        let slots = plan(&[audit("a", 300, 0, &models)], &observed);
        assert_eq!(slots[0].state, "due");
        assert_eq!(slots[0].scheduled_for_ms, 999_900_000);
        assert_eq!(slots[0].referenced_models, ["m"]);
    }

    #[test]
    fn a_slot_already_recorded_waits_for_the_next_and_missed_slots_run_once() {
        let models = vec![];
        let now = 10_000_000;
        let mut observed = Observed {
            now_ms: now,
            ..Observed::default()
        };
        observed
            .last
            .insert("a".into(), (10_000_000, "passed".into()));
        let idle = plan(&[audit("a", 100, 0, &models)], &observed);
        assert_eq!(idle[0].state, "idle");
        assert_eq!(idle[0].scheduled_for_ms, 10_100_000);
        assert_eq!(idle[0].last_status.as_deref(), Some("passed"));
        // Down for an hour: only the current slot is due.
        observed.now_ms = now + 3_600_000;
        let due = plan(&[audit("a", 100, 0, &models)], &observed);
        assert_eq!(due[0].state, "due");
        assert_eq!(due[0].scheduled_for_ms, now + 3_600_000);
    }

    #[test]
    fn warmup_holds_an_audit_back_after_a_build_and_unbuilt_models_first() {
        let models = vec!["m".to_owned()];
        let observed = Observed {
            now_ms: 1_000_000,
            last: BTreeMap::new(),
            last_build_ms: Some(990_000),
        };
        let warming = plan(&[audit("a", 60, 30, &models)], &observed);
        assert_eq!(warming[0].state, "warming_up");
        assert_eq!(warming[0].eligible_at_ms, 1_020_000);
        let later = Observed {
            now_ms: 1_030_000,
            ..observed.clone()
        };
        assert_eq!(plan(&[audit("a", 60, 30, &models)], &later)[0].state, "due");
        let mut unbuilt = audit("a", 60, 0, &models);
        unbuilt.unbuilt = vec!["m".into()];
        assert_eq!(plan(&[unbuilt], &later)[0].state, "not_materialized");
    }
}
