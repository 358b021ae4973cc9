//! The control store: who may use `stb dev` and what they may do. Accounts, password
//! credentials, external identities, sessions, system roles, project-role assignments, the
//! account audit log, durable destruction plans and the sensors' tick ledger, in SQLite (a file in the project by
//! default) or PostgreSQL (shared installs).
//!
//! Never in ClickHouse: these rules need transactions, unique constraints and row locks,
//! identity must work while the warehouse is down, and resetting a target must not be able
//! to delete the accounts that authorised it.
//!
//! One SQL text serves both backends through sqlx's `Any` driver: timestamps are UTC epoch
//! milliseconds (`BIGINT`) and flags are integers, so comparisons mean the same on both;
//! placeholders are `$1, $2, …` in order of first use, which SQLite numbers the same way.

mod accounts;
mod destruction_plans;
mod directory;
mod error;
mod migrations;
mod password;
mod project_roles;
mod sensors;
mod sessions;

use std::path::{Path, PathBuf};

pub use accounts::{AuditEntry, NewUser, Source, User};
pub use destruction_plans::{PLAN_TTL_MS, PlanLookup, StoredPlan};
pub use directory::{Account, ProfileChange};
pub use error::{ErrorKind, StoreError};
pub use password::{MAX_PASSWORD_LENGTH, MIN_PASSWORD_LENGTH, canonical_username};
pub use project_roles::Assignment;
pub use sensors::{
    Checkpoint, EventAttempts, NewTick, SensorOverride, SensorStep, SensorTick, TickEnd,
};
pub use sessions::{NewSession, ResolvedSession};
use sqlx::AnyPool;
use sqlx::any::AnyPoolOptions;

/// The two system roles.
pub const ADMIN: &str = "admin";
pub const VIEWER: &str = "viewer";

/// Which database holds the store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Sqlite,
    Postgres,
}

/// An open, migrated control store.
#[derive(Debug, Clone)]
pub struct ControlStore {
    pool: AnyPool,
    backend: Backend,
    /// The URL with its credentials removed: safe to show.
    shown: String,
}

/// `sqlite:///<absolute project dir>/.streambuild/control.db` (four slashes before an
/// absolute path): the store a project uses by default.
#[must_use]
pub fn default_url(project_dir: &Path) -> String {
    let dir = if project_dir.is_absolute() {
        project_dir.to_path_buf()
    } else {
        std::env::current_dir()
            .map_or_else(|_| project_dir.to_path_buf(), |cwd| cwd.join(project_dir))
    };
    format!(
        "sqlite:///{}",
        dir.join(".streambuild").join("control.db").display()
    )
}

/// `url` with any password replaced, for messages.
#[must_use]
pub fn redacted(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    match rest.rsplit_once('@') {
        Some((credentials, host)) => {
            let user = credentials.split(':').next().unwrap_or_default();
            format!("{scheme}://{user}:***@{host}")
        }
        None => url.to_owned(),
    }
}

/// The file a SQLAlchemy SQLite URL names, read as SQLAlchemy reads it: `sqlite:///` and
/// then the path, so `sqlite:///control.db` is relative to the working directory and
/// `sqlite:////var/lib/streambuild/control.db` (four slashes) is absolute. `None` for an
/// in-memory database (`sqlite://`, `sqlite:///:memory:`).
fn sqlite_path(rest: &str) -> Result<Option<PathBuf>, StoreError> {
    let Some(after_host) = rest.strip_prefix("//") else {
        return Err(StoreError::new(
            ErrorKind::Validation,
            format!(
                "unsupported SQLite URL 'sqlite:{rest}': write sqlite:///relative/path.db or sqlite:////absolute/path.db"
            ),
        ));
    };
    let path = after_host.strip_prefix('/').unwrap_or(after_host);
    if path.is_empty() || path == ":memory:" {
        return Ok(None);
    }
    let path = Path::new(path);
    if path.is_absolute() {
        return Ok(Some(path.to_path_buf()));
    }
    let resolved = std::env::current_dir()
        .map(|cwd| cwd.join(path))
        .map_err(|e| {
            StoreError::new(
                ErrorKind::Unavailable,
                format!(
                    "cannot resolve {} against the working directory: {e}",
                    path.display()
                ),
            )
        })?;
    // Earlier builds of stb read three slashes as absolute: a store made that way must not
    // be silently replaced by a new, empty one here.
    let absolute = Path::new("/").join(path);
    if !resolved.exists() && absolute.is_file() {
        return Err(StoreError::new(
            ErrorKind::Validation,
            format!(
                "sqlite:///{} names {} (three slashes: relative to the working directory), which does not exist, while {} does; for that file write sqlite:///{} (four slashes)",
                path.display(),
                resolved.display(),
                absolute.display(),
                absolute.display()
            ),
        ));
    }
    Ok(Some(resolved))
}

