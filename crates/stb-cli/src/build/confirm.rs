//! Confirmation before a build touches the warehouse: protected pipelines' tokens, else a
//! yes/no question.

use std::io::Write;

use stb_engine::build::{CONFIRMATION_CODE, SHRINK_CODE};

use super::BuildArgs;
use crate::output::Failure;
use stb_engine::plan::Prepared;

/// The shrink guard: a rebuild that would lose rows retained history cannot restore goes on
/// only with `--allow-shrink` or, at a terminal, a yes to a question that shows the numbers.
/// `Err` refuses the build unattended; `Ok(false)` is a declined question.
pub(super) fn accept_shrink(args: &BuildArgs, prepared: &Prepared) -> Result<bool, Failure> {
    let shrinking = prepared.planned.shrinking();
    // A deployment drops nothing readers see; its plan's warnings say what a promotion
    // would show fewer of.
    if shrinking.is_empty() || args.allow_shrink || prepared.planned.deployment.is_some() {
        return Ok(true);
    }
    let lines: Vec<String> = shrinking
        .iter()
        .map(|w| format!("  {}", w.describe()))
        .collect();
    if args.auto_approve || args.json || args.events {
        return Err(Failure {
            code: SHRINK_CODE,
            message: format!(
                "Refusing to rebuild: retained history cannot restore what these models hold now\n{}",
                lines.join("\n")
            ),
            hint: "nothing was dropped; rerun with --allow-shrink to accept the loss (protected pipelines still need --confirm), or restore the history (re-land the source, or choose a later --start-time) first".into(),
        });
    }
    let _ = writeln!(
        std::io::stderr().lock(),
        "\nThis rebuild loses rows that retained history cannot restore:\n{}",
        lines.join("\n")
    );
    let reply = ask("Rebuild anyway and lose these rows? [y/N] ").to_ascii_lowercase();
    Ok(reply == "y" || reply == "yes")
}

/// The answer to `prompt`, trimmed (a token typed with a stray space still counts).
fn ask(prompt: &str) -> String {
    crate::output::ask(prompt)
        .unwrap_or_default()
        .trim()
        .to_owned()
}

/// Asks for what the build needs: each protected pipeline's token, else a yes/no.
pub(super) fn confirm(
    args: &BuildArgs,
    project: &stb_project::Project,
    prepared: &Prepared,
) -> Result<bool, Failure> {
    let executing = prepared.planned.executed_models();
    let protected: Vec<(&str, &stb_project::pipelines::Protection)> = project
        .pipelines
        .iter()
        .filter(|p| {
            p.models
                .iter()
                .any(|m| executing.contains(&m.name.as_str()))
        })
        .filter_map(|p| p.protection.as_ref().map(|guard| (p.name.as_str(), guard)))
        .collect();
    let unattended = args.auto_approve || args.json || args.events;
    for (name, guard) in &protected {
        let _ = writeln!(
            std::io::stderr().lock(),
            "PROTECTED PIPELINE: {name}\n{}",
            guard.warning
        );
        if args.confirm.iter().any(|t| t == &guard.confirmation) {
            continue;
        }
        if unattended {
            return Err(Failure {
                code: CONFIRMATION_CODE,
                message: format!(
                    "Confirmation required: rerun with --confirm {}",
                    guard.confirmation
                ),
                hint: "protected pipelines need their token even with --auto-approve".into(),
            });
        }
        if ask(&format!("Type {} to confirm: ", guard.confirmation)) != guard.confirmation {
            return Ok(false);
        }
    }
    if !protected.is_empty() || args.auto_approve {
        return Ok(true);
    }
    let reply = ask("Proceed with build? [y/N] ").to_ascii_lowercase();
    Ok(reply == "y" || reply == "yes")
}
