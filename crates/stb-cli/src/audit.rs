//! `stb audit`: runs the project's SQL audits against the live relations. An audit's rows
//! are failures; an audit whose relations do not exist yet is deferred, not failed.

use std::io::Write;
use std::process::ExitCode;

use stb_engine::audits::{AuditResult, over_empty_relations, run_set};

use crate::output::{Failure, fail, print_json};
use crate::quality::print_lines;

pub(crate) use crate::quality::QualityArgs as AuditArgs;

pub(crate) fn run(args: &AuditArgs) -> ExitCode {
    let (project, compiled) = match args
        .project
        .compile(args.json, args.connection.database.as_deref())
    {
        Ok(compiled) => compiled,
        Err(code) => return code,
    };
    match run_audits(args, &project, &compiled) {
        Ok(results) => print(args.json, &results),
        Err(failure) => fail(&failure, args.json),
    }
}

fn run_audits(
    args: &AuditArgs,
    project: &stb_project::Project,
    compiled: &stb_compile::Compiled,
) -> Result<Vec<AuditResult>, Failure> {
    let started = std::time::SystemTime::now();
    let audits = &compiled.audits;
    let selected = crate::quality::selected_models(
        compiled,
        &args.select,
        stb_graph::parse_audit_selector,
        "audit",
    )?;
    let (client, database) = args.connection.connect(project)?;
    let chosen: Vec<&stb_compile::Audit> = audits
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
        &crate::quality::RecordedRun {
            command: "audit",
            trigger: "manual",
            deployment_id: None,
        },
        errors == 0,
        &results
            .iter()
            .map(AuditResult::node_result)
            .collect::<Vec<_>>(),
        started,
    );
    Ok(results)
}

fn print(json: bool, results: &[AuditResult]) -> ExitCode {
    let errors = results.iter().filter(|r| r.is_error()).count();
    let warnings = results.iter().filter(|r| r.is_warning()).count();
    let verdict = if errors == 0 { "PASS" } else { "FAIL" };
    if json {
        print_json(&serde_json::json!({
            "results": results,
            "result": verdict,
            "errors": errors,
            "warnings": warnings,
            "error_failure_count": errors,
            "warning_failure_count": warnings,
            "over_empty_relations": over_empty_relations(results),
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
