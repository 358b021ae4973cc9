//! `stb plan` (direct pipelines): what a build would drop, recreate and replay, and how each
//! model's SQL changed since its last build. Read-only against ClickHouse.

use std::collections::BTreeSet;
use std::io::Write;
use std::process::ExitCode;

use clap::Args;
use stb_plan::direct::{DirectPlan, Reason, Selection, model_graph, plan_direct};
use stb_plan::drift::{Drift, LiveLanding, landing_drift};
use stb_plan::options::{FLAG_CODE, ScopeFlags, StartTime, validate};
use stb_plan::sql_change::{Baseline, SqlChange, sql_change};
use stb_plan::workflow::{Workflow, WorkflowOptions, assemble, landings_read};
use stb_project::project_config::Mode;
use stb_warehouse::adopted::{ADOPTED_CODE, AdoptedTable, validate_adopted};
use stb_warehouse::fingerprints::{Fingerprints, latest_fingerprints};

use crate::discover::ProjectArgs;
use crate::output::{Failure, fail, print_json};
use crate::warehouse::ConnectionArgs;

/// Diff lines shown per model unless `--verbose`.
const DIFF_LINES: usize = 12;

/// What to rebuild; shared by `stb plan` and `stb build`.
#[derive(Debug, Args)]
pub(crate) struct ScopeArgs {
    /// Models or pipelines to rebuild (`name`, `model:name`, `pipeline:name`); everything
    /// downstream comes with them. Default: every model.
    #[arg(long, short = 's', value_name = "SELECTOR")]
    pub(crate) select: Vec<String>,
    /// Replay only history from this UTC instant on (`YYYY-MM-DD` or
    /// `YYYY-MM-DDTHH:MM:SS[.ffffff][Z]`); direct builds discard the rows before it.
    /// Needs --select or --changed.
    #[arg(long, value_name = "TIME")]
    pub(crate) start_time: Option<String>,
    /// Rebuild the models whose query or identity differs from their last successful
    /// build (and those never built), with everything downstream. Excludes --select.
    #[arg(long)]
    pub(crate) changed: bool,
    /// Also rebuild upstream models the selection reads that do not exist in the target.
    #[arg(long)]
    pub(crate) include_missing_upstream: bool,
}

impl ScopeArgs {
    /// Refuses flag combinations that cannot mean anything; the parsed start time.
    pub(crate) fn check(&self) -> Result<Option<StartTime>, Failure> {
        validate(
            &ScopeFlags {
                select: self.select.clone(),
                start_time: self.start_time.clone(),
                changed: self.changed,
                include_missing_upstream: self.include_missing_upstream,
                ..ScopeFlags::default()
            },
            stb_plan::options::Mode::Direct,
        )
        .map_err(|e| Failure {
            code: FLAG_CODE,
            message: e.message,
            hint: e.hint.to_owned(),
        })
    }
}

/// Seconds the new views run before boundaries are captured (default 5).
const STABILIZATION_ENV: &str = "STREAMBUILD_LIVE_STABILIZATION_SECONDS";

#[derive(Debug, Args)]
pub(crate) struct PlanArgs {
    #[command(flatten)]
    project: ProjectArgs,
    #[command(flatten)]
    connection: ConnectionArgs,
    #[command(flatten)]
    scope: ScopeArgs,
    /// Show whole SQL diffs.
    #[arg(long, short = 'v')]
    verbose: bool,
    /// Print machine-readable JSON on stdout.
    #[arg(long)]
    json: bool,
}

pub(crate) fn run(args: &PlanArgs) -> ExitCode {
    let (project, compiled) = match args.project.compile(args.json) {
        Ok(compiled) => compiled,
        Err(code) => return code,
    };
    let prepared = match prepare(&project, &compiled, &args.connection, &args.scope) {
        Ok(prepared) => prepared,
        Err(failure) => return fail(&failure, args.json),
    };
    if let Err(failure) = crate::run_artifacts::write_plan(&project.root, &prepared) {
        return fail(&failure, args.json);
    }
    prepared.output.print(args.json, args.verbose);
    ExitCode::SUCCESS
}

