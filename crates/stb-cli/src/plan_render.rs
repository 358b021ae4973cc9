//! How a direct plan reads: the text `stb plan` and `stb build` print, and the JSON of
//! `stb plan --json` and `target/run/plan/plan.json`.

use std::collections::BTreeSet;
use std::io::Write;

use stb_engine::direct::{NOTHING_CHANGED, Planned};

use crate::output::print_json;

/// Diff lines shown per model unless `--verbose`.
const DIFF_LINES: usize = 12;

/// The text lines of the shrink guard (empty when the plan replays nothing).
pub(crate) fn write_replay_windows(planned: &Planned, out: &mut dyn Write) {
    if planned.replay_windows.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "\nReplay windows (now vs what retained history restores)"
    );
    for window in &planned.replay_windows {
        let mark = if window.needs_consent() { "!" } else { " " };
        let _ = writeln!(out, " {mark} {}", window.describe());
    }
    let shrink = planned.shrink_summary();
    if shrink.needs_allow_shrink {
        let _ = writeln!(
            out,
            "\nSHRINK: this rebuild would lose {} rows of {} that retained history cannot restore; `stb build` refuses it unless --allow-shrink is given",
            shrink.lost_rows,
            shrink.models.join(", ")
        );
    }
}

/// What the replays read, root by root, against the target's budget (nothing when the
/// plan replays nothing).
pub(crate) fn write_replay_cost(planned: &Planned, out: &mut dyn Write) {
    if planned.replay_costs.is_empty() {
        return;
    }
    let summary = planned.cost_summary();
    let _ = writeln!(out, "\nReplay cost  {}", summary.describe());
    for cost in &planned.replay_costs {
        let _ = writeln!(out, "  {}", cost.describe());
    }
    if !summary.over_budget.is_empty() {
        let _ = writeln!(
            out,
            "\nOVER BUDGET: {}; `stb build` refuses it unless --allow-large is given",
            summary.over_budget.join("; ")
        );
    }
}

/// A plan of any kind as `stb plan` and `stb build` show it.
pub(crate) fn print_plan(plan: &stb_engine::plan::Plan, verbose: bool) {
    use stb_engine::plan::Plan;
    match plan {
        Plan::Direct(one) | Plan::Virtual(one) => match &one.staged {
            Some(staged) => {
                crate::staged_render::print(staged, false, verbose);
                write_replay_cost(&one.planned, &mut std::io::stdout().lock());
            }
            None => print(&one.planned, false, verbose),
        },
        Plan::Mixed { staged, direct } => {
            crate::staged_render::print_mixed(staged.staged.as_ref(), &direct.planned, verbose);
            // The virtual phase's replays (its build's own plan), then both together:
            // what the budget is checked against.
            let mut out = std::io::stdout().lock();
            write_replay_cost(&staged.planned, &mut out);
            let both = stb_engine::plan::replay_cost(&[staged, direct]);
            let _ = writeln!(out, "\nReplay cost, both phases  {}", both.describe());
            if !both.over_budget.is_empty() {
                let _ = writeln!(
                    out,
                    "OVER BUDGET: {}; `stb build` refuses it unless --allow-large is given",
                    both.over_budget.join("; ")
                );
            }
        }
    }
}

