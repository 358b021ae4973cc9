//! SQL audits: queries whose rows are failures.
//!
//! Standalone audits are `AUDIT (...);` blocks under `audits/`. Generic audits are
//! parameterised definitions under `audits/generic/`, instantiated by MODEL headers
//! (`audits [not_null]` on a model or a column). Every audit is checked to reference only
//! compiled models through `__ref`, and gets its severity, cadence and warm-up from its
//! header or from the audit defaults of the pipelines it reads.

mod generic;
mod policy;

use std::collections::BTreeSet;

use stb_diagnostics::{Diagnostic, Location, Position};
use stb_model::header::HeaderValue;
use stb_project::refs::RefKind;
use stb_sql::lexer::lex;

pub(crate) use generic::{definitions, instances};
pub(crate) use policy::{ModelDefaults, resolve};

pub(crate) const CODE: &str = "STB-COMPILE-009";

/// Where an audit is attached.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Attachment {
    /// An `AUDIT` block in a file under `audits/`.
    Standalone,
    /// `audits [...]` of a MODEL header.
    Model,
    /// `columns (c (audits [...]))` of a MODEL header.
    Column,
}

/// Header fields shared by `AUDIT (...)` and generic instances.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Options {
    pub severity: Option<String>,
    pub description: Option<String>,
    pub name: Option<String>,
    pub every_seconds: Option<u64>,
    pub warmup_seconds: Option<u64>,
    pub scheduled: Option<bool>,
}

/// The keys [`Options`] reads; generic instances pop these before rendering.
pub(crate) const OPTION_KEYS: &[&str] = &[
    "severity",
    "description",
    "name",
    "every",
    "warmup",
    "scheduled",
];

impl Options {
    /// Reads one option; the message says what is wrong with its value.
    pub(crate) fn read(&mut self, key: &str, value: &HeaderValue) -> Result<(), String> {
        let text = |what: &str| match value {
            HeaderValue::Str(s) if !s.trim().is_empty() => Ok(s.clone()),
            _ => Err(format!("{what} must be a non-empty string")),
        };
        let duration = |what: &str| match value {
            HeaderValue::Str(s) => stb_project::parse_duration(s).ok_or_else(|| {
                format!("{what} must be a duration such as '30s', '10m', '2h' or '7d', not '{s}'")
            }),
            other => Err(format!(
                "{what} must be a duration string, not {}",
                other.kind()
            )),
        };
        match key {
            "severity" => match value {
                HeaderValue::Str(s) if s == "error" || s == "warning" => {
                    self.severity = Some(s.clone());
                }
                _ => return Err("severity must be error or warning".to_owned()),
            },
            "description" => self.description = Some(text("description")?),
            "name" => self.name = Some(text("name")?),
            "every" => {
                let seconds = duration("every")?;
                if seconds == 0 {
                    return Err("every must be greater than zero".to_owned());
                }
                self.every_seconds = Some(seconds);
            }
            "warmup" => self.warmup_seconds = Some(duration("warmup")?),
            "scheduled" => match value {
                HeaderValue::Bool(b) => self.scheduled = Some(*b),
                _ => return Err("scheduled must be true or false".to_owned()),
            },
            other => {
                return Err(format!(
                    "'{other}' is not an audit setting (use {})",
                    OPTION_KEYS.join(", ")
                ));
            }
        }
        if self.scheduled == Some(false) && self.every_seconds.is_some() {
            return Err("scheduled false cannot be combined with every".to_owned());
        }
        Ok(())
    }
}

/// An audit before policy resolution.
#[derive(Debug, Clone)]
pub(crate) struct Draft {
    pub name: Option<String>,
    /// The file that declares it: the audit file, or the model file for generic instances.
    pub file: String,
    /// `compiled/audits/<mirror>/<stem>`, without the name suffix and extension.
    pub path_stem: String,
    pub attachment: Attachment,
    pub model: Option<String>,
    pub column: Option<String>,
    pub generic: Option<String>,
    pub query: String,
    pub options: Options,
    pub location: Location,
}

/// The generic audits every project has, as files under `audits/generic/` would define
/// them; a project file with the same name replaces one.
const BUILTIN_GENERIC_AUDITS: &[(&str, &str)] = &[
    (
        "not_null",
        "AUDIT ();\n-- Rows whose column is NULL.\nSELECT * FROM __ref(\"@model\") WHERE @column IS NULL\n",
    ),
    (
        "accepted_values",
        "AUDIT ();\n-- Values outside the accepted list, with how often each occurs.\nSELECT @column AS value, count() AS rows FROM __ref(\"@model\") WHERE @column NOT IN (@'values') GROUP BY @column\n",
    ),
    (
        "expression_is_true",
        "AUDIT ();\n-- Rows for which the expression does not hold.\nSELECT * FROM __ref(\"@model\") WHERE NOT (@expression)\n",
    ),
];