/// The sqlx URL and backend for a control-store URL as users write it (SQLAlchemy-style
/// `sqlite:///relative.db` and `sqlite:////absolute.db`, `sqlite://` for memory,
/// `postgresql+psycopg://…` are accepted).
fn driver_url(url: &str) -> Result<(String, Backend), StoreError> {
    let url = url.trim();
    if let Some(rest) = url.strip_prefix("sqlite:") {
        let Some(path) = sqlite_path(rest)? else {
            return Ok(("sqlite::memory:".to_owned(), Backend::Sqlite));
        };
        let path = path.as_path();
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(|e| {
                StoreError::new(
                    ErrorKind::Unavailable,
                    format!("cannot create {}: {e}", parent.display()),
                )
            })?;
        }
        return Ok((
            format!("sqlite://{}?mode=rwc", path.display()),
            Backend::Sqlite,
        ));
    }
    for prefix in [
        "postgresql+psycopg://",
        "postgresql+psycopg2://",
        "postgresql://",
        "postgres://",
    ] {
        if let Some(rest) = url.strip_prefix(prefix) {
            return Ok((format!("postgres://{rest}"), Backend::Postgres));
        }
    }
    Err(StoreError::new(
        ErrorKind::Validation,
        format!(
            "unsupported control store URL '{}': use sqlite:///<path> or postgresql://…",
            redacted(url)
        ),
    ))
}

impl ControlStore {
    /// Opens the store at `url` and brings its schema up to date.
    ///
    /// # Errors
    /// The URL is not supported, the database cannot be reached, or its schema is newer
    /// than this tool knows.
    pub async fn open(url: &str) -> Result<Self, StoreError> {
        sqlx::any::install_default_drivers();
        let (driver, backend) = driver_url(url)?;
        // An in-memory database exists once per connection: keep one.
        let connections = if driver == "sqlite::memory:" { 1 } else { 5 };
        let pool = AnyPoolOptions::new()
            .max_connections(connections)
            .acquire_timeout(std::time::Duration::from_secs(30))
            .connect(&driver)
            .await
            .map_err(|e| StoreError::unavailable(&redacted(url), &e))?;
        let store = Self {
            pool,
            backend,
            shown: redacted(url),
        };
        migrations::migrate(&store).await?;
        if let Some(path) = driver
            .strip_prefix("sqlite://")
            .and_then(|p| p.strip_suffix("?mode=rwc"))
        {
            owner_only(Path::new(path));
        }
        Ok(store)
    }

