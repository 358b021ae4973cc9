use super::*;

const WINDOWS: Windows = Windows {
    signal_ms: 45_000,
    presumed_failed_ms: 600_000,
};

fn silent(ms: i64) -> RunRow {
    RunRow {
        invocation_id: "r".into(),
        silent_ms: Some(ms),
        run_started: Some(
            r#"{"command":"build","mode":"direct","totalStatements":7,"selectors":["clean"],"executedLogicalIds":["model:clean"]}"#
                .into(),
        ),
        ..RunRow::default()
    }
}

#[test]
fn a_silent_run_is_running_then_unresponsive_then_presumed_failed_and_recovers() {
    assert_eq!(status(&silent(1_000), WINDOWS), "running");
    assert_eq!(status(&silent(44_999), WINDOWS), "running");
    assert_eq!(status(&silent(45_000), WINDOWS), "unresponsive");
    assert_eq!(status(&silent(599_999), WINDOWS), "unresponsive");
    assert_eq!(status(&silent(600_000), WINDOWS), "presumed_failed");
    // Status is derived on read: a heartbeat makes it running again.
    assert_eq!(status(&silent(10), WINDOWS), "running");
    assert_eq!(status(&RunRow::default(), WINDOWS), "presumed_failed");
    // An operator broke its lock: gone, whatever its silence says.
    let broken = RunRow {
        lock_broken: true,
        ..silent(50_000)
    };
    assert_eq!(status(&broken, WINDOWS), "presumed_failed");
}

#[test]
fn outcomes_and_cancellations_win_over_silence() {
    let mut completed = silent(900_000);
    completed.run_completed = Some(r#"{"outcome":"succeeded","exitCode":0}"#.into());
    assert_eq!(status(&completed, WINDOWS), "succeeded");
    let mut recorded = silent(900_000);
    recorded.outcome = Some("refused".into());
    assert_eq!(status(&recorded, WINDOWS), "failed");
    recorded.outcome = Some("cancelled".into());
    assert_eq!(status(&recorded, WINDOWS), "cancelled");
    let mut cancelled = silent(1_000);
    cancelled.cancellation = Some("cancellation_failed".into());
    assert_eq!(status(&cancelled, WINDOWS), "cancellation_failed");
    cancelled.cancellation = Some("cancellation_completed".into());
    assert_eq!(status(&cancelled, WINDOWS), "cancelled");
}

#[test]
fn a_summary_reads_its_scope_from_run_started() {
    let summary = summarise(&silent(50_000), WINDOWS);
    assert_eq!(summary.status, "unresponsive");
    assert_eq!(summary.silent_seconds, Some(50));
    assert_eq!(summary.command.as_deref(), Some("build"));
    assert_eq!(summary.scope, ["model:clean"]);
    assert_eq!(summary.selectors, ["clean"]);
    assert_eq!(summary.total_statements, Some(7));
}

#[test]
fn windows_take_the_project_setting_and_test_overrides() {
    let none = |_: &str| None;
    assert_eq!(
        Windows::of(120, &none),
        Windows {
            signal_ms: 45_000,
            presumed_failed_ms: 120_000
        }
    );
    let short = |name: &str| match name {
        "STREAMBUILD_RUN_SIGNAL_WINDOW_SECONDS" => Some("3".to_owned()),
        "STREAMBUILD_RUN_PRESUMED_FAILED_AFTER_SECONDS" => Some("8".to_owned()),
        _ => None,
    };
    assert_eq!(
        Windows::of(600, &short),
        Windows {
            signal_ms: 3_000,
            presumed_failed_ms: 8_000
        }
    );
}

#[test]
fn the_timeline_pairs_starts_with_completions() {
    let event = |sequence: u64, kind: &str, payload: &str| EventRow {
        sequence,
        emitted_at: format!("2026-12-01 00:00:0{sequence}.000"),
        kind: kind.into(),
        step_id: None,
        phase: None,
        payload: payload.into(),
    };
    let statements = timeline(&[
        event(1, "run_started", "{}"),
        event(
            2,
            "statement_started",
            r#"{"statementSequence":1,"displayName":"drop_x","intent":"mutation","queryId":"q1"}"#,
        ),
        event(
            3,
            "statement_completed",
            r#"{"statementSequence":1,"displayName":"drop_x","elapsedMs":12,"writtenRows":0}"#,
        ),
        event(
            4,
            "statement_started",
            r#"{"statementSequence":2,"displayName":"replay_x","intent":"mutation","queryId":"q2"}"#,
        ),
        event(5, "run_heartbeat", "{}"),
    ]);
    assert_eq!(statements.len(), 2);
    assert_eq!(statements[0].elapsed_ms, Some(12));
    assert_eq!(statements[0].query_id.as_deref(), Some("q1"));
    assert_eq!(statements[1].display_name, "replay_x");
    assert_eq!(statements[1].elapsed_ms, None, "still running");
}
