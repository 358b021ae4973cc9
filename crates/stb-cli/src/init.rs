//! `stb init`: a new project that builds on the local stack as it is written.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Args;
use stb_project::project_config::Mode;
use stb_project::scaffold::{self, ScaffoldError, SourceKind};

use crate::output::{Failure, fail, print_json};

#[derive(Debug, Args)]
pub(crate) struct InitArgs {
    /// Directory of the new project (created when missing; default: the current one).
    #[arg(value_name = "DIR", default_value = ".")]
    dir: PathBuf,
    /// Project name (default: the directory's name as an identifier).
    #[arg(long, value_name = "NAME")]
    name: Option<String>,
    /// Read an adopted stream table (a ClickHouse table something else fills) instead of a
    /// Kafka topic; prints the table's DDL.
    #[arg(long)]
    adopted: bool,
    /// How the pipeline builds: direct (in place) or virtual (a staged deployment that
    /// `stb deployment promote` switches readers to; docs/quickstart.md).
    #[arg(long, value_enum, default_value_t = InitMode::Direct)]
    mode: InitMode,
    /// Print machine-readable JSON on stdout.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum InitMode {
    Direct,
    Virtual,
}

pub(crate) fn run(args: &InitArgs) -> ExitCode {
    let mode = match args.mode {
        InitMode::Direct => Mode::Direct,
        InitMode::Virtual => Mode::Virtual,
    };
    let name = match &args.name {
        Some(name) if stb_project::is_identifier(name) => name.clone(),
        Some(name) => {
            return fail(
                &Failure {
                    code: "STB-INIT-002",
                    message: format!("'{name}' is not a valid project name"),
                    hint: "use letters, digits and underscores, not starting with a digit"
                        .to_owned(),
                },
                args.json,
            );
        }
        None => scaffold::name_for(&args.dir),
    };
    let kind = if args.adopted {
        SourceKind::Adopted
    } else {
        SourceKind::Kafka
    };
    let written = match scaffold::write(&args.dir, &scaffold::files(&name, kind, mode)) {
        Ok(written) => written,
        Err(error) => return fail(&failure(&error), args.json),
    };
    let database = scaffold::database_for(&name);
    let next = next_steps(&args.dir, &name, &database, kind, mode);
    if args.json {
        print_json(&serde_json::json!({
            "project": name,
            "project_dir": args.dir,
            "database": database,
            "source": if args.adopted { "stream_table" } else { "kafka" },
            "mode": mode.as_str(),
            "adopted_table_ddl": args.adopted.then(|| scaffold::adopted_table_ddl(&database)),
            "files": written,
            "next": next,
        }));
    } else {
        let mut out = std::io::stdout().lock();
        let _ = writeln!(
            out,
            "Created project '{name}' in {} ({} files):",
            args.dir.display(),
            written.len()
        );
        for path in &written {
            let _ = writeln!(out, "  {}", path.display());
        }
        let _ = writeln!(out, "\nNext:");
        for step in &next {
            let _ = writeln!(out, "  {step}");
        }
    }
    ExitCode::SUCCESS
}

fn failure(error: &ScaffoldError) -> Failure {
    match error {
        ScaffoldError::Exists(_) => Failure {
            code: "STB-INIT-001",
            message: error.to_string(),
            hint: "choose an empty or new directory: stb init <DIR>".to_owned(),
        },
        ScaffoldError::Io { .. } => Failure {
            code: "STB-INIT-003",
            message: error.to_string(),
            hint: "check the directory's permissions and free space".to_owned(),
        },
    }
}

/// The commands that take the new project from nothing to rows, tested and audited.
fn next_steps(dir: &Path, name: &str, database: &str, kind: SourceKind, mode: Mode) -> Vec<String> {
    let mut steps = Vec::new();
    if dir != Path::new(".") {
        steps.push(format!("cd '{}'", dir.display()));
    }
    steps.push("stb local up                 # a local ClickHouse and Kafka broker".to_owned());
    let build = match (kind, mode) {
        (SourceKind::Kafka, Mode::Direct) => {
            "stb build                    # the landing table and both models"
        }
        (SourceKind::Kafka, Mode::Virtual) => {
            "stb build                    # the landing table and a staged deployment"
        }
        (SourceKind::Adopted, Mode::Direct) => {
            "stb build                    # both models, replayed from the table"
        }
        (SourceKind::Adopted, Mode::Virtual) => {
            "stb build                    # a staged deployment, replayed from the table"
        }
    };
    let promote = (mode == Mode::Virtual).then_some(
        "stb deployment promote <id>  # readers switch to it (stb build printed its id)",
    );
    match kind {
        SourceKind::Kafka => {
            steps.push(build.to_owned());
            steps.extend(promote.map(str::to_owned));
            steps.push(format!(
                "echo '{{\"event_id\":\"e1\",\"kind\":\"click\",\"amount\":2}}' | stb local produce --topic {}",
                scaffold::topic_for(name)
            ));
        }
        SourceKind::Adopted => {
            steps.push(format!(
                "create the database and the table the source reads (rows already in it are replayed by the build): CREATE DATABASE IF NOT EXISTS `{database}`; {}",
                scaffold::adopted_table_ddl(database)
            ));
            steps.push(build.to_owned());
            steps.extend(promote.map(str::to_owned));
        }
    }
    steps.push(
        "stb test && stb audit        # the SQL test, then the audits on live rows".to_owned(),
    );
    steps.push("stb dev                      # the web UI on http://127.0.0.1:8000".to_owned());
    steps
}
