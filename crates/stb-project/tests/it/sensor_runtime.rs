//! One tick at a time in the long-lived sensor worker: events and contexts as handlers
//! see them, durable steps that a retry resumes, providers set up and torn down, and a
//! handler that raises or overruns its timeout as a failed tick.

use stb_project::sensors::{Evaluation, SensorRuntime, StepMarker, load_definitions};

const SENSORS: &str = r#"
import json
from providers.notes import Notes
from streambuild.events import AuditCompleted, AuditTransition, RunCompleted
from streambuild.sensors import (
    EventSensorContext, PollingSensorResult, SkipReason, StepPolicy, event_sensor, polling_sensor,
)


@event_sensor(on=AuditCompleted)
def alerts(ctx: EventSensorContext[AuditCompleted], notes: Notes):
    event = ctx.event
    if event.transition != AuditTransition.NEW_FAILURE:
        return SkipReason(f"{event.audit_name} {event.transition}")
    first = ctx.step("compose", lambda: {"text": f"{event.audit_name} on {ctx.target}", "rows": event.sample_rows[0][0]})
    ctx.step("deliver", lambda: notes.write(json.dumps(first, sort_keys=True)), StepPolicy.AT_MOST_ONCE)
    if event.failure_count > 1:
        raise RuntimeError("delivered, then failed")


@event_sensor(on=RunCompleted, timeout_seconds=0.5)
def slow(ctx):
    import time
    time.sleep(30)


@event_sensor(on=RunCompleted)
def leaky(ctx):
    raise RuntimeError("POST https://ops:hunter2@hooks.example.invalid/services/x?token=abc123 failed")


@polling_sensor(minimum_interval_seconds=1)
def counter(context):
    return PollingSensorResult(cursor=str(int(context.cursor or "0") + 1))
"#;

const NOTES: &str = r#"
import pathlib
from streambuild.providers import Provider


class Notes(Provider):
    def setup(self, ctx):
        self._path = pathlib.Path(__file__).parent.parent / "notes.txt"

    def write(self, text):
        with open(self._path, "a") as handle:
            handle.write(text + "\n")
        return len(text)

    def teardown(self):
        with open(self._path, "a") as handle:
            handle.write("teardown\n")
"#;

fn audit(transition: &str, failures: u64) -> serde_json::Value {
    serde_json::json!({
        "kind": "AuditCompleted", "id": "r1", "audit_name": "no_negative_totals", "status": "failed",
        "previous_status": "passed", "transition": transition, "severity": "error",
        "failure_count": failures, "target": "dev", "trigger": "manual",
        "completed_at": "2026-01-01 00:00:00.000", "binding_key": "k", "invocation_id": "i",
        "sample_column_names": ["order_id"], "sample_rows": [[7]],
    })
}

