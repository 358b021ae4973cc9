//! The discovery pass: from a directory to a validated [`Project`], reporting every
//! independent problem at once.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde::Serialize;
use serde_json::json;
use stb_diagnostics::{Diagnostic, Diagnostics, Location, Position};

use crate::codes;
use crate::interpolation::Scope;
use crate::local_config::{self, LocalConfig};
use crate::macros::{MacroError, MacroRuntime, macro_files};
use crate::pipelines::{self, ModelKind, Pipeline, PipelineDefaults};

use crate::project_config::{self, Mode, ProjectConfig};
use crate::reader::Reader;
use crate::sources::{self, NameDeriver, Resolved, Source, SourceContext, SourceRetention};
use crate::tree::{Node, Value};

/// Where to look and what to select.
#[derive(Debug, Clone, Default)]
pub struct DiscoverOptions {
    /// `--project-dir`; otherwise the nearest ancestor of `cwd` holding a project file.
    pub project_dir: Option<PathBuf>,
    pub cwd: PathBuf,
    /// `--target`
    pub target: Option<String>,
    /// `--vars` (a JSON object), applied last.
    pub vars: BTreeMap<String, Node>,
}

/// A discovered project.
#[derive(Debug, Clone, Serialize)]
pub struct Project {
    pub name: String,
    #[serde(skip)]
    pub root: PathBuf,
    pub target: String,
    /// The target's database after interpolation, if it names one.
    pub database: Option<String>,
    pub pipeline_mode: Mode,
    /// `[build] max_pipelines` for this target: the target's own limit, else the project
    /// default (local-only targets always inherit the project default).
    pub max_pipelines: Option<u32>,
    /// `[build] max_replay_rows` / `max_replay_bytes` for this target: each the target's
    /// own, else the project's.
    pub replay_budget: crate::project_config::ReplayBudget,
    /// `[build] replay_chunk_rows` and the replays' throttles for this target: each the
    /// target's own, else the project's.
    pub replay_pacing: crate::project_config::ReplayPacing,
    /// `[targets.X] production = true`, or a target named `prod`/`production`: a reset of
    /// it asks for `PRODUCTION` to be typed.
    pub production: bool,
    /// `[audit_scheduler] enabled` for this target (the local file's target, the project
    /// file's target, then the project's): `stb dev` runs audits with an `every`.
    pub audit_scheduler_enabled: bool,
    /// `[targets.X.destruction] max_table_size_to_drop`, in bytes.
    pub max_table_size_to_drop: Option<u64>,
    /// `[targets.X.cluster]`: the cluster the target's objects are spread over.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cluster: Option<crate::cluster::ClusterConfig>,
    pub pipelines: Vec<Pipeline>,
    /// `access.yml`: the project roles `stb dev` authorises with.
    pub access: Option<crate::access::AccessPolicy>,
    pub sources: Vec<Source>,
    pub macros: Vec<MacroSummary>,
    /// Project-wide settings the compiler needs, resolved for the target.
    #[serde(skip)]
    pub defaults: ProjectDefaults,
    /// The target's connection, merged and resolved only when a command connects.
    #[serde(skip)]
    pub connection: crate::connection::ConnectionSpec,
    /// `tests/**/*.sql`, sorted by path: (project-relative path, text).
    #[serde(skip)]
    pub test_files: Vec<(String, String)>,
    /// `tests/**/*.sql` as written, for files whose macros were expanded (macro-mode tests
    /// may call macros only inside `__macro_actual__`, which only the original shows).
    #[serde(skip)]
    pub test_originals: BTreeMap<String, String>,
    /// `audits/**/*.sql` outside `audits/generic/`, sorted by path.
    #[serde(skip)]
    pub audit_files: Vec<(String, String)>,
    /// `audits/generic/**/*.sql`: generic audit definitions.
    #[serde(skip)]
    pub generic_audit_files: Vec<(String, String)>,
    /// `sensors/` and `providers/` as loaded, with `[sensors]` for the target.
    pub sensors: crate::sensors::Sensors,
}

/// Project-level settings resolved for the selected target.
#[derive(Debug, Clone, Default)]
pub struct ProjectDefaults {
    pub kafka_broker_list: Option<Resolved>,
    pub kafka_retention: Option<SourceRetention>,
    pub managed_source_ttl: Option<String>,
    /// `[defaults.models] retention` (typed) and the legacy `[defaults] model_ttl`.
    pub model_retention: Option<crate::policies::ModelRetention>,
    pub model_ttl: Option<String>,
    /// `[defaults.audits]`
    pub audit_defaults: crate::policies::AuditDefaults,
    /// `[defaults.deployment_readiness]`
    pub deployment_readiness: project_config::DeploymentReadiness,
    /// `[defaults] replay_on_change` and `bounded_replay_fallback`.
    pub replay_policy: stb_model::planning::ReplayPolicy,
    /// `[defaults] run_presumed_failed_after` in seconds (default 600): a silent run is
    /// `unresponsive` until then, `presumed_failed` after.
    pub run_presumed_failed_after_seconds: u64,
    /// `[defaults.freshness]`: the expectation of every source without its own.
    pub freshness: Option<crate::policies::Freshness>,
    pub table_prefix: String,
    pub view_prefix: String,
    pub pipeline_reference_scope: bool,
    /// (upstream, downstream) pipelines allowed to reference each other.
    pub allowed_cross_pipeline_references: Vec<(String, String)>,
}

#[derive(Debug, Clone, Serialize)]
pub struct MacroSummary {
    pub name: String,
    pub file: String,
    pub line: u32,
    /// The whole macro file, recorded in the compile manifest.
    #[serde(skip)]
    pub source: String,
}

