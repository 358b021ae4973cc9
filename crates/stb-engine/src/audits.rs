//! Audits against the live relations: an audit's rows are failures; an audit whose
//! relations do not exist yet is deferred, not failed. `stb audit` and a build's audits
//! run the same function.

use stb_compile::{Audit, Compiled};
use stb_plan::direct::{PlanModel, RelationKind};

use crate::EngineError;

#[derive(Debug, serde::Serialize)]
pub struct AuditResult {
    pub name: String,
    pub file: String,
    pub severity: String,
    /// `passed`, `failed` (error severity), `warning`, `deferred` or `error`.
    pub status: &'static str,
    pub failing_rows: u64,
    /// Rows in each relation the audit reads, when they could be counted: an audit that
    /// passes over an empty relation checked nothing, and says so.
    pub checked_rows: Vec<CheckedRelation>,
    /// Up to five failing rows, column name to value.
    pub sample: Vec<serde_json::Map<String, serde_json::Value>>,
    /// The sample's columns in the audit query's order (the rows' maps keep none).
    pub sample_columns: Vec<String>,
    pub message: Option<String>,
    #[serde(skip)]
    warmup_seconds: u64,
    #[serde(skip)]
    sql: String,
}

/// One relation an audit read and its row count.
#[derive(Debug, Clone, serde::Serialize)]
pub struct CheckedRelation {
    pub model: String,
    pub rows: u64,
}

impl AuditResult {
    pub fn name(&self) -> &str {
        &self.name
    }

    /// An audit that could not run at all.
    pub fn unrun(name: &str, severity: &str, message: String) -> Self {
        Self {
            name: name.to_owned(),
            file: String::new(),
            severity: severity.to_owned(),
            status: "error",
            failing_rows: 0,
            checked_rows: Vec::new(),
            sample: Vec::new(),
            sample_columns: Vec::new(),
            message: Some(message),
            warmup_seconds: 0,
            sql: String::new(),
        }
    }

    /// An audit that runs later.
    pub fn deferred(audit: &Audit, why: &str) -> Self {
        Self {
            name: audit.name.clone(),
            file: audit.file.clone(),
            severity: audit.severity.clone(),
            status: "deferred",
            failing_rows: 0,
            checked_rows: Vec::new(),
            sample: Vec::new(),
            sample_columns: Vec::new(),
            message: Some(why.to_owned()),
            warmup_seconds: audit.warmup_seconds,
            sql: String::new(),
        }
    }

    /// A failure that fails the run: an error-severity audit that failed, or that the
    /// warehouse could not run. A warning-severity audit never fails it.
    pub fn is_error(&self) -> bool {
        self.status == "failed" || (self.status == "error" && self.severity != "warning")
    }

    /// A failure of a warning-severity audit: failing rows, or the warehouse refused it.
    pub fn is_warning(&self) -> bool {
        self.severity == "warning" && (self.status == "warning" || self.status == "error")
    }

    /// The row `_streambuild_node_results` keeps.
    pub fn node_result(&self) -> stb_warehouse::records::NodeResult<'_> {
        stb_warehouse::records::NodeResult {
            kind: "audit",
            name: &self.name,
            status: self.status,
            severity: Some(&self.severity),
            failure_count: self.failing_rows,
            warmup_seconds: self.warmup_seconds,
            definition: &self.sql,
            payload_json: serde_json::json!({
                "file": self.file,
                "failure_count": self.failing_rows,
                "sample_rows": self.sample,
                "sample_columns": self.sample_columns,
                "message": self.message,
                "checked_rows": self.checked_rows,
            })
            .to_string(),
            error_message: self.message.as_deref().filter(|_| self.status == "error"),
            schedule: None,
        }
    }
}

const SAMPLE_ROWS: usize = 5;
/// An audit that fails the run, or that cannot be run.
pub const AUDIT_CODE: &str = "STB-AUDIT-001";

/// Where an audit finds a model: the text its `__ref("model")` becomes and the relations
/// that must exist for the audit to run. Live audits read the stable relations; a
/// deployment's audit reads the deployment's copies.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placement {
    pub reference: String,
    pub relations: Vec<String>,
}

impl Placement {
    /// The model where readers find it: its table or view. (Its materialized view is
    /// not read, and a virtual pipeline's stable relation is a view with none beside it.)
    #[must_use]
    pub fn live(model: &PlanModel) -> Self {
        Self {
            reference: model.reference.clone(),
            relations: model
                .relations
                .iter()
                .filter(|(kind, _)| *kind != RelationKind::MaterializedView)
                .map(|(_, r)| r.clone())
                .collect(),
        }
    }
}

