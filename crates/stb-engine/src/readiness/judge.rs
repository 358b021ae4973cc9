//! The verdict on what was observed: pure, so every rule has a unit test.

use serde::Serialize;
use stb_project::project_config::DeploymentReadiness;

use super::RootReadiness;
use crate::audits::AuditResult;

/// Ordered from best to worst: the overall verdict is the worst of its parts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Assessment {
    #[default]
    Ready,
    Caution,
    NotReady,
}

impl Assessment {
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Ready => "ready",
            Self::Caution => "caution",
            Self::NotReady => "not_ready",
        }
    }
}

/// Judges one root against the thresholds: its verdict and every reason for it.
#[must_use]
pub fn judge(root: &RootReadiness, thresholds: &DeploymentReadiness) -> (Assessment, Vec<String>) {
    let mut verdict = Verdict::default();
    if !root.staged_exists {
        // The reference says caution here; a promotion would be refused outright.
        verdict.add(
            Assessment::NotReady,
            format!("the staged copy {} is gone", root.staged_relation),
        );
        return verdict.into_parts();
    }
    let staged = root.staged_rows.unwrap_or(0);
    let active = root.active_rows.unwrap_or(0);
    if staged == 0 {
        if active > 0 {
            verdict.add(
                Assessment::NotReady,
                format!("the staged copy is empty; the active copy holds {active} rows"),
            );
        } else {
            verdict.add(
                Assessment::Caution,
                "the staged copy is empty (so is the active one): nothing was checked".to_owned(),
            );
        }
        return verdict.into_parts();
    }
    match root.boundary_mode {
        Some("offsets") => offsets(root, thresholds, &mut verdict),
        Some("timestamp" | "landed_at") => {
            if let Some(lag) = root.lag_seconds {
                lagging(
                    lag,
                    thresholds,
                    "the active copy's newest row",
                    &mut verdict,
                );
            }
        }
        Some("cursor") => {
            if let Some(gap) = root.cursor_gap.filter(|gap| *gap > 0) {
                verdict.add(
                    Assessment::Caution,
                    format!("the staged copy's newest cursor is {gap} behind the active copy's"),
                );
            }
        }
        _ => verdict.add(
            Assessment::Caution,
            "the staged copy has no lineage columns: its freshness is unknown".to_owned(),
        ),
    }
    if root.active_relation.is_some() && active > 0 {
        // Compared in integers: staged / active < ratio, without rounding surprises.
        #[allow(clippy::cast_precision_loss)]
        let ratio = staged as f64 / active as f64;
        if ratio < thresholds.minimum_staged_row_ratio {
            verdict.add(
                Assessment::Caution,
                format!(
                    "the staged copy holds {staged} rows, {:.0}% of the active copy's {active} (minimum {:.0}%)",
                    ratio * 100.0,
                    thresholds.minimum_staged_row_ratio * 100.0
                ),
            );
        }
    }
    verdict.into_parts()
}

fn offsets(root: &RootReadiness, thresholds: &DeploymentReadiness, verdict: &mut Verdict) {
    if root.partitions_missing > 0 {
        verdict.add(
            Assessment::Caution,
            format!(
                "{} of {} partitions of {} have no staged rows",
                root.partitions_missing,
                root.partitions_compared,
                root.replay_source.as_deref().unwrap_or("the replay source")
            ),
        );
    }
    match root.lag_seconds {
        Some(lag) => lagging(lag, thresholds, "the replay source's newest row", verdict),
        None if root.partitions_lagging > 0 || root.partitions_compared == 0 => verdict.add(
            Assessment::Caution,
            "freshness unknown: the replay source keeps no time column".to_owned(),
        ),
        None => {}
    }
}

fn lagging(lag: f64, thresholds: &DeploymentReadiness, behind: &str, verdict: &mut Verdict) {
    #[allow(clippy::cast_precision_loss)]
    let limit = thresholds.maximum_lag_seconds as f64;
    if lag > limit {
        verdict.add(
            Assessment::NotReady,
            format!("the staged copy is {lag:.1} s behind {behind} (maximum {limit:.0} s)"),
        );
    }
}

/// The deployment's verdict: the worst root's, and not ready when an error-severity audit
/// failed (a warning-severity failure is a caution).
#[must_use]
pub fn overall(roots: &[RootReadiness], audits: &[AuditResult]) -> (Assessment, Vec<String>) {
    let mut verdict = Verdict::default();
    for root in roots {
        for reason in &root.reasons {
            verdict.add(root.assessment, format!("{}: {reason}", root.model));
        }
        verdict.worst = verdict.worst.max(root.assessment);
    }
    for audit in audits {
        if audit.is_error() {
            verdict.add(
                Assessment::NotReady,
                format!("audit {} {}", audit.name, failure(audit)),
            );
        } else if audit.is_warning() {
            verdict.add(
                Assessment::Caution,
                format!("audit {} (warning) {}", audit.name, failure(audit)),
            );
        }
    }
    // Worst first; the sort is stable, so each level keeps the roots' order.
    verdict
        .reasons
        .sort_by_key(|(level, _)| std::cmp::Reverse(*level));
    verdict.into_parts()
}

fn failure(audit: &AuditResult) -> String {
    match audit.status {
        "error" => format!(
            "could not run: {}",
            audit.message.as_deref().unwrap_or("unknown error")
        ),
        _ => format!("found {} failing rows", audit.failing_rows),
    }
}

/// The worst level met so far and every reason, each with its level.
#[derive(Default)]
struct Verdict {
    worst: Assessment,
    reasons: Vec<(Assessment, String)>,
}

impl Verdict {
    fn add(&mut self, level: Assessment, reason: String) {
        self.worst = self.worst.max(level);
        self.reasons.push((level, reason));
    }

    fn into_parts(self) -> (Assessment, Vec<String>) {
        (
            self.worst,
            self.reasons.into_iter().map(|(_, r)| r).collect(),
        )
    }
}

#[cfg(test)]
mod tests;
