//! The `stb` command line: argument parsing, dispatch and output.

mod admin;
mod args;
mod audit;
mod auth_args;
mod build;
mod build_render;
mod compile;
mod control;
mod deployment;
mod destruction;
mod dev;
mod discover;
mod init;
mod lineage;
mod local;
mod maintenance;
mod output;
mod plan;
mod plan_render;
mod quality;
mod reconcile;
mod run_artifacts;
mod run_context;
mod runs;
mod secret_input;
mod sensors;
mod staged_render;
mod status;
mod test;
mod unlock;
mod virtual_target;
mod warehouse;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// StreamBuild turns a folder of typed SQL into ClickHouse streaming pipelines, with
/// replay-aware rebuilds from retained Kafka history.
#[derive(Debug, Parser)]
#[command(
    name = "stb",
    version,
    about,
    long_about = None,
    propagate_version = true,
    after_help = "Start here: docs/install.md (the wheel, completions, colour), docs/quickstart.md \
(a first project in five minutes), docs/concepts.md (for people arriving from dbt or \
SQLMesh), docs/troubleshooting.md (my build failed half-way: what now)."
)]
struct Cli {
    /// Colour errors and hints: auto (at a terminal, unless NO_COLOR is set), always, never.
    #[arg(long, global = true, value_enum, value_name = "WHEN", default_value_t = output::ColorWhen::Auto)]
    color: output::ColorWhen,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Start a new project that builds on the local stack as written: a Kafka source, two
    /// models, a test and an audit (docs/quickstart.md).
    Init(init::InitArgs),
    /// Inspect the project: pipelines, their mode, protection, source and models.
    Discover(discover::DiscoverArgs),
    /// Compile models and sources to ClickHouse DDL and artifacts under target/ (offline).
    Compile(compile::CompileArgs),
    /// Trace a column to where its values come from: the models it is computed from, down
    /// to a source's column and JSON path (offline).
    Lineage(lineage::LineageArgs),
    /// Run a local ClickHouse server and Kafka broker, no Docker needed.
    #[command(subcommand)]
    Local(local::LocalCommand),
    /// Show what a build would do, read-only: a direct rebuild and replay, or what a new
    /// virtual deployment would stage.
    Plan(plan::PlanArgs),
    /// Build the selection: direct pipelines are dropped, recreated and replayed in place;
    /// virtual ones get a new deployment beside production (asks first; docs/build.md,
    /// docs/deployments.md).
    Build(build::BuildArgs),
    /// Virtual deployments: list, show, diff, audit, promote, roll back.
    #[command(subcommand)]
    Deployment(deployment::DeploymentCommand),
    /// Drop the relations of deployments that are no longer needed (dry run unless
    /// --apply; never the active, newest or recently built ones, nor rollback points).
    Janitor(maintenance::JanitorArgs),
    /// Report each stable view's binding and what to run when one is wrong (read-only).
    Doctor(virtual_target::Common),
    /// Repair what `stb doctor` reports.
    #[command(subcommand)]
    Repair(maintenance::RepairCommand),
    /// Drop the relations of whole pipelines (interactive: review, then type the
    /// challenges; re-planned under the target lock).
    Destroy(destruction::DestroyArgs),
    /// Drop everything the project owns in the target, landings included (interactive).
    ResetTarget(destruction::ResetArgs),
    /// Adopt the live tables and views as built from the project, without rebuilding
    /// (after a change applied by hand); a dry run unless --apply.
    Reconcile(reconcile::ReconcileArgs),
    /// Run the SQL tests under tests/: each rebuilds its model chain from mocks and compares
    /// rows as a multiset (nothing is created in the warehouse).
    Test(test::TestArgs),
    /// Run the SQL audits under audits/ against the live relations.
    Audit(audit::AuditArgs),
    /// Recent runs with their status (running, unresponsive, presumed failed, ...), and one
    /// run's timeline.
    #[command(subcommand)]
    Runs(runs::RunsCommand),
    /// The project's sensors (Python automation under sensors/, run by `stb dev`).
    #[command(subcommand)]
    Sensors(sensors::SensorsCommand),
    /// Break the target's mutation lock left by a killed command (refused while its run
    /// still heartbeats).
    Unlock(unlock::UnlockArgs),
    /// Serve the web UI and JSON API for this project on 127.0.0.1:8000: plans, builds,
    /// runs, deployments, audits, messages, with sign-in and project roles
    /// (docs/dev-server.md, docs/ui.md).
    Dev(dev::DevArgs),
    /// Accounts of the control store (users, system roles, passwords) for `stb dev`;
    /// never opens a warehouse connection.
    Admin(admin::AdminArgs),
    /// The target now: its lock, live runs, and per source and model whether rows are
    /// arriving and how fresh the newest row is against the source's expectation.
    Status(status::StatusArgs),
    /// Print a shell completion script: `stb completions bash > ~/.local/share/bash-completion/completions/stb`
    /// (bash, zsh, fish, powershell, elvish; docs/install.md).
    Completions(CompletionsArgs),
}

