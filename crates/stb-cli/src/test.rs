//! `stb test`: runs the project's SQL tests. Each compiled test is one statement that
//! rebuilds the model chain from mocks as CTEs (nothing is created) and returns the rows
//! that differ from the expectation, as a multiset: no rows means the test passed.

use std::io::Write;
use std::process::ExitCode;

use crate::output::{Failure, fail, print_json};

pub(crate) use crate::quality::QualityArgs as TestArgs;

/// One differing row: `missing` (expected, not produced) or `unexpected` (produced, not
/// expected), with how many times more.
#[derive(Debug, Clone, serde::Serialize)]
struct DiffRow {
    kind: String,
    values: Vec<Option<String>>,
    multiplicity: i64,
}

#[derive(Debug, serde::Serialize)]
struct TestResult {
    name: String,
    file: String,
    mode: String,
    status: &'static str,
    differences: Vec<DiffRow>,
    error: Option<String>,
    #[serde(skip)]
    sql: String,
}

impl TestResult {
    fn node_result(&self) -> stb_warehouse::records::NodeResult<'_> {
        stb_warehouse::records::NodeResult {
            kind: "test",
            name: &self.name,
            status: self.status,
            severity: None,
            failure_count: self.differences.iter().map(|d| d.multiplicity.unsigned_abs()).sum(),
            warmup_seconds: 0,
            definition: &self.sql,
            payload_json: serde_json::json!({"file": self.file, "mode": self.mode, "differences": self.differences}).to_string(),
            error_message: self.error.as_deref(),
        }
    }
}

const CODE_FAILED: &str = "STB-TEST-001";

pub(crate) fn run(args: &TestArgs) -> ExitCode {
    let (project, compiled) = match args.project.compile(args.json) {
        Ok(compiled) => compiled,
        Err(code) => return code,
    };
    match run_tests(args, &project, &compiled) {
        Ok(results) => print(args.json, &results),
        Err(failure) => fail(&failure, args.json),
    }
}

fn run_tests(
    args: &TestArgs,
    project: &stb_project::Project,
    compiled: &stb_compile::Compiled,
) -> Result<Vec<TestResult>, Failure> {
    let started = std::time::SystemTime::now();
    let tests = &compiled.tests;
    let selected = crate::quality::selected_models(
        compiled,
        &args.select,
        stb_graph::parse_test_selector,
        "test",
    )?;
    let (client, database) = args.connection.connect(project)?;
    let mut results = Vec::new();
    let mut executed = Vec::new();
    for test in tests.iter().filter(|t| {
        selected
            .as_ref()
            .is_none_or(|models| t.targets.iter().any(|m| models.contains(m)))
    }) {
        let sql = test.statement.clone();
        executed.push((format!("{}.sql", test.name), sql.clone()));
        let result = match client.query(&sql) {
            Ok(rows) => {
                let mut differences: Vec<DiffRow> = (0..rows.data.len())
                    .map(|row| DiffRow {
                        kind: rows.text(row, "_diff_type").unwrap_or_default(),
                        values: rows
                            .names
                            .iter()
                            .position(|n| n == "_row_values")
                            .and_then(|column| rows.data[row].get(column))
                            .and_then(serde_json::Value::as_array)
                            .map(|values| {
                                values
                                    .iter()
                                    .map(|v| v.as_str().map(str::to_owned))
                                    .collect()
                            })
                            .unwrap_or_default(),
                        multiplicity: rows
                            .text(row, "_multiplicity")
                            .and_then(|m| m.parse().ok())
                            .unwrap_or(1),
                    })
                    .collect();
                // Missing rows first, then unexpected ones, each in value order: the same
                // report every time.
                differences.sort_by(|a, b| (&a.kind, &a.values).cmp(&(&b.kind, &b.values)));
                TestResult {
                    name: test.name.clone(),
                    file: test.file.clone(),
                    mode: test.mode.to_owned(),
                    status: if differences.is_empty() {
                        "passed"
                    } else {
                        "failed"
                    },
                    differences,
                    error: None,
                    sql: sql.clone(),
                }
            }
            Err(error) => TestResult {
                name: test.name.clone(),
                file: test.file.clone(),
                mode: test.mode.to_owned(),
                status: "error",
                differences: Vec::new(),
                error: Some(error.to_string()),
                sql: sql.clone(),
            },
        };
        results.push(result);
    }
    crate::quality::write_run(&project.root, "tests", &executed)?;
    crate::quality::record_run(
        &client,
        &database,
        project,
        &crate::quality::RecordedRun {
            command: "test",
            trigger: "manual",
            deployment_id: None,
        },
        results.iter().all(|r| r.status == "passed"),
        &results
            .iter()
            .map(TestResult::node_result)
            .collect::<Vec<_>>(),
        started,
    );
    Ok(results)
}

fn print(json: bool, results: &[TestResult]) -> ExitCode {
    let passed = results.iter().filter(|r| r.status == "passed").count();
    let failed = results.len() - passed;
    if json {
        print_json(&serde_json::json!({
            "results": results,
            "passed": passed,
            "failed": failed,
        }));
    } else {
        let mut out = std::io::stdout().lock();
        for result in results {
            let _ = writeln!(
                out,
                "{}  {}  ({})",
                crate::quality::status_label(result.status),
                result.name,
                result.file
            );
            if let Some(error) = &result.error {
                let _ = writeln!(out, "    error: {error}");
            }
            for row in &result.differences {
                let values: Vec<String> = row
                    .values
                    .iter()
                    .map(|v| v.clone().unwrap_or_else(|| "NULL".to_owned()))
                    .collect();
                let _ = writeln!(
                    out,
                    "    {} x{}: ({})",
                    row.kind,
                    row.multiplicity,
                    values.join(", ")
                );
            }
        }
        let _ = writeln!(out, "Results: {passed} passed, {failed} failed");
    }
    if failed == 0 {
        ExitCode::SUCCESS
    } else {
        if !json {
            let _ = writeln!(
                std::io::stderr().lock(),
                "error[{CODE_FAILED}]: {failed} SQL test(s) failed\n  hint: each failure lists the rows that are missing or unexpected; the executed SQL is under target/run/tests/"
            );
        }
        ExitCode::from(1)
    }
}