/// What a plan shows.
pub(crate) struct Output {
    pub(crate) database: String,
    pub(crate) plan: DirectPlan,
    pub(crate) changes: Vec<(String, SqlChange)>,
    pub(crate) start_time: Option<StartTime>,
    /// `--changed` found nothing to rebuild.
    pub(crate) nothing_changed: bool,
    /// The replay roots as the workflow bounds them.
    pub(crate) roots: Vec<stb_plan::workflow::RootReplay>,
    /// Relation -> the model that owns it, for the models in scope.
    pub(crate) owner: std::collections::BTreeMap<String, String>,
    /// Managed sources whose Kafka table is recreated, with what drifted.
    pub(crate) recreations: Vec<(String, Vec<String>)>,
    /// Managed sources whose landing table exists with pieces missing, which the build
    /// recreates (`kafka_table`, `landing_view`).
    pub(crate) repairs: Vec<(String, Vec<&'static str>)>,
    /// Per replay root (same order as `roots`): what its table holds and what its replay
    /// window restores; the shrink guard.
    pub(crate) replay_windows: Vec<stb_plan::shrink::ReplayWindow>,
}

impl Output {
    /// Roots whose rebuild loses rows that retained history cannot restore.
    pub(crate) fn shrinking(&self) -> Vec<&stb_plan::shrink::ReplayWindow> {
        self.replay_windows
            .iter()
            .filter(|w| w.needs_consent())
            .collect()
    }

    /// The shrink guard's summary, as plan and build JSON carry it.
    pub(crate) fn shrink_json(&self) -> serde_json::Value {
        let shrinking = self.shrinking();
        serde_json::json!({
            "needs_allow_shrink": !shrinking.is_empty(),
            "lost_rows": shrinking.iter().map(|w| w.lost_rows).sum::<u64>(),
            "models": shrinking.iter().map(|w| &w.model).collect::<Vec<_>>(),
            "discarded_by_start_time": self.replay_windows.iter().map(|w| w.discarded_by_start_time).sum::<u64>(),
        })
    }

