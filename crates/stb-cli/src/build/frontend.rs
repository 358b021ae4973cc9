//! The terminal's side of a build: progress on stderr (or `--events` lines on stdout), the
//! plan shown before the question, the questions themselves (the shrink guard's, protected
//! pipelines' tokens, else a yes/no; unattended, the engine's rules decide alone), Ctrl-C
//! pointed at the build once it runs, and `target/run/build/` kept beside the records.

use std::io::Write;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use stb_engine::build::Ran;
use stb_engine::build::operation::{
    Approval, Frontend, missing_token, protected, unattended_shrink,
};
use stb_engine::build::records::{EventHook, WarningHook};
use stb_engine::plan::{Plan, Prepared};

use super::BuildArgs;

pub(super) struct Terminal<'a> {
    pub(super) args: &'a BuildArgs,
    pub(super) project: &'a stb_project::Project,
}

impl Frontend for Terminal<'_> {
    fn event_hook(&self) -> Option<EventHook> {
        crate::build_render::event_hook(self.args.events, self.args.json)
    }

    fn warning_hook(&self) -> WarningHook {
        Box::new(crate::build_render::warn)
    }

    fn show(&self, plan: &Plan) {
        if self.args.json || self.args.events {
            return;
        }
        crate::plan_render::print_plan(plan, self.args.verbose);
    }

    fn accept_shrink(&self, prepared: &Prepared) -> Approval {
        accept_shrink(self.args, prepared)
    }

    fn confirm(&self, prepared: &Prepared) -> Approval {
        confirm(self.args, self.project, prepared)
    }

    fn executing(&self, cancel: &Arc<AtomicBool>) {
        // From here an interrupt stops the workflow at a statement boundary (or kills the
        // statement in flight) instead of killing the process.
        for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
            let _ = signal_hook::flag::register(signal, Arc::clone(cancel));
        }
    }

    fn lock_wait(&self, holder: &str, owner: Option<&str>) {
        let _ = writeln!(
            std::io::stderr().lock(),
            "Waiting for run {holder}{} to release the target lock (it does not touch this build's models); Ctrl-C stops waiting",
            owner.map(|o| format!(" ({o})")).unwrap_or_default()
        );
    }

    fn ran(&self, prepared: &Prepared, ran: &Ran) -> Option<String> {
        crate::run_artifacts::write_build(
            &self.project.root,
            &prepared.planned.workflow,
            &ran.workflow_id,
            &ran.execution,
        )
        .err()
        .map(|failure| failure.message)
    }
}

fn unattended(args: &BuildArgs) -> bool {
    args.auto_approve || args.json || args.events
}

/// The shrink guard: a rebuild that would lose rows retained history cannot restore goes on
/// only with `--allow-shrink` or, at a terminal, a yes to a question that shows the numbers.
fn accept_shrink(args: &BuildArgs, prepared: &Prepared) -> Approval {
    let decided = unattended_shrink(prepared, args.allow_shrink);
    if unattended(args) || matches!(decided, Approval::Go) {
        return decided;
    }
    let lines = stb_engine::build::operation::shrink_lines(prepared);
    let _ = writeln!(
        std::io::stderr().lock(),
        "\nThis rebuild loses rows that retained history cannot restore:\n{}",
        lines.join("\n")
    );
    approved(&ask("Rebuild anyway and lose these rows? [y/N] "))
}

/// The answer to `prompt`, trimmed (a token typed with a stray space still counts).
pub(super) fn ask(prompt: &str) -> String {
    crate::output::ask(prompt)
        .unwrap_or_default()
        .trim()
        .to_owned()
}

/// Whether a reply to a yes/no question is a yes.
pub(super) fn yes(reply: &str) -> bool {
    matches!(reply.to_ascii_lowercase().as_str(), "y" | "yes")
}

/// [`yes`] as the approval a build goes on with.
fn approved(reply: &str) -> Approval {
    if yes(reply) {
        Approval::Go
    } else {
        Approval::Declined
    }
}

/// Asks for what the build needs: each protected pipeline's token, else a yes/no.
fn confirm(args: &BuildArgs, project: &stb_project::Project, prepared: &Prepared) -> Approval {
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
    approved(&ask("Proceed with build? [y/N] "))
}