/// The project's generic audit files plus the built-in ones it does not redefine.
fn with_builtins(files: &[(String, String)]) -> Vec<(String, String)> {
    let defined = |name: &str| {
        files.iter().any(|(file, _)| {
            std::path::Path::new(file)
                .file_stem()
                .is_some_and(|stem| stem == name)
        })
    };
    let mut all = files.to_vec();
    all.extend(
        BUILTIN_GENERIC_AUDITS
            .iter()
            .filter(|(name, _)| !defined(name))
            .map(|(name, text)| (format!("<built-in>/{name}.sql"), (*text).to_owned())),
    );
    all
}

/// One audit, compiled.
#[derive(Debug, Clone)]
pub(crate) struct CompiledAudit {
    pub name: String,
    pub file: String,
    /// `compiled/audits/...sql`
    pub path: String,
    pub attachment: Attachment,
    pub model: Option<String>,
    pub column: Option<String>,
    pub generic: Option<String>,
    pub description: Option<String>,
    /// Referenced models, sorted.
    pub models: Vec<String>,
    pub severity: String,
    pub every_seconds: Option<u64>,
    pub warmup_seconds: u64,
    /// The audit query as written (macros expanded), `__ref` markers kept.
    pub query: String,
}

fn fail(file: &str, text: &str, offset: usize, message: String, hint: &str) -> Diagnostic {
    crate::blocks::diagnostic_at(CODE, file, text, offset, message, hint)
}

/// `compiled/audits/<path relative to audits/ without .sql>`.
fn standalone_path_stem(file: &str) -> String {
    let relative = file.strip_prefix("audits/").unwrap_or(file);
    let stem = relative.strip_suffix(".sql").unwrap_or(relative);
    format!("compiled/audits/{stem}")
}

/// Every `AUDIT` block of one file under `audits/` (not `audits/generic/`).
pub(crate) fn standalone(file: &str, text: &str) -> Result<Vec<Draft>, Diagnostic> {
    let blocks = crate::blocks::split(text, "AUDIT").map_err(|e| {
        e.into_diagnostic(
            CODE,
            file,
            text,
            "SQL audit",
            "write AUDIT (name my_audit); then the SELECT that returns failing rows",
        )
    })?;
    let mut drafts: Vec<Draft> = Vec::new();
    for block in &blocks {
        let mut options = Options::default();
        for (key, value) in &block.entries {
            options.read(&key.value, &value.value).map_err(|message| {
                fail(
                    file,
                    text,
                    block.header_offset + key.offset,
                    format!("AUDIT() in '{file}': {message}"),
                    "AUDIT headers take severity, description, name, every, warmup, scheduled",
                )
            })?;
        }
        single_query(block.body).map_err(|(offset, message)| {
            fail(
                file,
                text,
                block.body_offset + offset,
                format!("SQL audit '{file}' {message}"),
                "an audit body is one SELECT (or set operation) returning the failing rows",
            )
        })?;
        if blocks.len() > 1 {
            let Some(name) = &options.name else {
                return Err(fail(
                    file,
                    text,
                    block.keyword_offset,
                    format!(
                        "SQL audit '{file}' has several AUDIT blocks; every block needs a unique name"
                    ),
                    "add name ... to each AUDIT header",
                ));
            };
            if drafts.iter().any(|d| d.name.as_ref() == Some(name)) {
                return Err(fail(
                    file,
                    text,
                    block.keyword_offset,
                    format!("SQL audit '{file}' repeats the audit name '{name}'"),
                    "give each block its own name",
                ));
            }
        }
        drafts.push(Draft {
            name: options.name.clone(),
            file: file.to_owned(),
            path_stem: standalone_path_stem(file),
            attachment: Attachment::Standalone,
            model: None,
            column: None,
            generic: None,
            query: block.body.to_owned(),
            options,
            location: Location::at(file, Position::of_offset(text, block.keyword_offset)),
        });
    }
    Ok(drafts)
}

/// Exactly one SELECT, WITH or parenthesised query; a single trailing `;` is allowed.
/// Returns the offending offset and a message.
pub(crate) fn single_query(sql: &str) -> Result<(), (usize, String)> {
    let tokens: Vec<_> = lex(sql)
        .map_err(|e| (e.offset, e.message))?
        .into_iter()
        .filter(|t| !t.is_trivia())
        .collect();
    let Some(first) = tokens.first() else {
        return Err((0, "has an empty query".to_owned()));
    };
    if !(first.is_keyword("SELECT") || first.is_keyword("WITH") || first.is_punct("(")) {
        return Err((
            first.start,
            format!(
                "must be a SELECT query (or a set operation), not one starting with '{}'",
                first.text
            ),
        ));
    }
    let mut depth = 0_i64;
    for (index, token) in tokens.iter().enumerate() {
        if token.is_punct("(") {
            depth += 1;
        } else if token.is_punct(")") {
            depth -= 1;
            if depth < 0 {
                return Err((token.start, "has an unmatched ')'".to_owned()));
            }
        } else if token.is_punct(";") && index + 1 != tokens.len() {
            return Err((
                token.start,
                "must contain exactly one query; found a second statement after ';'".to_owned(),
            ));
        }
    }
    if depth != 0 {
        return Err((sql.len(), "has an unclosed '('".to_owned()));
    }
    Ok(())
}

