//! `pipelines/<name>/`: pipeline directories, their `pipeline.toml`, and their model files.

use std::path::{Path, PathBuf};

use stb_diagnostics::{Diagnostic, Diagnostics, Location, Position};

use crate::codes;
use crate::policies;
use crate::project_config::Mode;
use crate::reader::Reader;
use crate::refs::{self, RefKind, RelationRef};
use crate::tree::{Node, Value};

const PIPELINE_KEYS: &[&str] = &[
    "mode",
    "replay_on_change",
    "bounded_replay_fallback",
    "naming",
    "protection",
    "audit_defaults",
    "execution",
    "defaults",
];

#[derive(Debug, Clone, serde::Serialize)]
pub struct Protection {
    pub warning: String,
    pub confirmation: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ModelKind {
    Table,
    View,
}

#[derive(Debug, Clone, serde::Serialize)]
pub struct Model {
    pub name: String,
    /// Project-relative path.
    pub file: String,
    pub kind: ModelKind,
    /// The driving input of a table model.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub driving_input: Option<String>,
    #[serde(skip)]
    pub refs: Vec<RelationRef>,
    /// The file's text, as read once by discovery.
    #[serde(skip)]
    pub text: String,
    /// Its header's `description` and column descriptions (`description`,
    /// `column_descriptions` in `stb discover --json`, absent when there are none).
    #[serde(flatten)]
    pub docs: stb_model::docs::ModelDocs,
}

#[derive(Debug, Clone, serde::Serialize)]
pub struct Pipeline {
    pub name: String,
    /// `pipelines/<name>`
    pub directory: String,
    pub mode: Mode,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub protection: Option<Protection>,
    /// The one source every table model reaches; none for view-only pipelines.
    pub source: Option<String>,
    pub models: Vec<Model>,
    #[serde(skip)]
    pub config_file: Option<PathBuf>,
    #[serde(skip)]
    pub virtual_only: Vec<(String, Position)>,
    /// `[naming]` of pipeline.toml: prefixes for this pipeline's relations.
    #[serde(skip)]
    pub table_prefix: Option<String>,
    #[serde(skip)]
    pub view_prefix: Option<String>,
    /// `[defaults.models] retention` of pipeline.toml.
    #[serde(skip)]
    pub model_retention: Option<crate::policies::ModelRetention>,
    /// `[audit_defaults]` of pipeline.toml.
    #[serde(skip)]
    pub audit_defaults: crate::policies::AuditDefaults,
    /// `replay_on_change` and `bounded_replay_fallback` of pipeline.toml.
    #[serde(skip)]
    pub replay_policy: stb_model::planning::ReplayPolicy,
}

/// Settings that come from the project and apply to every pipeline.
pub(crate) struct PipelineDefaults<'a> {
    pub mode: Mode,
    pub prefix: &'a str,
}

/// Reads every direct child directory of `pipelines/`.
pub(crate) fn discover(
    project_dir: &Path,
    defaults: &PipelineDefaults<'_>,
    diagnostics: &mut Diagnostics,
) -> Vec<Pipeline> {
    let root = project_dir.join("pipelines");
    let mut directories: Vec<PathBuf> = std::fs::read_dir(&root)
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .map(|e| e.path())
                .filter(|p| p.is_dir())
                .collect()
        })
        .unwrap_or_default();
    directories.sort();
    // Pipelines are independent: read and scan them in parallel, report in order.
    let results = crate::parallel::map_ordered(&directories, |dir| {
        let mut local = Diagnostics::new();
        let pipeline = pipeline(project_dir, dir, defaults, &mut local);
        (pipeline, local)
    });
    let mut pipelines = Vec::with_capacity(results.len());
    for (pipeline, local) in results {
        diagnostics.extend(local);
        pipelines.extend(pipeline);
    }
    pipelines
}

fn relative(project_dir: &Path, path: &Path) -> String {
    path.strip_prefix(project_dir)
        .unwrap_or(path)
        .to_string_lossy()
        .replace('\\', "/")
}

