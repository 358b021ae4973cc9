use super::*;

const WINDOWS: Windows = Windows {
    signal_ms: 45_000,
    presumed_failed_ms: 600_000,
};

fn ids(items: &[&str]) -> Vec<String> {
    items.iter().map(|i| (*i).to_owned()).collect()
}

fn scope(writes: &[&str], reads: &[&str]) -> Scope {
    Scope::new(ids(writes), ids(reads))
}

fn live(silent_ms: i64, started: &str) -> RunRow {
    RunRow {
        invocation_id: "run-a".into(),
        silent_ms: Some(silent_ms),
        started_at: Some("2026-12-02 00:00:00.000".into()),
        run_started: Some(started.into()),
        ..RunRow::default()
    }
}

const STARTED: &str = r#"{"owner":"ana@host (pid 7)","executedLogicalIds":["model:clean","model:daily"],"contextLogicalIds":["source:events"]}"#;

#[test]
fn scopes_overlap_where_one_writes_what_the_other_reads_or_writes() {
    let running = scope(&["model:clean"], &["source:events"]);
    // Writes meet writes.
    assert_eq!(
        overlap(Some(&running), &scope(&["model:clean"], &[])),
        ids(&["model:clean"])
    );
    // It writes what we read.
    assert_eq!(
        overlap(Some(&running), &scope(&["model:daily"], &["model:clean"])),
        ids(&["model:clean"])
    );
    // We write what it reads.
    assert_eq!(
        overlap(Some(&running), &scope(&["source:events"], &[])),
        ids(&["source:events"])
    );
    // Both only read the same source: no overlap.
    assert!(overlap(Some(&running), &scope(&["model:other"], &["source:events"])).is_empty());
    // An unknown scope meets everything.
    assert_eq!(overlap(None, &scope(&["model:x"], &[])), ids(&["*"]));
}

#[test]
fn a_run_started_payload_gives_its_scope_or_none() {
    let parsed = Scope::of_run_started(Some(STARTED)).expect("scope");
    assert_eq!(
        parsed,
        scope(&["model:clean", "model:daily"], &["source:events"])
    );
    // A destruction's payload names no logical ids: unknown.
    assert_eq!(
        Scope::of_run_started(Some(r#"{"command":"destroy","pipelines":["p"]}"#)),
        None
    );
    assert_eq!(Scope::of_run_started(Some("not json")), None);
    assert_eq!(Scope::of_run_started(None), None);
}

#[test]
fn live_overlapping_runs_block_and_the_others_do_not() {
    let requested = scope(&["model:daily"], &[]);
    let running = blocker(&live(5_000, STARTED), &requested, WINDOWS).expect("blocks");
    assert_eq!(running.status, "running");
    assert_eq!(running.owner.as_deref(), Some("ana@host (pid 7)"));
    assert_eq!(running.overlap, ids(&["model:daily"]));
    let unresponsive = blocker(&live(60_000, STARTED), &requested, WINDOWS).expect("blocks");
    assert_eq!(unresponsive.status, "unresponsive");
    // Presumed failed: no longer blocks.
    assert_eq!(blocker(&live(600_000, STARTED), &requested, WINDOWS), None);
    // Not overlapping: admitted.
    assert_eq!(
        blocker(
            &live(5_000, STARTED),
            &scope(&["model:other"], &[]),
            WINDOWS
        ),
        None
    );
    // Finished: admitted.
    let mut done = live(5_000, STARTED);
    done.run_completed = Some(r#"{"outcome":"succeeded"}"#.into());
    assert_eq!(blocker(&done, &requested, WINDOWS), None);
    // A cancellation that failed leaves a run that may still write.
    let mut stuck = live(5_000, STARTED);
    stuck.cancellation = Some("cancellation_failed".into());
    assert_eq!(
        blocker(&stuck, &requested, WINDOWS).map(|b| b.status),
        Some("running")
    );
}

#[test]
fn refusals_name_the_run_its_owner_its_scope_and_what_to_do() {
    let requested = scope(&["model:daily"], &[]);
    let running = blocker(&live(5_000, STARTED), &requested, WINDOWS).expect("blocks");
    let error = refusal(&running, WINDOWS);
    assert_eq!(error.code, OVERLAP_CODE);
    for part in [
        "Run run-a is still running",
        "owner ana@host (pid 7)",
        "it writes model:clean, model:daily",
        "both touch model:daily",
        "No new run was started",
    ] {
        assert!(error.message.contains(part), "{part}: {}", error.message);
    }
    assert!(
        error.hint.contains("stb runs cancel run-a"),
        "{}",
        error.hint
    );

    let unresponsive = blocker(&live(60_000, STARTED), &requested, WINDOWS).expect("blocks");
    let error = refusal(&unresponsive, WINDOWS);
    assert!(
        error.message.starts_with(
            "Run run-a is unresponsive: no signal for 60s. No new run was started. To prevent overlapping warehouse writes, StreamBuild will wait 540s more before treating it as presumed failed (configured safety window: 600s via defaults.run_presumed_failed_after). Retry after that."
        ),
        "{}",
        error.message
    );
}

#[test]
fn long_scopes_are_shortened_in_messages() {
    let many: Vec<String> = (0..8).map(|i| format!("model:m{i}")).collect();
    let text = listed(&many);
    assert_eq!(
        text,
        "model:m0, model:m1, model:m2, model:m3, model:m4 and 3 more"
    );
}

#[test]
fn a_build_stays_within_the_pipelines_it_was_authorised_for() {
    let pipeline_of = |model: &str| match model {
        "clean" | "daily" => Some("pl__orders".to_owned()),
        "report" => Some("pl__reports".to_owned()),
        _ => None,
    };
    let authorised = ids(&["pl__orders"]);
    assert!(
        within_authorised(
            &scope(&["model:clean", "model:daily"], &[]),
            &pipeline_of,
            &authorised
        )
        .is_ok()
    );
    let grown = within_authorised(
        &scope(&["model:clean", "model:report"], &[]),
        &pipeline_of,
        &authorised,
    )
    .expect_err("grown");
    assert_eq!(grown.code, UNAUTHORISED_SCOPE_CODE);
    assert!(grown.message.contains("pl__reports"), "{}", grown.message);
    assert!(within_authorised(&scope(&["model:ghost"], &[]), &pipeline_of, &authorised).is_err());
}

#[test]
fn the_hand_over_window_counts_from_when_the_holder_stopped_running() {
    let start = Instant::now();
    let at = |s: u64| start + Duration::from_secs(s);
    let mut hand_over = HandOver::default();
    // A long run holds the lock for 50 s while the build waits behind it.
    hand_over.running();
    // It ends at 50 s: its hand-over starts then, not when the build began waiting.
    assert_eq!(hand_over.not_running("heavy", at(50)), Duration::ZERO);
    assert_eq!(
        hand_over.not_running("heavy", at(51)),
        Duration::from_secs(1)
    );
    // Another holder took the lock in between: its own window starts.
    assert_eq!(hand_over.not_running("promote", at(60)), Duration::ZERO);
    assert_eq!(
        hand_over.not_running("promote", at(106)),
        Duration::from_secs(46)
    );
    // A holder seen running again starts over.
    hand_over.running();
    assert_eq!(hand_over.not_running("promote", at(200)), Duration::ZERO);
}