#[test]
fn ticks_run_handlers_with_durable_steps_providers_and_timeouts() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::create_dir_all(dir.path().join("sensors")).expect("mkdir");
    std::fs::create_dir_all(dir.path().join("providers")).expect("mkdir");
    std::fs::write(dir.path().join("sensors/alerts.py"), SENSORS).expect("write");
    std::fs::write(dir.path().join("providers/notes.py"), NOTES).expect("write");
    let notes = dir.path().join("notes.txt");
    let mut diagnostics = stb_diagnostics::Diagnostics::default();
    let (sensors, _) = load_definitions(dir.path(), &mut diagnostics);
    assert!(diagnostics.is_empty(), "{diagnostics:?}");
    let find = |name: &str| sensors.iter().find(|s| s.name == name).expect("loaded");
    let mut runtime = SensorRuntime::new(dir.path());
    let mut recorded: Vec<StepMarker> = Vec::new();

    // Not a new failure: skipped, with the handler's reason.
    let skipped = runtime.evaluate(
        &Evaluation {
            sensor: find("alerts"),
            target: "dev",
            event: Some(audit("still_failing", 1)),
            polling: None,
            steps: vec![],
        },
        &mut |step| {
            recorded.push(step.clone());
            Ok(())
        },
    );
    assert_eq!(skipped.status, "skipped");
    assert_eq!(
        skipped.skip_reason.as_deref(),
        Some("no_negative_totals still_failing")
    );
    assert!(recorded.is_empty());

    // Delivered, then the handler raises: failed, with both steps on record.
    let failed = runtime.evaluate(
        &Evaluation {
            sensor: find("alerts"),
            target: "dev",
            event: Some(audit("new_failure", 2)),
            polling: None,
            steps: vec![],
        },
        &mut |step| {
            recorded.push(step.clone());
            Ok(())
        },
    );
    assert_eq!(failed.status, "failed");
    assert_eq!(
        failed.error.as_deref(),
        Some("RuntimeError: delivered, then failed")
    );
    let statuses: Vec<(&str, &str)> = recorded
        .iter()
        .map(|s| (s.step_key.as_str(), s.status.as_str()))
        .collect();
    assert_eq!(
        statuses,
        [
            ("compose", "succeeded"),
            ("deliver", "started"),
            ("deliver", "succeeded")
        ]
    );
    assert_eq!(
        recorded[0].result_json.as_deref(),
        Some(r#"{"rows": 7, "text": "no_negative_totals on dev"}"#)
    );
    // Each tick opens the providers it injects and closes them, a skipped one too.
    assert_eq!(
        std::fs::read_to_string(&notes).expect("notes"),
        "teardown\n{\"rows\": 7, \"text\": \"no_negative_totals on dev\"}\nteardown\n"
    );

    // The retry resumes: the memoised steps do not run again.
    let markers = vec![recorded[0].clone(), recorded[2].clone()];
    recorded.clear();
    let retried = runtime.evaluate(
        &Evaluation {
            sensor: find("alerts"),
            target: "dev",
            event: Some(audit("new_failure", 1)),
            polling: None,
            steps: markers,
        },
        &mut |step| {
            recorded.push(step.clone());
            Ok(())
        },
    );
    assert_eq!(retried.status, "succeeded", "{retried:?}");
    assert!(recorded.is_empty(), "{recorded:?}");
    let written = std::fs::read_to_string(&notes).expect("notes");
    assert_eq!(
        written.lines().filter(|l| l.starts_with('{')).count(),
        1,
        "delivered once: {written}"
    );
    assert_eq!(
        written.lines().filter(|l| *l == "teardown").count(),
        3,
        "{written}"
    );

    // An at-most-once step that started and never finished is not run again.
    let started = StepMarker {
        step_key: "deliver".into(),
        policy: "at_most_once".into(),
        status: "started".into(),
        attempt: 1,
        result_json: None,
        error_message: None,
    };
    let refused = runtime.evaluate(
        &Evaluation {
            sensor: find("alerts"),
            target: "dev",
            event: Some(audit("new_failure", 1)),
            polling: None,
            steps: vec![started],
        },
        &mut |step| {
            recorded.push(step.clone());
            Ok(())
        },
    );
    assert_eq!(refused.status, "failed");
    assert!(
        refused
            .error
            .as_deref()
            .is_some_and(|e| e.contains("already attempted under at-most-once policy")),
        "{refused:?}"
    );

    // A handler past its timeout: failed, and the next tick gets a fresh worker.
    let run = serde_json::json!({
        "kind": "RunCompleted", "id": "i1", "command": "build", "mode": "direct", "outcome": "succeeded",
        "exit_code": 0, "target": "dev", "deployment_id": null, "selected_node_count": 1,
        "error_message": null, "completed_at": "2026-01-01 00:00:00.000",
    });
    let slow = runtime.evaluate(
        &Evaluation {
            sensor: find("slow"),
            target: "dev",
            event: Some(run),
            polling: None,
            steps: vec![],
        },
        &mut |_| Ok(()),
    );
    assert_eq!(
        slow.error.as_deref(),
        Some("Sensor 'slow' timed out after 0.5 seconds")
    );
    let polled = runtime.evaluate(
        &Evaluation {
            sensor: find("counter"),
            target: "dev",
            event: None,
            polling: Some(stb_project::sensors::PollingState {
                cursor: Some("41".into()),
                last_success_at: None,
            }),
            steps: vec![],
        },
        &mut |_| Ok(()),
    );
    assert_eq!(
        (polled.status.as_str(), polled.cursor.as_deref()),
        ("succeeded", Some("42"))
    );
}
