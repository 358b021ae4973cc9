//! Accounts: users, their password or proxy identity, system roles, and the audit log of
//! every change. The last active admin can be neither disabled nor stripped of `admin`.

use serde::Serialize;
use sqlx::any::AnyRow;
use sqlx::{Any, Row, Transaction};

use crate::password::{self, username as canonical};
use crate::{ADMIN, Backend, ControlStore, ErrorKind, StoreError, VIEWER, now_ms};

/// How an account signs in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// With a password (`stb dev --auth-mode password`).
    Password(String),
    /// As the identity an authenticating proxy names (`--auth-mode trusted_proxy`).
    TrustedProxy,
}

/// A user to create.
#[derive(Debug, Clone)]
pub struct NewUser {
    pub username: String,
    pub display_name: Option<String>,
    pub email: Option<String>,
    pub source: Source,
    /// System roles (default `viewer`).
    pub roles: Vec<String>,
}

/// A user as stored, with its system roles.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct User {
    pub id: String,
    pub username: String,
    pub display_name: Option<String>,
    pub email: Option<String>,
    pub is_active: bool,
    pub roles: Vec<String>,
    pub created_at_ms: i64,
}

impl User {
    #[must_use]
    pub fn is_admin(&self) -> bool {
        self.is_active && self.roles.iter().any(|r| r == ADMIN)
    }
}

/// One line of the account audit log.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AuditEntry {
    pub id: i64,
    pub operation: String,
    pub actor_user_id: Option<String>,
    pub affected_user_id: Option<String>,
    pub occurred_at_ms: i64,
    pub details: serde_json::Value,
}

const USER_COLUMNS: &str = "id, username, display_name, email, is_active, created_at";

fn user_of(row: &AnyRow, roles: Vec<String>) -> Result<User, sqlx::Error> {
    Ok(User {
        id: row.try_get("id")?,
        username: row.try_get("username")?,
        display_name: row.try_get("display_name")?,
        email: row.try_get("email")?,
        is_active: row.try_get::<i32, _>("is_active")? != 0,
        roles,
        created_at_ms: row.try_get("created_at")?,
    })
}

/// Appends to the audit log in `tx` (details must hold no secret).
pub(crate) async fn audit(
    tx: &mut Transaction<'_, Any>,
    operation: &str,
    actor: Option<&str>,
    affected: Option<&str>,
    details: &serde_json::Value,
) -> Result<(), StoreError> {
    sqlx::query(
        "INSERT INTO streambuild_account_audit_log (operation, actor_user_id, affected_user_id, occurred_at, details_json) VALUES ($1, $2, $3, $4, $5)",
    )
    .bind(operation)
    .bind(actor)
    .bind(affected)
    .bind(now_ms())
    .bind(details.to_string())
    .execute(&mut **tx)
    .await?;
    Ok(())
}

async fn roles_of(
    executor: &mut Transaction<'_, Any>,
    user_id: &str,
) -> Result<Vec<String>, StoreError> {
    let rows = sqlx::query(
        "SELECT role_name FROM streambuild_user_roles WHERE user_id = $1 ORDER BY role_name",
    )
    .bind(user_id)
    .fetch_all(&mut **executor)
    .await?;
    Ok(rows
        .iter()
        .filter_map(|r| r.try_get("role_name").ok())
        .collect())
}

/// The user `username` names, in `tx`.
pub(crate) async fn find_in(
    tx: &mut Transaction<'_, Any>,
    username: &str,
) -> Result<Option<User>, StoreError> {
    let row = sqlx::query(&format!(
        "SELECT {USER_COLUMNS} FROM streambuild_users WHERE username = $1"
    ))
    .bind(username)
    .fetch_optional(&mut **tx)
    .await?;
    match row {
        Some(row) => {
            let id: String = row.try_get("id")?;
            let roles = roles_of(tx, &id).await?;
            Ok(Some(user_of(&row, roles)?))
        }
        None => Ok(None),
    }
}

