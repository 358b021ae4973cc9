//! Confirmation before a build touches the warehouse: protected pipelines' tokens, else a
//! yes/no question.

use std::io::{BufRead, Write};

use super::{BuildArgs, CODE_CONFIRMATION};
use crate::output::Failure;
use crate::plan::Prepared;

/// Asks for what the build needs: each protected pipeline's token, else a yes/no.
pub(super) fn confirm(
    args: &BuildArgs,
    project: &stb_project::Project,
    prepared: &Prepared,
) -> Result<bool, Failure> {
    let executing = prepared.executed_models();
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
    let stdin = std::io::stdin();
    let answer = |prompt: &str| -> String {
        let _ = write!(std::io::stderr().lock(), "{prompt}");
        let _ = std::io::stderr().flush();
        let mut line = String::new();
        let _ = stdin.lock().read_line(&mut line);
        line.trim().to_owned()
    };
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
                code: CODE_CONFIRMATION,
                message: format!(
                    "Confirmation required: rerun with --confirm {}",
                    guard.confirmation
                ),
                hint: "protected pipelines need their token even with --auto-approve".into(),
            });
        }
        if answer(&format!("Type {} to confirm: ", guard.confirmation)) != guard.confirmation {
            return Ok(false);
        }
    }
    if !protected.is_empty() || args.auto_approve {
        return Ok(true);
    }
    let reply = answer("Proceed with build? [y/N] ").to_ascii_lowercase();
    Ok(reply == "y" || reply == "yes")
}