#[derive(Debug, clap::Args)]
struct CompletionsArgs {
    /// The shell to complete in.
    #[arg(value_enum)]
    shell: clap_complete::Shell,
}

/// Parses the arguments, runs the command and returns the process exit code.
#[must_use]
pub fn run() -> ExitCode {
    let cli = Cli::parse();
    output::set_color(cli.color);
    match cli.command {
        Command::Init(args) => init::run(&args),
        Command::Discover(args) => discover::run(&args),
        Command::Compile(args) => compile::run(&args),
        Command::Lineage(args) => lineage::run(&args),
        Command::Local(command) => local::run(command),
        Command::Plan(args) => plan::run(&args),
        Command::Build(args) => build::run(&args),
        Command::Deployment(command) => deployment::run(&command),
        Command::Janitor(args) => maintenance::janitor(&args),
        Command::Doctor(args) => maintenance::doctor(&args),
        Command::Repair(command) => maintenance::repair(&command),
        Command::Reconcile(args) => reconcile::run(&args),
        Command::Destroy(args) => destruction::destroy(&args),
        Command::ResetTarget(args) => destruction::reset(&args),
        Command::Test(args) => test::run(&args),
        Command::Audit(args) => audit::run(&args),
        Command::Unlock(args) => unlock::run(&args),
        Command::Runs(command) => runs::run(&command),
        Command::Sensors(command) => sensors::run(&command),
        Command::Status(args) => status::run(&args),
        Command::Admin(args) => admin::run(&args),
        Command::Dev(args) => dev::run(&args),
        Command::Completions(args) => {
            use clap::CommandFactory;
            use std::io::Write as _;
            // Generated into memory first: the generator panics on a write error, and a
            // reader that stops early (`| head`) is not an error worth one.
            let mut script = Vec::new();
            clap_complete::generate(args.shell, &mut Cli::command(), "stb", &mut script);
            let _ = std::io::stdout().lock().write_all(&script);
            ExitCode::SUCCESS
        }
    }
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    #[test]
    fn the_command_tree_is_consistent() {
        super::Cli::command().debug_assert();
    }

    /// A command parses, calls and renders; what two commands share lives in a shared
    /// module (`args`, `direct`, `plan_render`, `quality`, ...) or in a library crate.
    #[test]
    fn no_command_module_imports_another() {
        const COMMANDS: [&str; 17] = [
            "admin",
            "audit",
            "build",
            "compile",
            "deployment",
            "destruction",
            "dev",
            "discover",
            "init",
            "local",
            "maintenance",
            "plan",
            "reconcile",
            "runs",
            "status",
            "test",
            "unlock",
        ];
        let src = std::path::Path::new(
            &std::env::var_os("CARGO_MANIFEST_DIR").expect("set by cargo when it runs a test"),
        )
        .join("src");
        for command in COMMANDS {
            let mut files = vec![src.join(format!("{command}.rs"))];
            if let Ok(entries) = std::fs::read_dir(src.join(command)) {
                files.extend(entries.filter_map(Result::ok).map(|e| e.path()));
            }
            for file in files.iter().filter(|f| f.exists()) {
                let text = std::fs::read_to_string(file).expect("source");
                for other in COMMANDS.iter().filter(|c| **c != command) {
                    assert!(
                        !text.contains(&format!("crate::{other}::")),
                        "{} imports the {other} command",
                        file.display()
                    );
                }
            }
        }
    }
}
