//! Destruction plans reviewed in `stb dev`: frozen when made, bound to the admin who made
//! them (anyone else is told there is no such plan), valid for 15 minutes, reviewed once
//! and consumed once. The payload's SHA-256 is stored beside it and checked on every
//! read, so a plan edited in the database is refused, never run. Kept here, outside the
//! warehouse, so a plan survives a restart of the server and a reset of the target.

use serde::Serialize;
use sha2::{Digest as _, Sha256};
use sqlx::{Any, Row, Transaction};

use crate::accounts::audit;
use crate::{ControlStore, ErrorKind, StoreError, now_ms};

/// How long a plan may be reviewed and executed.
pub const PLAN_TTL_MS: i64 = 15 * 60 * 1000;

/// The payload layout this tool writes.
const PAYLOAD_VERSION: i64 = 1;

/// A stored plan.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StoredPlan {
    pub plan_id: String,
    pub actor: String,
    pub payload: serde_json::Value,
    pub created_at_ms: i64,
    pub expires_at_ms: i64,
    pub reviewed_at_ms: Option<i64>,
    pub consumed_at_ms: Option<i64>,
    /// `created`, `reviewed` or `consumed`.
    pub status: String,
}

/// What a plan id names for an actor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PlanLookup {
    Found(StoredPlan),
    /// Its 15 minutes are over.
    Expired,
    /// Unknown, another actor's, or already consumed.
    Missing,
    /// Executing needs a review first.
    NotReviewed,
}

