//! `stb sensors`: the project's sensors for operators without the web UI: list them with
//! their statuses and dead letters, run one dispatch pass, retry or skip a dead letter.
//! The ledger is the control store's (the dev server's, with the same URL).

use std::io::Write;
use std::process::ExitCode;

use clap::{Args, Subcommand};
use stb_sensors::{Dispatcher, SensorError, SensorsView};

use crate::args::TargetArgs;
use crate::control::ControlArgs;
use crate::output::{Failure, fail, print_json};

#[derive(Debug, Subcommand)]
pub(crate) enum SensorsCommand {
    /// The sensors under sensors/ and the providers under providers/: kind, what each
    /// reacts to, status, retry policy, last tick, and the dead letters (docs/sensors.md).
    List(Common),
    /// Run one dispatch pass now, as `stb dev` does every ten seconds: deliver the events
    /// the running sensors have not seen, tick the polling sensors that are due.
    Run(Common),
    /// Run a dead-lettered event again, as its sensor's next attempt.
    Retry(EventArgs),
    /// Give up on a dead-lettered event for good, with a reason.
    Skip(SkipArgs),
}

#[derive(Debug, Args)]
pub(crate) struct Common {
    #[command(flatten)]
    target: TargetArgs,
    #[command(flatten)]
    control: ControlArgs,
}

#[derive(Debug, Args)]
pub(crate) struct EventArgs {
    /// The sensor's name.
    sensor: String,
    /// The event's id (`stb sensors list` shows each dead letter's).
    event_id: String,
    #[command(flatten)]
    common: Common,
}

#[derive(Debug, Args)]
pub(crate) struct SkipArgs {
    #[command(flatten)]
    event: EventArgs,
    /// Why the event is skipped (required; kept with the tick).
    #[arg(long)]
    reason: String,
}

pub(crate) fn run(command: &SensorsCommand) -> ExitCode {
    let common = match command {
        SensorsCommand::List(common) | SensorsCommand::Run(common) => common,
        SensorsCommand::Retry(args) => &args.common,
        SensorsCommand::Skip(args) => &args.event.common,
    };
    let json = common.target.json;
    match execute(command, common) {
        Ok(()) => ExitCode::SUCCESS,
        Err(Ended::Failed(failure)) => fail(&failure, json),
        Err(Ended::Exit(code)) => code,
    }
}

enum Ended {
    Failed(Failure),
    Exit(ExitCode),
}

impl From<Failure> for Ended {
    fn from(failure: Failure) -> Self {
        Self::Failed(failure)
    }
}

impl From<SensorError> for Ended {
    fn from(error: SensorError) -> Self {
        Self::Failed(Failure {
            code: error.code,
            message: error.message,
            hint: error.hint.to_owned(),
        })
    }
}

fn execute(command: &SensorsCommand, common: &Common) -> Result<(), Ended> {
    let json = common.target.json;
    let project = common.target.project.discover(json).map_err(Ended::Exit)?.1;
    let opened = crate::control::open(&common.control.url(&project.root))?;
    let connect = || common.target.connection.connect(&project);
    let database = project
        .database
        .clone()
        .unwrap_or_else(|| "default".to_owned());
    let owner = format!("stb-sensors-{}", uuid::Uuid::new_v4().simple());
    let mut dispatcher = Dispatcher::new(
        &project,
        &database,
        opened.store.clone(),
        opened.handle(),
        &owner,
    );
    let result = match command {
        SensorsCommand::List(_) => list(&dispatcher, json),
        SensorsCommand::Run(_) => {
            let (client, _) = connect()?;
            let summary = dispatcher.pass(&client)?;
            // One pass: the lease goes back at once, for `stb dev` to take.
            if summary.lease_held {
                dispatcher.release()?;
            }
            if json {
                print_json(&summary);
            } else {
                say(&if summary.lease_held {
                    format!(
                        "sensors: {} evaluated ({} succeeded, {} skipped, {} failed), {} dead-lettered, {} started at the head of their stream\n",
                        summary.evaluated,
                        summary.succeeded,
                        summary.skipped,
                        summary.failed,
                        summary.dead_lettered,
                        summary.started
                    )
                } else {
                    "sensors: another dispatcher holds the target's lease (stb dev?); nothing run\n"
                        .to_owned()
                });
            }
            Ok(())
        }
        SensorsCommand::Retry(args) => {
            let (client, _) = connect()?;
            let status = dispatcher.retry(&client, &args.sensor, &args.event_id)?;
            let shown = serde_json::json!({"sensorName": args.sensor, "eventId": args.event_id, "status": status});
            if json {
                print_json(&shown);
            } else {
                say(&format!(
                    "{} {}: retried, {status}\n",
                    args.sensor, args.event_id
                ));
            }
            Ok(())
        }
        SensorsCommand::Skip(args) => {
            let event = &args.event;
            dispatcher.skip(&event.sensor, &event.event_id, &args.reason)?;
            let shown = serde_json::json!({"sensorName": event.sensor, "eventId": event.event_id, "status": "skipped"});
            if json {
                print_json(&shown);
            } else {
                say(&format!("{} {}: skipped\n", event.sensor, event.event_id));
            }
            Ok(())
        }
    };
    opened.run(dispatcher.close());
    result
}

fn say(text: &str) {
    let _ = std::io::stdout().lock().write_all(text.as_bytes());
}

fn list(dispatcher: &Dispatcher, json: bool) -> Result<(), Ended> {
    let view = dispatcher.view()?;
    let letters = dispatcher.dead_letters()?;
    if json {
        let mut shown = serde_json::to_value(&view).unwrap_or_default();
        shown["deadLetters"] = serde_json::to_value(&letters).unwrap_or_default();
        shown["providers"] = serde_json::to_value(dispatcher.providers()).unwrap_or_default();
        print_json(&shown);
    } else {
        say(&render(&view, dispatcher.providers(), &letters));
    }
    Ok(())
}

fn render(
    view: &SensorsView,
    providers: &[stb_project::sensors::ProviderDefinition],
    letters: &[stb_control::SensorTick],
) -> String {
    let settings = &view.settings;
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
    if view.sensors.is_empty() {
        text.push_str("no sensors (Python modules under sensors/)\n");
    }
    for sensor in &view.sensors {
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
        let last = sensor.last_tick.as_ref().map_or_else(
            || "no tick yet".to_owned(),
            |tick| {
                format!(
                    "last tick {} at {}",
                    tick.status,
                    stb_sensors::timestamp(tick.started_at)
                )
            },
        );
        text.push_str(&format!(
            "{:<24} {:<28} {:<18} {} attempt(s), {}s backoff, timeout {}s  {}  {}\n",
            definition.name,
            reacts,
            status,
            retry.max_attempts,
            retry.backoff_seconds,
            definition.timeout_seconds,
            definition.file,
            last,
        ));
        if let Some(description) = &definition.description {
            text.push_str(&format!("    {description}\n"));
        }
    }
    for provider in providers {
        text.push_str(&format!(
            "provider {:<15} {} ({})\n",
            provider.name, provider.class, provider.file
        ));
    }
    if !letters.is_empty() {
        text.push_str(&format!(
            "{} dead letter(s) (stb sensors retry|skip SENSOR EVENT_ID):\n",
            letters.len()
        ));
        for letter in letters {
            text.push_str(&format!(
                "  {} {} attempt {}: {}\n",
                letter.sensor_name,
                letter.event_id.as_deref().unwrap_or(""),
                letter.attempt,
                letter.error_message.as_deref().unwrap_or("")
            ));
        }
    }
    text
}