    /// A transaction that will write: on SQLite it takes the write lock at once (`BEGIN
    /// IMMEDIATE`), so two writers wait for each other instead of deadlocking when both
    /// read first.
    pub(crate) async fn write(&self) -> Result<sqlx::Transaction<'static, sqlx::Any>, StoreError> {
        Ok(match self.backend {
            Backend::Sqlite => self.pool.begin_with("BEGIN IMMEDIATE").await?,
            Backend::Postgres => self.pool.begin().await?,
        })
    }

    #[must_use]
    pub fn backend(&self) -> Backend {
        self.backend
    }

    /// The URL, credentials removed.
    #[must_use]
    pub fn shown_url(&self) -> &str {
        &self.shown
    }

    /// The schema version of each component, as stored.
    ///
    /// # Errors
    /// The store cannot be read.
    pub async fn schema_versions(&self) -> Result<Vec<(String, i64)>, StoreError> {
        use sqlx::Row;
        let rows = sqlx::query(
            "SELECT component, version FROM streambuild_schema_versions ORDER BY component",
        )
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|row| Ok((row.try_get("component")?, row.try_get("version")?)))
            .collect()
    }

    /// Closes every connection.
    pub async fn close(&self) {
        self.pool.close().await;
    }
}

/// Password hashes and session hashes live in the file: readable by its owner only.
fn owner_only(path: &Path) {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        let _ = std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600));
    }
    #[cfg(not(unix))]
    let _ = path;
}

/// Milliseconds since the Unix epoch, now.
pub(crate) fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_as_users_write_them_map_to_drivers() {
        assert_eq!(
            driver_url("sqlite://").expect("memory"),
            ("sqlite::memory:".to_owned(), Backend::Sqlite)
        );
        assert_eq!(
            driver_url("sqlite:///:memory:").expect("memory").0,
            "sqlite::memory:"
        );
        assert_eq!(
            driver_url("postgresql+psycopg://u:secret@localhost:5432/db")
                .expect("pg")
                .0,
            "postgres://u:secret@localhost:5432/db"
        );
        assert!(driver_url("mysql://x").is_err());
        let dir = tempfile::tempdir().expect("dir");
        let url = default_url(dir.path());
        assert!(url.starts_with("sqlite:///"), "{url}");
        let (driver, backend) = driver_url(&url).expect("file");
        assert_eq!(backend, Backend::Sqlite);
        assert!(
            driver.ends_with("/.streambuild/control.db?mode=rwc"),
            "{driver}"
        );
        assert!(dir.path().join(".streambuild").is_dir(), "parent created");
        // An absolute project directory gives four slashes, as SQLAlchemy writes it.
        assert_eq!(
            url,
            format!(
                "sqlite:///{}",
                dir.path().join(".streambuild/control.db").display()
            )
        );
        assert!(url.starts_with("sqlite:////"), "{url}");
    }

    #[test]
    fn sqlite_urls_are_read_as_sqlalchemy_reads_them() {
        // Four slashes: an absolute path.
        assert_eq!(
            sqlite_path("////var/lib/streambuild/control.db").expect("absolute"),
            Some(PathBuf::from("/var/lib/streambuild/control.db"))
        );
        // Three: relative to the working directory.
        let cwd = std::env::current_dir().expect("cwd");
        assert_eq!(
            sqlite_path("///state/control.db").expect("relative"),
            Some(cwd.join("state/control.db"))
        );
        assert_eq!(sqlite_path("//").expect("memory"), None);
        assert_eq!(sqlite_path("///:memory:").expect("memory"), None);
        assert!(
            sqlite_path("control.db").is_err(),
            "no slashes is not a URL"
        );
        // Three slashes over a path that exists only from the root: the old reading's
        // store, refused rather than replaced by an empty one.
        let old = tempfile::tempdir().expect("dir");
        let file = old.path().join("control.db");
        std::fs::write(&file, b"").expect("file");
        let refused = sqlite_path(&format!("//{}", file.display())).expect_err("ambiguous");
        assert!(
            refused.message.contains("four slashes"),
            "{}",
            refused.message
        );
    }

    #[test]
    fn passwords_never_show_in_a_shown_url() {
        assert_eq!(
            redacted("postgresql://stb:hunter2-long@db:5432/ctl"),
            "postgresql://stb:***@db:5432/ctl"
        );
        assert_eq!(redacted("sqlite:///x/control.db"), "sqlite:///x/control.db");
        let error = driver_url("mysql://root:pw@h/db").expect_err("unsupported");
        assert!(!error.to_string().contains("pw@"), "{error}");
    }
}
