//! The sensors' tick ledger: every evaluation (tick) with its outcome, the durable step
//! markers of event handlers, operators' status overrides, each event sensor's checkpoint
//! in the event stream, and the dispatch lease, per target.
//!
//! In the control store rather than in ClickHouse metadata tables (where the reference
//! keeps them): a lease and a delivery claim need compare-and-set, which a transactional
//! store gives exactly. An event's attempt is claimed by inserting its tick, and the
//! ticks' `(target, sensor, event, attempt)` key is unique, so two dispatchers that both
//! believe they hold the lease still run one attempt once.

use serde::Serialize;
use sqlx::Row;
use sqlx::any::AnyRow;

use crate::{ControlStore, StoreError, now_ms};

pub(crate) const TICKS: &str = "CREATE TABLE IF NOT EXISTS streambuild_sensor_ticks (\
    tick_id VARCHAR(36) PRIMARY KEY, target_name VARCHAR(128) NOT NULL, \
    sensor_name VARCHAR(256) NOT NULL, definition_fingerprint VARCHAR(64) NOT NULL, \
    kind VARCHAR(16) NOT NULL, event_id VARCHAR(256), event_kind VARCHAR(32), \
    attempt INTEGER NOT NULL, status VARCHAR(16) NOT NULL, started_at BIGINT NOT NULL, \
    completed_at BIGINT, error_message TEXT, skip_reason TEXT, cursor TEXT, \
    owner_id VARCHAR(64) NOT NULL, \
    UNIQUE (target_name, sensor_name, event_id, attempt))";
pub(crate) const TICKS_BY_TIME: &str = "CREATE INDEX IF NOT EXISTS streambuild_sensor_ticks_by_time \
    ON streambuild_sensor_ticks (target_name, sensor_name, started_at)";
pub(crate) const STEPS: &str = "CREATE TABLE IF NOT EXISTS streambuild_sensor_steps (\
    target_name VARCHAR(128) NOT NULL, sensor_name VARCHAR(256) NOT NULL, \
    event_id VARCHAR(256) NOT NULL, step_key VARCHAR(256) NOT NULL, policy VARCHAR(16) NOT NULL, \
    status VARCHAR(16) NOT NULL, attempt INTEGER NOT NULL, result_json TEXT, error_message TEXT, \
    recorded_at BIGINT NOT NULL, PRIMARY KEY (target_name, sensor_name, event_id, step_key))";
pub(crate) const OVERRIDES: &str = "CREATE TABLE IF NOT EXISTS streambuild_sensor_overrides (\
    target_name VARCHAR(128) NOT NULL, sensor_name VARCHAR(256) NOT NULL, \
    status VARCHAR(16) NOT NULL, actor VARCHAR(128), changed_at BIGINT NOT NULL, \
    PRIMARY KEY (target_name, sensor_name))";
pub(crate) const CHECKPOINTS: &str = "CREATE TABLE IF NOT EXISTS streambuild_sensor_checkpoints (\
    target_name VARCHAR(128) NOT NULL, sensor_name VARCHAR(256) NOT NULL, \
    source VARCHAR(32) NOT NULL, position_at VARCHAR(32) NOT NULL, position_id VARCHAR(256) NOT NULL, \
    recorded_at BIGINT NOT NULL, PRIMARY KEY (target_name, sensor_name))";
pub(crate) const LEASES: &str = "CREATE TABLE IF NOT EXISTS streambuild_sensor_leases (\
    target_name VARCHAR(128) NOT NULL, lease_name VARCHAR(64) NOT NULL, \
    owner_id VARCHAR(64) NOT NULL, acquired_at BIGINT NOT NULL, expires_at BIGINT NOT NULL, \
    PRIMARY KEY (target_name, lease_name))";

/// The statements of the ledger's first version (the same on both backends).
pub(crate) fn v1() -> Vec<&'static str> {
    vec![TICKS, TICKS_BY_TIME, STEPS, OVERRIDES, CHECKPOINTS, LEASES]
}

