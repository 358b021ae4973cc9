//! What `stb test` and `stb audit` share: their entries in the compiled manifest, the
//! model selection, and the executed SQL under `target/run/`.

use std::collections::BTreeSet;

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

/// The entries of one section (`tests`, `audits`) of the compiled manifest, in name order.
pub(crate) fn manifest_section<T: serde::de::DeserializeOwned>(
    compiled: &stb_compile::Compiled,
    section: &str,
) -> Result<Vec<T>, Failure> {
    let manifest: serde_json::Value = compiled
        .files
        .get("manifest.json")
        .and_then(|text| serde_json::from_str(text).ok())
        .unwrap_or_default();
    let entries = manifest
        .get(section)
        .and_then(serde_json::Value::as_object)
        .cloned()
        .unwrap_or_default();
    entries
        .into_values()
        .map(|entry| {
            serde_json::from_value(entry).map_err(|e| Failure {
                code: "STB-COMPILE-007",
                message: format!("the compiled manifest's {section} could not be read: {e}"),
                hint: "report this: the manifest and this command disagree".to_owned(),
            })
        })
        .collect()
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

/// Records a `stb test` / `stb audit` run: the lifecycle tables, an invocation row and one
/// node result per test or audit. Best effort: a run whose records cannot be written still
/// reports its results, with a warning.
pub(crate) fn record_run(
    client: &stb_warehouse::Client,
    database: &str,
    project: &stb_project::Project,
    command: &str,
    passed: bool,
    results: &[stb_build::records::NodeResult<'_>],
    started: std::time::SystemTime,
) {
    let invocation_id = uuid::Uuid::new_v4().to_string();
    let started_at_ms = started
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis());
    let duration_ms = started.elapsed().map_or(0, |d| d.as_millis());
    let recorded = stb_warehouse::metadata::migrate(client, database)
        .and_then(|()| {
            stb_build::records::write_node_results(
                client,
                database,
                &invocation_id,
                &project.target,
                "manual",
                results,
            )
        })
        .and_then(|()| {
            stb_build::records::write_invocation(
                client,
                database,
                &stb_build::records::Invocation {
                    invocation_id: &invocation_id,
                    project_identity: &project.name,
                    target_identity: &project.target,
                    command,
                    mode: None,
                    outcome: if passed { "succeeded" } else { "failed" },
                    exit_code: i32::from(!passed),
                    materialized_outcome: None,
                    workflow_id: None,
                    selected_node_count: results.len(),
                    started_at_ms,
                    duration_ms,
                    error_message: None,
                    summary_json: &serde_json::json!({"results": results.len()}).to_string(),
                },
            )
        });
    if let Err(error) = recorded {
        use std::io::Write;
        let _ = writeln!(
            std::io::stderr().lock(),
            "warning: the {command} results were not recorded: {error}"
        );
    }
}