    /// The text lines of the shrink guard (empty when the plan replays nothing).
    pub(crate) fn write_replay_windows(&self, out: &mut dyn Write) {
        if self.replay_windows.is_empty() {
            return;
        }
        let _ = writeln!(
            out,
            "\nReplay windows (now vs what retained history restores)"
        );
        for window in &self.replay_windows {
            let mark = if window.needs_consent() { "!" } else { " " };
            let _ = writeln!(out, " {mark} {}", window.describe());
        }
        let shrinking = self.shrinking();
        if !shrinking.is_empty() {
            let lost: u64 = shrinking.iter().map(|w| w.lost_rows).sum();
            let _ = writeln!(
                out,
                "\nSHRINK: this rebuild would lose {lost} rows of {} that retained history cannot restore; `stb build` refuses it unless --allow-shrink is given",
                shrinking
                    .iter()
                    .map(|w| w.model.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        }
    }
}

/// What a build does to the landings it reads: Kafka tables recreated for their settings,
/// and missing pieces of landings that exist.
type LandingWork = (Vec<(String, Vec<String>)>, Vec<(String, Vec<&'static str>)>);

/// Compares every landing the scope reads with its declaration: settings drift and missing
/// pieces are repaired by the build (returned with what changed or is missing); anything
/// else stops it here, before anything is dropped.
fn source_recreations(
    plan: &DirectPlan,
    compiled: &stb_compile::Compiled,
    catalog: &stb_warehouse::Catalog,
) -> Result<LandingWork, Failure> {
    let drift_failure = |message: String, hint: String| Failure {
        code: SOURCE_DRIFT_CODE,
        message,
        hint,
    };
    let read = landings_read(plan, &compiled.plan_models, &compiled.plan_sources);
    let mut recreations = Vec::new();
    let mut repairs = Vec::new();
    for source in &read {
        let missing = missing_landing_pieces(source, catalog);
        if !missing.is_empty() {
            repairs.push((source.name.clone(), missing));
        }
        match live_drift(source, catalog) {
            Ok(Drift::None) => {}
            Ok(Drift::Settings(changes)) => recreations.push((source.name.clone(), changes)),
            Err(error) => return Err(drift_failure(error.message, error.hint.to_owned())),
        }
    }
    // A source that feeds the scope only through models it does not rebuild: the build
    // cannot repair it without rebuilding the pipeline that reads it.
    for prerequisite in &plan.prerequisites {
        let Some(model) = compiled
            .plan_models
            .iter()
            .find(|m| m.name == prerequisite.name)
        else {
            continue;
        };
        for source in compiled
            .plan_sources
            .iter()
            .filter(|s| model.reads.contains(&s.name) && !read.iter().any(|r| r.name == s.name))
        {
            let missing = missing_landing_pieces(source, catalog);
            let drifted = match live_drift(source, catalog) {
                Ok(Drift::None) if missing.is_empty() => continue,
                Ok(Drift::None) => format!("missing: {}", missing.join(", ")),
                Ok(Drift::Settings(changes)) => changes.join(", "),
                Err(error) => error.message,
            };
            return Err(drift_failure(
                format!(
                    "source '{}' has drifted ({drifted}) and feeds this build through '{}', which it does not rebuild",
                    source.name, model.name
                ),
                format!(
                    "add --select pipeline:{} so the build repairs the source",
                    model.pipeline
                ),
            ));
        }
    }
    Ok((recreations, repairs))
}

/// The pieces of `source`'s landing that are missing while its landing table exists.
fn missing_landing_pieces(
    source: &stb_plan::direct::PlanSource,
    catalog: &stb_warehouse::Catalog,
) -> Vec<&'static str> {
    source.landing.as_ref().map_or_else(Vec::new, |landing| {
        stb_plan::drift::missing_pieces(&live_landing(landing, catalog))
    })
}

/// For `--changed`: one direct pipeline per managed source whose Kafka settings drifted
/// and which `scope` does not already read (unprotected pipelines first, then by name).
fn drifted_source_pipelines(
    project: &stb_project::Project,
    compiled: &stb_compile::Compiled,
    catalog: &stb_warehouse::Catalog,
    scope: &std::collections::BTreeSet<String>,
) -> Vec<String> {
    let mut chosen = Vec::new();
    for source in &compiled.plan_sources {
        let drifted = matches!(live_drift(source, catalog), Ok(Drift::Settings(_)));
        if !drifted && missing_landing_pieces(source, catalog).is_empty() {
            continue;
        }
        let read_by_scope = compiled
            .plan_models
            .iter()
            .any(|m| scope.contains(&m.name) && m.reads.contains(&source.name));
        if read_by_scope {
            continue;
        }
        let mut owners: Vec<&stb_project::pipelines::Pipeline> = project
            .pipelines
            .iter()
            .filter(|p| p.mode == Mode::Direct && p.source.as_deref() == Some(source.name.as_str()))
            .collect();
        owners.sort_by_key(|p| (p.protection.is_some(), p.name.clone()));
        if let Some(owner) = owners.first()
            && !chosen.contains(&owner.name)
        {
            chosen.push(owner.name.clone());
        }
    }
    chosen
}

/// How `source`'s landing in the catalog differs from its declaration.
fn live_drift(
    source: &stb_plan::direct::PlanSource,
    catalog: &stb_warehouse::Catalog,
) -> Result<Drift, stb_plan::direct::PlanError> {
    let Some(landing) = &source.landing else {
        return Ok(Drift::None);
    };
    landing_drift(&source.name, landing, &live_landing(landing, catalog))
}

/// A landing as the catalog has it.
fn live_landing(
    landing: &stb_plan::direct::Landing,
    catalog: &stb_warehouse::Catalog,
) -> LiveLanding {
    LiveLanding {
        kafka_create: catalog
            .relation(&landing.kafka_table)
            .map(|r| r.create_table_query.clone()),
        raw_columns: catalog.relation(&landing.raw_table).map(|r| {
            r.columns
                .iter()
                .map(|c| (c.name.clone(), c.data_type.clone()))
                .collect()
        }),
        view_create: catalog
            .relation(&landing.view)
            .map(|r| r.create_table_query.clone()),
    }
}

/// A managed source's landing drifted in a way a build cannot repair.
const SOURCE_DRIFT_CODE: &str = "STB-SOURCE-002";

/// What `--changed` says when every model matches its last build.
pub(crate) const NOTHING_CHANGED: &str = "No changed models to build.";

/// A plan ready to print or to run: the same preparation for `stb plan` and `stb build`.
pub(crate) struct Prepared {
    pub(crate) output: Output,
    pub(crate) workflow: Workflow,
    pub(crate) client: std::sync::Arc<stb_warehouse::Client>,
    /// The compiled models, for fingerprints.
    pub(crate) models: Vec<stb_plan::direct::PlanModel>,
}

impl Prepared {
    /// The models the build rebuilds, in plan order.
    pub(crate) fn executed_models(&self) -> Vec<&str> {
        self.output
            .plan
            .entries
            .iter()
            .map(|e| e.model.as_str())
            .collect()
    }
}

/// Compiles nothing, reads the warehouse, plans and assembles the workflow.
pub(crate) fn prepare(
    project: &stb_project::Project,
    compiled: &stb_compile::Compiled,
    connection: &ConnectionArgs,
    scope: &ScopeArgs,
) -> Result<Prepared, Failure> {
    let start_time = scope.check()?;
    let graph = model_graph(&compiled.plan_models);
    let selected = if scope.select.is_empty() {
        None
    } else {
        Some(stb_graph::select_for_build(&graph, &scope.select).map_err(Failure::from)?)
    };
    let (client, database) = connection.connect(project)?;
    let catalog = client
        .load_catalog(&database)
        .map_err(|e| Failure::from(&e))?;
    let present = |relation: &str| catalog.relation(relation).is_some();
    // One read of the latest baselines, whatever the scope: --changed compares them all.
    let identities: Vec<String> = compiled
        .plan_models
        .iter()
        .map(|m| format!("{database}.{}", m.name))
        .collect();
    let fingerprints =
        latest_fingerprints(&client, &database, &identities).map_err(|e| Failure::from(&e))?;
    let mut selection = if scope.changed {
        let direct: Vec<stb_plan::direct::PlanModel> = compiled
            .plan_models
            .iter()
            .filter(|m| {
                project
                    .pipelines
                    .iter()
                    .any(|p| p.name == m.pipeline && p.mode == Mode::Direct)
            })
            .cloned()
            .collect();
        let found = match &fingerprints {
            Fingerprints::Found(found) => Some(found),
            Fingerprints::Absent => None,
            Fingerprints::Unavailable(reason) => {
                return Err(Failure {
                    code: "STB-PLAN-005",
                    message: format!(
                        "--changed cannot tell what changed: the build records could not be read ({reason})"
                    ),
                    hint: "select the models to rebuild with --select instead".to_owned(),
                });
            }
        };
        let baseline = |name: &str| {
            found
                .and_then(|f| f.get(&format!("{database}.{name}")))
                .map(|f| (f.definition_hash.clone(), f.identity_metadata.clone()))
        };
        let changed = Selection::changed(&graph, &direct, &baseline);
        let repairs = drifted_source_pipelines(project, compiled, &catalog, &changed.scope);
        if !repairs.is_empty() && scope.start_time.is_some() {
            return Err(Failure {
                code: FLAG_CODE,
                message: format!(
                    "--changed --start-time would discard the history of pipelines that repair drifted sources: {}",
                    repairs.join(", ")
                ),
                hint: "build those pipelines without --start-time first, or select models with --select".to_owned(),
            });
        }
        let models = project
            .pipelines
            .iter()
            .filter(|p| repairs.contains(&p.name))
            .flat_map(|p| p.models.iter().map(|m| m.name.clone()))
            .collect();
        changed.with_source_drift(&graph, models)
    } else {
        Selection::new(&graph, selected)
    };
    if scope.include_missing_upstream {
        selection = selection.with_missing_upstream(&graph, &compiled.plan_models, &present);
    }
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
        .map_err(Failure::from)?;
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
    let execution_empty = selection.scope.is_empty();
    let owner = compiled
        .plan_models
        .iter()
        .filter(|m| selection.scope.contains(&m.name))
        .flat_map(|m| m.relations.iter().map(|(_, r)| (r.clone(), m.name.clone())))
        .collect();
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
    let queries: std::collections::BTreeMap<&str, &str> = compiled
        .plan_models
        .iter()
        .map(|m| (m.name.as_str(), m.query.as_str()))
        .collect();
    let changes = plan
        .entries
        .iter()
        .map(|entry| {
            let identity = format!("{database}.{}", entry.model);
            let current = queries.get(entry.model.as_str()).copied().unwrap_or("");
            let baseline = match &fingerprints {
                Fingerprints::Absent => Baseline::Absent,
                Fingerprints::Unavailable(_) => Baseline::Unavailable,
                Fingerprints::Found(found) => found
                    .get(&identity)
                    .map_or(Baseline::Absent, |f| Baseline::Recorded(&f.definition_sql)),
            };
            (entry.model.clone(), sql_change(current, &baseline))
        })
        .collect();
    let stabilization_seconds = match std::env::var(STABILIZATION_ENV) {
        Ok(text) => text.trim().parse().map_err(|_| Failure {
            code: FLAG_CODE,
            message: format!("{STABILIZATION_ENV} must be a whole number of seconds, not '{text}'"),
            hint: "unset it for the default of 5 seconds".to_owned(),
        })?,
        Err(_) => 5,
    };
    let (recreations, repairs) = source_recreations(&plan, compiled, &catalog)?;
    let workflow = assemble(
        &plan,
        &compiled.plan_models,
        &compiled.plan_sources,
        &WorkflowOptions {
            database: database.clone(),
            stabilization_seconds,
            start_time: start_time.clone(),
            recreate_sources: recreations.iter().map(|(s, _)| s.clone()).collect(),
        },
        &present,
    )
    .map_err(|e| Failure {
        code: "STB-PLAN-004",
        message: e.message,
        hint: e.hint.to_owned(),
    })?;
    // Measured after every check that can stop the plan, before anything is dropped.
    let facts = |name: &str| {
        catalog
            .relation(name)
            .map(|r| stb_plan::shrink::RelationFacts {
                engine: r.engine.clone(),
                sorting_key: r.sorting_key.clone(),
                create_table_query: r.create_table_query.clone(),
            })
    };
    let baseline = |model: &str| match &fingerprints {
        Fingerprints::Found(found) => found
            .get(&format!("{database}.{model}"))
            .map(|f| f.definition_sql.clone()),
        Fingerprints::Absent | Fingerprints::Unavailable(_) => None,
    };
    let probes = stb_plan::shrink::probes(
        &workflow.roots,
        &stb_plan::shrink::Context {
            models: &compiled.plan_models,
            sources: &compiled.plan_sources,
            start: start_time.as_ref(),
            facts: &facts,
            baseline: &baseline,
        },
    );
    let replay_windows =
        stb_build::shrink::measure(&client, &probes).map_err(|e| Failure::from(&e))?;
    Ok(Prepared {
        output: Output {
            database,
            plan,
            changes,
            start_time,
            nothing_changed: scope.changed && execution_empty,
            roots: workflow.roots.clone(),
            owner,
            recreations,
            repairs,
            replay_windows,
        },
        workflow,
        client: std::sync::Arc::new(client),
        models: compiled.plan_models.clone(),
    })
}

impl Output {
    pub(crate) fn print(&self, json: bool, verbose: bool) {
        if json {
            print_json(&self.json());
            return;
        }
        let mut out = std::io::stdout().lock();
        if self.nothing_changed {
            let _ = writeln!(out, "{NOTHING_CHANGED}");
            return;
        }
        let _ = writeln!(out, "Direct plan  {}", self.database);
        let _ = writeln!(out, "\nRebuild paths");
        for root in &self.roots {
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
        if !self.recreations.is_empty() {
            let _ = writeln!(out, "\nSource recreations");
            for (source, changes) in &self.recreations {
                let _ = writeln!(
                    out,
                    "  kafka__{source} is recreated, its landing table and rows kept: {}",
                    changes.join(", ")
                );
            }
        }
        if !self.repairs.is_empty() {
            let _ = writeln!(out, "\nLanding repairs");
            for (source, missing) in &self.repairs {
                let _ = writeln!(
                    out,
                    "  {source}: {} missing, recreated from the declaration (landing table and its rows kept; the consumer group resumes from its committed offsets)",
                    missing.join(" and ")
                );
            }
        }
        if let Some(start) = &self.start_time {
            let _ = writeln!(
                out,
                "\nStart time  {start} UTC (history before it is not rebuilt)"
            );
        }
        self.write_replay_windows(&mut out);
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

    fn relations_of(&self, model: &str) -> Vec<&str> {
        self.plan
            .creation
            .iter()
            .filter(|(_, relation)| {
                self.owner
                    .get(relation.as_str())
                    .is_some_and(|m| m == model)
            })
            .map(|(_, relation)| relation.as_str())
            .collect()
    }

    pub(crate) fn json(&self) -> serde_json::Value {
        let kind = |k: &stb_plan::direct::RelationKind| k.as_str();
        serde_json::json!({
            "mode": "direct",
            "adapter": "clickhouse",
            "database": self.database,
            "start_time": self.start_time.as_ref().map(StartTime::as_str),
            "selection_mode": if self.nothing_changed || self.plan.entries.iter().any(|e| matches!(e.reason, Reason::Changed | Reason::SourceDrift)) { "changed" } else if self.plan.entries.iter().all(|e| e.reason == Reason::AllModels) { "all" } else { "selected" },
            "entries": self.plan.entries.iter().zip(&self.changes).map(|(e, (_, c))| serde_json::json!({
                "model": e.model,
                "reason": e.reason.as_str(),
                "relation_names": self.relations_of(&e.model),
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
            "execution_scope": self.plan.entries.iter().map(|e| &e.model).collect::<Vec<_>>(),
            "replay_roots": self.roots.iter().map(|r| serde_json::json!({
                "model": r.model,
                "model_key": {"name": r.model},
                "reason": if r.waits_for.is_empty() { "driving_input_not_rebuilt" } else { "side_input_rebuilt" },
                "stage": r.stage,
                "waits_for": r.waits_for,
                "bounded": r.bounded,
                "driving_input": r.driving_input,
                "driving_input_relation": r.template.anchor.relation,
                "replay_boundary_mode": r.template.anchor.mode.as_str(),
                "start_time_column": r.template.anchor.time_column,
                "skips_keys_already_written": r.template.skip_existing,
                "propagated_models": r.propagated,
                "settings": r.template.settings.iter().map(|(k, v)| serde_json::json!({"name": k, "value": v})).collect::<Vec<_>>(),
                "replay_window": self.replay_windows.iter().find(|w| w.model == r.model),
            })).collect::<Vec<_>>(),
            "shrink": self.shrink_json(),
            "teardown": self.plan.teardown.iter().map(|(k, n)| serde_json::json!({"kind": kind(k), "relation": n})).collect::<Vec<_>>(),
            "creation": self.plan.creation.iter().map(|(k, n)| serde_json::json!({"kind": kind(k), "relation": n})).collect::<Vec<_>>(),
            "source_recreations": self.recreations.iter().map(|(source, changes)| serde_json::json!({
                "source": source, "changes": changes,
            })).collect::<Vec<_>>(),
            "landing_repairs": self.repairs.iter().map(|(source, missing)| serde_json::json!({
                "source": source, "missing": missing,
            })).collect::<Vec<_>>(),
            "warnings": self.plan.warnings,
        })
    }
}
