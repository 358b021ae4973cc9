//! `stb sensors`: the project's sensors, for operators without the web UI.

use std::io::Write;
use std::process::ExitCode;

use clap::{Args, Subcommand};
use stb_engine::sensors::SensorList;

use crate::args::ProjectArgs;
use crate::output::print_json;

#[derive(Debug, Subcommand)]
pub(crate) enum SensorsCommand {
    /// The sensors under sensors/ and the providers under providers/: kind, what each
    /// reacts to, status, retry policy (offline; docs/sensors.md).
    List(ListArgs),
}

#[derive(Debug, Args)]
pub(crate) struct ListArgs {
    #[command(flatten)]
    project: ProjectArgs,
    /// Print the list as JSON on stdout (docs/sensors.md).
    #[arg(long)]
    json: bool,
}

pub(crate) fn run(command: &SensorsCommand) -> ExitCode {
    match command {
        SensorsCommand::List(args) => list(args),
    }
}

fn list(args: &ListArgs) -> ExitCode {
    let project = match args.project.discover(args.json) {
        Ok((_, project)) => project,
        Err(code) => return code,
    };
    let listed = stb_engine::sensors::list(&project);
    if args.json {
        print_json(&listed);
    } else {
        let _ = std::io::stdout()
            .lock()
            .write_all(render(&listed).as_bytes());
    }
    ExitCode::SUCCESS
}

fn render(listed: &SensorList) -> String {
    let settings = &listed.settings;
    let mut text = format!(
        "sensors {} for this target (tick retention {}, maximum event age {})\n",
        if settings.enabled {
            "enabled"
        } else {
            "disabled ([sensors] enabled = true runs them in stb dev)"
        },
        match settings.tick_retention_days {
            0 => "unlimited".to_owned(),
            days => format!("{days} days"),
        },
        settings
            .maximum_event_age_seconds
            .map_or_else(|| "none".to_owned(), |s| format!("{s}s")),
    );
    if listed.sensors.is_empty() {
        text.push_str("no sensors (Python modules under sensors/)\n");
    }
    for sensor in &listed.sensors {
        let definition = &sensor.definition;
        let reacts = match (&definition.event_type, definition.minimum_interval_seconds) {
            (Some(event), _) => format!("on {event}"),
            (None, Some(interval)) => format!("every {interval}s or more"),
            (None, None) => String::new(),
        };
        let status = match &sensor.r#override {
            Some(_) => format!("{} (override)", sensor.effective_status),
            None => sensor.effective_status.clone(),
        };
        let retry = definition.retry_policy;
        text.push_str(&format!(
            "{:<24} {:<8} {:<28} {:<18} {} attempt(s), {}s backoff, timeout {}s  {}\n",
            definition.name,
            serde_json::to_value(definition.kind)
                .ok()
                .and_then(|v| v.as_str().map(str::to_owned))
                .unwrap_or_default(),
            reacts,
            status,
            retry.max_attempts,
            retry.backoff_seconds,
            definition.timeout_seconds,
            definition.file,
        ));
        if let Some(description) = &definition.description {
            text.push_str(&format!("    {description}\n"));
        }
    }
    for provider in &listed.providers {
        text.push_str(&format!(
            "provider {:<15} {} ({})\n",
            provider.name, provider.class, provider.file
        ));
    }
    text
}
