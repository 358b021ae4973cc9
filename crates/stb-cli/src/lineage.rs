//! `stb lineage <model>.<column>`: where a column's values come from, through the models
//! it is computed from down to its sources (offline: read from the compiled project).

use std::io::Write;
use std::process::ExitCode;

use clap::Args;
use stb_compile::column_lineage::{InputKind, TRACE_CODE, Trace, trace};

use crate::args::ProjectArgs;
use crate::output::{Failure, fail, print_json};

#[derive(Debug, Args)]
pub(crate) struct LineageArgs {
    /// The column to trace, as <model>.<column> (e.g. customer_revenue.revenue_cents).
    #[arg(value_name = "MODEL.COLUMN")]
    column: String,
    #[command(flatten)]
    project: ProjectArgs,
    /// Print the traced tree as JSON on stdout (docs/models.md#column-lineage).
    #[arg(long)]
    json: bool,
}

pub(crate) fn run(args: &LineageArgs) -> ExitCode {
    let Some((model, column)) = args
        .column
        .split_once('.')
        .filter(|(m, c)| !m.is_empty() && !c.is_empty())
    else {
        return fail(
            &Failure {
                code: TRACE_CODE,
                message: format!("'{}' does not name a column", args.column),
                hint: "write <model>.<column>, e.g. customer_revenue.revenue_cents".to_owned(),
            },
            args.json,
        );
    };
    let (project, compiled) =
        match args
            .project
            .compile_for(args.json, None, stb_compile::Output::PlanOnly)
        {
            Ok(done) => done,
            Err(code) => return code,
        };
    match trace(&project, &compiled, model, column) {
        Ok(traced) if args.json => {
            print_json(&traced);
            ExitCode::SUCCESS
        }
        Ok(traced) => {
            let mut text = String::new();
            render(&traced, "", "", &mut text);
            let _ = std::io::stdout().lock().write_all(text.as_bytes());
            ExitCode::SUCCESS
        }
        Err(error) => fail(
            &Failure {
                code: error.code,
                message: error.message,
                hint: error.hint,
            },
            args.json,
        ),
    }
}

/// One line per traced column, its inputs indented below it.
fn render(traced: &Trace, first: &str, rest: &str, text: &mut String) {
    let what = match traced.kind {
        InputKind::Model => format!("{}.{}", traced.name, traced.column),
        InputKind::Source => format!("source {}: {}", traced.name, traced.column),
        InputKind::Relation => format!("relation {}: {}", traced.name, traced.column),
    };
    let mut line = format!("{first}{what}");
    if !traced.json_path.is_empty() {
        line.push_str(&format!(" at {}", traced.json_path.join(".")));
    }
    if let Some(derivation) = traced.derivation {
        line.push_str(&format!("  ({derivation})"));
    }
    if !traced.opaque.is_empty() {
        line.push_str(&format!("  opaque: {}", traced.opaque.join(", ")));
    }
    if !traced.unresolved.is_empty() {
        line.push_str(&format!(
            "  not traced: {} (no relation in scope is known to hold it, or more than one may)",
            traced.unresolved.join(", ")
        ));
    }
    if traced.truncated {
        line.push_str("  … (the tree stops here: it shows at most 2,000 columns)");
    }
    text.push_str(&line);
    text.push('\n');
    for (index, input) in traced.inputs.iter().enumerate() {
        let last = index + 1 == traced.inputs.len();
        let (branch, below) = if last {
            ("└─ ", "   ")
        } else {
            ("├─ ", "│  ")
        };
        render(
            input,
            &format!("{rest}{branch}"),
            &format!("{rest}{below}"),
            text,
        );
    }
}