/// The user with id `id`, in `tx`.
pub(crate) async fn by_id_in(
    tx: &mut Transaction<'_, Any>,
    id: &str,
) -> Result<Option<User>, StoreError> {
    let row = sqlx::query(&format!(
        "SELECT {USER_COLUMNS} FROM streambuild_users WHERE id = $1"
    ))
    .bind(id)
    .fetch_optional(&mut **tx)
    .await?;
    match row {
        Some(row) => {
            let roles = roles_of(tx, id).await?;
            Ok(Some(user_of(&row, roles)?))
        }
        None => Ok(None),
    }
}

/// Grants `role` to `user_id` in `tx` (audited).
async fn insert_role(
    tx: &mut Transaction<'_, Any>,
    user_id: &str,
    role: &str,
    actor: Option<&str>,
) -> Result<(), StoreError> {
    sqlx::query("INSERT INTO streambuild_user_roles (user_id, role_name, assigned_at, assigned_by) VALUES ($1, $2, $3, $4)")
        .bind(user_id)
        .bind(role)
        .bind(now_ms())
        .bind(actor)
        .execute(&mut **tx)
        .await?;
    audit(
        tx,
        "role.granted",
        actor,
        Some(user_id),
        &serde_json::json!({"role": role}),
    )
    .await
}

/// Reads user `id` as `tx` left it, then commits.
async fn finish(
    mut tx: Transaction<'_, Any>,
    id: &str,
    username: &str,
) -> Result<User, StoreError> {
    let user = by_id_in(&mut tx, id)
        .await?
        .ok_or_else(|| StoreError::not_found(username))?;
    tx.commit().await?;
    Ok(user)
}

async fn known_role(tx: &mut Transaction<'_, Any>, role: &str) -> Result<(), StoreError> {
    let found = sqlx::query("SELECT name FROM streambuild_roles WHERE name = $1 AND is_system = 1")
        .bind(role)
        .fetch_optional(&mut **tx)
        .await?;
    if found.is_none() {
        return Err(StoreError::new(
            ErrorKind::Validation,
            format!("unknown system role '{role}': use {ADMIN} or {VIEWER}"),
        ));
    }
    Ok(())
}

impl ControlStore {
    /// Refuses when `leaving` is the last active admin, counted under a lock that
    /// serialises concurrent checks.
    async fn keep_an_admin(
        &self,
        tx: &mut Transaction<'_, Any>,
        leaving: &User,
    ) -> Result<(), StoreError> {
        if !leaving.is_admin() {
            return Ok(());
        }
        // PostgreSQL: lock the role row so concurrent checks take turns. SQLite's write
        // transactions (BEGIN IMMEDIATE) are one at a time already.
        if self.backend == Backend::Postgres {
            sqlx::query("SELECT name FROM streambuild_roles WHERE name = $1 FOR UPDATE")
                .bind(ADMIN)
                .fetch_optional(&mut **tx)
                .await?;
        }
        let others: i64 = sqlx::query(
            "SELECT count(*) AS n FROM streambuild_user_roles r JOIN streambuild_users u ON u.id = r.user_id \
             WHERE r.role_name = $1 AND u.is_active = 1 AND u.id <> $2",
        )
        .bind(ADMIN)
        .bind(leaving.id.as_str())
        .fetch_one(&mut **tx)
        .await?
        .try_get("n")?;
        if others == 0 {
            return Err(StoreError::new(
                ErrorKind::Policy,
                format!(
                    "'{}' is the last active admin and must stay one",
                    leaving.username
                ),
            ));
        }
        Ok(())
    }

