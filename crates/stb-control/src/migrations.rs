//! Versioned migrations, per component (`accounts`, `destruction_plans`, `sensors`), applied in order
//! at every open: each component's version is a row of `streambuild_schema_versions`; a
//! store at a version this tool does not know is refused, never downgraded. On PostgreSQL
//! an advisory lock makes concurrent first opens take turns; SQLite serialises writers.

use sqlx::Row;

use crate::{Backend, ControlStore, ErrorKind, StoreError};

/// One step of a component's schema: the statements for each backend.
struct Migration {
    version: i64,
    sqlite: Vec<&'static str>,
    postgres: Vec<&'static str>,
}

/// Version 1 of the accounts component, with each backend's audit-log table.
fn accounts_v1(audit: &'static str) -> Vec<&'static str> {
    vec![
        USERS,
        EXTERNAL,
        CREDENTIALS,
        SESSIONS,
        ROLES,
        USER_ROLES,
        PROJECT_ROLES,
        audit,
        SEED_ROLES,
    ]
}

const VERSIONS: &str = "CREATE TABLE IF NOT EXISTS streambuild_schema_versions (\
    component VARCHAR(64) PRIMARY KEY, version BIGINT NOT NULL)";

const USERS: &str = "CREATE TABLE IF NOT EXISTS streambuild_users (\
    id VARCHAR(36) PRIMARY KEY, username VARCHAR(128) NOT NULL UNIQUE, \
    display_name VARCHAR(256), email VARCHAR(320), is_active INTEGER NOT NULL, \
    created_at BIGINT NOT NULL, updated_at BIGINT NOT NULL)";
const EXTERNAL: &str = "CREATE TABLE IF NOT EXISTS streambuild_external_identities (\
    source VARCHAR(32) NOT NULL, subject VARCHAR(128) NOT NULL, \
    user_id VARCHAR(36) NOT NULL REFERENCES streambuild_users(id) ON DELETE CASCADE, \
    created_at BIGINT NOT NULL, PRIMARY KEY (source, subject))";
const CREDENTIALS: &str = "CREATE TABLE IF NOT EXISTS streambuild_password_credentials (\
    user_id VARCHAR(36) PRIMARY KEY REFERENCES streambuild_users(id) ON DELETE CASCADE, \
    password_hash TEXT NOT NULL, password_changed_at BIGINT NOT NULL)";
const SESSIONS: &str = "CREATE TABLE IF NOT EXISTS streambuild_sessions (\
    token_hash VARCHAR(64) PRIMARY KEY, \
    user_id VARCHAR(36) NOT NULL REFERENCES streambuild_users(id) ON DELETE CASCADE, \
    csrf_token VARCHAR(64) NOT NULL, created_at BIGINT NOT NULL, last_seen_at BIGINT NOT NULL, \
    expires_at BIGINT NOT NULL, revoked_at BIGINT)";
const ROLES: &str = "CREATE TABLE IF NOT EXISTS streambuild_roles (\
    name VARCHAR(128) PRIMARY KEY, description VARCHAR(256) NOT NULL, is_system INTEGER NOT NULL)";
const USER_ROLES: &str = "CREATE TABLE IF NOT EXISTS streambuild_user_roles (\
    user_id VARCHAR(36) NOT NULL REFERENCES streambuild_users(id) ON DELETE CASCADE, \
    role_name VARCHAR(128) NOT NULL REFERENCES streambuild_roles(name), \
    assigned_at BIGINT NOT NULL, assigned_by VARCHAR(36), UNIQUE (user_id, role_name))";
const PROJECT_ROLES: &str = "CREATE TABLE IF NOT EXISTS streambuild_project_role_assignments (\
    id VARCHAR(36) PRIMARY KEY, \
    user_id VARCHAR(36) NOT NULL REFERENCES streambuild_users(id) ON DELETE CASCADE, \
    project_name VARCHAR(256) NOT NULL, role_name VARCHAR(128) NOT NULL, \
    target_name VARCHAR(128), assignment_scope VARCHAR(128) NOT NULL, \
    assigned_by VARCHAR(36), assigned_at BIGINT NOT NULL, \
    revoked_by VARCHAR(36), revoked_at BIGINT, active_key VARCHAR(36) NOT NULL, \
    UNIQUE (user_id, project_name, role_name, assignment_scope, active_key))";
const AUDIT_SQLITE: &str = "CREATE TABLE IF NOT EXISTS streambuild_account_audit_log (\
    id INTEGER PRIMARY KEY AUTOINCREMENT, operation VARCHAR(64) NOT NULL, \
    actor_user_id VARCHAR(36), affected_user_id VARCHAR(36), occurred_at BIGINT NOT NULL, \
    details_json TEXT NOT NULL)";
const AUDIT_POSTGRES: &str = "CREATE TABLE IF NOT EXISTS streambuild_account_audit_log (\
    id BIGSERIAL PRIMARY KEY, operation VARCHAR(64) NOT NULL, \
    actor_user_id VARCHAR(36), affected_user_id VARCHAR(36), occurred_at BIGINT NOT NULL, \
    details_json TEXT NOT NULL)";
const SEED_ROLES: &str = "INSERT INTO streambuild_roles (name, description, is_system) VALUES \
    ('viewer', 'Authenticated project viewer', 1), \
    ('admin', 'StreamBuild system administrator', 1) ON CONFLICT (name) DO NOTHING";

const PLANS: &str = "CREATE TABLE IF NOT EXISTS streambuild_destruction_plans (\
    plan_id VARCHAR(36) PRIMARY KEY, actor VARCHAR(36) NOT NULL, payload_version INTEGER NOT NULL, \
    payload_json TEXT NOT NULL, payload_sha256 VARCHAR(64) NOT NULL, created_at BIGINT NOT NULL, \
    expires_at BIGINT NOT NULL, reviewed_at BIGINT, consumed_at BIGINT, status VARCHAR(16) NOT NULL)";

/// The components and their migrations, oldest first.
fn components() -> [(&'static str, Vec<Migration>); 3] {
    [
        (
            "accounts",
            vec![Migration {
                version: 1,
                sqlite: accounts_v1(AUDIT_SQLITE),
                postgres: accounts_v1(AUDIT_POSTGRES),
            }],
        ),
        (
            "destruction_plans",
            vec![Migration {
                version: 1,
                sqlite: vec![PLANS],
                postgres: vec![PLANS],
            }],
        ),
        (
            "sensors",
            vec![Migration {
                version: 1,
                sqlite: crate::sensors::v1(),
                postgres: crate::sensors::v1(),
            }],
        ),
    ]
}

/// Brings every component up to its newest version, each step in a transaction.
pub(crate) async fn migrate(store: &ControlStore) -> Result<(), StoreError> {
    let mut tx = store.write().await?;
    if store.backend == Backend::Postgres {
        // Concurrent first opens would race on CREATE TABLE: take turns.
        sqlx::query("SELECT pg_advisory_xact_lock(7305126551)")
            .execute(&mut *tx)
            .await?;
    }
    sqlx::query(VERSIONS).execute(&mut *tx).await?;
    for (component, steps) in components() {
        let stored: Option<i64> =
            sqlx::query("SELECT version FROM streambuild_schema_versions WHERE component = $1")
                .bind(component)
                .fetch_optional(&mut *tx)
                .await?
                .map(|row| row.try_get("version"))
                .transpose()?;
        let newest = steps.iter().map(|m| m.version).max().unwrap_or(0);
        let current = stored.unwrap_or(0);
        if current > newest {
            return Err(StoreError::new(
                ErrorKind::Incompatible,
                format!(
                    "{component} schema is incompatible: found {current}, expected at most {newest}"
                ),
            ));
        }
        for step in steps.iter().filter(|m| m.version > current) {
            let statements = match store.backend {
                Backend::Sqlite => &step.sqlite,
                Backend::Postgres => &step.postgres,
            };
            for statement in statements {
                sqlx::query(statement).execute(&mut *tx).await?;
            }
        }
        if stored.is_none() {
            sqlx::query(
                "INSERT INTO streambuild_schema_versions (component, version) VALUES ($1, $2)",
            )
            .bind(component)
            .bind(newest)
            .execute(&mut *tx)
            .await?;
        } else if current < newest {
            sqlx::query("UPDATE streambuild_schema_versions SET version = $1 WHERE component = $2")
                .bind(newest)
                .bind(component)
                .execute(&mut *tx)
                .await?;
        }
    }
    tx.commit().await?;
    Ok(())
}
