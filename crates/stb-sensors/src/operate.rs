//! What operators do with sensors, from the API or `stb sensors`: see them with their
//! statuses and last ticks, start and stop them, read their ticks, and retry or skip the
//! events that were dead-lettered.

use serde::Serialize;
use stb_control::{SensorTick, TickEnd};
use stb_project::sensors::{SensorDefinition, SensorKind, SensorSettings};
use stb_warehouse::Client;

use crate::SensorError;
use crate::dispatch::{Dispatcher, new_tick};
use stb_warehouse::sensor_events::{self as events, Stream};

/// One sensor as the API lists it.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SensorRow {
    #[serde(flatten)]
    pub definition: SensorDefinition,
    /// `running` or `stopped`: the override, else the declared default.
    pub effective_status: String,
    /// The operator's override (`running`/`stopped`); `None` when the code decides.
    pub r#override: Option<String>,
    pub last_tick: Option<SensorTick>,
}

/// `GET /api/sensors` without the dispatcher's health (the server adds it).
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SensorsView {
    pub settings: SensorSettings,
    pub sensors: Vec<SensorRow>,
    pub dead_letter_count: usize,
}

impl Dispatcher {
    fn sensor(&self, name: &str) -> Result<SensorDefinition, SensorError> {
        self.sensors
            .find(name)
            .cloned()
            .ok_or_else(|| SensorError::unknown(name))
    }

    /// Every sensor with its status and last tick, and how many dead letters wait.
    ///
    /// # Errors
    /// The ledger cannot be read.
    pub fn view(&self) -> Result<SensorsView, SensorError> {
        let statuses = self.effective_statuses()?;
        let mut sensors = Vec::new();
        for (definition, (_, status, overridden)) in self.sensors.definitions.iter().zip(statuses) {
            let last_tick = self
                .block_on(
                    self.store
                        .sensor_ticks(&self.target, &definition.name, 1, (None, None)),
                )
                .map_err(SensorError::store)?
                .into_iter()
                .next();
            sensors.push(SensorRow {
                definition: definition.clone(),
                r#override: overridden.then(|| status.clone()),
                effective_status: status,
                last_tick,
            });
        }
        Ok(SensorsView {
            settings: self.sensors.settings,
            sensors,
            dead_letter_count: self.dead_letters()?.len(),
        })
    }

    /// Sets `name`'s status: `running`, `stopped`, or `declared_in_code` (the override is
    /// removed). Returns the status it runs with now.
    ///
    /// # Errors
    /// An unknown sensor or status, or the ledger cannot be written.
    pub fn set_status(
        &self,
        name: &str,
        status: &str,
        actor: Option<&str>,
    ) -> Result<String, SensorError> {
        let sensor = self.sensor(name)?;
        let chosen = match status {
            "running" | "stopped" => Some(status),
            "declared_in_code" => None,
            other => {
                return Err(SensorError::refused(format!(
                    "Unknown sensor status '{other}'"
                )));
            }
        };
        self.block_on(
            self.store
                .set_sensor_override(&self.target, name, chosen, actor),
        )
        .map_err(SensorError::store)?;
        Ok(chosen.map_or(sensor.default_status, str::to_owned))
    }

    /// `name`'s ticks, newest first (`limit` 1 to 500), started within the window.
    ///
    /// # Errors
    /// An unknown sensor, a limit out of range, or the ledger cannot be read.
    pub fn ticks(
        &self,
        name: &str,
        limit: i64,
        window: (Option<i64>, Option<i64>),
    ) -> Result<Vec<SensorTick>, SensorError> {
        self.sensor(name)?;
        if !(1..=500).contains(&limit) {
            return Err(SensorError::refused(format!(
                "limit must be between 1 and 500, received {limit}"
            )));
        }
        self.block_on(self.store.sensor_ticks(&self.target, name, limit, window))
            .map_err(SensorError::store)
    }