/// The models `audit` reads that are not built where `place` puts them (a relation
/// missing from `catalog`): such an audit is deferred, not failed.
#[must_use]
pub fn unbuilt_models<'a>(
    catalog: &stb_warehouse::Catalog,
    compiled: &Compiled,
    audit: &'a Audit,
    place: &dyn Fn(&PlanModel) -> Placement,
) -> Vec<&'a str> {
    audit
        .models
        .iter()
        .filter(|name| {
            compiled
                .plan_models
                .iter()
                .find(|m| &m.name == *name)
                .is_none_or(|m| {
                    place(m)
                        .relations
                        .iter()
                        .any(|r| catalog.relation(r).is_none())
                })
        })
        .map(String::as_str)
        .collect()
}

/// The audit query with each `__ref("model")` replaced by the model's placed relation.
fn resolve(
    query: &str,
    compiled: &Compiled,
    place: &dyn Fn(&PlanModel) -> Placement,
) -> Result<String, String> {
    let refs = stb_project::refs::extract(query).map_err(|e| e.message)?;
    let mut text = String::with_capacity(query.len());
    let mut last = 0;
    for reference in refs {
        let model = compiled
            .plan_models
            .iter()
            .find(|m| m.name == reference.name)
            .ok_or_else(|| format!("unknown model '{}'", reference.name))?;
        text.push_str(&query[last..reference.span.0]);
        text.push_str(&place(model).reference);
        last = reference.span.1;
    }
    text.push_str(&query[last..]);
    Ok(text)
}

/// Statements that ran: file name and SQL, for `target/run/`.
pub type Executed = Vec<(String, String)>;

/// Runs `audits` against the live relations of `database`; their results and the
/// counting statements.
///
/// # Errors
/// The catalog could not be read, or an audit's query no longer resolves.
pub fn run_set(
    client: &stb_warehouse::Client,
    database: &str,
    compiled: &Compiled,
    audits: &[&Audit],
) -> Result<(Vec<AuditResult>, Executed), EngineError> {
    run_placed(client, database, compiled, audits, &Placement::live)
}

/// Runs `audits` with each model read where `place` puts it.
///
/// # Errors
/// The catalog could not be read, or an audit's query no longer resolves.
pub fn run_placed(
    client: &stb_warehouse::Client,
    database: &str,
    compiled: &Compiled,
    audits: &[&Audit],
    place: &dyn Fn(&PlanModel) -> Placement,
) -> Result<(Vec<AuditResult>, Executed), EngineError> {
    if audits.is_empty() {
        // Nothing to read: a build without audits asks the catalog nothing.
        return Ok((Vec::new(), Vec::new()));
    }
    let catalog = client
        .load_catalog(database)
        .map_err(|e| EngineError::from(&e))?;
    let counts = relation_counts(client, compiled, &catalog, audits, place);
    let mut results = Vec::new();
    let mut executed = Vec::new();
    for audit in audits {
        let mut result = AuditResult {
            name: audit.name.clone(),
            file: audit.file.clone(),
            severity: audit.severity.clone(),
            status: "passed",
            failing_rows: 0,
            checked_rows: Vec::new(),
            sample: Vec::new(),
            sample_columns: Vec::new(),
            message: None,
            warmup_seconds: audit.warmup_seconds,
            sql: String::new(),
        };
        let missing = unbuilt_models(&catalog, compiled, audit, place);
        if !missing.is_empty() {
            result.status = "deferred";
            result.message = Some(format!("not built yet: {}", missing.join(", ")));
            results.push(result);
            continue;
        }
        result.checked_rows = audit
            .models
            .iter()
            .filter_map(|model| {
                counts.get(model).map(|rows| CheckedRelation {
                    model: model.clone(),
                    rows: *rows,
                })
            })
            .collect();
        let query = resolve(&audit.query, compiled, place).map_err(|message| {
            EngineError::new(
                AUDIT_CODE,
                format!("audit '{}': {message}", audit.name),
                "recompile the project",
            )
        })?;
        let body = query.trim_end().trim_end_matches(';');
        let count_sql =
            format!("SELECT count() AS failing_row_count FROM ({body}) AS __streambuild_audit");
        let sample_sql =
            format!("SELECT * FROM ({body}) AS __streambuild_audit LIMIT {SAMPLE_ROWS}");
        executed.push((
            format!("{}.sql", audit.name.replace('/', "_")),
            count_sql.clone(),
        ));
        match client
            .query(&count_sql)
            .and_then(|count| Ok((count, client.query(&sample_sql)?)))
        {
            Ok((count, sample)) => {
                result.failing_rows = count
                    .text(0, "failing_row_count")
                    .and_then(|n| n.parse().ok())
                    .unwrap_or(0);
                result.sample_columns.clone_from(&sample.names);
                result.sample = sample
                    .data
                    .iter()
                    .map(|row| {
                        sample
                            .names
                            .iter()
                            .cloned()
                            .zip(row.iter().cloned())
                            .collect()
                    })
                    .collect();
                if result.failing_rows > 0 {
                    result.status = if audit.severity == "warning" {
                        "warning"
                    } else {
                        "failed"
                    };
                }
            }
            Err(error) => {
                result.status = "error";
                result.message = Some(error.to_string());
            }
        }
        results.push(result);
    }
    Ok((results, executed))
}