fn pipeline(
    project_dir: &Path,
    dir: &Path,
    defaults: &PipelineDefaults<'_>,
    diagnostics: &mut Diagnostics,
) -> Option<Pipeline> {
    let name = dir.file_name()?.to_string_lossy().into_owned();
    let directory = relative(project_dir, dir);
    if !name.starts_with(defaults.prefix) {
        diagnostics.push(
            Diagnostic::new(
                codes::DISCOVER_PIPELINE_PREFIX,
                format!("Pipeline directory '{name}' must start with configured naming.pipeline_prefix '{}'", defaults.prefix),
                format!("rename it to '{}{name}', or set [naming] pipeline_prefix (\"\" disables the rule)", defaults.prefix),
            )
            .at(Location::file(&directory)),
        );
    }
    let config_path = dir.join("pipeline.toml");
    let config = config_path
        .is_file()
        .then(|| read_config(project_dir, &config_path, &name, defaults.mode, diagnostics))
        .flatten();
    let settings = config.unwrap_or_else(|| PipelineSettings {
        mode: defaults.mode,
        ..PipelineSettings::default()
    });
    let models = models(project_dir, dir, &directory, diagnostics);
    if models.is_empty() && !has_sql(dir) {
        diagnostics.push(
            Diagnostic::new(
                codes::DISCOVER_EMPTY_PIPELINE,
                format!("Pipeline root '{directory}' must contain at least one SQL model file"),
                "add a model (a .sql file), or remove the directory",
            )
            .at(Location::file(&directory)),
        );
    }
    Some(Pipeline {
        name,
        directory,
        mode: settings.mode,
        protection: settings.protection,
        source: None,
        models,
        config_file: config_path
            .is_file()
            .then(|| PathBuf::from(relative(project_dir, &config_path))),
        virtual_only: settings.virtual_only,
        table_prefix: settings.table_prefix,
        view_prefix: settings.view_prefix,
        model_retention: settings.model_retention,
        audit_defaults: settings.audit_defaults,
        replay_policy: settings.replay_policy,
    })
}

#[derive(Default)]
struct PipelineSettings {
    model_retention: Option<policies::ModelRetention>,
    audit_defaults: policies::AuditDefaults,
    mode: Mode,
    protection: Option<Protection>,
    virtual_only: Vec<(String, Position)>,
    table_prefix: Option<String>,
    view_prefix: Option<String>,
    replay_policy: stb_model::planning::ReplayPolicy,
}

fn read_config(
    project_dir: &Path,
    path: &Path,
    name: &str,
    default_mode: Mode,
    diagnostics: &mut Diagnostics,
) -> Option<PipelineSettings> {
    let file = relative(project_dir, path);
    let text = crate::read_text(path, &file, diagnostics)?;
    let root = crate::parse_toml_file(&file, &text, diagnostics)?;
    let mut reader = Reader::new(&file, diagnostics);
    reader.table(&root, "pipeline.toml")?;
    reader.allowed_keys(&root, "pipeline.toml", PIPELINE_KEYS);
    let mode = root
        .get("mode")
        .and_then(|m| reader.choice(m, "mode", &["direct", "virtual"]))
        .and_then(|m| Mode::parse(&m))
        .unwrap_or(default_mode);
    let mut virtual_only = Vec::new();
    for key in ["replay_on_change", "bounded_replay_fallback"] {
        if let Some(node) = root.get(key) {
            virtual_only.push((key.to_owned(), node.position));
        }
    }
    let replay_policy = policies::replay_policy(
        &mut reader,
        root.get("replay_on_change"),
        root.get("bounded_replay_fallback"),
        "",
    );
    if mode == Mode::Direct {
        for (key, position) in &virtual_only {
            reader.report(
                codes::DISCOVER_DIRECT_ONLY,
                *position,
                format!("Pipeline '{name}' cannot define {key} when its mode is direct"),
                "direct builds always replay fully; remove the key or set mode = \"virtual\"",
            );
        }
    }
    if let Some(naming) = root.get("naming")
        && reader.table(naming, "[naming]").is_some()
    {
        reader.allowed_keys(
            naming,
            "pipeline.toml [naming]",
            &["table_prefix", "view_prefix"],
        );
        for key in ["table_prefix", "view_prefix"] {
            if let Some(value) = naming.get(key) {
                reader.string(value, &format!("naming.{key}"));
            }
        }
    }
    let audit_defaults = root
        .get("audit_defaults")
        .map(|audits| policies::audit_defaults(&mut reader, audits, "audit_defaults"))
        .unwrap_or_default();
    if let Some(execution) = root.get("execution") {
        execution_settings(&mut reader, execution);
    }
    let mut model_retention = None;
    if let Some(defaults) = root.get("defaults")
        && reader.table(defaults, "[defaults]").is_some()
    {
        reader.allowed_keys(defaults, "pipeline.toml [defaults]", &["models"]);
        match defaults.get("models") {
            Some(models) if reader.table(models, "[defaults.models]").is_some() => {
                reader.allowed_keys(models, "pipeline.toml [defaults.models]", &["retention"]);
                if let Some(retention) = models.get("retention") {
                    model_retention = policies::model_retention(
                        &mut reader,
                        retention,
                        "defaults.models.retention",
                    );
                }
            }
            Some(_) => {}
            None => reader.report(
                codes::CONFIG_MISSING,
                defaults.position,
                "pipeline.toml [defaults] must contain a models table",
                "write [defaults.models] retention = ...",
            ),
        }
    }
    let protection = root
        .get("protection")
        .and_then(|node| protection(&mut reader, node, name, mode));
    let prefix = |key: &str| {
        root.get("naming")
            .and_then(|n| n.get(key))
            .and_then(Node::as_str)
            .map(str::to_owned)
    };
    Some(PipelineSettings {
        mode,
        protection,
        virtual_only,
        table_prefix: prefix("table_prefix"),
        view_prefix: prefix("view_prefix"),
        model_retention,
        audit_defaults,
        replay_policy,
    })
}

