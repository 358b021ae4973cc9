//! `stb admin`: accounts of the control store, for bootstrapping and recovery. Never opens
//! a warehouse connection. Passwords come from a prompt (twice, without echo) or one line
//! of standard input, never from a flag.

use std::io::{BufRead as _, IsTerminal as _, Write as _};
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Subcommand, ValueEnum};
use stb_control::{NewUser, Source, User};

use crate::control::{ControlArgs, Opened, open, project_dir};
use crate::output::{Failure, fail, print_json};

/// Passwords could not be read.
const PASSWORD_CODE: &str = "STB-ADMIN-001";

#[derive(Debug, Args)]
pub(crate) struct AdminArgs {
    /// Project directory, only to find the default store (default: the nearest upwards
    /// holding streambuild_project.toml, else the current directory).
    #[arg(long, value_name = "DIR", global = true)]
    project_dir: Option<PathBuf>,
    #[command(flatten)]
    control: ControlArgs,
    /// Print the result as JSON on stdout.
    #[arg(long, global = true)]
    json: bool,
    #[command(subcommand)]
    command: AdminCommand,
}

#[derive(Debug, Subcommand)]
enum AdminCommand {
    /// Create or upgrade the store's schema.
    Migrate,
    /// Create a user (a password one reads its password from a prompt or standard input).
    CreateUser(CreateUserArgs),
    /// Grant a system role (admin or viewer).
    GrantRole(RoleArgs),
    /// Revoke a system role (never the last active admin's admin).
    RevokeRole(RoleArgs),
    /// Let a disabled user sign in again.
    EnableUser(UserArgs),
    /// Stop a user signing in and end its sessions (never the last active admin).
    DisableUser(UserArgs),
    /// Set a new password (prompt or standard input) and end the user's sessions.
    ResetPassword(UserArgs),
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum AuthenticationSource {
    Password,
    #[value(name = "trusted_proxy")]
    TrustedProxy,
}

#[derive(Debug, Args)]
struct CreateUserArgs {
    #[arg(long)]
    username: String,
    #[arg(long)]
    display_name: Option<String>,
    #[arg(long)]
    email: Option<String>,
    /// How the user signs in.
    #[arg(long, value_enum)]
    authentication_source: AuthenticationSource,
    /// A system role (repeat for more; default viewer).
    #[arg(long = "role", value_name = "ROLE")]
    roles: Vec<String>,
}

#[derive(Debug, Args)]
struct RoleArgs {
    #[arg(long)]
    username: String,
    #[arg(long)]
    role: String,
}

#[derive(Debug, Args)]
struct UserArgs {
    #[arg(long)]
    username: String,
}

pub(crate) fn run(args: &AdminArgs) -> ExitCode {
    let url = args.control.url(&project_dir(args.project_dir.as_deref()));
    let opened = match open(&url) {
        Ok(opened) => opened,
        Err(failure) => return fail(&failure, args.json),
    };
    let outcome = execute(&opened, &args.command);
    opened.run(opened.store.close());
    match outcome {
        Ok((message, user)) => {
            if args.json {
                print_json(&serde_json::json!({
                    "message": message,
                    "user": user,
                    "control_store": opened.store.shown_url(),
                }));
            } else {
                let _ = writeln!(std::io::stdout().lock(), "{message}");
            }
            ExitCode::SUCCESS
        }
        Err(failure) => fail(&failure, args.json),
    }
}

/// What a subcommand did, and the user it left.
fn execute(opened: &Opened, command: &AdminCommand) -> Result<(String, Option<User>), Failure> {
    let store = &opened.store;
    Ok(match command {
        AdminCommand::Migrate => ("StreamBuild account schema is ready".to_owned(), None),
        AdminCommand::CreateUser(args) => {
            let source = match args.authentication_source {
                AuthenticationSource::Password => Source::Password(read_password()?),
                AuthenticationSource::TrustedProxy => Source::TrustedProxy,
            };
            let new = NewUser {
                username: args.username.clone(),
                display_name: args.display_name.clone(),
                email: args.email.clone(),
                source,
                roles: args.roles.clone(),
            };
            let user = opened.run(store.create_user(&new, None))?;
            (
                format!("Created user {} ({})", user.username, user.id),
                Some(user),
            )
        }
        AdminCommand::GrantRole(args) => {
            let user = opened.run(store.grant_role(&args.username, &args.role, None))?;
            (
                format!("Granted {} to {}", args.role, user.username),
                Some(user),
            )
        }
        AdminCommand::RevokeRole(args) => {
            let user = opened.run(store.revoke_role(&args.username, &args.role, None))?;
            (
                format!("Revoked {} from {}", args.role, user.username),
                Some(user),
            )
        }
        AdminCommand::EnableUser(args) => {
            let user = opened.run(store.set_active(&args.username, true, None))?;
            (format!("Enabled {}", user.username), Some(user))
        }
        AdminCommand::DisableUser(args) => {
            let user = opened.run(store.set_active(&args.username, false, None))?;
            (format!("Disabled {}", user.username), Some(user))
        }
        AdminCommand::ResetPassword(args) => {
            let password = read_password()?;
            let user = opened.run(store.reset_password(&args.username, &password, None))?;
            (format!("Reset password for {}", user.username), Some(user))
        }
    })
}

fn password_failure(message: &str) -> Failure {
    Failure {
        code: PASSWORD_CODE,
        message: message.to_owned(),
        hint: format!(
            "pipe one line on standard input, or type it twice at the prompt; at least {} characters",
            stb_control::MIN_PASSWORD_LENGTH
        ),
    }
}

/// A password: at a terminal, typed twice without echo; otherwise the first line of
/// standard input (its line ending removed).
fn read_password() -> Result<String, Failure> {
    let stdin = std::io::stdin();
    if !stdin.is_terminal() {
        let mut line = String::new();
        stdin
            .lock()
            .read_line(&mut line)
            .map_err(|e| password_failure(&format!("cannot read the password: {e}")))?;
        let password = line.trim_end_matches(['\n', '\r']).to_owned();
        if password.is_empty() {
            return Err(password_failure("Password input was empty"));
        }
        return Ok(password);
    }
    let first = crate::secret_input::prompt_hidden("Password: ")
        .map_err(|e| password_failure(&format!("cannot read the password: {e}")))?;
    let second = crate::secret_input::prompt_hidden("Confirm password: ")
        .map_err(|e| password_failure(&format!("cannot read the password: {e}")))?;
    if first != second {
        return Err(password_failure("Passwords do not match"));
    }
    if first.is_empty() {
        return Err(password_failure("Password input was empty"));
    }
    Ok(first)
}