/// Row counts of every existing relation the audits read, in one query (model name to
/// rows). A relation that cannot be counted is left out, and its audits show no count.
fn relation_counts(
    client: &stb_warehouse::Client,
    compiled: &Compiled,
    catalog: &stb_warehouse::Catalog,
    audits: &[&Audit],
    place: &dyn Fn(&PlanModel) -> Placement,
) -> std::collections::BTreeMap<String, u64> {
    let models: std::collections::BTreeSet<&str> = audits
        .iter()
        .flat_map(|a| a.models.iter().map(String::as_str))
        .collect();
    let by_name = stb_plan::work::ModelIndex::new(&compiled.plan_models);
    let counted: Vec<(&str, String)> = models
        .into_iter()
        .filter_map(|name| by_name.get(name))
        .map(|m| (m, place(m)))
        .filter(|(_, placed)| {
            placed
                .relations
                .iter()
                .all(|r| catalog.relation(r).is_some())
        })
        .map(|(m, placed)| {
            (
                m.name.as_str(),
                format!(
                    "SELECT {} AS model, count() AS rows FROM {}",
                    stb_ddl::string_literal(&m.name),
                    placed.reference
                ),
            )
        })
        .collect();
    let read = |sql: &str, into: &mut std::collections::BTreeMap<String, u64>| {
        let rows = client.query(sql).ok()?;
        for row in 0..rows.data.len() {
            if let (Some(model), Some(n)) = (
                rows.text(row, "model"),
                rows.text(row, "rows").and_then(|n| n.parse().ok()),
            ) {
                into.insert(model, n);
            }
        }
        Some(())
    };
    let mut counts = std::collections::BTreeMap::new();
    if counted.is_empty() {
        return counts;
    }
    let all: Vec<&str> = counted.iter().map(|(_, sql)| sql.as_str()).collect();
    if read(&all.join(" UNION ALL "), &mut counts).is_none() {
        // One relation that cannot be read (a broken view) keeps the others' counts.
        for (_, sql) in &counted {
            let _ = read(sql, &mut counts);
        }
    }
    counts
}

/// The audits that ran over at least one relation with no rows: a pass proves nothing
/// there.
pub fn over_empty_relations(results: &[AuditResult]) -> Vec<&str> {
    results
        .iter()
        .filter(|r| r.checked_rows.iter().any(|c| c.rows == 0))
        .map(AuditResult::name)
        .collect()
}

/// A build's audit phase: the audits that read a model the build rebuilt, run once the
/// workflow succeeded; those with a warm-up are deferred. A warehouse error in one audit
/// is recorded as `error` and the others still run; nothing is undone when they fail.
#[must_use]
pub fn after_build(
    client: &stb_warehouse::Client,
    database: &str,
    compiled: &Compiled,
    rebuilt: &[&str],
) -> Vec<AuditResult> {
    let chosen: Vec<&Audit> = compiled
        .audits
        .iter()
        .filter(|a| a.models.iter().any(|m| rebuilt.contains(&m.as_str())))
        .collect();
    let (now, later): (Vec<&Audit>, Vec<&Audit>) =
        chosen.into_iter().partition(|a| a.warmup_seconds == 0);
    let mut results = match run_set(client, database, compiled, &now) {
        Ok((results, _)) => results,
        Err(error) => vec![AuditResult::unrun("build_audits", "error", error.message)],
    };
    results.extend(
        later
            .iter()
            .map(|a| AuditResult::deferred(a, "waits for its warm-up after the build")),
    );
    results
}
