//! Server-side sessions: a random token the browser keeps in a cookie (stored here only as
//! its SHA-256), a CSRF token per session, an absolute expiry, revocation.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use rand::RngCore as _;
use serde::Serialize;
use sha2::{Digest as _, Sha256};
use sqlx::{Any, Row, Transaction};

use crate::accounts::{audit, by_id_in};
use crate::{ControlStore, StoreError, User, now_ms};

/// `last_seen_at` is written at most this often.
const SEEN_EVERY_MS: i64 = 60_000;

/// A session just created: the token goes to the cookie and is never stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewSession {
    pub token: String,
    pub csrf_token: String,
    pub expires_at_ms: i64,
}

/// A live session and its user.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ResolvedSession {
    pub user: User,
    #[serde(skip)]
    pub csrf_token: String,
    pub expires_at_ms: i64,
}

fn random_token(bytes: usize) -> String {
    let mut buffer = vec![0_u8; bytes];
    rand::rng().fill_bytes(&mut buffer);
    URL_SAFE_NO_PAD.encode(buffer)
}

/// The stored form of a session token.
#[must_use]
pub(crate) fn token_hash(token: &str) -> String {
    Sha256::digest(token.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Revokes every live session of `user_id` in `tx` (audited once per session).
pub(crate) async fn revoke_all(
    tx: &mut Transaction<'_, Any>,
    user_id: &str,
    actor: Option<&str>,
) -> Result<u64, StoreError> {
    let revoked = sqlx::query(
        "UPDATE streambuild_sessions SET revoked_at = $1 WHERE user_id = $2 AND revoked_at IS NULL",
    )
    .bind(now_ms())
    .bind(user_id)
    .execute(&mut **tx)
    .await?
    .rows_affected();
    if revoked > 0 {
        audit(
            tx,
            "session.revoked",
            actor,
            Some(user_id),
            &serde_json::json!({"sessions": revoked, "reason": "account change"}),
        )
        .await?;
    }
    Ok(revoked)
}

impl ControlStore {
    /// A new session for `user_id` that expires `ttl_ms` from now (audited).
    ///
    /// # Errors
    /// The store cannot be written.
    pub async fn create_session(
        &self,
        user_id: &str,
        ttl_ms: i64,
    ) -> Result<NewSession, StoreError> {
        let token = random_token(48);
        let csrf_token = random_token(32);
        let now = now_ms();
        let expires_at_ms = now.saturating_add(ttl_ms);
        let mut tx = self.write().await?;
        sqlx::query(
            "INSERT INTO streambuild_sessions (token_hash, user_id, csrf_token, created_at, last_seen_at, expires_at) VALUES ($1, $2, $3, $4, $4, $5)",
        )
        .bind(token_hash(&token))
        .bind(user_id)
        .bind(csrf_token.as_str())
        .bind(now)
        .bind(expires_at_ms)
        .execute(&mut *tx)
        .await?;
        audit(
            &mut tx,
            "session.created",
            Some(user_id),
            Some(user_id),
            &serde_json::json!({"expiresAtMs": expires_at_ms}),
        )
        .await?;
        tx.commit().await?;
        Ok(NewSession {
            token,
            csrf_token,
            expires_at_ms,
        })
    }

    /// The session `token` opens, when it is known, not revoked, not expired and its user
    /// is active. Marks it seen (at most once a minute).
    ///
    /// # Errors
    /// The store cannot be read.
    pub async fn resolve_session(
        &self,
        token: &str,
    ) -> Result<Option<ResolvedSession>, StoreError> {
        let hash = token_hash(token);
        let now = now_ms();
        let mut tx = self.write().await?;
        let row = sqlx::query(
            "SELECT user_id, csrf_token, last_seen_at, expires_at FROM streambuild_sessions \
             WHERE token_hash = $1 AND revoked_at IS NULL AND expires_at > $2",
        )
        .bind(hash.as_str())
        .bind(now)
        .fetch_optional(&mut *tx)
        .await?;
        let Some(row) = row else {
            tx.commit().await?;
            return Ok(None);
        };
        let user_id: String = row.try_get("user_id")?;
        let last_seen: i64 = row.try_get("last_seen_at")?;
        let user = by_id_in(&mut tx, &user_id).await?.filter(|u| u.is_active);
        if user.is_some() && now - last_seen >= SEEN_EVERY_MS {
            sqlx::query("UPDATE streambuild_sessions SET last_seen_at = $1 WHERE token_hash = $2")
                .bind(now)
                .bind(hash.as_str())
                .execute(&mut *tx)
                .await?;
        }
        tx.commit().await?;
        Ok(match user {
            Some(user) => Some(ResolvedSession {
                user,
                csrf_token: row.try_get("csrf_token")?,
                expires_at_ms: row.try_get("expires_at")?,
            }),
            None => None,
        })
    }

    /// Revokes the session `token` opens (logout); whether there was one.
    ///
    /// # Errors
    /// The store cannot be written.
    pub async fn revoke_session(&self, token: &str) -> Result<bool, StoreError> {
        let hash = token_hash(token);
        let mut tx = self.write().await?;
        let user: Option<String> = sqlx::query(
            "SELECT user_id FROM streambuild_sessions WHERE token_hash = $1 AND revoked_at IS NULL",
        )
        .bind(hash.as_str())
        .fetch_optional(&mut *tx)
        .await?
        .map(|row| row.try_get("user_id"))
        .transpose()?;
        if let Some(user) = &user {
            sqlx::query("UPDATE streambuild_sessions SET revoked_at = $1 WHERE token_hash = $2")
                .bind(now_ms())
                .bind(hash.as_str())
                .execute(&mut *tx)
                .await?;
            audit(
                &mut tx,
                "session.revoked",
                Some(user),
                Some(user),
                &serde_json::json!({"reason": "logout"}),
            )
            .await?;
        }
        tx.commit().await?;
        Ok(user.is_some())
    }

    /// Deletes sessions that expired or were revoked more than `older_than_ms` ago; how
    /// many.
    ///
    /// # Errors
    /// The store cannot be written.
    pub async fn prune_sessions(&self, older_than_ms: i64) -> Result<u64, StoreError> {
        let cutoff = now_ms().saturating_sub(older_than_ms);
        Ok(sqlx::query(
            "DELETE FROM streambuild_sessions WHERE expires_at < $1 OR (revoked_at IS NOT NULL AND revoked_at < $1)",
        )
        .bind(cutoff)
        .execute(&self.pool)
        .await?
        .rows_affected())
    }
}