/// Runs discovery.
///
/// # Errors
/// Every problem found, each with a code, a location and a hint.
pub fn discover(options: &DiscoverOptions) -> Result<Project, Diagnostics> {
    let mut diagnostics = Diagnostics::new();
    let root = find_root(options).map_err(Diagnostics::from)?;
    legacy_files(&root, &mut diagnostics);
    let project_text = crate::read_text(
        &root.join(project_config::FILE_NAME),
        project_config::FILE_NAME,
        &mut diagnostics,
    )
    .ok_or_else(|| diagnostics.clone())?;
    let config = parse_file(
        project_config::FILE_NAME,
        &project_text,
        &mut diagnostics,
        project_config::read,
    );
    let local_path = root.join(local_config::FILE_NAME);
    let local = if local_path.is_file() {
        crate::read_text(&local_path, local_config::FILE_NAME, &mut diagnostics)
            .and_then(|text| {
                parse_file(
                    local_config::FILE_NAME,
                    &text,
                    &mut diagnostics,
                    |reader, node| Some(local_config::read(reader, node)),
                )
            })
            .unwrap_or_default()
    } else {
        LocalConfig::default()
    };
    if !root.join("pipelines").is_dir() {
        diagnostics.push(
            Diagnostic::new(
                codes::DISCOVER_NO_PIPELINES_DIR,
                format!(
                    "Found StreamBuild project at '{}', but '{}' does not exist",
                    root.display(),
                    root.join("pipelines").display()
                ),
                "create pipelines/ with one directory per pipeline",
            )
            .at(Location::file("pipelines")),
        );
    }
    let Some(config) = config else {
        return Err(diagnostics);
    };
    let target = select_target(&config, &local, options, &mut diagnostics);
    let vars = merged_vars(&config, &local, target.as_deref(), &options.vars);
    // Later wins, whole keys: the local top-level table beats the local target's.
    let connection = crate::connection::ConnectionSpec::merge(
        &[
            (project_config::FILE_NAME, config.connection.as_ref()),
            (
                project_config::FILE_NAME,
                target
                    .as_deref()
                    .and_then(|t| config.targets.get(t))
                    .and_then(|t| t.connection.as_ref()),
            ),
            (
                crate::local_config::FILE_NAME,
                target
                    .as_deref()
                    .and_then(|t| local.targets.get(t))
                    .and_then(|t| t.connection.as_ref()),
            ),
            (crate::local_config::FILE_NAME, local.connection.as_ref()),
        ],
        vars.clone(),
    );
    let env = |name: &str| std::env::var(name).ok();
    let scope = Scope {
        vars: &vars,
        env: &env,
    };
    let database = target
        .as_deref()
        .and_then(|t| target_database(&config, &local, t, &scope, &mut diagnostics));
    let prefix = naming_value(
        config.naming.pipeline_prefix.as_ref(),
        "naming.pipeline_prefix",
        &scope,
        &mut diagnostics,
    )
    .unwrap_or_else(|| "pl__".to_owned());
    let naming_macro = naming_value(
        config.naming.pipeline_naming_macro.as_ref(),
        "naming.pipeline_naming_macro",
        &scope,
        &mut diagnostics,
    );
    let table_prefix = naming_value(
        config.naming.table_prefix.as_ref(),
        "naming.table_prefix",
        &scope,
        &mut diagnostics,
    )
    .unwrap_or_else(|| "tbl__".to_owned());
    let view_prefix = naming_value(
        config.naming.view_prefix.as_ref(),
        "naming.view_prefix",
        &scope,
        &mut diagnostics,
    )
    .unwrap_or_else(|| "view__".to_owned());
    let defaults = ProjectDefaults {
        kafka_broker_list: naming_value(
            config.kafka_broker_list.as_ref(),
            "defaults.kafka_broker_list",
            &scope,
            &mut diagnostics,
        )
        .map(|value| Resolved {
            value,
            from_environment: sources::uses_environment(config.kafka_broker_list.as_ref()),
        }),
        kafka_retention: config
            .kafka_retention
            .as_ref()
            .and_then(sources::retention_setting),
        managed_source_ttl: naming_value(
            config.managed_source_ttl.as_ref(),
            "defaults.managed_source_ttl",
            &scope,
            &mut diagnostics,
        ),
        model_retention: config.model_retention.as_ref().and_then(|node| {
            let mut scratch = Diagnostics::new();
            crate::policies::model_retention(
                &mut Reader::new(project_config::FILE_NAME, &mut scratch),
                node,
                "defaults.models.retention",
            )
        }),
        model_ttl: naming_value(
            config.model_ttl.as_ref(),
            "defaults.model_ttl",
            &scope,
            &mut diagnostics,
        ),
        audit_defaults: config
            .audit_defaults
            .as_ref()
            .map(|node| {
                let mut scratch = Diagnostics::new();
                crate::policies::audit_defaults(
                    &mut Reader::new(project_config::FILE_NAME, &mut scratch),
                    node,
                    "defaults.audits",
                )
            })
            .unwrap_or_default(),
        run_presumed_failed_after_seconds: config.run_presumed_failed_after.unwrap_or(600),
        freshness: config.freshness.as_ref().and_then(|node| {
            crate::policies::freshness(
                &mut Reader::new(project_config::FILE_NAME, &mut Diagnostics::new()),
                node,
                "defaults.freshness",
            )
        }),
        replay_policy: crate::policies::replay_policy(
            &mut Reader::new(project_config::FILE_NAME, &mut Diagnostics::new()),
            config.replay_on_change.as_ref(),
            config.bounded_replay_fallback.as_ref(),
            "defaults.",
        ),
        deployment_readiness: config
            .deployment_readiness
            .as_ref()
            .map(|node| {
                let mut scratch = Diagnostics::new();
                project_config::deployment_readiness(
                    &mut Reader::new(project_config::FILE_NAME, &mut scratch),
                    node,
                )
            })
            .unwrap_or_default(),
        table_prefix,
        view_prefix,
        pipeline_reference_scope: config.dependencies.pipeline_scope,
        allowed_cross_pipeline_references: config
            .dependencies
            .allowed
            .iter()
            .map(|(u, d, _)| (u.clone(), d.clone()))
            .collect(),
    };
    let mode = local.pipeline_mode.unwrap_or(config.pipeline_mode);

    let errors_before_macros = diagnostics.len();
    let mut runtime = start_macros(&root, &mut diagnostics);
    let macros_failed = diagnostics.len() > errors_before_macros;
    let (sources, invalid_sources) =
        read_sources(&root, &config, &scope, runtime.as_mut(), &mut diagnostics);
    let mut pipelines = pipelines::discover(
        &root,
        &PipelineDefaults {
            mode,
            prefix: &prefix,
        },
        &mut diagnostics,
    );
    let macro_context = MacroContextBase {
        target: target.clone().unwrap_or_default(),
        database: database.clone().unwrap_or_else(|| "default".to_owned()),
        variables: resolved_variables(&vars, &scope),
    };
    expand_sql_macros(
        &mut pipelines,
        runtime.as_mut(),
        macros_failed,
        &macro_context,
        &mut diagnostics,
    );
    infer_pipeline_sources(&mut pipelines, &sources, &invalid_sources, &mut diagnostics);
    let (generic_audit_files, mut audit_files): (Vec<_>, Vec<_>) =
        sql_files_under(&root, &root.join("audits"), &mut diagnostics)
            .into_iter()
            .partition(|(path, _)| path.starts_with("audits/generic/"));
    let mut generic_audit_files = generic_audit_files;
    let mut test_files = sql_files_under(&root, &root.join("tests"), &mut diagnostics);
    let unexpanded: Vec<(String, String)> = test_files.clone();
    if !macros_failed {
        let context = json!({
            "target_name": macro_context.target,
            "database": macro_context.database,
            "virtual_environments": mode == Mode::Virtual,
            "variables": macro_context.variables,
        });
        for files in [&mut audit_files, &mut generic_audit_files, &mut test_files] {
            expand_file_macros(files, runtime.as_mut(), &context, &mut diagnostics);
        }
    }
    // A macro file that failed to load has been reported; "not defined" would only repeat it.
    if let (Some(name), false) = (&naming_macro, macros_failed) {
        let at = config
            .naming
            .pipeline_naming_macro
            .as_ref()
            .map_or(Position::new(1, 1), |n| n.position);
        check_naming_macro(name, at, &pipelines, runtime.as_mut(), &mut diagnostics);
    }
    check_namespace(&pipelines, &sources, &mut diagnostics);
    let (sensor_definitions, providers) = crate::sensors::load_definitions(&root, &mut diagnostics);
    crate::sensors::check_names(
        &sensor_definitions,
        &taken_names(&pipelines, &sources),
        &mut diagnostics,
    );
    let access = read_access(&root, &pipelines, &mut diagnostics);
    check_dependencies(&config, &pipelines, &mut diagnostics);
    check_virtual_only_defaults(&config, mode, &pipelines, &mut diagnostics);
    let macros = runtime
        .as_ref()
        .map(|r| {
            r.macros
                .iter()
                .map(|m| MacroSummary {
                    name: m.name.clone(),
                    file: m.file.clone(),
                    line: m.line,
                    source: std::fs::read_to_string(root.join(&m.file)).unwrap_or_default(),
                })
                .collect()
        })
        .unwrap_or_default();
    let (Some(target), true) = (target, diagnostics.is_empty()) else {
        return Err(diagnostics);
    };
    let test_originals: BTreeMap<String, String> = unexpanded
        .into_iter()
        .zip(&test_files)
        .filter(|((_, original), (_, expanded))| original != expanded)
        .map(|((path, original), _)| (path, original))
        .collect();
    if !diagnostics.is_empty() {
        return Err(diagnostics);
    }
    let target_config = config.targets.get(&target);
    let max_pipelines = target_config
        .and_then(|t| t.max_pipelines)
        .or(config.max_pipelines);
    let replay_budget = target_config.map_or(config.replay_budget, |t| {
        t.replay_budget.or(config.replay_budget)
    });
    let replay_pacing = target_config.map_or(config.replay_pacing, |t| {
        t.replay_pacing.or(config.replay_pacing)
    });
    // A target named prod or production is one whatever its flag says.
    let production = target_config.is_some_and(|t| t.production)
        || matches!(target.to_ascii_lowercase().as_str(), "prod" | "production");
    let max_table_size_to_drop = target_config.and_then(|t| t.max_table_size_to_drop);
    let cluster = target_config.and_then(|t| t.cluster.clone());
    // The local file's target, then the project file's target, then its top level.
    let audit_scheduler_enabled = local
        .targets
        .get(&target)
        .and_then(|t| t.audit_scheduler)
        .or_else(|| target_config.and_then(|t| t.audit_scheduler))
        .or(config.audit_scheduler)
        .unwrap_or(false);
    // Key by key, in the same order.
    let sensor_config = local
        .targets
        .get(&target)
        .map(|t| t.sensors)
        .unwrap_or_default()
        .or(target_config.map(|t| t.sensors).unwrap_or_default())
        .or(config.sensors);
    let sensors = crate::sensors::Sensors {
        settings: crate::sensors::SensorSettings {
            enabled: sensor_config.enabled.unwrap_or(false),
            tick_retention_days: sensor_config.tick_retention_days.unwrap_or(0),
            maximum_event_age_seconds: sensor_config.maximum_event_age_seconds,
        },
        sources: if sensor_definitions.is_empty() && providers.is_empty() {
            String::new()
        } else {
            crate::sensors::sources_fingerprint(&root)
        },
        definitions: sensor_definitions,
        providers,
    };
    Ok(Project {
        audit_scheduler_enabled,
        production,
        max_table_size_to_drop,
        cluster,
        name: config.name,
        root,
        target,
        database,
        pipeline_mode: mode,
        max_pipelines,
        replay_budget,
        replay_pacing,
        pipelines,
        sources,
        macros,
        defaults,
        connection,
        test_files,
        test_originals,
        audit_files,
        generic_audit_files,
        access,
        sensors,
    })
}

