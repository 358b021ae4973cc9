//! What `stb test` and `stb audit` (and a build's audits) share: the model selection, the
//! executed SQL under `target/run/`, the records, and how results read as text.

use std::collections::BTreeSet;
use std::io::Write;

use stb_diagnostics::Diagnostic;
use stb_graph::ScopedSelector;

use crate::args::ConnectionArgs;
use crate::args::ProjectArgs;
use crate::output::Failure;

/// The options of `stb test` and `stb audit`.
#[derive(Debug, clap::Args)]
pub(crate) struct QualityArgs {
    #[command(flatten)]
    pub(crate) project: ProjectArgs,
    #[command(flatten)]
    pub(crate) connection: ConnectionArgs,
    /// Models whose tests or audits run: `name`, `pipeline:name`; `+name` adds the models
    /// upstream, `name+` (tests only) the models downstream. Default: all.
    #[arg(long, short = 's', value_name = "SELECTOR")]
    pub(crate) select: Vec<String>,
    /// Print machine-readable JSON on stdout.
    #[arg(long)]
    pub(crate) json: bool,
}

/// A test's or audit's status as the text output shows it: `PASS`, `FAIL`, `ERROR`,
/// `WARN` or `DEFERRED` (the reference's words for tests, used for audits too).
pub(crate) fn status_label(status: &str) -> String {
    match status {
        "passed" => "PASS".to_owned(),
        "failed" => "FAIL".to_owned(),
        "warning" => "WARN".to_owned(),
        other => other.to_ascii_uppercase(),
    }
}

/// The models `--select` names (`None`: no selector, everything).
pub(crate) fn selected_models(
    compiled: &stb_compile::Compiled,
    select: &[String],
    parse: fn(&str) -> Result<ScopedSelector, Diagnostic>,
    what: &str,
) -> Result<Option<BTreeSet<String>>, Failure> {
    if select.is_empty() {
        return Ok(None);
    }
    let selectors = select
        .iter()
        .map(|s| parse(s))
        .collect::<Result<Vec<_>, _>>()
        .map_err(Failure::from)?;
    let graph = stb_plan::direct::model_graph(&compiled.plan_models);
    stb_graph::resolve_scoped(&graph, &selectors, what)
        .map(Some)
        .map_err(Failure::from)
}

/// Replaces `target/run/<what>/` with the statements that ran.
pub(crate) fn write_run(
    root: &std::path::Path,
    what: &str,
    statements: &[(String, String)],
) -> Result<(), Failure> {
    let files: Vec<(String, String)> = statements
        .iter()
        .map(|(name, sql)| (name.clone(), format!("{}\n", sql.trim_end())))
        .collect();
    crate::run_artifacts::publish(root, what, &files)
}

pub(crate) use stb_engine::quality::RecordedRun;

/// Records a `stb test` / `stb audit` run (see [`stb_engine::quality::record_run`]). Best
/// effort: a run whose records cannot be written still reports its results, with a
/// warning.
pub(crate) fn record_run(
    client: &stb_warehouse::Client,
    database: &str,
    project: &stb_project::Project,
    run: &RecordedRun<'_>,
    passed: bool,
    results: &[stb_warehouse::records::NodeResult<'_>],
    started: std::time::SystemTime,
) {
    let recorded =
        stb_engine::quality::record_run(client, database, project, run, passed, results, started);
    if let Err(error) = recorded {
        let _ = writeln!(
            std::io::stderr().lock(),
            "warning: the {} results were not recorded: {error}",
            run.command
        );
    }
}

/// `PASS (0 rows)`, `FAIL (a: 3 rows, b: 0 rows)`: what the audit checked.
fn status_with_rows(result: &stb_engine::audits::AuditResult) -> String {
    let status = crate::quality::status_label(result.status);
    let rows = |n: u64| {
        if n == 1 {
            "1 row".to_owned()
        } else {
            format!("{n} rows")
        }
    };
    match result.checked_rows.as_slice() {
        [] => status,
        [only] => format!("{status} ({})", rows(only.rows)),
        many => format!(
            "{status} ({})",
            many.iter()
                .map(|c| format!("{}: {}", c.model, rows(c.rows)))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

/// One line per audit, its message and its sample rows.
pub(crate) fn print_lines(results: &[stb_engine::audits::AuditResult]) {
    let mut out = std::io::stdout().lock();
    for result in results {
        let _ = write!(
            out,
            "{}  {}  ({}, {})",
            status_with_rows(result),
            result.name,
            result.severity,
            result.file
        );
        if result.failing_rows > 0 {
            let _ = write!(out, "  {} failing rows", result.failing_rows);
        }
        let _ = writeln!(out);
        if let Some(message) = &result.message {
            let _ = writeln!(out, "    {message}");
        }
        for row in &result.sample {
            let _ = writeln!(out, "    {}", serde_json::Value::Object(row.clone()));
        }
    }
    // Said once under the list, for `stb audit` and for a build's audits alike.
    let over_empty = stb_engine::audits::over_empty_relations(results);
    if !over_empty.is_empty() {
        let _ = writeln!(
            out,
            "Note: {} audits ran over an empty relation and checked nothing there: {}",
            over_empty.len(),
            over_empty.join(", ")
        );
    }
}