pub(crate) fn print(planned: &Planned, as_json: bool, verbose: bool) {
    if as_json {
        print_json(&stb_engine::direct::json::json(planned));
        return;
    }
    let mut out = std::io::stdout().lock();
    if planned.nothing_changed {
        let _ = writeln!(out, "{NOTHING_CHANGED}");
        return;
    }
    let _ = writeln!(out, "Direct plan  {}", planned.database);
    let _ = writeln!(out, "\nRebuild paths");
    for root in planned.roots() {
        let _ = writeln!(
            out,
            "  [replay source] {} [{}]",
            root.driving_input,
            root.template.anchor.mode.as_str()
        );
        if root.waits_for.is_empty() {
            let _ = writeln!(out, "  └── [replay root] {}", root.model);
        } else {
            let _ = writeln!(
                out,
                "  └── [replay root] {}  (stage {}: joins {}, rebuilt in this build; its view is created and it replays once {} complete)",
                root.model,
                root.stage,
                root.waits_for.join(", "),
                if root.waits_for.len() == 1 {
                    "that is"
                } else {
                    "they are"
                }
            );
        }
        for model in &root.propagated {
            let _ = writeln!(out, "      └── [rebuild] {model}");
        }
    }
    let under_root: BTreeSet<&str> = planned
        .plan
        .replay_roots
        .iter()
        .flat_map(|r| {
            std::iter::once(r.model.as_str()).chain(r.propagated.iter().map(String::as_str))
        })
        .collect();
    for entry in planned
        .plan
        .entries
        .iter()
        .filter(|e| !under_root.contains(e.model.as_str()))
    {
        let _ = writeln!(out, "  [rebuild] {}", entry.model);
    }
    let _ = writeln!(out, "\nModel decisions");
    for (entry, (_, change)) in planned.plan.entries.iter().zip(&planned.changes) {
        let _ = writeln!(
            out,
            "  {}  {}  (reason: {})",
            entry.model,
            change.status.as_str(),
            entry.reason.as_str()
        );
        let lines: Vec<&str> = change.unified_diff.lines().collect();
        let shown = if verbose {
            lines.len()
        } else {
            lines.len().min(DIFF_LINES)
        };
        for line in &lines[..shown] {
            let _ = writeln!(out, "      {line}");
        }
        if shown < lines.len() {
            let _ = writeln!(
                out,
                "      ... {} more lines (--verbose)",
                lines.len() - shown
            );
        }
    }
    if !planned.recreations.is_empty() {
        let _ = writeln!(out, "\nSource recreations");
        for (source, changes) in &planned.recreations {
            let _ = writeln!(
                out,
                "  kafka__{source} is recreated, its landing table and rows kept: {}",
                changes.join(", ")
            );
        }
    }
    if !planned.repairs.is_empty() {
        let _ = writeln!(out, "\nLanding repairs");
        for (source, missing) in &planned.repairs {
            let _ = writeln!(
                out,
                "  {source}: {} missing, recreated from the declaration (landing table and its rows kept; the consumer group resumes from its committed offsets)",
                missing.join(" and ")
            );
        }
    }
    if let Some(start) = &planned.start_time {
        let _ = writeln!(
            out,
            "\nStart time  {start} UTC (history before it is not rebuilt)"
        );
    }
    write_replay_windows(planned, &mut out);
    write_replay_cost(planned, &mut out);
    if let Some(cluster) = &planned.workflow.cluster {
        write_cluster(planned, cluster, &mut out);
    }
    if !planned.plan.warnings.is_empty() {
        let _ = writeln!(out, "\nWarnings");
        for warning in &planned.plan.warnings {
            let _ = writeln!(out, "  {warning}");
        }
    }
    if let Some(validated) = &planned.validated {
        let _ = writeln!(
            out,
            "\nChecked against the warehouse: {} statements passed ({} ms)",
            validated.checked, validated.elapsed_ms
        );
        for unchecked in &validated.unchecked {
            let _ = writeln!(
                out,
                "  not checked: {}: {}",
                unchecked.model, unchecked.reason
            );
        }
    }
    let relations: usize = planned.plan.creation.len();
    let _ = writeln!(
        out,
        "\n{} models selected, {relations} relations rebuilt, {} replay roots",
        planned.plan.entries.len(),
        planned.plan.replay_roots.len()
    );
}

/// An `on_cluster` or `sharded` target's plan: the shards, how many statements run on
/// every server, and each root's capture and replay on each shard.
fn write_cluster(
    planned: &Planned,
    cluster: &stb_plan::cluster::ClusterWork,
    out: &mut impl Write,
) {
    let target = &cluster.target;
    let shards = target.shards.len();
    let _ = writeln!(
        out,
        "\nCluster  {} ({}, {shards} shard{})",
        target.cluster.name,
        target.cluster.topology.as_str(),
        if shards == 1 { "" } else { "s" }
    );
    for shard in &target.shards {
        let _ = writeln!(
            out,
            "  shard {}  {}",
            shard.number,
            shard.replicas.join(", ")
        );
    }
    let (everywhere, per_shard) = planned
        .workflow
        .steps
        .iter()
        .fold((0, 0), |(all, one), step| match step.shard {
            Some(_) => (all, one + 1),
            None => (all + 1, one),
        });
    let _ = writeln!(
        out,
        "  {everywhere} steps from the connected server (DDL ON CLUSTER {}), {} on a replica of each shard",
        target.cluster.name,
        per_shard / shards.max(1)
    );
    for root in &cluster.shard_roots {
        let _ = writeln!(
            out,
            "  {}: on each shard, sync and capture {}, replay its rows into {}",
            root.model,
            root.template.anchor.read_from(),
            root.template.target
        );
    }
    let _ = writeln!(
        out,
        "  `stb build` cannot run this plan yet: the statements are in target/run/plan/ (docs/clusters.md)"
    );
}