/// The names sensors may not take: pipelines', models' and sources', where each is defined.
fn taken_names<'a>(pipelines: &'a [Pipeline], sources: &'a [Source]) -> Vec<(&'a str, Location)> {
    let mut taken: Vec<(&str, Location)> = sources
        .iter()
        .map(|s| (s.name.as_str(), Location::at(&s.file, s.position)))
        .collect();
    for pipeline in pipelines {
        taken.push((pipeline.name.as_str(), Location::file(&pipeline.directory)));
        taken.extend(
            pipeline
                .models
                .iter()
                .map(|m| (m.name.as_str(), Location::file(&m.file))),
        );
    }
    taken
}

/// The project's `access.yml`, when it has one.
fn read_access(
    root: &Path,
    pipelines: &[Pipeline],
    diagnostics: &mut Diagnostics,
) -> Option<crate::access::AccessPolicy> {
    let path = root.join(crate::access::FILE_NAME);
    if !path.is_file() {
        return None;
    }
    let text = crate::read_text(&path, crate::access::FILE_NAME, diagnostics)?;
    let names: Vec<String> = pipelines.iter().map(|p| p.name.clone()).collect();
    crate::access::read(&text, &names, diagnostics)
}

/// Every `*.sql` under `dir`, recursively, sorted by path components.
fn sql_files_under(
    root: &Path,
    dir: &Path,
    diagnostics: &mut Diagnostics,
) -> Vec<(String, String)> {
    let mut paths = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(current) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&current) else {
            continue;
        };
        for entry in entries.filter_map(Result::ok) {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "sql") {
                paths.push(path);
            }
        }
    }
    paths.sort();
    paths
        .into_iter()
        .filter_map(|path| {
            let relative = path
                .strip_prefix(root)
                .unwrap_or(&path)
                .to_string_lossy()
                .replace('\\', "/");
            crate::read_text(&path, &relative, diagnostics).map(|text| (relative, text))
        })
        .collect()
}