    /// Creates a user (audited as `user.created`, with `role.granted` per role).
    ///
    /// # Errors
    /// An invalid username or password, an unknown role, a taken username.
    pub async fn create_user(
        &self,
        new: &NewUser,
        actor: Option<&str>,
    ) -> Result<User, StoreError> {
        let username = canonical(&new.username)?;
        let hash = match &new.source {
            Source::Password(password) => {
                password::check_policy(password)?;
                Some(password::hash(password)?)
            }
            Source::TrustedProxy => None,
        };
        let mut tx = self.write().await?;
        if find_in(&mut tx, &username).await?.is_some() {
            return Err(StoreError::new(
                ErrorKind::Conflict,
                format!("User '{username}' already exists"),
            ));
        }
        let id = uuid::Uuid::new_v4().to_string();
        let now = now_ms();
        let blank = |v: &Option<String>| {
            v.as_ref()
                .map(|s| s.trim().to_owned())
                .filter(|s| !s.is_empty())
        };
        sqlx::query(
            "INSERT INTO streambuild_users (id, username, display_name, email, is_active, created_at, updated_at) VALUES ($1, $2, $3, $4, 1, $5, $5)",
        )
        .bind(id.as_str())
        .bind(username.as_str())
        .bind(blank(&new.display_name))
        .bind(blank(&new.email))
        .bind(now)
        .execute(&mut *tx)
        .await?;
        match hash {
            Some(hash) => {
                sqlx::query("INSERT INTO streambuild_password_credentials (user_id, password_hash, password_changed_at) VALUES ($1, $2, $3)")
                    .bind(id.as_str())
                    .bind(hash)
                    .bind(now)
                    .execute(&mut *tx)
                    .await?;
            }
            None => {
                sqlx::query("INSERT INTO streambuild_external_identities (source, subject, user_id, created_at) VALUES ('trusted_proxy', $1, $2, $3)")
                    .bind(username.as_str())
                    .bind(id.as_str())
                    .bind(now)
                    .execute(&mut *tx)
                    .await?;
            }
        }
        let mut roles = new.roles.clone();
        if roles.is_empty() {
            roles.push(VIEWER.to_owned());
        }
        roles.sort();
        roles.dedup();
        let source = match new.source {
            Source::Password(_) => "password",
            Source::TrustedProxy => "trusted_proxy",
        };
        audit(
            &mut tx,
            "user.created",
            actor,
            Some(&id),
            &serde_json::json!({"username": username, "authenticationSource": source}),
        )
        .await?;
        for role in &roles {
            known_role(&mut tx, role).await?;
            insert_role(&mut tx, &id, role, actor).await?;
        }
        finish(tx, &id, &username).await
    }

    /// The user `username` names (compared canonically).
    ///
    /// # Errors
    /// The store cannot be read.
    pub async fn find_user(&self, username: &str) -> Result<Option<User>, StoreError> {
        let Some(username) = password::canonical_username(username) else {
            return Ok(None);
        };
        let mut tx = self.write().await?;
        let user = find_in(&mut tx, &username).await?;
        tx.commit().await?;
        Ok(user)
    }

    /// The user `username` names, or `NotFound`, in `tx`.
    async fn existing(tx: &mut Transaction<'_, Any>, username: &str) -> Result<User, StoreError> {
        let name = canonical(username)?;
        find_in(tx, &name)
            .await?
            .ok_or_else(|| StoreError::not_found(&name))
    }

    /// Enables or disables `username`; disabling revokes every session of it in the same
    /// transaction and refuses the last active admin.
    ///
    /// # Errors
    /// Unknown user; the last-admin rule.
    pub async fn set_active(
        &self,
        username: &str,
        active: bool,
        actor: Option<&str>,
    ) -> Result<User, StoreError> {
        let mut tx = self.write().await?;
        let user = Self::existing(&mut tx, username).await?;
        if !active {
            self.keep_an_admin(&mut tx, &user).await?;
            crate::sessions::revoke_all(&mut tx, &user.id, actor).await?;
        }
        sqlx::query("UPDATE streambuild_users SET is_active = $1, updated_at = $2 WHERE id = $3")
            .bind(i32::from(active))
            .bind(now_ms())
            .bind(user.id.as_str())
            .execute(&mut *tx)
            .await?;
        let operation = if active {
            "user.enabled"
        } else {
            "user.disabled"
        };
        audit(
            &mut tx,
            operation,
            actor,
            Some(&user.id),
            &serde_json::json!({}),
        )
        .await?;
        finish(tx, &user.id, username).await
    }

