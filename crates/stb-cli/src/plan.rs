//! `stb plan` (direct pipelines): what a build would drop, recreate and replay, and how each
//! model's SQL changed since its last build. Read-only against ClickHouse.

use std::collections::BTreeSet;
use std::io::Write;
use std::process::ExitCode;

use clap::Args;
use stb_plan::direct::{DirectPlan, Selection, model_graph, plan_direct};
use stb_plan::sql_change::{Baseline, SqlChange, sql_change};
use stb_project::project_config::Mode;
use stb_warehouse::adopted::{ADOPTED_CODE, AdoptedTable, validate_adopted};
use stb_warehouse::fingerprints::{Fingerprints, latest_fingerprints};

use crate::discover::{ProjectArgs, report};
use crate::output::{Failure, fail, print_json};
use crate::warehouse::ConnectionArgs;

/// Diff lines shown per model unless `--verbose`.
const DIFF_LINES: usize = 12;

#[derive(Debug, Args)]
pub(crate) struct PlanArgs {
    #[command(flatten)]
    project: ProjectArgs,
    #[command(flatten)]
    connection: ConnectionArgs,
    /// Models or pipelines to rebuild (`name`, `model:name`, `pipeline:name`); everything
    /// downstream comes with them. Default: every model.
    #[arg(long, short = 's', value_name = "SELECTOR")]
    select: Vec<String>,
    /// Show whole SQL diffs.
    #[arg(long, short = 'v')]
    verbose: bool,
    /// Print machine-readable JSON on stdout.
    #[arg(long)]
    json: bool,
}

pub(crate) fn run(args: &PlanArgs) -> ExitCode {
    let (_, project) = match args.project.discover(args.json) {
        Ok(found) => found,
        Err(code) => return code,
    };
    let compiled = match stb_compile::compile(&project) {
        Ok(compiled) => compiled,
        Err(diagnostics) => return report(diagnostics, args.json),
    };
    match plan(args, &project, &compiled) {
        Ok(output) => {
            output.print(args.json, args.verbose);
            ExitCode::SUCCESS
        }
        Err(failure) => fail(&failure, args.json),
    }
}

struct Output {
    database: String,
    plan: DirectPlan,
    changes: Vec<(String, SqlChange)>,
}

fn plan(
    args: &PlanArgs,
    project: &stb_project::Project,
    compiled: &stb_compile::Compiled,
) -> Result<Output, Failure> {
    let graph = model_graph(&compiled.plan_models);
    let diagnostic = |d: stb_diagnostics::Diagnostic| Failure {
        code: d.code,
        message: d.message,
        hint: d.hint,
    };
    let selected = if args.select.is_empty() {
        None
    } else {
        Some(stb_graph::select_for_build(&graph, &args.select).map_err(diagnostic)?)
    };
    let selection = Selection::new(&graph, selected);
    let execution = &selection.scope;
    let virtual_pipelines: Vec<&str> = project
        .pipelines
        .iter()
        .filter(|p| p.mode == Mode::Virtual && p.models.iter().any(|m| execution.contains(&m.name)))
        .map(|p| p.name.as_str())
        .collect();
    if !virtual_pipelines.is_empty() {
        return Err(Failure {
            code: "STB-PLAN-002",
            message: format!(
                "Virtual pipelines are not planned by this edition yet: {}",
                virtual_pipelines.join(", ")
            ),
            hint: "select direct pipelines only, or set mode = \"direct\" while virtual plans are built".to_owned(),
        });
    }
    stb_graph::check_max_pipelines(&graph, execution, project.max_pipelines, &project.target)
        .map_err(diagnostic)?;
    let (client, database) = args.connection.connect(project)?;
    let catalog = client
        .load_catalog(&database)
        .map_err(|e| Failure::from(&e))?;
    let mut adopted_problems = Vec::new();
    for source in project
        .sources
        .iter()
        .filter(|s| s.kind == stb_project::sources::SourceKind::StreamTable)
    {
        let read_by_scope = compiled
            .plan_models
            .iter()
            .any(|m| execution.contains(&m.name) && m.reads.contains(&source.name));
        if let (true, Some(table)) = (read_by_scope, &source.table_name) {
            adopted_problems.extend(validate_adopted(
                &catalog,
                &AdoptedTable {
                    source: &source.name,
                    table,
                    roles: &source.columns,
                },
            ));
        }
    }
    if let Some(first) = adopted_problems.first() {
        return Err(Failure {
            code: ADOPTED_CODE,
            message: adopted_problems
                .iter()
                .map(|p| p.message.clone())
                .collect::<Vec<_>>()
                .join("\n"),
            hint: first.hint.to_owned(),
        });
    }
    let present = |relation: &str| catalog.relation(relation).is_some();
    let plan = plan_direct(
        &compiled.plan_models,
        &compiled.plan_sources,
        &selection,
        &present,
    )
    .map_err(|e| Failure {
        code: "STB-PLAN-003",
        message: e.message,
        hint: e.hint.to_owned(),
    })?;
    let identities: Vec<String> = plan
        .entries
        .iter()
        .map(|e| format!("{database}.{}", e.model))
        .collect();
    let fingerprints =
        latest_fingerprints(&client, &database, &identities).map_err(|e| Failure::from(&e))?;
    let changes = plan
        .entries
        .iter()
        .zip(&identities)
        .map(|(entry, identity)| {
            let model = compiled.plan_models.iter().find(|m| m.name == entry.model);
            let current = model
                .and_then(|m| {
                    compiled
                        .files
                        .get(&format!("compiled/models/{}/{}.sql", m.pipeline, m.name))
                })
                .map_or("", String::as_str);
            let baseline = match &fingerprints {
                Fingerprints::Absent => Baseline::Absent,
                Fingerprints::Unavailable(_) => Baseline::Unavailable,
                Fingerprints::Found(found) => found
                    .get(identity)
                    .map_or(Baseline::Absent, |f| Baseline::Recorded(&f.definition_sql)),
            };
            (entry.model.clone(), sql_change(current, &baseline))
        })
        .collect();
    Ok(Output {
        database,
        plan,
        changes,
    })
}

