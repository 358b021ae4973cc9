//! The control store as commands reach it: which URL (flag, environment, else the
//! project's own SQLite file), opening it on a small runtime of its own (the store is
//! async; these commands are not), and its errors as failures.

use std::path::{Path, PathBuf};

use clap::Args;
use stb_control::{ControlStore, StoreError};

use crate::output::Failure;

/// Where the control store is.
#[derive(Debug, Args)]
pub(crate) struct ControlArgs {
    /// Control store URL: sqlite:////absolute/path.db, sqlite:///relative/path.db or
    /// postgresql://user@host:5432/db (env STREAMBUILD_CONTROL_STORE_URL; default
    /// sqlite:///<absolute project dir>/.streambuild/control.db).
    #[arg(
        long,
        value_name = "URL",
        env = "STREAMBUILD_CONTROL_STORE_URL",
        hide_env_values = true,
        global = true
    )]
    pub(crate) control_store_url: Option<String>,
}

impl ControlArgs {
    /// The URL to open: the flag or environment, else the project's SQLite file.
    pub(crate) fn url(&self, project_dir: &Path) -> String {
        self.control_store_url
            .clone()
            .filter(|u| !u.trim().is_empty())
            .unwrap_or_else(|| stb_control::default_url(project_dir))
    }
}

impl From<StoreError> for Failure {
    fn from(error: StoreError) -> Self {
        Self {
            code: error.code(),
            hint: error.hint().into(),
            message: error.message,
        }
    }
}

/// The project directory for `explicit` (`--project-dir`), else the nearest upwards from
/// the working directory holding a project file, else the working directory.
pub(crate) fn project_dir(explicit: Option<&Path>) -> PathBuf {
    let cwd = std::env::current_dir().unwrap_or_default();
    if let Some(dir) = explicit {
        return if dir.is_absolute() {
            dir.to_path_buf()
        } else {
            cwd.join(dir)
        };
    }
    stb_project::project_root(&stb_project::DiscoverOptions {
        cwd: cwd.clone(),
        ..Default::default()
    })
    .unwrap_or(cwd)
}

/// A store opened on a runtime that lives as long as it.
pub(crate) struct Opened {
    runtime: tokio::runtime::Runtime,
    pub(crate) store: ControlStore,
}

impl Opened {
    /// Runs `future` to completion.
    pub(crate) fn run<T>(&self, future: impl std::future::Future<Output = T>) -> T {
        self.runtime.block_on(future)
    }

    /// A handle on the runtime, for code that waits on the store through it (the sensor
    /// dispatcher).
    pub(crate) fn handle(&self) -> tokio::runtime::Handle {
        self.runtime.handle().clone()
    }
}

/// Opens (and migrates) the store at `url`.
pub(crate) fn open(url: &str) -> Result<Opened, Failure> {
    // One worker thread drives the store's connections, so a caller may also wait on it
    // through a handle (`Handle::block_on` drives no I/O on a current-thread runtime).
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .map_err(|e| Failure {
            code: stb_control::ErrorKind::Unavailable.code(),
            message: format!("cannot start the control store's runtime: {e}"),
            hint: "this is a bug; please report it".into(),
        })?;
    let store = runtime.block_on(ControlStore::open(url))?;
    Ok(Opened { runtime, store })
}

/// The local account's name as the control store compares it (`$USER`, else `$LOGNAME`).
pub(crate) fn os_username() -> Option<String> {
    ["USER", "LOGNAME"]
        .iter()
        .find_map(|name| std::env::var(name).ok())
        .and_then(|name| stb_control::canonical_username(&name))
}

/// The local account is not an active admin of the control store.
pub(crate) const NOT_ADMIN_CODE: &str = "STB-DESTROY-003";

/// The control-store account of the local OS user, when it is an active `admin`: the gate
/// in front of `stb destroy` and `stb reset-target`.
pub(crate) fn local_admin(url: &str) -> Result<stb_control::User, Failure> {
    let Some(username) = os_username() else {
        return Err(Failure {
            code: NOT_ADMIN_CODE,
            message: "cannot tell who runs this: neither USER nor LOGNAME names a valid account"
                .into(),
            hint: "run it from a login shell of an account that is an admin in the control store"
                .into(),
        });
    };
    let opened = open(url)?;
    let user = opened.run(opened.store.find_user(&username));
    opened.run(opened.store.close());
    match user? {
        Some(user) if user.is_admin() => Ok(user),
        found => Err(Failure {
            code: NOT_ADMIN_CODE,
            message: format!(
                "the local user '{username}' is {} in the control store {}: destruction needs an active admin",
                match found {
                    None => "not an account",
                    Some(user) if !user.is_active => "a disabled account",
                    Some(_) => "not an admin",
                },
                opened.store.shown_url()
            ),
            hint: format!(
                "an admin runs `stb admin grant-role --username {username} --role admin` (the first one: `stb admin create-user --username {username} --authentication-source password --role admin`)"
            ),
        }),
    }
}
