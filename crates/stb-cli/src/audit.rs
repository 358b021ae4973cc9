//! `stb audit`: runs the project's SQL audits against the live relations. An audit's rows
//! are failures; an audit whose relations do not exist yet is deferred, not failed.

use std::io::Write;
use std::process::ExitCode;

use crate::output::{Failure, fail, print_json};

pub(crate) use crate::quality::QualityArgs as AuditArgs;

/// A compiled audit, as the manifest lists it.
#[derive(Debug, serde::Deserialize)]
pub(crate) struct AuditEntry {
    pub(crate) name: String,
    file: String,
    path: String,
    severity: String,
    #[serde(default)]
    pub(crate) models: Vec<String>,
    #[serde(default)]
    pub(crate) warmup_seconds: u64,
}

#[derive(Debug, serde::Serialize)]
pub(crate) struct AuditResult {
    name: String,
    file: String,
    severity: String,
    /// `passed`, `failed` (error severity), `warning`, `deferred` or `error`.
    pub(crate) status: &'static str,
    failing_rows: u64,
    /// Rows in each relation the audit reads, when they could be counted: an audit that
    /// passes over an empty relation checked nothing, and says so.
    checked_rows: Vec<CheckedRelation>,
    /// Up to five failing rows, column name to value.
    sample: Vec<serde_json::Map<String, serde_json::Value>>,
    message: Option<String>,
    #[serde(skip)]
    warmup_seconds: u64,
    #[serde(skip)]
    sql: String,
}

/// One relation an audit read and its row count.
#[derive(Debug, Clone, serde::Serialize)]
pub(crate) struct CheckedRelation {
    model: String,
    rows: u64,
}

impl AuditResult {
    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    /// An audit that could not run at all.
    pub(crate) fn unrun(name: &str, severity: &str, message: String) -> Self {
        Self {
            name: name.to_owned(),
            file: String::new(),
            severity: severity.to_owned(),
            status: "error",
            failing_rows: 0,
            checked_rows: Vec::new(),
            sample: Vec::new(),
            message: Some(message),
            warmup_seconds: 0,
            sql: String::new(),
        }
    }

    /// An audit that runs later.
    pub(crate) fn deferred(audit: &AuditEntry, why: &str) -> Self {
        Self {
            name: audit.name.clone(),
            file: audit.file.clone(),
            severity: audit.severity.clone(),
            status: "deferred",
            failing_rows: 0,
            checked_rows: Vec::new(),
            sample: Vec::new(),
            message: Some(why.to_owned()),
            warmup_seconds: audit.warmup_seconds,
            sql: String::new(),
        }
    }

    /// A failure that fails the run: an error-severity audit that failed, or that the
    /// warehouse could not run. A warning-severity audit never fails it.
    pub(crate) fn is_error(&self) -> bool {
        self.status == "failed" || (self.status == "error" && self.severity != "warning")
    }

    /// A failure of a warning-severity audit: failing rows, or the warehouse refused it.
    pub(crate) fn is_warning(&self) -> bool {
        self.severity == "warning" && (self.status == "warning" || self.status == "error")
    }

    /// The row `_streambuild_node_results` keeps.
    pub(crate) fn node_result(&self) -> stb_build::records::NodeResult<'_> {
        stb_build::records::NodeResult {
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
                "message": self.message,
                "checked_rows": self.checked_rows,
            })
            .to_string(),
            error_message: self.message.as_deref().filter(|_| self.status == "error"),
        }
    }
}

const SAMPLE_ROWS: usize = 5;
const CODE_FAILED: &str = "STB-AUDIT-001";

pub(crate) fn run(args: &AuditArgs) -> ExitCode {
    let (project, compiled) = match args.project.compile(args.json) {
        Ok(compiled) => compiled,
        Err(code) => return code,
    };
    match run_audits(args, &project, &compiled) {
        Ok(results) => print(args.json, &results),
        Err(failure) => fail(&failure, args.json),
    }
}

/// The audit query with each `__ref("model")` replaced by the model's relation.
fn resolve(query: &str, compiled: &stb_compile::Compiled) -> Result<String, String> {
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
        text.push_str(&model.reference);
        last = reference.span.1;
    }
    text.push_str(&query[last..]);
    Ok(text)
}

