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
    /// Up to five failing rows, column name to value.
    sample: Vec<serde_json::Map<String, serde_json::Value>>,
    message: Option<String>,
    #[serde(skip)]
    warmup_seconds: u64,
    #[serde(skip)]
    sql: String,
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
            sample: Vec::new(),
            message: Some(why.to_owned()),
            warmup_seconds: audit.warmup_seconds,
            sql: String::new(),
        }
    }

    /// A failure that fails the run: error severity with failing rows, or an audit the
    /// warehouse could not run.
    pub(crate) fn is_error(&self) -> bool {
        self.status == "failed" || self.status == "error"
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
            payload_json: serde_json::json!({"file": self.file, "sample": self.sample, "message": self.message}).to_string(),
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
    let mut results = Vec::new();
    let mut executed = Vec::new();
    for audit in audits {
        let mut result = AuditResult {
            name: audit.name.clone(),
            file: audit.file.clone(),
            severity: audit.severity.clone(),
            status: "passed",
            failing_rows: 0,
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

fn print(json: bool, results: &[AuditResult]) -> ExitCode {
    let errors = results.iter().filter(|r| r.is_error()).count();
    let warnings = results.iter().filter(|r| r.status == "warning").count();
    let verdict = if errors == 0 { "PASS" } else { "FAIL" };
    if json {
        print_json(&serde_json::json!({
            "results": results,
            "result": verdict,
            "errors": errors,
            "warnings": warnings,
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
            result.status.to_ascii_uppercase(),
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
}
