//! One dispatch pass, as the reference's dispatcher makes it every ten seconds: take (or
//! renew) the target's lease, then evaluate every sensor whose status is `running`.
//!
//! An event sensor starts at the head of its stream (it does not replay history), then
//! delivers the events after its checkpoint up to the head captured when the pass began,
//! oldest first. Per event: resolved already, skipped; failed `max_attempts` times, dead-
//! lettered (it stops blocking the stream); inside its backoff, the sensor waits for a
//! later pass; else the next attempt runs, claimed in the ledger first. A failed attempt
//! blocks the stream at that event until it succeeds or is dead-lettered. The lease is
//! renewed before every delivery; a pass that loses it stops at once. A polling sensor
//! ticks when its interval has passed since its last tick began; a failed poll is recorded
//! and not retried.

use serde::Serialize;
use stb_control::{Checkpoint, ControlStore, NewTick, SensorStep, TickEnd};
use stb_project::sensors::{
    Evaluation, PollingState, SensorDefinition, SensorKind, SensorRuntime, StepMarker, TickOutcome,
};
use stb_warehouse::Client;

use crate::{SensorError, now_ms};
use stb_warehouse::sensor_events::{self as events, Event, Position, Stream};

/// The lease every dispatcher of a target competes for.
pub const LEASE: &str = "sensor_dispatch";
/// How long a lease lasts unless renewed.
pub const LEASE_TTL_MS: i64 = 60_000;
/// Tick retention runs at most this often.
const PRUNE_EVERY_MS: i64 = 3_600_000;

/// What one pass did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PassSummary {
    /// False: another dispatcher holds the lease (this one stands by).
    pub lease_held: bool,
    pub evaluated: u32,
    pub succeeded: u32,
    pub skipped: u32,
    pub failed: u32,
    pub dead_lettered: u32,
    /// Event sensors started at their stream's head this pass.
    pub started: u32,
}

/// A target's sensors and what evaluates them: the project's definitions, the ledger, a
/// sensor worker, and this dispatcher's identity for the lease.
pub struct Dispatcher {
    pub(crate) sensors: stb_project::sensors::Sensors,
    pub(crate) target: String,
    pub(crate) database: String,
    pub(crate) store: ControlStore,
    pub(crate) handle: tokio::runtime::Handle,
    pub(crate) runtime: SensorRuntime,
    pub(crate) owner: String,
    last_prune_ms: Option<i64>,
}

/// Where a sensor's delivery stopped in a pass.
enum Delivery {
    /// The event is done with: move past it.
    Resolved,
    /// It waits for a later pass (a failed attempt, a backoff, another dispatcher's claim).
    Blocked,
    /// The lease is gone: stop the pass.
    LeaseLost,
}

impl Dispatcher {
    /// A dispatcher of `project`'s sensors for its target, writing to `store` (whose
    /// async calls run on `handle`), known to other dispatchers as `owner`.
    #[must_use]
    pub fn new(
        project: &stb_project::Project,
        database: &str,
        store: ControlStore,
        handle: tokio::runtime::Handle,
        owner: &str,
    ) -> Self {
        Self {
            sensors: project.sensors.clone(),
            target: project.target.clone(),
            database: database.to_owned(),
            store,
            handle,
            runtime: SensorRuntime::new(&project.root),
            owner: owner.to_owned(),
            last_prune_ms: None,
        }
    }

    /// Whether this dispatcher evaluates exactly `sensors` (a reloaded project with other
    /// definitions needs a new one: its worker loaded the old files).
    #[must_use]
    pub fn serves(&self, sensors: &stb_project::sensors::Sensors) -> bool {
        &self.sensors == sensors
    }

    /// The providers the project's sensors may take.
    #[must_use]
    pub fn providers(&self) -> &[stb_project::sensors::ProviderDefinition] {
        &self.sensors.providers
    }

    /// Closes the ledger's connections.
    pub async fn close(&self) {
        self.store.close().await;
    }

    pub(crate) fn block_on<F: std::future::Future>(&self, future: F) -> F::Output {
        self.handle.block_on(future)
    }

    /// Takes or renews the lease for `ttl_ms`.
    fn lease(&self, ttl_ms: i64) -> Result<bool, SensorError> {
        self.block_on(
            self.store
                .acquire_sensor_lease(&self.target, LEASE, &self.owner, ttl_ms),
        )
        .map_err(SensorError::store)
    }

    /// Gives the lease up (a dispatcher that stops).
    ///
    /// # Errors
    /// The store cannot be written.
    pub fn release(&self) -> Result<(), SensorError> {
        self.block_on(
            self.store
                .release_sensor_lease(&self.target, LEASE, &self.owner),
        )
        .map_err(SensorError::store)
    }

