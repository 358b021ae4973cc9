//! Approval before a build touches the warehouse, at a terminal: the shrink guard's
//! question, protected pipelines' tokens, else a yes/no question. Unattended
//! (`--auto-approve`, `--json`, `--events`), the engine's rules decide alone.

use std::io::Write;

use stb_engine::build::operation::{Approval, missing_token, protected, unattended_shrink};
use stb_engine::plan::Prepared;

use super::BuildArgs;

fn unattended(args: &BuildArgs) -> bool {
    args.auto_approve || args.json || args.events
}

/// The shrink guard: a rebuild that would lose rows retained history cannot restore goes on
/// only with `--allow-shrink` or, at a terminal, a yes to a question that shows the numbers.
pub(super) fn accept_shrink(args: &BuildArgs, prepared: &Prepared) -> Approval {
    let decided = unattended_shrink(prepared, args.allow_shrink);
    if unattended(args) || matches!(decided, Approval::Go) {
        return decided;
    }
    let lines: Vec<String> = prepared
        .planned
        .shrinking()
        .iter()
        .map(|w| format!("  {}", w.describe()))
        .collect();
    let _ = writeln!(
        std::io::stderr().lock(),
        "\nThis rebuild loses rows that retained history cannot restore:\n{}",
        lines.join("\n")
    );
    yes(&ask("Rebuild anyway and lose these rows? [y/N] "))
}

/// The answer to `prompt`, trimmed (a token typed with a stray space still counts).
fn ask(prompt: &str) -> String {
    crate::output::ask(prompt)
        .unwrap_or_default()
        .trim()
        .to_owned()
}

fn yes(reply: &str) -> Approval {
    if matches!(reply.to_ascii_lowercase().as_str(), "y" | "yes") {
        Approval::Go
    } else {
        Approval::Declined
    }
}

/// Asks for what the build needs: each protected pipeline's token, else a yes/no.
pub(super) fn confirm(
    args: &BuildArgs,
    project: &stb_project::Project,
    prepared: &Prepared,
) -> Approval {
    let protected = protected(project, prepared);
    for (name, guard) in &protected {
        let _ = writeln!(
            std::io::stderr().lock(),
            "PROTECTED PIPELINE: {name}\n{}",
            guard.warning
        );
        if args.confirm.iter().any(|t| t == &guard.confirmation) {
            continue;
        }
        if unattended(args) {
            return Approval::Failed(missing_token(&guard.confirmation));
        }
        if ask(&format!("Type {} to confirm: ", guard.confirmation)) != guard.confirmation {
            return Approval::Declined;
        }
    }
    if !protected.is_empty() || args.auto_approve {
        return Approval::Go;
    }
    yes(&ask("Proceed with build? [y/N] "))
}