/// One evaluation of a sensor, as the API shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SensorTick {
    pub tick_id: String,
    pub sensor_name: String,
    pub definition_fingerprint: String,
    /// `event` or `polling`.
    pub kind: String,
    pub event_id: Option<String>,
    /// `AuditCompleted` or `RunCompleted`.
    pub event_kind: Option<String>,
    pub attempt: i64,
    /// `started`, `succeeded`, `skipped`, `failed` or `dead_lettered`.
    pub status: String,
    /// Epoch milliseconds.
    pub started_at: i64,
    pub completed_at: Option<i64>,
    pub error_message: Option<String>,
    pub skip_reason: Option<String>,
    pub cursor: Option<String>,
}

/// A tick about to run: claimed by recording it as `started`.
#[derive(Debug, Clone)]
pub struct NewTick<'a> {
    pub target: &'a str,
    pub sensor: &'a str,
    pub fingerprint: &'a str,
    pub kind: &'a str,
    pub event_id: Option<&'a str>,
    pub event_kind: Option<&'a str>,
    pub attempt: i64,
    pub owner: &'a str,
}

/// How a tick ended.
#[derive(Debug, Clone, Default)]
pub struct TickEnd {
    pub status: String,
    pub error_message: Option<String>,
    pub skip_reason: Option<String>,
    pub cursor: Option<String>,
}

/// What the ledger knows about one event for one sensor.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EventAttempts {
    /// The highest attempt on record (0: none): the next tick is this plus one.
    pub last_attempt: i64,
    pub failed_attempts: i64,
    pub last_failed_at: Option<i64>,
    pub last_error: Option<String>,
    /// A tick succeeded, was skipped or dead-lettered: the event is done with.
    pub resolved: bool,
    /// Its newest tick is `dead_lettered` and nothing resolved it since.
    pub dead_lettered: bool,
    /// When its newest attempt started, if that attempt has not ended: a dispatcher may
    /// be running it now.
    pub in_flight_since: Option<i64>,
}

/// A durable step marker: `started`, `failed` or `succeeded`, with its memoised result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SensorStep {
    pub step_key: String,
    /// `at_least_once` or `at_most_once`.
    pub policy: String,
    pub status: String,
    pub attempt: i64,
    pub result_json: Option<String>,
    pub error_message: Option<String>,
}

/// An operator's status for a sensor, beating the one declared in code.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SensorOverride {
    pub sensor_name: String,
    /// `running` or `stopped`.
    pub status: String,
    pub actor: Option<String>,
    pub changed_at: i64,
}

/// Where an event sensor is in its stream: the last event it is done with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Checkpoint {
    /// `node_results` or `invocations`.
    pub source: String,
    /// The event's completion time as the warehouse writes it (`YYYY-MM-DD HH:MM:SS.mmm`).
    pub position_at: String,
    pub position_id: String,
}

const TICK_COLUMNS: &str = "tick_id, sensor_name, definition_fingerprint, kind, event_id, event_kind, \
    attempt, status, started_at, completed_at, error_message, skip_reason, cursor";

fn tick(row: &AnyRow) -> Result<SensorTick, StoreError> {
    Ok(SensorTick {
        tick_id: row.try_get("tick_id")?,
        sensor_name: row.try_get("sensor_name")?,
        definition_fingerprint: row.try_get("definition_fingerprint")?,
        kind: row.try_get("kind")?,
        event_id: row.try_get("event_id")?,
        event_kind: row.try_get("event_kind")?,
        attempt: integer(row, "attempt")?,
        status: row.try_get("status")?,
        started_at: row.try_get("started_at")?,
        completed_at: row.try_get("completed_at")?,
        error_message: row.try_get("error_message")?,
        skip_reason: row.try_get("skip_reason")?,
        cursor: row.try_get("cursor")?,
    })
}

/// An `INTEGER` column: 64 bits on SQLite, 32 on PostgreSQL.
fn integer(row: &AnyRow, column: &str) -> Result<i64, StoreError> {
    row.try_get::<i64, _>(column)
        .or_else(|_| row.try_get::<i32, _>(column).map(i64::from))
        .map_err(StoreError::from)
}