/// The project's directory: `--project-dir` when given (it must hold the project file),
/// else the nearest directory upwards from the working directory that holds one.
///
/// # Errors
/// No project file where it was looked for.
pub fn project_root(options: &DiscoverOptions) -> Result<PathBuf, Diagnostic> {
    find_root(options)
}

fn find_root(options: &DiscoverOptions) -> Result<PathBuf, Diagnostic> {
    if let Some(dir) = &options.project_dir {
        let dir = if dir.is_absolute() {
            dir.clone()
        } else {
            options.cwd.join(dir)
        };
        if dir.join(project_config::FILE_NAME).is_file()
            || dir.join("streambuild_project.yml").is_file()
        {
            return Ok(dir);
        }
        return Err(Diagnostic::new(
            codes::CONFIG_NOT_FOUND,
            format!(
                "Project config not found: {}",
                dir.join(project_config::FILE_NAME).display()
            ),
            "run stb inside a StreamBuild project or pass --project-dir",
        ));
    }
    let mut dir = options.cwd.as_path();
    loop {
        if dir.join(project_config::FILE_NAME).is_file()
            || dir.join("streambuild_project.yml").is_file()
        {
            return Ok(dir.to_path_buf());
        }
        match dir.parent() {
            Some(parent) => dir = parent,
            None => {
                return Err(Diagnostic::new(
                    codes::CONFIG_NOT_FOUND,
                    "No StreamBuild project found from the current directory.",
                    "run stb inside a StreamBuild project or pass --project-dir",
                ));
            }
        }
    }
}

fn legacy_files(root: &Path, diagnostics: &mut Diagnostics) {
    for (legacy, modern) in [
        ("streambuild_project.yml", project_config::FILE_NAME),
        ("streambuild_local.yml", local_config::FILE_NAME),
    ] {
        if root.join(legacy).is_file() {
            let mixed = if root.join(modern).is_file() {
                " Mixed project config formats are not supported."
            } else {
                ""
            };
            diagnostics.push(
                Diagnostic::new(
                    codes::CONFIG_LEGACY_YAML,
                    format!("{legacy} is not supported. Convert it to {modern}.{mixed}"),
                    format!("move its settings into {modern} and delete {legacy}"),
                )
                .at(Location::file(legacy)),
            );
        }
    }
}

fn parse_file<T>(
    file: &str,
    text: &str,
    diagnostics: &mut Diagnostics,
    read: impl FnOnce(&mut Reader<'_>, &Node) -> Option<T>,
) -> Option<T> {
    let root = crate::parse_toml_file(file, text, diagnostics)?;
    read(&mut Reader::new(file, diagnostics), &root)
}

fn select_target(
    config: &ProjectConfig,
    local: &LocalConfig,
    options: &DiscoverOptions,
    diagnostics: &mut Diagnostics,
) -> Option<String> {
    let (name, location) = if let Some(name) = &options.target {
        (name.clone(), None)
    } else if let Some((name, position)) = &local.target {
        (
            name.clone(),
            Some(Location::at(local_config::FILE_NAME, *position)),
        )
    } else {
        (
            config.default_target.clone(),
            Some(Location::at(
                project_config::FILE_NAME,
                config.default_target_position,
            )),
        )
    };
    if config.targets.contains_key(&name) || local.targets.contains_key(&name) {
        return Some(name);
    }
    let known: BTreeSet<&String> = config.targets.keys().chain(local.targets.keys()).collect();
    let known: Vec<&str> = known.into_iter().map(String::as_str).collect();
    let mut diagnostic = Diagnostic::new(
        codes::CONFIG_UNKNOWN_TARGET,
        format!("Unknown target '{name}'"),
        if known.is_empty() {
            "define it with a [targets.<name>] table".to_owned()
        } else {
            format!("known targets: {}", known.join(", "))
        },
    );
    if let Some(location) = location {
        diagnostic = diagnostic.at(location);
    }
    diagnostics.push(diagnostic);
    None
}

/// project [vars] < project target vars < local target vars < local [vars] < --vars
fn merged_vars(
    config: &ProjectConfig,
    local: &LocalConfig,
    target: Option<&str>,
    cli: &BTreeMap<String, Node>,
) -> BTreeMap<String, Node> {
    let mut vars = config.vars.clone();
    if let Some(target) = target {
        if let Some(t) = config.targets.get(target) {
            vars.extend(t.vars.clone());
        }
        if let Some(t) = local.targets.get(target) {
            vars.extend(t.vars.clone());
        }
    }
    vars.extend(local.vars.clone());
    vars.extend(cli.clone());
    vars
}

fn target_database(
    config: &ProjectConfig,
    local: &LocalConfig,
    target: &str,
    scope: &Scope<'_>,
    diagnostics: &mut Diagnostics,
) -> Option<String> {
    let (node, file) = match local.targets.get(target).and_then(|t| t.database.as_ref()) {
        Some(node) => (node, local_config::FILE_NAME),
        None => (
            config.targets.get(target)?.database.as_ref()?,
            project_config::FILE_NAME,
        ),
    };
    let text = node.as_str()?;
    match scope.resolve_string(text) {
        Ok(database) => Some(database),
        Err(error) => {
            diagnostics.push(
                Diagnostic::new(
                    codes::CONFIG_INTERPOLATION,
                    format!("targets.{target}.database {error}"),
                    error.hint(),
                )
                .at(Location::at(file, node.position)),
            );
            None
        }
    }
}

fn naming_value(
    node: Option<&Node>,
    what: &str,
    scope: &Scope<'_>,
    diagnostics: &mut Diagnostics,
) -> Option<String> {
    let node = node?;
    let text = node.as_str()?;
    match scope.resolve_string(text) {
        Ok(value) => Some(value),
        Err(error) => {
            diagnostics.push(
                Diagnostic::new(
                    codes::CONFIG_INTERPOLATION,
                    format!("{what} {error}"),
                    error.hint(),
                )
                .at(Location::at(project_config::FILE_NAME, node.position)),
            );
            None
        }
    }
}

fn start_macros(root: &Path, diagnostics: &mut Diagnostics) -> Option<MacroRuntime> {
    let files = macro_files(root);
    if files.is_empty() {
        return None;
    }
    match MacroRuntime::start(&files) {
        Ok(runtime) => Some(runtime),
        Err(MacroError::Python(error)) => {
            let file = error.file.clone().unwrap_or_else(|| "macros".to_owned());
            let location = error.line.map_or_else(
                || Location::file(&file),
                |line| Location::at(&file, Position::new(line, 1)),
            );
            let message = if error.collision {
                error.message
            } else {
                format!("Failed to load {file}: {}", error.message)
            };
            diagnostics.push(
                Diagnostic::new(
                    codes::DISCOVER_MACRO_LOAD,
                    message,
                    "fix the macro file; it is executed as ordinary Python",
                )
                .at(location),
            );
            None
        }
        Err(other) => {
            diagnostics.push(
                Diagnostic::new(
                    codes::DISCOVER_PYTHON,
                    format!(
                        "the project has macros but Python cannot run them: {}",
                        describe(&other)
                    ),
                    "install python3 (3.9+) or set STB_PYTHON to an interpreter",
                )
                .at(Location::file("macros")),
            );
            None
        }
    }
}

fn describe(error: &MacroError) -> String {
    match error {
        MacroError::Worker(detail) => detail.clone(),
        MacroError::Timeout(limit) => format!("no answer within {}s", limit.as_secs_f32()),
        MacroError::Python(error) => error.message.clone(),
    }
}

struct MacroNameDeriver<'a> {
    runtime: Option<&'a mut MacroRuntime>,
    name: String,
}