    /// Grants system role `role` to `username` (a no-op when it holds it).
    ///
    /// # Errors
    /// Unknown user or role.
    pub async fn grant_role(
        &self,
        username: &str,
        role: &str,
        actor: Option<&str>,
    ) -> Result<User, StoreError> {
        let mut tx = self.write().await?;
        let user = Self::existing(&mut tx, username).await?;
        known_role(&mut tx, role).await?;
        if !user.roles.iter().any(|r| r == role) {
            insert_role(&mut tx, &user.id, role, actor).await?;
        }
        finish(tx, &user.id, username).await
    }

    /// Revokes system role `role` from `username`; never the last active admin's `admin`.
    ///
    /// # Errors
    /// Unknown user or role; the user does not hold it; the last-admin rule.
    pub async fn revoke_role(
        &self,
        username: &str,
        role: &str,
        actor: Option<&str>,
    ) -> Result<User, StoreError> {
        let mut tx = self.write().await?;
        let user = Self::existing(&mut tx, username).await?;
        known_role(&mut tx, role).await?;
        if !user.roles.iter().any(|r| r == role) {
            return Err(StoreError::new(
                ErrorKind::NotFound,
                format!("User '{}' does not hold the {role} role", user.username),
            ));
        }
        if role == ADMIN {
            self.keep_an_admin(&mut tx, &user).await?;
        }
        sqlx::query("DELETE FROM streambuild_user_roles WHERE user_id = $1 AND role_name = $2")
            .bind(user.id.as_str())
            .bind(role)
            .execute(&mut *tx)
            .await?;
        audit(
            &mut tx,
            "role.revoked",
            actor,
            Some(&user.id),
            &serde_json::json!({"role": role}),
        )
        .await?;
        finish(tx, &user.id, username).await
    }

    /// Sets a new password for `username` and revokes all of its sessions.
    ///
    /// # Errors
    /// Unknown user; a password the policy refuses.
    pub async fn reset_password(
        &self,
        username: &str,
        new_password: &str,
        actor: Option<&str>,
    ) -> Result<User, StoreError> {
        password::check_policy(new_password)?;
        let hash = password::hash(new_password)?;
        let mut tx = self.write().await?;
        let user = Self::existing(&mut tx, username).await?;
        let now = now_ms();
        // Insert or replace: a proxy account gains a password this way.
        sqlx::query("DELETE FROM streambuild_password_credentials WHERE user_id = $1")
            .bind(user.id.as_str())
            .execute(&mut *tx)
            .await?;
        sqlx::query("INSERT INTO streambuild_password_credentials (user_id, password_hash, password_changed_at) VALUES ($1, $2, $3)")
            .bind(user.id.as_str())
            .bind(hash)
            .bind(now)
            .execute(&mut *tx)
            .await?;
        crate::sessions::revoke_all(&mut tx, &user.id, actor).await?;
        audit(
            &mut tx,
            "password.reset",
            actor,
            Some(&user.id),
            &serde_json::json!({}),
        )
        .await?;
        tx.commit().await?;
        Ok(user)
    }

    /// The active user `username` if `password` is theirs; `None` otherwise, after the same
    /// work either way (a missing user verifies a dummy hash). An outdated hash is replaced.
    ///
    /// # Errors
    /// The store cannot be read.
    pub async fn verify_password(
        &self,
        username: &str,
        password: &str,
    ) -> Result<Option<User>, StoreError> {
        let name = password::canonical_username(username);
        let too_long = password.chars().count() > password::MAX_PASSWORD_LENGTH;
        let mut tx = self.write().await?;
        let user = match &name {
            Some(name) => find_in(&mut tx, name).await?,
            None => None,
        };
        let stored: Option<String> = match &user {
            Some(user) => sqlx::query(
                "SELECT password_hash FROM streambuild_password_credentials WHERE user_id = $1",
            )
            .bind(user.id.as_str())
            .fetch_optional(&mut *tx)
            .await?
            .map(|row| row.try_get("password_hash"))
            .transpose()?,
            None => None,
        };
        let matches = !too_long
            && password::verify(
                password,
                stored.as_deref().unwrap_or_else(|| password::dummy()),
            )
            && stored.is_some();
        let Some(user) = user.filter(|u| matches && u.is_active) else {
            tx.commit().await?;
            return Ok(None);
        };
        if stored.as_deref().is_some_and(password::outdated) {
            sqlx::query(
                "UPDATE streambuild_password_credentials SET password_hash = $1 WHERE user_id = $2",
            )
            .bind(password::hash(password)?)
            .bind(user.id.as_str())
            .execute(&mut *tx)
            .await?;
        }
        tx.commit().await?;
        Ok(Some(user))
    }