impl ControlStore {
    /// Takes or renews `lease` for `owner` until `ttl_ms` from now: true when `owner`
    /// holds it (it was free, expired, or already `owner`'s). On PostgreSQL "now" is the
    /// database's clock, so dispatchers on hosts whose clocks differ still agree on when a
    /// lease expires; SQLite is one host's file, read with its clock.
    ///
    /// # Errors
    /// The store cannot be written.
    pub async fn acquire_sensor_lease(
        &self,
        target: &str,
        lease: &str,
        owner: &str,
        ttl_ms: i64,
    ) -> Result<bool, StoreError> {
        let mut tx = self.write().await?;
        let now = match self.backend {
            crate::Backend::Sqlite => now_ms(),
            crate::Backend::Postgres => sqlx::query(
                "SELECT CAST(EXTRACT(EPOCH FROM clock_timestamp()) * 1000 AS BIGINT) AS now",
            )
            .fetch_one(&mut *tx)
            .await?
            .try_get("now")?,
        };
        sqlx::query(
            "INSERT INTO streambuild_sensor_leases (target_name, lease_name, owner_id, acquired_at, expires_at) \
             VALUES ($1, $2, $3, $4, $5) ON CONFLICT (target_name, lease_name) DO NOTHING",
        )
        .bind(target)
        .bind(lease)
        .bind(owner)
        .bind(now)
        .bind(now.saturating_add(ttl_ms))
        .execute(&mut *tx)
        .await?;
        let taken = sqlx::query(
            "UPDATE streambuild_sensor_leases SET owner_id = $1, expires_at = $2, \
             acquired_at = CASE WHEN owner_id = $1 THEN acquired_at ELSE $3 END \
             WHERE target_name = $4 AND lease_name = $5 AND (owner_id = $1 OR expires_at < $3)",
        )
        .bind(owner)
        .bind(now.saturating_add(ttl_ms))
        .bind(now)
        .bind(target)
        .bind(lease)
        .execute(&mut *tx)
        .await?
        .rows_affected();
        tx.commit().await?;
        Ok(taken == 1)
    }