impl NameDeriver for MacroNameDeriver<'_> {
    fn derive(
        &mut self,
        topic: &str,
        file: &Path,
        position: Position,
    ) -> Result<String, Diagnostic> {
        let location = Location::at(file, position);
        let Some(runtime) = self.runtime.as_deref_mut() else {
            return Err(Diagnostic::new(
                codes::DISCOVER_MACRO_MISSING,
                format!(
                    "Source naming macro '{}' is not defined (the project has no macros)",
                    self.name
                ),
                "define it in a file under macros/",
            )
            .at(location));
        };
        let Some(info) = runtime.find(&self.name) else {
            return Err(Diagnostic::new(
                codes::DISCOVER_MACRO_MISSING,
                format!("Source naming macro '{}' is not defined", self.name),
                available(runtime),
            )
            .at(location));
        };
        if info.params.len() != 1 || info.params[0].name != "topic" {
            return Err(Diagnostic::new(
                codes::DISCOVER_MACRO_MISSING,
                format!(
                    "Source naming macro '{}' must take exactly one parameter named topic",
                    self.name
                ),
                "write def name(topic: str) -> str",
            )
            .at(Location::at(&info.file, Position::new(info.line, 1))));
        }
        match runtime.call(&self.name, &[json!(topic)]) {
            Ok(result) if result.type_name == "str" => {
                Ok(result.value.as_str().unwrap_or_default().to_owned())
            }
            Ok(result) => Err(Diagnostic::new(
                codes::DISCOVER_MACRO_FAILED,
                format!(
                    "Source naming macro '{}' returned {} instead of a string",
                    self.name, result.type_name
                ),
                "return the source name as a str",
            )
            .at(location)),
            Err(error) => Err(macro_failure(&self.name, &error, location)),
        }
    }
}

fn available(runtime: &MacroRuntime) -> String {
    let names: Vec<&str> = runtime.macros.iter().map(|m| m.name.as_str()).collect();
    format!(
        "Available macros: {}",
        if names.is_empty() {
            "none".to_owned()
        } else {
            names.join(", ")
        }
    )
}

fn macro_failure(name: &str, error: &MacroError, fallback: Location) -> Diagnostic {
    let location = match error {
        MacroError::Python(python) => match (&python.file, python.line) {
            (Some(file), Some(line)) => Location::at(file, Position::new(line, 1)),
            _ => fallback,
        },
        _ => fallback,
    };
    Diagnostic::new(
        codes::DISCOVER_MACRO_FAILED,
        format!("Macro '{name}' failed: {}", describe(error)),
        "fix the macro; it must return quickly and return a string",
    )
    .at(location)
}

fn read_sources(
    root: &Path,
    config: &ProjectConfig,
    scope: &Scope<'_>,
    runtime: Option<&mut MacroRuntime>,
    diagnostics: &mut Diagnostics,
) -> (Vec<Source>, Vec<String>) {
    let mut files: Vec<PathBuf> = std::fs::read_dir(root.join("sources"))
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .map(|e| e.path())
                .filter(|p| p.is_file() && p.extension().is_some_and(|e| e == "yml" || e == "yaml"))
                .collect()
        })
        .unwrap_or_default();
    files.sort();
    let macro_name = config
        .kafka_naming_macro
        .as_ref()
        .and_then(Node::as_str)
        .map(str::to_owned);
    let mut deriver = macro_name.map(|name| MacroNameDeriver { runtime, name });
    let mut context = SourceContext {
        scope,
        default_broker_list: config.kafka_broker_list.is_some(),
        deriver: deriver.as_mut().map(|d| d as &mut dyn NameDeriver),
        invalid_names: Vec::new(),
    };
    let mut sources = Vec::new();
    for path in files {
        let relative = path.strip_prefix(root).unwrap_or(&path).to_path_buf();
        let Some(text) = crate::read_text(&path, &relative.to_string_lossy(), diagnostics) else {
            continue;
        };
        sources::read_file(&relative, &text, &mut context, diagnostics, &mut sources);
    }
    sources::check_across_files(&sources, diagnostics);
    (sources, context.invalid_names)
}

/// What every SQL macro call sees, apart from its pipeline's mode.
struct MacroContextBase {
    target: String,
    database: String,
    variables: serde_json::Value,
}