    /// The user an external identity (`source`, `subject`) is linked to.
    ///
    /// # Errors
    /// The store cannot be read.
    pub async fn find_external(
        &self,
        source: &str,
        subject: &str,
    ) -> Result<Option<User>, StoreError> {
        let mut tx = self.write().await?;
        let id: Option<String> = sqlx::query(
            "SELECT user_id FROM streambuild_external_identities WHERE source = $1 AND subject = $2",
        )
        .bind(source)
        .bind(subject)
        .fetch_optional(&mut *tx)
        .await?
        .map(|row| row.try_get("user_id"))
        .transpose()?;
        let user = match id {
            Some(id) => by_id_in(&mut tx, &id).await?,
            None => None,
        };
        tx.commit().await?;
        Ok(user)
    }

    /// The proxy identity `subject` (a canonical username), created as a `viewer` on first
    /// sight. Concurrent first requests all get the one account: a writer that loses the
    /// race reads what the winner created. A username taken by an account without that
    /// identity is a conflict, never linked.
    ///
    /// # Errors
    /// An invalid subject; a conflicting unlinked account.
    pub async fn provision_proxy_user(
        &self,
        subject: &str,
        display_name: Option<&str>,
        email: Option<&str>,
    ) -> Result<User, StoreError> {
        let subject = canonical(subject)?;
        if let Some(user) = self.find_external("trusted_proxy", &subject).await? {
            return Ok(user);
        }
        let created = self
            .create_user(
                &NewUser {
                    username: subject.clone(),
                    display_name: display_name.map(str::to_owned),
                    email: email.map(str::to_owned),
                    source: Source::TrustedProxy,
                    roles: vec![VIEWER.to_owned()],
                },
                None,
            )
            .await;
        match created {
            Ok(user) => Ok(user),
            Err(error) if error.kind == ErrorKind::Conflict => {
                // Someone created it meanwhile: theirs, if it carries the identity.
                self.find_external("trusted_proxy", &subject)
                    .await?
                    .ok_or_else(|| {
                        StoreError::new(
                            ErrorKind::Conflict,
                            format!(
                                "User '{subject}' exists without a trusted-proxy identity and is not linked to one"
                            ),
                        )
                    })
            }
            Err(error) => Err(error),
        }
    }

    /// The newest `limit` audit log entries, newest first.
    ///
    /// # Errors
    /// The store cannot be read.
    pub async fn audit_log(&self, limit: i64) -> Result<Vec<AuditEntry>, StoreError> {
        let rows = sqlx::query(
            "SELECT id, operation, actor_user_id, affected_user_id, occurred_at, details_json \
             FROM streambuild_account_audit_log ORDER BY id DESC LIMIT $1",
        )
        .bind(limit)
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|row| {
                let details: String = row.try_get("details_json")?;
                Ok(AuditEntry {
                    id: row.try_get("id")?,
                    operation: row.try_get("operation")?,
                    actor_user_id: row.try_get("actor_user_id")?,
                    affected_user_id: row.try_get("affected_user_id")?,
                    occurred_at_ms: row.try_get("occurred_at")?,
                    details: serde_json::from_str(&details).unwrap_or_default(),
                })
            })
            .collect()
    }
}