    /// The status each sensor runs with: an operator's override, else its declared one.
    ///
    /// # Errors
    /// The store cannot be read.
    pub fn effective_statuses(&self) -> Result<Vec<(String, String, bool)>, SensorError> {
        let overrides = self
            .block_on(self.store.sensor_overrides(&self.target))
            .map_err(SensorError::store)?;
        Ok(self
            .sensors
            .definitions
            .iter()
            .map(|sensor| {
                let chosen = overrides.iter().find(|o| o.sensor_name == sensor.name);
                match chosen {
                    Some(o) => (sensor.name.clone(), o.status.clone(), true),
                    None => (sensor.name.clone(), sensor.default_status.clone(), false),
                }
            })
            .collect())
    }

    /// One pass over the target's running sensors.
    ///
    /// # Errors
    /// The ledger or the warehouse failed; what the pass did before that stays recorded.
    pub fn pass(&mut self, client: &Client) -> Result<PassSummary, SensorError> {
        let mut summary = PassSummary::default();
        if !self.lease(LEASE_TTL_MS)? {
            return Ok(summary);
        }
        summary.lease_held = true;
        let statuses = self.effective_statuses()?;
        let mut names: Vec<&(String, String, bool)> =
            statuses.iter().filter(|(_, s, _)| s == "running").collect();
        names.sort();
        for (name, _, _) in names {
            let Some(sensor) = self.sensors.find(name).cloned() else {
                continue;
            };
            let go_on = match sensor.kind {
                SensorKind::Event => self.deliver_events(client, &sensor, &mut summary)?,
                SensorKind::Polling => self.poll(&sensor, &mut summary)?,
            };
            if !go_on {
                summary.lease_held = false;
                return Ok(summary);
            }
        }
        self.prune()?;
        Ok(summary)
    }

    /// Delivers `sensor`'s pending events; false when the lease was lost.
    fn deliver_events(
        &mut self,
        client: &Client,
        sensor: &SensorDefinition,
        summary: &mut PassSummary,
    ) -> Result<bool, SensorError> {
        let Some(stream) = sensor.event_type.as_deref().and_then(Stream::of) else {
            return Ok(true);
        };
        let head = events::head(client, &self.database, &self.target, stream)
            .map_err(|e| SensorError::warehouse(&e))?;
        let checkpoint = self
            .block_on(self.store.sensor_checkpoint(&self.target, &sensor.name))
            .map_err(SensorError::store)?;
        let Some(checkpoint) = checkpoint else {
            // A sensor starts at the head: it reacts to what happens from now on.
            self.save_checkpoint(&sensor.name, stream, &head)?;
            summary.started += 1;
            return Ok(true);
        };
        let mut at = Position {
            at: checkpoint.position_at,
            id: checkpoint.position_id,
        };
        loop {
            let page = events::page(client, &self.database, &self.target, stream, (&at, &head))
                .map_err(|e| SensorError::warehouse(&e))?;
            let full = page.len() == events::PAGE;
            for event in &page {
                match self.deliver(sensor, event, summary)? {
                    Delivery::Resolved => {
                        at = event.position();
                        self.save_checkpoint(&sensor.name, stream, &at)?;
                    }
                    Delivery::Blocked => return Ok(true),
                    Delivery::LeaseLost => return Ok(false),
                }
            }
            if !full {
                return Ok(true);
            }
        }
    }

    fn save_checkpoint(
        &self,
        sensor: &str,
        stream: Stream,
        at: &Position,
    ) -> Result<(), SensorError> {
        let checkpoint = Checkpoint {
            source: stream.source().to_owned(),
            position_at: at.at.clone(),
            position_id: at.id.clone(),
        };
        self.block_on(
            self.store
                .save_sensor_checkpoint(&self.target, sensor, &checkpoint),
        )
        .map_err(SensorError::store)
    }

    /// Whether `sensor` wants `event`: its target and trigger filters.
    fn wants(sensor: &SensorDefinition, event: &Event) -> bool {
        let targets = sensor
            .targets
            .as_ref()
            .is_none_or(|t| t.contains(&event.target));
        let triggers = sensor.triggers.as_ref().is_none_or(|t| {
            event
                .trigger
                .as_ref()
                .is_some_and(|trigger| t.contains(trigger))
        });
        targets && triggers
    }

