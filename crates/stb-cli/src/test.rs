//! `stb test`: runs the project's SQL tests. Each compiled test is one statement that
//! rebuilds the model chain from mocks as CTEs (nothing is created) and returns the rows
//! that differ from the expectation, as a multiset: no rows means the test passed.

use std::io::Write;
use std::process::ExitCode;

use stb_engine::sql_tests::TestResult;

use crate::output::{Failure, fail, print_json};

pub(crate) use crate::quality::QualityArgs as TestArgs;

const CODE_FAILED: &str = "STB-TEST-001";

pub(crate) fn run(args: &TestArgs) -> ExitCode {
    let (project, compiled) = match args
        .project
        .compile(args.json, args.connection.database.as_deref())
    {
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
    let chosen: Vec<&stb_compile::SqlTest> = tests
        .iter()
        .filter(|t| {
            selected
                .as_ref()
                .is_none_or(|models| t.targets.iter().any(|m| models.contains(m)))
        })
        .collect();
    let (results, executed) = stb_engine::sql_tests::run_set(&client, &chosen);
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
            crate::output::eprint_styled(&format!(
                "error[{CODE_FAILED}]: {failed} SQL test(s) failed\n  hint: each failure lists the rows that are missing or unexpected; the executed SQL is under target/run/tests/\n"
            ));
        }
        ExitCode::from(1)
    }
}