impl Output {
    fn print(&self, json: bool, verbose: bool) {
        if json {
            print_json(&self.json());
            return;
        }
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "Direct plan  {}", self.database);
        let _ = writeln!(out, "\nRebuild paths");
        for root in &self.plan.replay_roots {
            let _ = writeln!(out, "  [replay source] {}", root.driving_input);
            let _ = writeln!(out, "  └── [replay root] {}", root.model);
            for model in &root.propagated {
                let _ = writeln!(out, "      └── [rebuild] {model}");
            }
        }
        let under_root: BTreeSet<&str> = self
            .plan
            .replay_roots
            .iter()
            .flat_map(|r| {
                std::iter::once(r.model.as_str()).chain(r.propagated.iter().map(String::as_str))
            })
            .collect();
        for entry in self
            .plan
            .entries
            .iter()
            .filter(|e| !under_root.contains(e.model.as_str()))
        {
            let _ = writeln!(out, "  [rebuild] {}", entry.model);
        }
        let _ = writeln!(out, "\nModel decisions");
        for (entry, (_, change)) in self.plan.entries.iter().zip(&self.changes) {
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
        if !self.plan.warnings.is_empty() {
            let _ = writeln!(out, "\nWarnings");
            for warning in &self.plan.warnings {
                let _ = writeln!(out, "  {warning}");
            }
        }
        let relations: usize = self.plan.creation.len();
        let _ = writeln!(
            out,
            "\n{} models selected, {relations} relations rebuilt, {} replay roots",
            self.plan.entries.len(),
            self.plan.replay_roots.len()
        );
    }

    fn json(&self) -> serde_json::Value {
        let kind = |k: &stb_plan::direct::RelationKind| k.as_str();
        serde_json::json!({
            "mode": "direct",
            "adapter": "clickhouse",
            "database": self.database,
            "entries": self.plan.entries.iter().zip(&self.changes).map(|(e, (_, c))| serde_json::json!({
                "model": e.model,
                "reason": e.reason.as_str(),
                "is_replay_root": e.is_replay_root,
                "sql_change": {
                    "status": c.status.as_str(),
                    "current_hash": c.current_hash,
                    "previous_hash": c.previous_hash,
                    "unified_diff": c.unified_diff,
                },
            })).collect::<Vec<_>>(),
            "prerequisite_scope": self.plan.prerequisites.iter().map(|p| serde_json::json!({
                "name": p.name, "present": p.present, "framework_managed": p.framework_managed,
            })).collect::<Vec<_>>(),
            "replay_roots": self.plan.replay_roots.iter().map(|r| serde_json::json!({
                "model": r.model, "driving_input": r.driving_input, "propagated_models": r.propagated,
            })).collect::<Vec<_>>(),
            "teardown": self.plan.teardown.iter().map(|(k, n)| serde_json::json!({"kind": kind(k), "relation": n})).collect::<Vec<_>>(),
            "creation": self.plan.creation.iter().map(|(k, n)| serde_json::json!({"kind": kind(k), "relation": n})).collect::<Vec<_>>(),
            "warnings": self.plan.warnings,
        })
    }
}