    fn deliver(
        &mut self,
        sensor: &SensorDefinition,
        event: &Event,
        summary: &mut PassSummary,
    ) -> Result<Delivery, SensorError> {
        if !Self::wants(sensor, event) {
            return Ok(Delivery::Resolved);
        }
        let age = sensor.maximum_event_age_seconds.or(self
            .sensors
            .settings
            .maximum_event_age_seconds
            .map(|s| s as f64));
        if let Some(age) = age
            && event.completed_ms.saturating_add(millis(age)) < now_ms()
        {
            return Ok(Delivery::Resolved);
        }
        let ttl = LEASE_TTL_MS.max(millis(sensor.timeout_seconds + 10.0));
        if !self.lease(ttl)? {
            return Ok(Delivery::LeaseLost);
        }
        let attempts = self
            .block_on(
                self.store
                    .sensor_event_attempts(&self.target, &sensor.name, &event.id),
            )
            .map_err(SensorError::store)?;
        if attempts.resolved {
            return Ok(Delivery::Resolved);
        }
        // An attempt that started and has not ended may still be running elsewhere (a
        // dispatcher that lost its lease to a slow start); one older than it could take
        // was abandoned, and the next attempt runs.
        if attempts
            .in_flight_since
            .is_some_and(|since| now_ms() < since.saturating_add(in_flight_ms(sensor)))
        {
            return Ok(Delivery::Blocked);
        }
        let max_attempts = i64::from(sensor.retry_policy.max_attempts.max(1));
        let attempt = attempts.last_attempt + 1;
        if attempts.failed_attempts >= max_attempts {
            self.dead_letter(sensor, event, attempt, attempts.last_error)?;
            summary.dead_lettered += 1;
            return Ok(Delivery::Resolved);
        }
        let backoff_ms = millis(sensor.retry_policy.backoff_seconds);
        if let Some(failed_at) = attempts.last_failed_at
            && now_ms() < failed_at + backoff_ms
        {
            return Ok(Delivery::Blocked);
        }
        let Some(outcome) = self.evaluate_event(sensor, event, attempt)? else {
            // Another dispatcher claimed this attempt: it is delivering it.
            return Ok(Delivery::Blocked);
        };
        summary.evaluated += 1;
        match outcome.status.as_str() {
            "succeeded" => summary.succeeded += 1,
            "skipped" => summary.skipped += 1,
            _ => summary.failed += 1,
        }
        if outcome.status != "failed" {
            return Ok(Delivery::Resolved);
        }
        if attempts.failed_attempts + 1 >= max_attempts {
            // Out of attempts: dead-lettered now, so it stops blocking the stream.
            self.dead_letter(sensor, event, attempt + 1, outcome.error)?;
            summary.dead_lettered += 1;
            return Ok(Delivery::Resolved);
        }
        Ok(Delivery::Blocked)
    }

    fn dead_letter(
        &self,
        sensor: &SensorDefinition,
        event: &Event,
        attempt: i64,
        error: Option<String>,
    ) -> Result<(), SensorError> {
        let tick = new_tick(&self.target, &self.owner, sensor, Some(event), attempt);
        let end = TickEnd {
            status: "dead_lettered".into(),
            error_message: error,
            ..TickEnd::default()
        };
        self.block_on(self.store.record_sensor_tick(&tick, &end))
            .map_err(SensorError::store)?;
        Ok(())
    }

    /// Claims attempt `attempt` of `event` for `sensor` and runs it; `None` when another
    /// dispatcher claimed it first.
    pub(crate) fn evaluate_event(
        &mut self,
        sensor: &SensorDefinition,
        event: &Event,
        attempt: i64,
    ) -> Result<Option<TickOutcome>, SensorError> {
        self.runtime.ready().map_err(SensorError::worker)?;
        let tick = new_tick(&self.target, &self.owner, sensor, Some(event), attempt);
        let Some(tick_id) = self
            .block_on(self.store.start_sensor_tick(&tick))
            .map_err(SensorError::store)?
        else {
            return Ok(None);
        };
        let steps = self
            .block_on(
                self.store
                    .sensor_steps(&self.target, &sensor.name, &event.id),
            )
            .map_err(SensorError::store)?
            .into_iter()
            .map(|s| StepMarker {
                step_key: s.step_key,
                policy: s.policy,
                status: s.status,
                attempt: s.attempt,
                result_json: s.result_json,
                error_message: s.error_message,
            })
            .collect();
        let evaluation = Evaluation {
            sensor,
            target: &self.target,
            event: Some(event.fields.clone()),
            polling: None,
            steps,
        };
        let (store, handle, target) = (&self.store, &self.handle, &self.target);
        let outcome = self.runtime.evaluate(&evaluation, &mut |marker| {
            let step = SensorStep {
                step_key: marker.step_key.clone(),
                policy: marker.policy.clone(),
                status: marker.status.clone(),
                attempt: marker.attempt,
                result_json: marker.result_json.clone(),
                error_message: marker.error_message.clone(),
            };
            handle
                .block_on(store.record_sensor_step(target, &sensor.name, &event.id, &step))
                .map_err(|e| e.message)
        });
        self.finish(&tick_id, &outcome)?;
        Ok(Some(outcome))
    }