    /// Gives `lease` up if `owner` holds it (a dispatcher that stops).
    ///
    /// # Errors
    /// The store cannot be written.
    pub async fn release_sensor_lease(
        &self,
        target: &str,
        lease: &str,
        owner: &str,
    ) -> Result<(), StoreError> {
        sqlx::query(
            "UPDATE streambuild_sensor_leases SET expires_at = 0 \
             WHERE target_name = $1 AND lease_name = $2 AND owner_id = $3",
        )
        .bind(target)
        .bind(lease)
        .bind(owner)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// Records a tick as `started`: its id, or `None` when another dispatcher claimed the
    /// same attempt of the same event first.
    ///
    /// # Errors
    /// The store cannot be written.
    pub async fn start_sensor_tick(
        &self,
        tick: &NewTick<'_>,
    ) -> Result<Option<String>, StoreError> {
        let tick_id = uuid::Uuid::new_v4().to_string();
        let inserted = sqlx::query(
            "INSERT INTO streambuild_sensor_ticks (tick_id, target_name, sensor_name, definition_fingerprint, \
             kind, event_id, event_kind, attempt, status, started_at, owner_id) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, 'started', $9, $10) \
             ON CONFLICT (target_name, sensor_name, event_id, attempt) DO NOTHING",
        )
        .bind(tick_id.as_str())
        .bind(tick.target)
        .bind(tick.sensor)
        .bind(tick.fingerprint)
        .bind(tick.kind)
        .bind(tick.event_id)
        .bind(tick.event_kind)
        .bind(tick.attempt)
        .bind(now_ms())
        .bind(tick.owner)
        .execute(&self.pool)
        .await?
        .rows_affected();
        Ok((inserted == 1).then_some(tick_id))
    }

    /// Records how tick `tick_id` ended.
    ///
    /// # Errors
    /// The store cannot be written.
    pub async fn finish_sensor_tick(&self, tick_id: &str, end: &TickEnd) -> Result<(), StoreError> {
        sqlx::query(
            "UPDATE streambuild_sensor_ticks SET status = $1, completed_at = $2, error_message = $3, \
             skip_reason = $4, cursor = $5 WHERE tick_id = $6",
        )
        .bind(end.status.as_str())
        .bind(now_ms())
        .bind(end.error_message.as_deref())
        .bind(end.skip_reason.as_deref())
        .bind(end.cursor.as_deref())
        .bind(tick_id)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// Records a finished tick in one statement (a dead letter, a skip from an operator).
    /// `None` when that attempt of that event is on record already.
    ///
    /// # Errors
    /// The store cannot be written.
    pub async fn record_sensor_tick(
        &self,
        tick: &NewTick<'_>,
        end: &TickEnd,
    ) -> Result<Option<String>, StoreError> {
        let Some(tick_id) = self.start_sensor_tick(tick).await? else {
            return Ok(None);
        };
        self.finish_sensor_tick(&tick_id, end).await?;
        Ok(Some(tick_id))
    }

    /// Every tick of `sensor` for `event_id`, summed up.
    ///
    /// # Errors
    /// The store cannot be read.
    pub async fn sensor_event_attempts(
        &self,
        target: &str,
        sensor: &str,
        event_id: &str,
    ) -> Result<EventAttempts, StoreError> {
        let rows = sqlx::query(&format!(
            "SELECT {TICK_COLUMNS} FROM streambuild_sensor_ticks \
             WHERE target_name = $1 AND sensor_name = $2 AND event_id = $3 ORDER BY attempt, started_at"
        ))
        .bind(target)
        .bind(sensor)
        .bind(event_id)
        .fetch_all(&self.pool)
        .await?;
        let mut attempts = EventAttempts::default();
        for row in &rows {
            let tick = tick(row)?;
            attempts.last_attempt = attempts.last_attempt.max(tick.attempt);
            attempts.in_flight_since = (tick.status == "started").then_some(tick.started_at);
            match tick.status.as_str() {
                "failed" => {
                    attempts.failed_attempts += 1;
                    attempts.last_failed_at = tick.completed_at.or(Some(tick.started_at));
                    attempts.last_error = tick.error_message;
                }
                "succeeded" | "skipped" => {
                    attempts.resolved = true;
                    attempts.dead_lettered = false;
                }
                "dead_lettered" => {
                    attempts.resolved = true;
                    attempts.dead_lettered = true;
                }
                _ => {}
            }
        }
        Ok(attempts)
    }

    /// The newest ticks of `sensor`, newest first, started within `[after, before]` when
    /// given (epoch milliseconds).
    ///
    /// # Errors
    /// The store cannot be read.
    pub async fn sensor_ticks(
        &self,
        target: &str,
        sensor: &str,
        limit: i64,
        (after, before): (Option<i64>, Option<i64>),
    ) -> Result<Vec<SensorTick>, StoreError> {
        let rows = sqlx::query(&format!(
            "SELECT {TICK_COLUMNS} FROM streambuild_sensor_ticks \
             WHERE target_name = $1 AND sensor_name = $2 AND started_at >= $3 AND started_at <= $4 \
             ORDER BY started_at DESC, attempt DESC, tick_id DESC LIMIT $5"
        ))
        .bind(target)
        .bind(sensor)
        .bind(after.unwrap_or(i64::MIN))
        .bind(before.unwrap_or(i64::MAX))
        .bind(limit)
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(tick).collect()
    }

    /// The newest tick of `sensor` that succeeded (a polling sensor's cursor is there).
    ///
    /// # Errors
    /// The store cannot be read.
    pub async fn last_succeeded_sensor_tick(
        &self,
        target: &str,
        sensor: &str,
    ) -> Result<Option<SensorTick>, StoreError> {
        let row = sqlx::query(&format!(
            "SELECT {TICK_COLUMNS} FROM streambuild_sensor_ticks \
             WHERE target_name = $1 AND sensor_name = $2 AND status = 'succeeded' \
             ORDER BY started_at DESC, tick_id DESC LIMIT 1"
        ))
        .bind(target)
        .bind(sensor)
        .fetch_optional(&self.pool)
        .await?;
        row.as_ref().map(tick).transpose()
    }

    /// The events whose newest word is a dead letter (nothing succeeded or was skipped
    /// since), one tick each, oldest first.
    ///
    /// # Errors
    /// The store cannot be read.
    pub async fn sensor_dead_letters(&self, target: &str) -> Result<Vec<SensorTick>, StoreError> {
        let rows = sqlx::query(&format!(
            "SELECT {TICK_COLUMNS} FROM streambuild_sensor_ticks AS d \
             WHERE target_name = $1 AND status = 'dead_lettered' AND NOT EXISTS (\
               SELECT 1 FROM streambuild_sensor_ticks AS r WHERE r.target_name = d.target_name \
               AND r.sensor_name = d.sensor_name AND r.event_id = d.event_id \
               AND r.status IN ('succeeded', 'skipped')) \
             ORDER BY started_at, tick_id"
        ))
        .bind(target)
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(tick).collect()
    }

    /// The step markers of `sensor` for `event_id`.
    ///
    /// # Errors
    /// The store cannot be read.
    pub async fn sensor_steps(
        &self,
        target: &str,
        sensor: &str,
        event_id: &str,
    ) -> Result<Vec<SensorStep>, StoreError> {
        let rows = sqlx::query(
            "SELECT step_key, policy, status, attempt, result_json, error_message \
             FROM streambuild_sensor_steps WHERE target_name = $1 AND sensor_name = $2 AND event_id = $3 \
             ORDER BY recorded_at, step_key",
        )
        .bind(target)
        .bind(sensor)
        .bind(event_id)
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|row| {
                Ok(SensorStep {
                    step_key: row.try_get("step_key")?,
                    policy: row.try_get("policy")?,
                    status: row.try_get("status")?,
                    attempt: integer(row, "attempt")?,
                    result_json: row.try_get("result_json")?,
                    error_message: row.try_get("error_message")?,
                })
            })
            .collect()
    }

    /// Records a step marker (the newest word on that step wins).
    ///
    /// # Errors
    /// The store cannot be written.
    pub async fn record_sensor_step(
        &self,
        target: &str,
        sensor: &str,
        event_id: &str,
        step: &SensorStep,
    ) -> Result<(), StoreError> {
        sqlx::query(
            "INSERT INTO streambuild_sensor_steps (target_name, sensor_name, event_id, step_key, policy, \
             status, attempt, result_json, error_message, recorded_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) \
             ON CONFLICT (target_name, sensor_name, event_id, step_key) DO UPDATE SET \
             policy = excluded.policy, status = excluded.status, attempt = excluded.attempt, \
             result_json = excluded.result_json, error_message = excluded.error_message, \
             recorded_at = excluded.recorded_at",
        )
        .bind(target)
        .bind(sensor)
        .bind(event_id)
        .bind(step.step_key.as_str())
        .bind(step.policy.as_str())
        .bind(step.status.as_str())
        .bind(step.attempt)
        .bind(step.result_json.as_deref())
        .bind(step.error_message.as_deref())
        .bind(now_ms())
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// The operators' overrides for `target`'s sensors.
    ///
    /// # Errors
    /// The store cannot be read.
    pub async fn sensor_overrides(&self, target: &str) -> Result<Vec<SensorOverride>, StoreError> {
        let rows = sqlx::query(
            "SELECT sensor_name, status, actor, changed_at FROM streambuild_sensor_overrides \
             WHERE target_name = $1 ORDER BY sensor_name",
        )
        .bind(target)
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|row| {
                Ok(SensorOverride {
                    sensor_name: row.try_get("sensor_name")?,
                    status: row.try_get("status")?,
                    actor: row.try_get("actor")?,
                    changed_at: row.try_get("changed_at")?,
                })
            })
            .collect()
    }

    /// Sets an operator's status for `sensor` (`running` or `stopped`), or removes it
    /// (`None`: the status declared in code applies again).
    ///
    /// # Errors
    /// The store cannot be written.
    pub async fn set_sensor_override(
        &self,
        target: &str,
        sensor: &str,
        status: Option<&str>,
        actor: Option<&str>,
    ) -> Result<(), StoreError> {
        let Some(status) = status else {
            sqlx::query(
                "DELETE FROM streambuild_sensor_overrides WHERE target_name = $1 AND sensor_name = $2",
            )
            .bind(target)
            .bind(sensor)
            .execute(&self.pool)
            .await?;
            return Ok(());
        };
        sqlx::query(
            "INSERT INTO streambuild_sensor_overrides (target_name, sensor_name, status, actor, changed_at) \
             VALUES ($1, $2, $3, $4, $5) ON CONFLICT (target_name, sensor_name) DO UPDATE SET \
             status = excluded.status, actor = excluded.actor, changed_at = excluded.changed_at",
        )
        .bind(target)
        .bind(sensor)
        .bind(status)
        .bind(actor)
        .bind(now_ms())
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// Where event sensor `sensor` is in its stream, if it has started.
    ///
    /// # Errors
    /// The store cannot be read.
    pub async fn sensor_checkpoint(
        &self,
        target: &str,
        sensor: &str,
    ) -> Result<Option<Checkpoint>, StoreError> {
        let row = sqlx::query(
            "SELECT source, position_at, position_id FROM streambuild_sensor_checkpoints \
             WHERE target_name = $1 AND sensor_name = $2",
        )
        .bind(target)
        .bind(sensor)
        .fetch_optional(&self.pool)
        .await?;
        row.map(|row| {
            Ok(Checkpoint {
                source: row.try_get("source")?,
                position_at: row.try_get("position_at")?,
                position_id: row.try_get("position_id")?,
            })
        })
        .transpose()
    }

    /// Moves event sensor `sensor` to `checkpoint`.
    ///
    /// # Errors
    /// The store cannot be written.
    pub async fn save_sensor_checkpoint(
        &self,
        target: &str,
        sensor: &str,
        checkpoint: &Checkpoint,
    ) -> Result<(), StoreError> {
        sqlx::query(
            "INSERT INTO streambuild_sensor_checkpoints (target_name, sensor_name, source, position_at, \
             position_id, recorded_at) VALUES ($1, $2, $3, $4, $5, $6) \
             ON CONFLICT (target_name, sensor_name) DO UPDATE SET source = excluded.source, \
             position_at = excluded.position_at, position_id = excluded.position_id, \
             recorded_at = excluded.recorded_at",
        )
        .bind(target)
        .bind(sensor)
        .bind(checkpoint.source.as_str())
        .bind(checkpoint.position_at.as_str())
        .bind(checkpoint.position_id.as_str())
        .bind(now_ms())
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// Deletes the history older than `before_ms` (`[sensors] tick_retention_days`) that
    /// nothing needs any more: the ticks and steps of events a tick resolved for good
    /// (succeeded or skipped), and polling ticks but each sensor's newest success (its
    /// cursor). What an event still waiting for an attempt, a retry or a skip needs (its
    /// failed attempts, its dead letter, its step markers) stays whatever its age.
    /// Returns the ticks deleted.
    ///
    /// # Errors
    /// The store cannot be written.
    pub async fn prune_sensor_history(
        &self,
        target: &str,
        before_ms: i64,
    ) -> Result<u64, StoreError> {
        const RESOLVED: &str = "EXISTS (SELECT 1 FROM streambuild_sensor_ticks AS r \
            WHERE r.target_name = $1 AND r.sensor_name = {t}.sensor_name \
            AND r.event_id = {t}.event_id AND r.status IN ('succeeded', 'skipped'))";
        let resolved = |table: &str| RESOLVED.replace("{t}", table);
        let mut tx = self.write().await?;
        // Every statement reads the ledger as it was before this prune: the steps first,
        // while the ticks that say their events are resolved are still there.
        sqlx::query(&format!(
            "DELETE FROM streambuild_sensor_steps WHERE target_name = $1 AND recorded_at < $2 AND {}",
            resolved("streambuild_sensor_steps")
        ))
        .bind(target)
        .bind(before_ms)
        .execute(&mut *tx)
        .await?;
        let ticks = sqlx::query(&format!(
            "DELETE FROM streambuild_sensor_ticks WHERE target_name = $1 AND started_at < $2 \
             AND status <> 'started' AND ((event_id IS NOT NULL AND {resolved}) OR (event_id IS NULL \
             AND tick_id NOT IN (SELECT n.tick_id FROM streambuild_sensor_ticks AS n \
               WHERE n.target_name = $1 AND n.event_id IS NULL AND n.status = 'succeeded' \
               AND n.started_at = (SELECT max(m.started_at) FROM streambuild_sensor_ticks AS m \
                 WHERE m.target_name = $1 AND m.sensor_name = n.sensor_name \
                 AND m.event_id IS NULL AND m.status = 'succeeded'))))",
            resolved = resolved("streambuild_sensor_ticks")
        ))
        .bind(target)
        .bind(before_ms)
        .execute(&mut *tx)
        .await?
        .rows_affected();
        tx.commit().await?;
        Ok(ticks)
    }
}
