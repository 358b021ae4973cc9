//! `stb deployment audit [<id>]`: is a staged deployment ready to promote? A report: it
//! exits 0 whatever the verdict (scripts read `assessment` from `--json`).

use std::io::Write;
use std::process::ExitCode;

use clap::Args;
use stb_engine::readiness::{Readiness, RootReadiness, assess, choose};

use crate::output::{Failure, fail, print_json};
use crate::virtual_target::{Common, connect_compiled};

#[derive(Debug, Args)]
pub(crate) struct AuditArgs {
    /// The deployment to judge; without it, the only staged one.
    deployment_id: Option<String>,
    #[command(flatten)]
    common: Common,
}

pub(crate) fn run(args: &AuditArgs) -> ExitCode {
    let json = args.common.json;
    let started = std::time::SystemTime::now();
    let (project, compiled, client, database) = match connect_compiled(&args.common) {
        Ok(connected) => connected,
        Err(code) => return code,
    };
    let result = stb_engine::deployments::read_state(&client, &database).and_then(|state| {
        let record = choose(&state, args.deployment_id.as_deref())?;
        assess(
            &client,
            &database,
            &compiled,
            &state,
            &record.deployment_id,
            project.defaults.deployment_readiness,
        )
    });
    let (readiness, executed) = match result {
        Ok(assessed) => assessed,
        Err(error) => return fail(&Failure::from(error), json),
    };
    if let Err(failure) = crate::quality::write_run(&project.root, "deployment_audit", &executed) {
        return fail(&failure, json);
    }
    crate::quality::record_run(
        &client,
        &database,
        &project,
        &crate::quality::RecordedRun {
            command: "deployment audit",
            trigger: "deployment",
            deployment_id: Some(&readiness.deployment_id),
        },
        !readiness.audits.iter().any(|a| a.is_error()),
        &readiness
            .audits
            .iter()
            .map(stb_engine::audits::AuditResult::node_result)
            .collect::<Vec<_>>(),
        started,
    );
    if json {
        let mut value = serde_json::to_value(&readiness).unwrap_or_default();
        if let Some(object) = value.as_object_mut() {
            object.insert("database".into(), database.into());
        }
        print_json(&value);
    } else {
        print_text(&database, &readiness);
    }
    ExitCode::SUCCESS
}

fn print_text(database: &str, readiness: &Readiness) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(
        out,
        "Deployment {} in '{database}': {}",
        readiness.deployment_id,
        label(readiness.assessment)
    );
    let _ = writeln!(
        out,
        "Thresholds: maximum lag {} s, staged rows at least {:.0}% of the active copy's",
        readiness.thresholds.maximum_lag_seconds,
        readiness.thresholds.minimum_staged_row_ratio * 100.0
    );
    if !readiness.roots.is_empty() {
        let _ = writeln!(out, "\nRoots");
    }
    for root in &readiness.roots {
        print_root(&mut out, root);
    }
    if !readiness.audits.is_empty() {
        let _ = writeln!(out, "\nAudits (on the deployment's copies)");
        drop(out);
        crate::quality::print_lines(&readiness.audits);
        out = std::io::stdout().lock();
    }
    if !readiness.reasons.is_empty() {
        let _ = writeln!(out, "\nWhy");
        for reason in &readiness.reasons {
            let _ = writeln!(out, "  - {reason}");
        }
    }
    let _ = writeln!(
        out,
        "\nNext: stb deployment promote {}",
        readiness.deployment_id
    );
}

fn label(assessment: stb_engine::readiness::Assessment) -> &'static str {
    match assessment.as_str() {
        "ready" => "READY",
        "caution" => "CAUTION",
        _ => "NOT READY",
    }
}

fn print_root(out: &mut std::io::StdoutLock<'_>, root: &RootReadiness) {
    let count = |rows: Option<u64>| rows.map_or_else(|| "-".to_owned(), |n| n.to_string());
    let _ = writeln!(
        out,
        "  {}  {}  ({} boundary)",
        root.model,
        label(root.assessment),
        root.boundary_mode.unwrap_or("no")
    );
    let _ = writeln!(
        out,
        "    staged {}: {} rows",
        root.staged_relation,
        count(root.staged_rows)
    );
    match &root.active_relation {
        Some(active) => {
            let _ = writeln!(out, "    active {active}: {} rows", count(root.active_rows));
        }
        None => {
            let _ = writeln!(out, "    active: none (nothing is promoted for it yet)");
        }
    }
    if let Some(source) = &root.replay_source {
        let _ = writeln!(
            out,
            "    replay source {source}: {} rows",
            count(root.replay_source_rows)
        );
    }
    if root.partitions_compared > 0 {
        let _ = writeln!(
            out,
            "    partitions: {} compared, {} missing, {} lagging; offset gap max {}, avg {}",
            root.partitions_compared,
            root.partitions_missing,
            root.partitions_lagging,
            root.max_offset_gap
                .map_or_else(|| "-".to_owned(), |g| g.to_string()),
            root.avg_offset_gap
                .map_or_else(|| "-".to_owned(), |g| format!("{g:.1}"))
        );
    }
    if let (Some(low), Some(high)) = (&root.staged_min, &root.staged_max) {
        let _ = writeln!(out, "    staged range {low} .. {high}");
    }
    if let (Some(low), Some(high)) = (&root.active_min, &root.active_max) {
        let _ = writeln!(out, "    active range {low} .. {high}");
    }
    if let Some(lag) = root.lag_seconds {
        let _ = writeln!(out, "    lag {lag:.1} s");
    }
    for reason in &root.reasons {
        let _ = writeln!(out, "    - {reason}");
    }
}