    fn finish(&self, tick_id: &str, outcome: &TickOutcome) -> Result<(), SensorError> {
        let end = TickEnd {
            status: outcome.status.clone(),
            error_message: outcome.error.clone(),
            skip_reason: outcome.skip_reason.clone(),
            cursor: outcome.cursor.clone(),
        };
        self.block_on(self.store.finish_sensor_tick(tick_id, &end))
            .map_err(SensorError::store)
    }

    /// Ticks a polling sensor whose interval has passed; false when the lease was lost.
    fn poll(
        &mut self,
        sensor: &SensorDefinition,
        summary: &mut PassSummary,
    ) -> Result<bool, SensorError> {
        let last = self
            .block_on(
                self.store
                    .sensor_ticks(&self.target, &sensor.name, 1, (None, None)),
            )
            .map_err(SensorError::store)?;
        let interval_ms = millis(sensor.minimum_interval_seconds.unwrap_or(0.0));
        if last
            .first()
            .is_some_and(|last| now_ms() < last.started_at.saturating_add(interval_ms))
        {
            return Ok(true);
        }
        let ttl = LEASE_TTL_MS.max(millis(sensor.timeout_seconds + 10.0));
        if !self.lease(ttl)? {
            return Ok(false);
        }
        let last_success = self
            .block_on(
                self.store
                    .last_succeeded_sensor_tick(&self.target, &sensor.name),
            )
            .map_err(SensorError::store)?;
        let last_success = last_success.as_ref();
        let polling = PollingState {
            cursor: last_success.and_then(|t| t.cursor.clone()),
            last_success_at: last_success.map(|t| crate::timestamp(t.started_at)),
        };
        self.runtime.ready().map_err(SensorError::worker)?;
        let tick = new_tick(&self.target, &self.owner, sensor, None, 1);
        let Some(tick_id) = self
            .block_on(self.store.start_sensor_tick(&tick))
            .map_err(SensorError::store)?
        else {
            return Ok(true);
        };
        let evaluation = Evaluation {
            sensor,
            target: &self.target,
            event: None,
            polling: Some(polling),
            steps: Vec::new(),
        };
        let outcome = self.runtime.evaluate(&evaluation, &mut |_| {
            Err("polling sensors have no steps".into())
        });
        self.finish(&tick_id, &outcome)?;
        summary.evaluated += 1;
        match outcome.status.as_str() {
            "succeeded" => summary.succeeded += 1,
            "skipped" => summary.skipped += 1,
            _ => summary.failed += 1,
        }
        Ok(true)
    }

    /// `[sensors] tick_retention_days`, at most hourly.
    fn prune(&mut self) -> Result<(), SensorError> {
        let days = self.sensors.settings.tick_retention_days;
        let now = now_ms();
        if days == 0
            || self
                .last_prune_ms
                .is_some_and(|last| now < last + PRUNE_EVERY_MS)
        {
            return Ok(());
        }
        let keep_ms = i64::try_from(days)
            .unwrap_or(i64::MAX / 86_400_000)
            .saturating_mul(86_400_000);
        self.block_on(
            self.store
                .prune_sensor_history(&self.target, now.saturating_sub(keep_ms)),
        )
        .map_err(SensorError::store)?;
        self.last_prune_ms = Some(now);
        Ok(())
    }
}

/// How long an attempt may run before a dispatcher takes it for abandoned: its lease's
/// lifetime and a worker's start on top of the handler's timeout.
pub(crate) fn in_flight_ms(sensor: &SensorDefinition) -> i64 {
    LEASE_TTL_MS
        .max(millis(sensor.timeout_seconds + 10.0))
        .saturating_add(60_000)
}

/// Seconds (as declared in Python) in whole milliseconds, clamped to what fits.
fn millis(seconds: f64) -> i64 {
    let ms = (seconds * 1000.0).round();
    if ms.is_nan() || ms <= 0.0 {
        0
    } else if ms >= 9.0e15 {
        9_000_000_000_000_000
    } else {
        // In range and whole: the cast is exact.
        #[allow(clippy::cast_possible_truncation)]
        let whole = ms as i64;
        whole
    }
}

pub(crate) fn new_tick<'a>(
    target: &'a str,
    owner: &'a str,
    sensor: &'a SensorDefinition,
    event: Option<&'a Event>,
    attempt: i64,
) -> NewTick<'a> {
    NewTick {
        target,
        sensor: &sensor.name,
        fingerprint: &sensor.fingerprint,
        kind: match sensor.kind {
            SensorKind::Event => "event",
            SensorKind::Polling => "polling",
        },
        event_id: event.map(|e| e.id.as_str()),
        event_kind: sensor.event_type.as_deref().filter(|_| event.is_some()),
        attempt,
        owner,
    }
}
