//! The user directory as administrators see it: every account with how it signs in, and
//! profile changes by id.

use serde::Serialize;
use sqlx::Row;

use crate::accounts::{audit, by_id_in};
use crate::{ControlStore, ErrorKind, StoreError, User, now_ms};

/// A user with how it can sign in and when it last changed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Account {
    #[serde(flatten)]
    pub user: User,
    /// `password` and/or `trusted_proxy`.
    pub authentication_sources: Vec<String>,
    pub updated_at_ms: i64,
}

/// Profile fields to change: `None` leaves one as it is; `Some(None)` clears it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProfileChange {
    pub display_name: Option<Option<String>>,
    pub email: Option<Option<String>>,
    pub active: Option<bool>,
}

impl ControlStore {
    /// Every account, by username.
    ///
    /// # Errors
    /// The store cannot be read.
    pub async fn list_accounts(&self) -> Result<Vec<Account>, StoreError> {
        let mut tx = self.write().await?;
        let rows = sqlx::query(
            "SELECT u.id AS id, u.updated_at AS updated_at, \
             (SELECT count(*) FROM streambuild_password_credentials c WHERE c.user_id = u.id) AS passwords, \
             (SELECT count(*) FROM streambuild_external_identities e WHERE e.user_id = u.id AND e.source = 'trusted_proxy') AS proxies \
             FROM streambuild_users u ORDER BY u.username",
        )
        .fetch_all(&mut *tx)
        .await?;
        let mut accounts = Vec::with_capacity(rows.len());
        for row in &rows {
            let id: String = row.try_get("id")?;
            let Some(user) = by_id_in(&mut tx, &id).await? else {
                continue;
            };
            let mut sources = Vec::new();
            if row.try_get::<i64, _>("passwords")? > 0 {
                sources.push("password".to_owned());
            }
            if row.try_get::<i64, _>("proxies")? > 0 {
                sources.push("trusted_proxy".to_owned());
            }
            accounts.push(Account {
                user,
                authentication_sources: sources,
                updated_at_ms: row.try_get("updated_at")?,
            });
        }
        tx.commit().await?;
        Ok(accounts)
    }

    /// The user with id `id`.
    ///
    /// # Errors
    /// The store cannot be read.
    pub async fn user_by_id(&self, id: &str) -> Result<Option<User>, StoreError> {
        let mut tx = self.write().await?;
        let user = by_id_in(&mut tx, id).await?;
        tx.commit().await?;
        Ok(user)
    }

    /// Changes `id`'s display name and email (audited as `user.profile_updated`), then its
    /// active flag through [`ControlStore::set_active`] (which keeps the last admin).
    ///
    /// # Errors
    /// Unknown user; the last-admin rule.
    pub async fn update_profile(
        &self,
        id: &str,
        change: &ProfileChange,
        actor: Option<&str>,
    ) -> Result<User, StoreError> {
        let user = self.user_by_id(id).await?.ok_or_else(|| {
            StoreError::new(ErrorKind::NotFound, format!("no user with id '{id}'"))
        })?;
        if change.display_name.is_some() || change.email.is_some() {
            let clean = |v: &Option<String>| {
                v.as_ref()
                    .map(|s| s.trim().to_owned())
                    .filter(|s| !s.is_empty())
            };
            let display_name = change
                .display_name
                .as_ref()
                .map_or(user.display_name.clone(), clean);
            let email = change.email.as_ref().map_or(user.email.clone(), clean);
            let mut tx = self.write().await?;
            sqlx::query(
                "UPDATE streambuild_users SET display_name = $1, email = $2, updated_at = $3 WHERE id = $4",
            )
            .bind(display_name)
            .bind(email)
            .bind(now_ms())
            .bind(id)
            .execute(&mut *tx)
            .await?;
            audit(
                &mut tx,
                "user.profile_updated",
                actor,
                Some(id),
                &serde_json::json!({"displayName": change.display_name.is_some(), "email": change.email.is_some()}),
            )
            .await?;
            tx.commit().await?;
        }
        if let Some(active) = change.active
            && active != user.is_active
        {
            self.set_active(&user.username, active, actor).await?;
        }
        self.user_by_id(id)
            .await?
            .ok_or_else(|| StoreError::new(ErrorKind::NotFound, format!("no user with id '{id}'")))
    }
}