/// The models an audit reads: `__ref` only, every one a compiled model.
pub(crate) fn referenced_models(
    draft: &Draft,
    models: &BTreeSet<&str>,
) -> Result<Vec<String>, Diagnostic> {
    let name = draft.name.as_deref().unwrap_or(&draft.file);
    let problem = |message: String, hint: &str| {
        Diagnostic::new(CODE, message, hint).at(draft.location.clone())
    };
    let refs = stb_project::refs::extract(&draft.query)
        .map_err(|e| problem(format!("SQL audit '{name}': {}", e.message), "close it"))?;
    if refs.iter().any(|r| r.kind == RefKind::Source) {
        return Err(problem(
            format!("SQL audit '{name}' may only use __ref(...); __source(...) is not allowed"),
            "audit the model that reads the source instead",
        ));
    }
    if refs.is_empty() {
        return Err(problem(
            format!("SQL audit '{name}' must reference at least one model with __ref(...)"),
            "read the audited model as __ref(\"model_name\")",
        ));
    }
    let referenced: BTreeSet<String> = refs.into_iter().map(|r| r.name).collect();
    let unknown: Vec<&str> = referenced
        .iter()
        .map(String::as_str)
        .filter(|r| !models.contains(r))
        .collect();
    if !unknown.is_empty() {
        return Err(problem(
            format!(
                "SQL audit '{name}' references unknown models: {}",
                unknown.join(", ")
            ),
            &format!(
                "{}audits read compiled models; check the spelling, or audit a model instead of a source",
                unknown
                    .first()
                    .map(|typed| stb_diagnostics::suggest::did_you_mean(
                        typed,
                        models.iter().copied()
                    ))
                    .unwrap_or_default()
            ),
        ));
    }
    Ok(referenced.into_iter().collect())
}

/// A path segment an audit name may become: no separators, not `.`/`..`, not empty.
pub(crate) fn safe_segment(name: &str) -> bool {
    !(name.is_empty() || name == "." || name == ".." || name.contains(['/', '\\']))
}

/// Every audit of the project: standalone files, then header instances in model order.
/// Names are unique and become path segments.
pub(crate) fn compile(
    project: &stb_project::Project,
    analysed: &[crate::model::AnalysedModel<'_>],
    diagnostics: &mut stb_diagnostics::Diagnostics,
) -> Vec<CompiledAudit> {
    let mut drafts = Vec::new();
    for (file, text) in &project.audit_files {
        match standalone(file, text) {
            Ok(found) => drafts.extend(found),
            Err(problem) => diagnostics.push(problem),
        }
    }
    let definitions = definitions(&with_builtins(&project.generic_audit_files), diagnostics);
    drafts.extend(instances(analysed, &definitions, diagnostics));
    let models: BTreeSet<&str> = analysed.iter().map(|a| a.model.name.as_str()).collect();
    let defaults = ModelDefaults::of(project);
    let mut audits: Vec<CompiledAudit> = Vec::new();
    for draft in drafts {
        let location = draft.location.clone();
        let resolved = referenced_models(&draft, &models)
            .and_then(|referenced| resolve(draft, referenced, &defaults));
        let audit = match resolved {
            Ok(audit) => audit,
            Err(problem) => {
                diagnostics.push(problem);
                continue;
            }
        };
        let refuse =
            |message: String, hint: &str| Diagnostic::new(CODE, message, hint).at(location.clone());
        if !safe_segment(&audit.name) {
            diagnostics.push(refuse(
                format!("Unsafe audit artifact path segment '{}'", audit.name),
                "audit names become file names: no '/' or '\\', not '.' or '..'",
            ));
        } else if let Some(first) = audits.iter().find(|a| a.name == audit.name) {
            diagnostics.push(refuse(
                format!(
                    "Duplicate SQL audit name '{}' in '{}' and '{}'",
                    audit.name, first.file, audit.file
                ),
                "audit names are unique across the project; rename one",
            ));
        } else if let Some(first) = audits.iter().find(|a| a.path == audit.path) {
            diagnostics.push(refuse(
                format!(
                    "Multiple compile artifacts resolve to '{}' (audits '{}' and '{}')",
                    audit.path, first.name, audit.name
                ),
                "rename one of the audits",
            ));
        } else {
            audits.push(audit);
        }
    }
    audits
}

#[cfg(test)]
mod tests;
