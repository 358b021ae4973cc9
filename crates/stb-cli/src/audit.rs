//! `stb audit`: runs the project's SQL audits against the live relations. An audit's rows
//! are failures; an audit whose relations do not exist yet is deferred, not failed.

use std::io::Write;
use std::process::ExitCode;

use crate::output::{Failure, fail, print_json};

pub(crate) use crate::quality::QualityArgs as AuditArgs;

/// A compiled audit, as the manifest lists it.
#[derive(Debug, serde::Deserialize)]
struct AuditEntry {
    name: String,
    file: String,
    path: String,
    severity: String,
    #[serde(default)]
    models: Vec<String>,
}

#[derive(Debug, serde::Serialize)]
struct AuditResult {
    name: String,
    file: String,
    severity: String,
    /// `passed`, `failed` (error severity), `warning`, `deferred` or `error`.
    status: &'static str,
    failing_rows: u64,
    /// Up to five failing rows, column name to value.
    sample: Vec<serde_json::Map<String, serde_json::Value>>,
    message: Option<String>,
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
    let audits: Vec<AuditEntry> = crate::quality::manifest_section(compiled, "audits")?;
    let selected = crate::quality::selected_models(
        compiled,
        &args.select,
        stb_graph::parse_audit_selector,
        "audit",
    )?;
    let (client, database) = args.connection.connect(project)?;
    let catalog = client
        .load_catalog(&database)
        .map_err(|e| Failure::from(&e))?;
    let mut results = Vec::new();
    let mut executed = Vec::new();
    for audit in audits.iter().filter(|a| {
        selected
            .as_ref()
            .is_none_or(|models| a.models.iter().any(|m| models.contains(m)))
    }) {
        let mut result = AuditResult {
            name: audit.name.clone(),
            file: audit.file.clone(),
            severity: audit.severity.clone(),
            status: "passed",
            failing_rows: 0,
            sample: Vec::new(),
            message: None,
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
    crate::quality::write_run(&project.root, "audits", &executed)?;
    Ok(results)
}

fn print(json: bool, results: &[AuditResult]) -> ExitCode {
    let errors = results
        .iter()
        .filter(|r| r.status == "failed" || r.status == "error")
        .count();
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
        let _ = writeln!(
            out,
            "Result: {verdict} ({errors} errors, {warnings} warnings)"
        );
    }
    if errors == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}
