//! The project's sensors as the API and `stb sensors` show them: each definition with the
//! status it runs with, the providers, and `[sensors]` for the target.

use serde::Serialize;
use stb_project::Project;
use stb_project::sensors::{ProviderDefinition, SensorDefinition, SensorSettings};

/// One sensor: its definition and the status it has now.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SensorView {
    #[serde(flatten)]
    pub definition: SensorDefinition,
    /// `running` or `stopped`: an operator's override, else the declared default.
    pub effective_status: String,
    /// The operator's override (`running`/`stopped`), `None` when the declared default
    /// applies.
    pub r#override: Option<String>,
}

/// What `stb sensors list` prints.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SensorList {
    pub settings: SensorSettings,
    pub sensors: Vec<SensorView>,
    pub providers: Vec<ProviderDefinition>,
}

/// The project's sensors with their declared statuses (no override is on record without
/// the tick ledger).
#[must_use]
pub fn list(project: &Project) -> SensorList {
    SensorList {
        settings: project.sensors.settings,
        sensors: project
            .sensors
            .definitions
            .iter()
            .map(|definition| SensorView {
                effective_status: definition.default_status.clone(),
                r#override: None,
                definition: definition.clone(),
            })
            .collect(),
        providers: project.sensors.providers.clone(),
    }
}