/// The project variables that resolve, as JSON for the macro context. A variable that reads
/// a missing environment variable is left out rather than failing every macro call.
fn resolved_variables(vars: &BTreeMap<String, Node>, scope: &Scope<'_>) -> serde_json::Value {
    let mut map = serde_json::Map::new();
    for (name, node) in vars {
        let resolved = match &node.value {
            Value::Str(text) => scope.resolve_text(text),
            other => Ok(other.clone()),
        };
        if let Ok(value) = resolved {
            map.insert(name.clone(), value_json(&value));
        }
    }
    serde_json::Value::Object(map)
}

fn value_json(value: &Value) -> serde_json::Value {
    match value {
        Value::Null => serde_json::Value::Null,
        Value::Bool(b) => json!(b),
        Value::Int(i) => json!(i),
        Value::Float(f) => json!(f),
        Value::Str(s) | Value::Datetime(s) => json!(s),
        Value::Array(items) => {
            serde_json::Value::Array(items.iter().map(|n| value_json(&n.value)).collect())
        }
        Value::Table(entries) => serde_json::Value::Object(
            entries
                .iter()
                .map(|(k, n)| (k.name.clone(), value_json(&n.value)))
                .collect(),
        ),
    }
}

/// Expands `@name(...)` in every model's query, then reads the model's references again
/// from the expanded text (a macro may produce them).
fn expand_sql_macros(
    pipelines: &mut [Pipeline],
    mut runtime: Option<&mut MacroRuntime>,
    macros_failed: bool,
    base: &MacroContextBase,
    diagnostics: &mut Diagnostics,
) {
    for pipeline in pipelines.iter_mut() {
        let context = json!({
            "target_name": base.target,
            "database": base.database,
            "virtual_environments": pipeline.mode == Mode::Virtual,
            "variables": base.variables,
        });
        for model in &mut pipeline.models {
            let Ok(body_start) = stb_model::file::split(&model.text).map(|file| file.query_offset)
            else {
                continue; // compile reports the header
            };
            let calls = match crate::sql_macros::find_calls(&model.text, body_start) {
                Ok(calls) => calls,
                Err(error) => {
                    diagnostics.push(
                        Diagnostic::new(
                            codes::DISCOVER_MACRO_FAILED,
                            format!("Model '{}': {}", model.name, error.message),
                            "close the macro call's parenthesis",
                        )
                        .at(Location::at(
                            &model.file,
                            Position::of_offset(&model.text, error.offset),
                        )),
                    );
                    continue;
                }
            };
            if calls.is_empty() || macros_failed {
                continue;
            }
            let Some(runtime) = runtime.as_deref_mut() else {
                diagnostics.push(no_macros_defined(&model.file, &model.text, &calls[0]));
                continue;
            };
            match crate::sql_macros::expand(&model.text, body_start, runtime, &context) {
                Ok(expanded) => {
                    match crate::refs::extract(&expanded) {
                        Ok(refs) => {
                            model.driving_input = if model.kind == ModelKind::Table {
                                pipelines::driving_input(
                                    &model.name,
                                    &model.file,
                                    &refs,
                                    diagnostics,
                                )
                            } else {
                                None
                            };
                            model.refs = refs;
                        }
                        Err(error) => diagnostics.push(
                            Diagnostic::new(
                                codes::DISCOVER_REFS,
                                format!(
                                    "Model '{}' (after macro expansion): {}",
                                    model.name, error.message
                                ),
                                "the macro produced a malformed __ref/__source call",
                            )
                            .at(Location::file(&model.file)),
                        ),
                    }
                    model.text = expanded;
                }
                Err(error) => diagnostics.push(expansion_failure(&model.file, &model.text, error)),
            }
        }
    }
}

/// A call in a project that has no `macros/` folder.
fn no_macros_defined(file: &str, text: &str, call: &crate::sql_macros::MacroCall) -> Diagnostic {
    Diagnostic::new(
        codes::DISCOVER_MACRO_MISSING,
        format!(
            "Unknown macro '@{}' in '{file}'. Available macros: none",
            call.name
        ),
        "define it as a function in a file under macros/",
    )
    .at(Location::at(file, Position::of_offset(text, call.start)))
}

/// A macro that could not be expanded in `file`, pointing at the call and the macro.
fn expansion_failure(
    file: &str,
    text: &str,
    error: crate::sql_macros::ExpansionError,
) -> Diagnostic {
    let code = if error.message.starts_with("Unknown macro") {
        codes::DISCOVER_MACRO_MISSING
    } else {
        codes::DISCOVER_MACRO_FAILED
    };
    let mut diagnostic = Diagnostic::new(
        code,
        format!("{} in '{file}'", error.message),
        "macros take Python literals and return SQL text",
    )
    .at(Location::at(file, Position::of_offset(text, error.offset)));
    if let Some((macro_file, line)) = error.macro_location {
        diagnostic = diagnostic.with_related(
            "in the macro",
            Location::at(macro_file, Position::new(line, 1)),
        );
    }
    diagnostic
}

/// Expands `@name(...)` in whole files (audits, tests); their headers hold no calls, and
/// generic placeholders (`@column`, no parenthesis) are not calls. The project's default
/// pipeline mode sets `virtual_environments`.
fn expand_file_macros(
    files: &mut [(String, String)],
    mut runtime: Option<&mut MacroRuntime>,
    context: &serde_json::Value,
    diagnostics: &mut Diagnostics,
) {
    for (file, text) in files.iter_mut() {
        let calls = match crate::sql_macros::find_calls(text, 0) {
            Ok(calls) => calls,
            Err(error) => {
                diagnostics.push(
                    Diagnostic::new(
                        codes::DISCOVER_MACRO_FAILED,
                        format!("{} in '{file}'", error.message),
                        "close the macro call's parenthesis",
                    )
                    .at(Location::at(
                        file.as_str(),
                        Position::of_offset(text, error.offset),
                    )),
                );
                continue;
            }
        };
        let Some(first) = calls.first() else {
            continue;
        };
        let Some(runtime) = runtime.as_deref_mut() else {
            diagnostics.push(no_macros_defined(file, text, first));
            continue;
        };
        match crate::sql_macros::expand(text, 0, runtime, context) {
            Ok(expanded) => *text = expanded,
            Err(error) => diagnostics.push(expansion_failure(file, text, error)),
        }
    }
}

