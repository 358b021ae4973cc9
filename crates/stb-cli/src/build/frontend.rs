//! The terminal's side of a build: progress on stderr (or `--events` lines on stdout), the
//! plan shown before the question, the questions themselves, Ctrl-C pointed at the build
//! once it runs, and `target/run/build/` kept beside the records.

use std::io::Write;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use stb_engine::build::Ran;
use stb_engine::build::operation::{Approval, Frontend};
use stb_engine::build::records::{EventHook, WarningHook};
use stb_engine::plan::{Plan, Prepared};

use super::BuildArgs;

pub(super) struct Terminal<'a> {
    pub(super) args: &'a BuildArgs,
    pub(super) project: &'a stb_project::Project,
}

impl Frontend for Terminal<'_> {
    fn event_hook(&self) -> Option<EventHook> {
        super::progress::event_hook(self.args.events, self.args.json)
    }

    fn warning_hook(&self) -> WarningHook {
        Box::new(super::warn)
    }

    fn show(&self, plan: &Plan) {
        if self.args.json || self.args.events {
            return;
        }
        let verbose = self.args.verbose;
        match plan {
            Plan::Direct(one) | Plan::Virtual(one) => match &one.staged {
                Some(staged) => crate::staged_render::print(staged, false, verbose),
                None => crate::plan_render::print(&one.planned, false, verbose),
            },
            Plan::Mixed { staged, direct } => {
                crate::staged_render::print_mixed(staged.staged.as_ref(), &direct.planned, verbose);
            }
        }
    }

    fn accept_shrink(&self, prepared: &Prepared) -> Approval {
        super::confirm::accept_shrink(self.args, prepared)
    }

    fn confirm(&self, prepared: &Prepared) -> Approval {
        super::confirm::confirm(self.args, self.project, prepared)
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