fn run_audits(
    args: &AuditArgs,
    project: &stb_project::Project,
    compiled: &stb_compile::Compiled,
) -> Result<Vec<AuditResult>, Failure> {
    let started = std::time::SystemTime::now();
    let audits: Vec<AuditEntry> = crate::quality::manifest_section(compiled, "audits")?;
    let selected = crate::quality::selected_models(
        compiled,
        &args.select,
        stb_graph::parse_audit_selector,
        "audit",
    )?;
    let (client, database) = args.connection.connect(project)?;
    let chosen: Vec<&AuditEntry> = audits
        .iter()
        .filter(|a| {
            selected
                .as_ref()
                .is_none_or(|models| a.models.iter().any(|m| models.contains(m)))
        })
        .collect();
    let (results, executed) = run_set(&client, &database, compiled, &chosen)?;
    crate::quality::write_run(&project.root, "audits", &executed)?;
    let errors = results.iter().filter(|r| r.is_error()).count();
    crate::quality::record_run(
        &client,
        &database,
        project,
        "audit",
        errors == 0,
        &results
            .iter()
            .map(AuditResult::node_result)
            .collect::<Vec<_>>(),
        started,
    );
    Ok(results)
}

/// Statements that ran: file name and SQL, for `target/run/`.
pub(crate) type Executed = Vec<(String, String)>;

/// Runs `audits` against `database`; their results and the counting statements.
pub(crate) fn run_set(
    client: &stb_warehouse::Client,
    database: &str,
    compiled: &stb_compile::Compiled,
    audits: &[&AuditEntry],
) -> Result<(Vec<AuditResult>, Executed), Failure> {
    let catalog = client
        .load_catalog(database)
        .map_err(|e| Failure::from(&e))?;
    let counts = relation_counts(client, compiled, &catalog, audits);
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
            message: None,
            warmup_seconds: audit.warmup_seconds,
            sql: String::new(),
        };
        let missing: Vec<&str> = audit
            .models
            .iter()
            .filter(|name| {
                compiled
                    .plan_models
                    .iter()
                    .find(|m| &m.name == *name)
                    .is_none_or(|m| {
                        m.relations
                            .iter()
                            .any(|(_, r)| catalog.relation(r).is_none())
                    })
            })
            .map(String::as_str)
            .collect();
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
        let query = compiled
            .files
            .get(&audit.path)
            .map(|q| resolve(q, compiled))
            .transpose()
            .map_err(|message| Failure {
                code: CODE_FAILED,
                message: format!("audit '{}': {message}", audit.name),
                hint: "recompile the project".to_owned(),
            })?
            .unwrap_or_default();
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
    compiled: &stb_compile::Compiled,
    catalog: &stb_warehouse::Catalog,
    audits: &[&AuditEntry],
) -> std::collections::BTreeMap<String, u64> {
    let models: std::collections::BTreeSet<&str> = audits
        .iter()
        .flat_map(|a| a.models.iter().map(String::as_str))
        .collect();
    let counted: Vec<(&str, String)> = models
        .into_iter()
        .filter_map(|name| compiled.plan_models.iter().find(|m| m.name == name))
        .filter(|m| {
            m.relations
                .iter()
                .all(|(_, r)| catalog.relation(r).is_some())
        })
        .map(|m| {
            (
                m.name.as_str(),
                format!(
                    "SELECT {} AS model, count() AS rows FROM {}",
                    stb_ddl::string_literal(&m.name),
                    m.reference
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

/// `PASS (0 rows)`, `FAIL (a: 3 rows, b: 0 rows)`: what the audit checked.
fn status_with_rows(result: &AuditResult) -> String {
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

/// The audits that ran over at least one relation with no rows: a pass proves nothing
/// there.
pub(crate) fn over_empty_relations(results: &[AuditResult]) -> Vec<&str> {
    results
        .iter()
        .filter(|r| r.checked_rows.iter().any(|c| c.rows == 0))
        .map(AuditResult::name)
        .collect()
}

fn print(json: bool, results: &[AuditResult]) -> ExitCode {
    let errors = results.iter().filter(|r| r.is_error()).count();
    let warnings = results.iter().filter(|r| r.is_warning()).count();
    let verdict = if errors == 0 { "PASS" } else { "FAIL" };
    let over_empty = over_empty_relations(results);
    if json {
        print_json(&serde_json::json!({
            "results": results,
            "result": verdict,
            "errors": errors,
            "warnings": warnings,
            "error_failure_count": errors,
            "warning_failure_count": warnings,
            "over_empty_relations": over_empty,
        }));
    } else {
        print_lines(results);
        let _ = writeln!(
            std::io::stdout().lock(),
            "Result: {verdict} ({errors} errors, {warnings} warnings)"
        );
    }
    if errors == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}

/// One line per audit, its message and its sample rows.
pub(crate) fn print_lines(results: &[AuditResult]) {
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
    let over_empty = over_empty_relations(results);
    if !over_empty.is_empty() {
        let _ = writeln!(
            out,
            "Note: {} audits ran over an empty relation and checked nothing there: {}",
            over_empty.len(),
            over_empty.join(", ")
        );
    }
}