/// Follows each table model's driving input to a source; all of a pipeline's table models
/// must reach the same one.
fn infer_pipeline_sources(
    pipelines: &mut [Pipeline],
    sources: &[Source],
    invalid_sources: &[String],
    diagnostics: &mut Diagnostics,
) {
    let source_names: BTreeSet<&str> = sources.iter().map(|s| s.name.as_str()).collect();
    // Each model's kind and driving input, and where it names that input (its file and the
    // call's position): an unknown input is reported at that call, in the model that makes
    // it, not at the model whose chain led there.
    type Driving = (ModelKind, Option<String>, String, Option<Position>);
    let models: BTreeMap<String, Driving> = pipelines
        .iter()
        .flat_map(|p| {
            p.models.iter().map(|m| {
                let call = m
                    .refs
                    .iter()
                    .find(|r| m.driving_input.as_ref() == Some(&r.name))
                    .map(|r| r.position);
                let driving = (m.kind, m.driving_input.clone(), m.file.clone(), call);
                (m.name.clone(), driving)
            })
        })
        .collect();
    // model -> the source its chain reaches (None: the chain failed, already reported).
    // Each chain is walked once, so long pipelines stay linear.
    let mut reached_by: std::collections::HashMap<String, Option<String>> =
        std::collections::HashMap::new();
    for pipeline in pipelines.iter_mut() {
        let mut reached: Vec<String> = Vec::new();
        for model in pipeline
            .models
            .iter()
            .filter(|m| m.kind == ModelKind::Table)
        {
            let Some(start) = &model.driving_input else {
                continue;
            };
            let mut path = vec![model.name.clone()];
            let mut seen: std::collections::HashSet<String> =
                std::collections::HashSet::from([model.name.clone()]);
            let mut current = start.clone();
            let outcome = loop {
                if source_names.contains(current.as_str()) {
                    break Ok(current);
                }
                if let Some(known) = reached_by.get(&current) {
                    break known.clone().ok_or_else(String::new);
                }
                if invalid_sources
                    .iter()
                    .any(|n| *n == current || n == sources::UNREADABLE_FILE)
                {
                    break Err(String::new()); // the source itself was reported
                }
                match models.get(&current) {
                    Some((ModelKind::Table, Some(next), ..)) if !seen.contains(&current) => {
                        seen.insert(current.clone());
                        path.push(current.clone());
                        current = next.clone();
                    }
                    Some((ModelKind::Table, Some(_), ..)) => {
                        break Err(format!(
                            "Pipeline directory '{}' has a driving-input cycle through '{current}'",
                            pipeline.name
                        ));
                    }
                    Some((ModelKind::Table, None, ..)) => break Err(String::new()), // already reported on that model
                    _ => {
                        // `current` is the driving input of the chain's last model.
                        let naming = path.last().map_or(model.name.as_str(), String::as_str);
                        let location = match models.get(naming) {
                            Some((.., file, Some(at))) => Location::at(file, *at),
                            Some((.., file, None)) => Location::file(file),
                            None => Location::file(&model.file),
                        };
                        let inputs = source_names.iter().copied().chain(
                            models
                                .iter()
                                .filter(|(_, (kind, ..))| *kind == ModelKind::Table)
                                .map(|(name, _)| name.as_str()),
                        );
                        diagnostics.push(
                            Diagnostic::new(
                                codes::DISCOVER_PIPELINE_SOURCE,
                                format!(
                                    "Pipeline directory '{}' references unknown driving input '{current}' (from model '{naming}')",
                                    pipeline.name
                                ),
                                format!(
                                    "{}a table model's driving input must be a source or a table model that leads to one",
                                    stb_diagnostics::suggest::did_you_mean(&current, inputs)
                                ),
                            )
                            .at(location),
                        );
                        break Err(String::new());
                    }
                }
            };
            for name in path {
                reached_by.insert(name, outcome.as_ref().ok().cloned());
            }
            match outcome {
                Ok(source) => {
                    if !reached.contains(&source) {
                        reached.push(source);
                    }
                }
                Err(message) if !message.is_empty() => diagnostics.push(
                    Diagnostic::new(codes::DISCOVER_PIPELINE_SOURCE, message, "a table model's driving input must be a source or a table model that leads to one").at(Location::file(&model.file)),
                ),
                Err(_) => {}
            }
        }
        match reached.as_slice() {
            [] => {}
            [one] => pipeline.source = Some(one.clone()),
            many => diagnostics.push(
                Diagnostic::new(
                    codes::DISCOVER_PIPELINE_SOURCE,
                    format!(
                        "Pipeline directory '{}' must resolve to exactly one source; found {}",
                        pipeline.name,
                        many.join(", ")
                    ),
                    "split the pipeline so each reads one source",
                )
                .at(Location::file(&pipeline.directory)),
            ),
        }
    }
}

fn check_naming_macro(
    name: &str,
    at: Position,
    pipelines: &[Pipeline],
    runtime: Option<&mut MacroRuntime>,
    diagnostics: &mut Diagnostics,
) {
    let config = Location::at(project_config::FILE_NAME, at);
    let Some(runtime) = runtime else {
        diagnostics.push(
            Diagnostic::new(
                codes::DISCOVER_MACRO_MISSING,
                format!("Pipeline naming macro '{name}' is not defined. Available macros: none"),
                "define it in a file under macros/",
            )
            .at(config),
        );
        return;
    };
    let Some(info) = runtime.find(name).cloned() else {
        diagnostics.push(
            Diagnostic::new(
                codes::DISCOVER_MACRO_MISSING,
                format!(
                    "Pipeline naming macro '{name}' is not defined. {}",
                    available(runtime)
                ),
                "define it in a file under macros/, or fix naming.pipeline_naming_macro",
            )
            .at(config),
        );
        return;
    };
    let signature_ok = info.params.len() == 1
        && info.params[0].name == "ctx"
        && info.params[0]
            .annotation
            .as_deref()
            .is_some_and(|a| a == "PipelineNamingContext" || a.ends_with(".PipelineNamingContext"));
    if !signature_ok {
        diagnostics.push(
            Diagnostic::new(codes::DISCOVER_MACRO_MISSING, format!("Pipeline naming macro '{name}' must have the signature def {name}(ctx: PipelineNamingContext) -> str"), "from streambuild.compiler.macros.models import PipelineNamingContext")
                .at(Location::at(&info.file, Position::new(info.line, 1))),
        );
        return;
    }
    for pipeline in pipelines {
        let mut model_names: Vec<&str> = pipeline.models.iter().map(|m| m.name.as_str()).collect();
        model_names.sort_unstable();
        let context = json!({
            "name": pipeline.name,
            "source_name": pipeline.source,
            "model_names": model_names,
            "relative_directory": pipeline.directory,
            "mode": pipeline.mode.as_str(),
        });
        let here = Location::file(&pipeline.directory);
        match runtime.call_naming(name, &context) {
            Ok(result) if result.type_name == "str" && result.value.as_str().is_some_and(|v| !v.is_empty()) => {
                let expected = result.value.as_str().unwrap_or_default();
                if expected != pipeline.name {
                    diagnostics.push(
                        Diagnostic::new(codes::DISCOVER_NAMING_MISMATCH, format!("Pipeline directory '{}' does not satisfy naming macro '{name}'; expected 'pipelines/{expected}'", pipeline.name), format!("rename the directory to pipelines/{expected}; stb never renames files"))
                            .at(here)
                            .with_related("naming macro", Location::at(&info.file, Position::new(info.line, 1))),
                    );
                }
            }
            Ok(result) => diagnostics.push(
                Diagnostic::new(codes::DISCOVER_MACRO_FAILED, format!("Pipeline naming macro '{name}' returned {} for '{}' instead of a non-empty string", if result.type_name == "str" { "an empty string".to_owned() } else { result.type_name }, pipeline.name), "return the required directory name as a str")
                    .at(Location::at(&info.file, Position::new(info.line, 1))),
            ),
            Err(error) => {
                diagnostics.push(macro_failure(name, &error, Location::at(&info.file, Position::new(info.line, 1))));
                if matches!(error, MacroError::Timeout(_) | MacroError::Worker(_)) {
                    return; // the worker is gone; one report is enough
                }
            }
        }
    }
}