fn execution_settings(reader: &mut Reader<'_>, node: &Node) {
    if reader.table(node, "[execution]").is_none() {
        return;
    }
    reader.allowed_keys(node, "[execution]", &["replay"]);
    let Some(replay) = node.get("replay") else {
        return;
    };
    if reader.table(replay, "[execution.replay]").is_none() {
        return;
    }
    reader.allowed_keys(replay, "[execution.replay]", &["settings"]);
    let Some(settings) = replay.get("settings") else {
        return;
    };
    let Some(entries) = reader.table(settings, "[execution.replay.settings]") else {
        return;
    };
    if entries.is_empty() {
        reader.report(
            codes::CONFIG_VALUE,
            settings.position,
            "[execution.replay.settings] must not be empty",
            "add ClickHouse settings such as max_threads = 4, or remove the table",
        );
    }
    for (key, value) in entries {
        if !crate::reader::is_identifier(&key.name) {
            reader.report(
                codes::CONFIG_VALUE,
                key.position,
                format!(
                    "replay setting name '{}' is not a ClickHouse setting name",
                    key.name
                ),
                "setting names use letters, numbers and underscores",
            );
        }
        if matches!(value.value, Value::Array(_) | Value::Table(_)) {
            reader.type_error(
                value,
                &format!("replay setting {}", key.name),
                "a string, number or boolean",
            );
        }
    }
}

fn protection(reader: &mut Reader<'_>, node: &Node, name: &str, mode: Mode) -> Option<Protection> {
    reader.table(node, "[protection]")?;
    if mode == Mode::Virtual {
        reader.report(
            codes::DISCOVER_PROTECTION,
            node.position,
            format!("Pipeline '{name}' may define protection only for direct pipelines"),
            "virtual pipelines are protected by staging and promotion; remove [protection]",
        );
        return None;
    }
    reader.allowed_keys(node, "[protection]", &["warning", "confirmation"]);
    let warning = node
        .get("warning")
        .and_then(|w| reader.non_empty_string(w, "protection.warning"))
        .unwrap_or_else(|| {
            format!(
                "Pipeline '{name}' is protected. Confirm its operational impact before building."
            )
        });
    let confirmation = match node.get("confirmation") {
        Some(value) => {
            let text = reader.non_empty_string(value, "protection.confirmation")?;
            if !is_confirmation(&text) {
                reader.report(
                    codes::DISCOVER_PROTECTION,
                    value.position,
                    "protection.confirmation must contain only letters, numbers, '.', '_', ':', or '-' and must start with a letter or number",
                    "for example confirmation = \"orders-prod\"",
                );
                return None;
            }
            text
        }
        None => default_confirmation(name),
    };
    Some(Protection {
        warning,
        confirmation,
    })
}

fn is_confirmation(text: &str) -> bool {
    let mut chars = text.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphanumeric())
        && chars.all(|c| c.is_ascii_alphanumeric() || "._:-".contains(c))
}

/// The pipeline name when it is a valid confirmation, else `CONFIRM_` + the name with every
/// other character replaced by `_`.
#[must_use]
pub fn default_confirmation(name: &str) -> String {
    if is_confirmation(name) {
        return name.to_owned();
    }
    let cleaned: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "._:-".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect();
    format!("CONFIRM_{cleaned}")
}

fn has_sql(dir: &Path) -> bool {
    let mut files = Vec::new();
    sql_files(dir, &mut files);
    !files.is_empty()
}

fn sql_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.filter_map(Result::ok) {
        let path = entry.path();
        if path.is_dir() {
            sql_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "sql") {
            out.push(path);
        }
    }
}