fn digest(payload: &str) -> String {
    Sha256::digest(payload.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Reads `plan_id` for `actor` in `tx`, checking its integrity.
async fn read(
    tx: &mut Transaction<'_, Any>,
    plan_id: &str,
    actor: &str,
) -> Result<Option<StoredPlan>, StoreError> {
    let row = sqlx::query(
        "SELECT plan_id, actor, payload_version, payload_json, payload_sha256, created_at, expires_at, \
         reviewed_at, consumed_at, status FROM streambuild_destruction_plans WHERE plan_id = $1 AND actor = $2",
    )
    .bind(plan_id)
    .bind(actor)
    .fetch_optional(&mut **tx)
    .await?;
    let Some(row) = row else { return Ok(None) };
    let text: String = row.try_get("payload_json")?;
    let stored_digest: String = row.try_get("payload_sha256")?;
    let version: i64 = row.try_get("payload_version")?;
    if digest(&text) != stored_digest || version != PAYLOAD_VERSION {
        return Err(StoreError::new(
            ErrorKind::Conflict,
            format!("destruction plan {plan_id} failed its integrity check; it will not run"),
        ));
    }
    let payload = serde_json::from_str(&text).map_err(|e| {
        StoreError::new(
            ErrorKind::Conflict,
            format!("destruction plan {plan_id} is unreadable: {e}"),
        )
    })?;
    Ok(Some(StoredPlan {
        plan_id: row.try_get("plan_id")?,
        actor: row.try_get("actor")?,
        payload,
        created_at_ms: row.try_get("created_at")?,
        expires_at_ms: row.try_get("expires_at")?,
        reviewed_at_ms: row.try_get("reviewed_at")?,
        consumed_at_ms: row.try_get("consumed_at")?,
        status: row.try_get("status")?,
    }))
}

/// A read plan as a lookup at `now`: consumed plans are gone, old ones expired.
fn lookup(plan: Option<StoredPlan>, now: i64) -> PlanLookup {
    match plan {
        None => PlanLookup::Missing,
        Some(plan) if plan.status == "consumed" => PlanLookup::Missing,
        Some(plan) if plan.expires_at_ms <= now => PlanLookup::Expired,
        Some(plan) => PlanLookup::Found(plan),
    }
}

impl ControlStore {
    /// Opens a write transaction and reads `plan_id` for `actor` at `now`: the transaction
    /// and the plan, or what was found instead (the transaction then committed).
    async fn begin_found(
        &self,
        plan_id: &str,
        actor: &str,
        now: i64,
    ) -> Result<Result<(Transaction<'static, Any>, StoredPlan), PlanLookup>, StoreError> {
        let mut tx = self.write().await?;
        match lookup(read(&mut tx, plan_id, actor).await?, now) {
            PlanLookup::Found(plan) => Ok(Ok((tx, plan))),
            other => {
                tx.commit().await?;
                Ok(Err(other))
            }
        }
    }

    /// Stores a new plan made by `actor` (audited) that expires `ttl_ms` from now (the
    /// server gives [`PLAN_TTL_MS`]).
    ///
    /// # Errors
    /// The store cannot be written.
    pub async fn save_destruction_plan(
        &self,
        actor: &str,
        payload: &serde_json::Value,
        ttl_ms: i64,
    ) -> Result<StoredPlan, StoreError> {
        let plan_id = uuid::Uuid::new_v4().to_string();
        let text = payload.to_string();
        let now = now_ms();
        let expires = now.saturating_add(ttl_ms);
        let mut tx = self.write().await?;
        sqlx::query(
            "INSERT INTO streambuild_destruction_plans (plan_id, actor, payload_version, payload_json, \
             payload_sha256, created_at, expires_at, status) VALUES ($1, $2, $3, $4, $5, $6, $7, 'created')",
        )
        .bind(plan_id.as_str())
        .bind(actor)
        .bind(PAYLOAD_VERSION)
        .bind(text.as_str())
        .bind(digest(&text))
        .bind(now)
        .bind(expires)
        .execute(&mut *tx)
        .await?;
        audit(
            &mut tx,
            "destruction_plan.created",
            Some(actor),
            None,
            &serde_json::json!({"planId": plan_id}),
        )
        .await?;
        tx.commit().await?;
        Ok(StoredPlan {
            plan_id,
            actor: actor.to_owned(),
            payload: payload.clone(),
            created_at_ms: now,
            expires_at_ms: expires,
            reviewed_at_ms: None,
            consumed_at_ms: None,
            status: "created".to_owned(),
        })
    }

    /// Plan `plan_id` as `actor` may see it.
    ///
    /// # Errors
    /// The store cannot be read, or the plan fails its integrity check.
    pub async fn destruction_plan(
        &self,
        plan_id: &str,
        actor: &str,
    ) -> Result<PlanLookup, StoreError> {
        let mut tx = self.write().await?;
        let plan = read(&mut tx, plan_id, actor).await?;
        tx.commit().await?;
        Ok(lookup(plan, now_ms()))
    }

    /// Marks the plan reviewed by its actor (once; again is a no-op) and returns it.
    ///
    /// # Errors
    /// The store cannot be written, or the plan fails its integrity check.
    pub async fn review_destruction_plan(
        &self,
        plan_id: &str,
        actor: &str,
    ) -> Result<PlanLookup, StoreError> {
        let now = now_ms();
        let (mut tx, mut plan) = match self.begin_found(plan_id, actor, now).await? {
            Ok(found) => found,
            Err(other) => return Ok(other),
        };
        if plan.status == "created" {
            sqlx::query(
                "UPDATE streambuild_destruction_plans SET status = 'reviewed', reviewed_at = $1 \
                 WHERE plan_id = $2 AND status = 'created'",
            )
            .bind(now)
            .bind(plan_id)
            .execute(&mut *tx)
            .await?;
            audit(
                &mut tx,
                "destruction_plan.reviewed",
                Some(actor),
                None,
                &serde_json::json!({"planId": plan_id}),
            )
            .await?;
            plan.status = "reviewed".to_owned();
            plan.reviewed_at_ms = Some(now);
        }
        tx.commit().await?;
        Ok(PlanLookup::Found(plan))
    }

    /// Consumes a reviewed plan for execution: exactly one caller gets it.
    ///
    /// # Errors
    /// The store cannot be written, or the plan fails its integrity check.
    pub async fn consume_destruction_plan(
        &self,
        plan_id: &str,
        actor: &str,
    ) -> Result<PlanLookup, StoreError> {
        let now = now_ms();
        let (mut tx, mut plan) = match self.begin_found(plan_id, actor, now).await? {
            Ok(found) => found,
            Err(other) => return Ok(other),
        };
        if plan.status != "reviewed" {
            tx.commit().await?;
            return Ok(PlanLookup::NotReviewed);
        }
        let taken = sqlx::query(
            "UPDATE streambuild_destruction_plans SET status = 'consumed', consumed_at = $1 \
             WHERE plan_id = $2 AND status = 'reviewed'",
        )
        .bind(now)
        .bind(plan_id)
        .execute(&mut *tx)
        .await?
        .rows_affected();
        if taken != 1 {
            tx.commit().await?;
            return Ok(PlanLookup::Missing);
        }
        audit(
            &mut tx,
            "destruction_plan.consumed",
            Some(actor),
            None,
            &serde_json::json!({"planId": plan_id}),
        )
        .await?;
        tx.commit().await?;
        plan.status = "consumed".to_owned();
        plan.consumed_at_ms = Some(now);
        Ok(PlanLookup::Found(plan))
    }
}