/// Pipelines, sources and models share one namespace.
fn check_namespace(pipelines: &[Pipeline], sources: &[Source], diagnostics: &mut Diagnostics) {
    let mut seen: BTreeMap<&str, Location> = BTreeMap::new();
    for source in sources {
        seen.entry(source.name.as_str())
            .or_insert_with(|| Location::at(&source.file, source.position));
    }
    for pipeline in pipelines {
        let here = Location::file(&pipeline.directory);
        if let Some(first) = seen.get(pipeline.name.as_str()) {
            diagnostics.push(
                Diagnostic::new(
                    codes::DISCOVER_NAME_COLLISION,
                    format!(
                        "Logical resource name '{}' is defined in both {} and {}",
                        pipeline.name,
                        first.file.display(),
                        pipeline.directory
                    ),
                    "pipelines, sources and models share one namespace; rename one",
                )
                .at(here)
                .with_related("first defined here", first.clone()),
            );
        } else {
            seen.insert(pipeline.name.as_str(), here);
        }
    }
    for model in pipelines.iter().flat_map(|p| &p.models) {
        let here = Location::file(&model.file);
        if let Some(first) = seen.get(model.name.as_str()) {
            diagnostics.push(
                Diagnostic::new(
                    codes::DISCOVER_NAME_COLLISION,
                    format!(
                        "Logical node name '{}' is defined in both {} and {}",
                        model.name,
                        first.file.display(),
                        model.file
                    ),
                    "pipelines, sources and models share one namespace; rename the model file",
                )
                .at(here)
                .with_related("first defined here", first.clone()),
            );
        } else {
            seen.insert(model.name.as_str(), here);
        }
    }
}

fn check_dependencies(
    config: &ProjectConfig,
    pipelines: &[Pipeline],
    diagnostics: &mut Diagnostics,
) {
    let names: BTreeSet<&str> = pipelines.iter().map(|p| p.name.as_str()).collect();
    for (up, down, position) in &config.dependencies.allowed {
        let unknown: Vec<&str> = [up.as_str(), down.as_str()]
            .into_iter()
            .filter(|n| !names.contains(n))
            .collect();
        if !unknown.is_empty() {
            diagnostics.push(
                Diagnostic::new(codes::CONFIG_DEPENDENCIES, format!("allowed cross-pipeline reference {up} -> {down} names unknown pipeline(s): {}", unknown.join(", ")), "use the directory names under pipelines/")
                    .at(Location::at(project_config::FILE_NAME, *position)),
            );
        }
    }
}

fn check_virtual_only_defaults(
    config: &ProjectConfig,
    mode: Mode,
    pipelines: &[Pipeline],
    diagnostics: &mut Diagnostics,
) {
    if config.virtual_only_defaults.is_empty() || pipelines.iter().any(|p| p.mode == Mode::Virtual)
    {
        return;
    }
    let reason = if mode == Mode::Direct {
        "when defaults.pipeline_mode is direct"
    } else {
        "when every pipeline overrides its mode to direct"
    };
    for (key, position) in &config.virtual_only_defaults {
        diagnostics.push(
            Diagnostic::new(
                codes::DISCOVER_DIRECT_ONLY,
                format!(
                    "Project file '{}' cannot define defaults.{key} {reason}",
                    project_config::FILE_NAME
                ),
                "this setting only affects virtual pipelines; remove it",
            )
            .at(Location::at(project_config::FILE_NAME, *position)),
        );
    }
}

/// `--vars` JSON as tree nodes.
///
/// # Errors
/// When the text is not a JSON object.
pub fn vars_from_json(text: &str) -> Result<BTreeMap<String, Node>, String> {
    let value: serde_json::Value =
        serde_json::from_str(text).map_err(|e| format!("--vars must be a JSON object: {e}"))?;
    let serde_json::Value::Object(map) = value else {
        return Err("--vars must be a JSON object".to_owned());
    };
    Ok(map.into_iter().map(|(k, v)| (k, json_node(v))).collect())
}

fn json_node(value: serde_json::Value) -> Node {
    let position = Position::default();
    let value = match value {
        serde_json::Value::Null => Value::Null,
        serde_json::Value::Bool(b) => Value::Bool(b),
        serde_json::Value::Number(n) => n
            .as_i64()
            .map_or_else(|| Value::Float(n.as_f64().unwrap_or(0.0)), Value::Int),
        serde_json::Value::String(s) => Value::Str(s),
        serde_json::Value::Array(items) => Value::Array(items.into_iter().map(json_node).collect()),
        serde_json::Value::Object(map) => Value::Table(
            map.into_iter()
                .map(|(k, v)| (crate::tree::Key { name: k, position }, json_node(v)))
                .collect(),
        ),
    };
    Node { value, position }
}
