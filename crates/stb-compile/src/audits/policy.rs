//! Severity, cadence and warm-up of each audit: its own header first, else what the
//! pipelines of the models it reads say.

use std::collections::{BTreeMap, BTreeSet};

use stb_diagnostics::Diagnostic;
use stb_project::Project;
use stb_project::policies::AuditDefaults;

use super::{CODE, CompiledAudit, Draft};

/// Each model's effective audit defaults: its pipeline's `[audit_defaults]` over the
/// project's `[defaults.audits]`.
pub(crate) struct ModelDefaults(BTreeMap<String, AuditDefaults>);

impl ModelDefaults {
    pub(crate) fn of(project: &Project) -> Self {
        let base = &project.defaults.audit_defaults;
        let mut map = BTreeMap::new();
        for pipeline in &project.pipelines {
            let own = &pipeline.audit_defaults;
            let effective = AuditDefaults {
                severity: own.severity.clone().or_else(|| base.severity.clone()),
                every_seconds: own.every_seconds.or(base.every_seconds),
                warmup_seconds: own.warmup_seconds.or(base.warmup_seconds),
            };
            for model in &pipeline.models {
                map.insert(model.name.clone(), effective.clone());
            }
        }
        Self(map)
    }

    fn get(&self, model: &str) -> AuditDefaults {
        self.0.get(model).cloned().unwrap_or_default()
    }
}

/// Resolves one audit's policy. `models` are the models it references, sorted.
pub(crate) fn resolve(
    draft: Draft,
    models: Vec<String>,
    defaults: &ModelDefaults,
) -> Result<CompiledAudit, Diagnostic> {
    let name = draft
        .name
        .clone()
        .unwrap_or_else(|| stem_of(&draft.path_stem));
    let problem = |message: String, hint: &str| {
        Diagnostic::new(CODE, message, hint).at(draft.location.clone())
    };
    let inherited: Vec<AuditDefaults> = models.iter().map(|m| defaults.get(m)).collect();
    let severity = draft.options.severity.clone().unwrap_or_else(|| {
        // Unset severities count as `error`: one strict pipeline makes the audit strict.
        let any_error = inherited
            .iter()
            .any(|d| d.severity.as_deref().unwrap_or("error") == "error");
        if any_error { "error" } else { "warning" }.to_owned()
    });
    let warmup_seconds = draft.options.warmup_seconds.unwrap_or_else(|| {
        inherited
            .iter()
            .filter_map(|d| d.warmup_seconds)
            .max()
            .unwrap_or(0)
    });
    let every_seconds = match (draft.options.every_seconds, draft.options.scheduled) {
        (Some(every), _) => Some(every),
        (None, Some(false)) => None,
        (None, scheduled) => {
            let cadences: BTreeSet<u64> =
                inherited.iter().filter_map(|d| d.every_seconds).collect();
            if cadences.len() > 1 {
                return Err(problem(
                    format!(
                        "SQL audit '{name}' inherits conflicting pipeline cadences; define every on the audit"
                    ),
                    "add every \"5m\" (for example) to the audit",
                ));
            }
            let cadence = cadences.into_iter().next();
            if scheduled == Some(true) && cadence.is_none() {
                return Err(problem(
                    format!("SQL audit '{name}' is scheduled but has no cadence"),
                    "add every \"5m\" (for example), or set [audit_defaults] every in pipeline.toml",
                ));
            }
            cadence
        }
    };
    if every_seconds.is_some()
        && draft.attachment == super::Attachment::Standalone
        && draft.options.name.is_none()
    {
        return Err(problem(
            format!("Scheduled SQL audit '{name}' must have an explicit name"),
            "add name ... to its AUDIT header",
        ));
    }
    // The `__<name>` suffix only when the audit has a name.
    let path = match &draft.name {
        Some(named) => format!("{}__{named}.sql", draft.path_stem),
        None => format!("{}.sql", draft.path_stem),
    };
    Ok(CompiledAudit {
        name,
        file: draft.file,
        path,
        attachment: draft.attachment,
        model: draft.model,
        column: draft.column,
        generic: draft.generic,
        description: draft.options.description,
        models,
        severity,
        every_seconds,
        warmup_seconds,
        query: draft.query,
    })
}

fn stem_of(path_stem: &str) -> String {
    path_stem.rsplit('/').next().unwrap_or(path_stem).to_owned()
}