fn models(
    project_dir: &Path,
    dir: &Path,
    directory: &str,
    diagnostics: &mut Diagnostics,
) -> Vec<Model> {
    let mut files = Vec::new();
    sql_files(dir, &mut files);
    files.sort();
    let mut models: Vec<Model> = Vec::new();
    for path in files {
        let file = relative(project_dir, &path);
        let Some(stem) = path.file_stem().map(|s| s.to_string_lossy().into_owned()) else {
            continue;
        };
        if let Some(first) = models.iter().find(|m| m.name == stem) {
            diagnostics.push(
                Diagnostic::new(codes::DISCOVER_DUPLICATE_MODEL, format!("Pipeline root '{directory}' defines duplicate model filename stem '{stem}' in both {} and {file}", first.file), "model names are file stems; rename one of the files")
                    .at(Location::file(&file))
                    .with_related("first defined here", Location::file(&first.file)),
            );
            continue;
        }
        let Some(text) = crate::read_text(&path, &file, diagnostics) else {
            continue;
        };
        let kind = model_kind(&text);
        let (refs, refs_ok) = match refs::extract(&text) {
            Ok(refs) => (refs, true),
            Err(error) => {
                diagnostics.push(
                    Diagnostic::new(
                        codes::DISCOVER_REFS,
                        format!("Model '{stem}': {}", error.message),
                        "fix the call: __ref(\"name\") or __source(\"name\")",
                    )
                    .at(Location::at(&file, error.position)),
                );
                (Vec::new(), false)
            }
        };
        // Without its references (already reported) a model has no driving input to infer.
        let driving_input = if kind == ModelKind::Table && refs_ok {
            driving_input(&stem, &file, &refs, diagnostics)
        } else {
            None
        };
        let docs = stb_model::docs::ModelDocs::of(&text);
        models.push(Model {
            name: stem,
            file,
            kind,
            driving_input,
            refs,
            text,
            docs,
        });
    }
    models
}

/// `kind view` in the MODEL header makes a view model; anything else (including a file
/// whose header does not parse, which compile reports) is a table model.
#[must_use]
pub fn model_kind(text: &str) -> ModelKind {
    match stb_model::file::split(text) {
        Ok(file)
            if file.header.value.get("kind").and_then(|v| v.value.as_str()) == Some("view") =>
        {
            ModelKind::View
        }
        _ => ModelKind::Table,
    }
}

pub(crate) fn driving_input(
    model: &str,
    file: &str,
    refs: &[RelationRef],
    diagnostics: &mut Diagnostics,
) -> Option<String> {
    let mut report = |message: String, position: Option<Position>| {
        let location = position.map_or_else(|| Location::file(file), |p| Location::at(file, p));
        diagnostics.push(Diagnostic::new(codes::DISCOVER_REFS, format!("Model '{model}' {message}"), "a table model reads one driving input untyped; declare others with __ref(\"x\", ref_type='reference')").at(location));
    };
    let mut sources: Vec<&RelationRef> =
        refs.iter().filter(|r| r.kind == RefKind::Source).collect();
    sources.dedup_by(|a, b| a.name == b.name);
    let untyped: Vec<&RelationRef> = refs
        .iter()
        .filter(|r| r.kind == RefKind::Ref && r.ref_type.is_none())
        .collect();
    if let Some(first) = sources.first() {
        let unique: std::collections::BTreeSet<&str> =
            sources.iter().map(|r| r.name.as_str()).collect();
        if unique.len() > 1 {
            report(
                "must contain exactly one unique __source(...) when source refs are present"
                    .to_owned(),
                Some(sources[1].position),
            );
            return None;
        }
        if let Some(untyped) = untyped.first() {
            report(
                "must not mix __source(...) with untyped __ref(...)".to_owned(),
                Some(untyped.position),
            );
            return None;
        }
        return Some(first.name.clone());
    }
    let mut names: Vec<&str> = refs.iter().map(|r| r.name.as_str()).collect();
    names.sort_unstable();
    names.dedup();
    let mut untyped_names: Vec<&str> = untyped.iter().map(|r| r.name.as_str()).collect();
    untyped_names.sort_unstable();
    untyped_names.dedup();
    match (names.as_slice(), untyped_names.as_slice()) {
        ([], _) => {
            report(
                "must reference exactly one driving input using __source(...) or __ref(...)"
                    .to_owned(),
                None,
            );
            None
        }
        ([only], []) => {
            report(
                format!("must not declare ref_type for its driving input '{only}'"),
                refs.first().map(|r| r.position),
            );
            None
        }
        (_, [one]) => Some((*one).to_owned()),
        _ => {
            report("must contain exactly one unique untyped driving input when multiple relations are present".to_owned(), untyped.get(1).map(|r| r.position));
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn confirmations() {
        assert_eq!(default_confirmation("pl__orders"), "pl__orders");
        assert_eq!(default_confirmation("_hidden dir"), "CONFIRM__hidden_dir");
    }

    #[test]
    fn model_kinds() {
        assert_eq!(model_kind("MODEL (kind view);\nSELECT 1"), ModelKind::View);
        assert_eq!(
            model_kind("MODEL (\n  kind table,\n);\nSELECT 1"),
            ModelKind::Table
        );
        assert_eq!(model_kind("SELECT 1"), ModelKind::Table);
        assert_eq!(
            model_kind("MODEL (description \"a ); kind view\", kind table);"),
            ModelKind::Table
        );
        assert_eq!(
            model_kind("MODEL (columns (a \"x\"), kind view);\nSELECT 1"),
            ModelKind::View
        );
    }
}