    /// The dead letters nothing resolved yet, oldest first.
    ///
    /// # Errors
    /// The ledger cannot be read.
    pub fn dead_letters(&self) -> Result<Vec<SensorTick>, SensorError> {
        self.block_on(self.store.sensor_dead_letters(&self.target))
            .map_err(SensorError::store)
    }

    /// The dead letter of `name` for `event_id`, and `name` as an event sensor.
    fn dead_lettered(
        &self,
        name: &str,
        event_id: &str,
    ) -> Result<(SensorDefinition, Stream), SensorError> {
        let sensor = self.sensor(name)?;
        let stream = match (
            sensor.kind,
            sensor.event_type.as_deref().and_then(Stream::of),
        ) {
            (SensorKind::Event, Some(stream)) => stream,
            _ => {
                return Err(SensorError::refused(format!(
                    "Sensor '{name}' is not an event sensor"
                )));
            }
        };
        let letters = self.dead_letters()?;
        if !letters
            .iter()
            .any(|t| t.sensor_name == name && t.event_id.as_deref() == Some(event_id))
        {
            return Err(SensorError::refused(format!(
                "Event '{event_id}' of sensor '{name}' is not a dead letter"
            )));
        }
        Ok((sensor, stream))
    }

    /// Runs a dead-lettered event again now, as its next attempt: the tick's status
    /// (`succeeded` takes it off the dead letters).
    ///
    /// # Errors
    /// Not a dead letter of an event sensor, its record is gone from the warehouse, or the
    /// ledger or the warehouse failed.
    pub fn retry(
        &mut self,
        client: &Client,
        name: &str,
        event_id: &str,
    ) -> Result<String, SensorError> {
        let (sensor, stream) = self.dead_lettered(name, event_id)?;
        let event = events::by_id(client, &self.database, &self.target, stream, event_id)
            .map_err(|e| SensorError::warehouse(&e))?
            .ok_or_else(|| {
                SensorError::refused(format!(
                    "Event '{event_id}' for sensor '{name}' cannot be rebuilt from persisted observations"
                ))
            })?;
        let attempts = self
            .block_on(
                self.store
                    .sensor_event_attempts(&self.target, name, event_id),
            )
            .map_err(SensorError::store)?;
        if attempts.in_flight_since.is_some_and(|since| {
            crate::now_ms() < since.saturating_add(crate::dispatch::in_flight_ms(&sensor))
        }) {
            return Err(SensorError {
                status: 409,
                ..SensorError::refused(format!(
                    "Event '{event_id}' of sensor '{name}' is being run now; retry it once that attempt has ended"
                ))
            });
        }
        let outcome = self
            .evaluate_event(&sensor, &event, attempts.last_attempt + 1)?
            .ok_or_else(|| {
                SensorError::refused(format!(
                    "Event '{event_id}' of sensor '{name}' is being retried by another dispatcher"
                ))
            })?;
        Ok(outcome.status)
    }

    /// Skips a dead-lettered event for good, with the operator's reason.
    ///
    /// # Errors
    /// A blank reason, not a dead letter of an event sensor, or the ledger failed.
    pub fn skip(&self, name: &str, event_id: &str, reason: &str) -> Result<(), SensorError> {
        if reason.trim().is_empty() {
            return Err(SensorError::refused(
                "Skipping a dead letter requires a reason".to_owned(),
            ));
        }
        let (sensor, _) = self.dead_lettered(name, event_id)?;
        let attempts = self
            .block_on(
                self.store
                    .sensor_event_attempts(&self.target, name, event_id),
            )
            .map_err(SensorError::store)?;
        let mut tick = new_tick(
            &self.target,
            &self.owner,
            &sensor,
            None,
            attempts.last_attempt + 1,
        );
        tick.event_id = Some(event_id);
        let end = TickEnd {
            status: "skipped".into(),
            skip_reason: Some(reason.trim().to_owned()),
            ..TickEnd::default()
        };
        self.block_on(self.store.record_sensor_tick(&tick, &end))
            .map_err(SensorError::store)?;
        Ok(())
    }
}
