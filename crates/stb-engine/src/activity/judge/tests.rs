use super::*;

const ALL: Capabilities = Capabilities {
    query_views_log: true,
    part_log: true,
};
const PART_LOG_ONLY: Capabilities = Capabilities {
    query_views_log: false,
    part_log: true,
};
const NONE: Capabilities = Capabilities {
    query_views_log: false,
    part_log: false,
};

fn views(rows: u64, status: &str) -> Evidence {
    Evidence {
        views: Some(ViewRuns {
            last_triggered_at: Some("2026-12-02 10:00:00".into()),
            last_write_at: (rows > 0).then(|| "2026-12-02 10:00:00".into()),
            rows_written: rows,
            latest_status: status.into(),
        }),
        new_parts: Some(NewParts {
            last_write_at: Some("2026-12-02 10:00:00".into()),
            rows_in_window: rows,
        }),
        ..Evidence::default()
    }
}

#[test]
fn the_views_log_decides_moving_idle_and_stalled() {
    let moving = activity(ALL, &views(40, "QueryFinish"), 120);
    assert_eq!(
        (moving.state, moving.source, moving.rows_written),
        ("moving", EvidenceSource::QueryViewsLog, 40)
    );
    assert!(!moving.approximate && moving.source_available);
    assert_eq!(activity(ALL, &views(0, "QueryFinish"), 120).state, "idle");
    let stalled = activity(ALL, &views(40, "ExceptionWhileProcessing"), 120);
    assert_eq!(stalled.state, "stalled");
    assert_eq!(
        stalled.detail,
        "The latest materialized-view execution failed."
    );
    assert_eq!(
        activity(ALL, &views(0, "ExceptionBeforeStart"), 120).state,
        "stalled"
    );
}

#[test]
fn without_view_runs_the_part_log_speaks_for_plain_inserts() {
    let inserted = Evidence {
        new_parts: Some(NewParts {
            last_write_at: Some("2026-12-02 10:00:00".into()),
            rows_in_window: 9,
        }),
        ..Evidence::default()
    };
    let found = activity(ALL, &inserted, 120);
    assert_eq!(
        (found.state, found.source),
        ("moving", EvidenceSource::PartLog)
    );
    // The same without the views log at all.
    assert_eq!(activity(PART_LOG_ONLY, &inserted, 120).state, "moving");
    // A view's runs are not read when the log is not there.
    let quiet = activity(PART_LOG_ONLY, &views(0, "QueryFinish"), 120);
    assert_eq!(quiet.source, EvidenceSource::PartLog);
    // Nothing in the window: idle, with the last write the log still holds.
    let old = Evidence {
        new_parts: Some(NewParts {
            last_write_at: Some("2026-12-01 10:00:00".into()),
            rows_in_window: 0,
        }),
        ..Evidence::default()
    };
    let idle = activity(PART_LOG_ONLY, &old, 120);
    assert_eq!(idle.state, "idle");
    assert_eq!(idle.last_write_at.as_deref(), Some("2026-12-01 10:00:00"));
    assert_eq!(
        activity(PART_LOG_ONLY, &Evidence::default(), 120).state,
        "idle"
    );
}

#[test]
fn with_no_log_part_times_are_approximate_and_nothing_is_unknown() {
    let recent = Evidence {
        parts: Some(PartTimes {
            modified_at: Some("2026-12-02 10:00:00".into()),
            seconds_ago: Some(30),
        }),
        ..Evidence::default()
    };
    let found = activity(NONE, &recent, 120);
    assert_eq!(
        (
            found.state,
            found.source,
            found.approximate,
            found.source_available
        ),
        ("moving", EvidenceSource::SystemParts, true, false)
    );
    let stale = Evidence {
        parts: Some(PartTimes {
            modified_at: Some("2026-12-02 09:00:00".into()),
            seconds_ago: Some(3_600),
        }),
        ..Evidence::default()
    };
    assert_eq!(activity(NONE, &stale, 120).state, "idle");
    let nothing = activity(NONE, &Evidence::default(), 120);
    assert_eq!(
        (nothing.state, nothing.source),
        ("unknown", EvidenceSource::Unavailable)
    );
    assert_eq!(
        nothing.detail,
        "ClickHouse activity telemetry is unavailable."
    );
    let failed = Evidence {
        read_error: Some("denied".into()),
        ..views(5, "QueryFinish")
    };
    assert_eq!(activity(ALL, &failed, 120).state, "unknown");
}

fn newest(lag: i64) -> Newest {
    Newest {
        column: Some("_replay_landed_at".into()),
        newest_at: Some("2026-12-02 10:00:00.000".into()),
        lag_seconds: Some(lag),
        has_rows: true,
    }
}

#[test]
fn freshness_compares_the_newest_row_with_the_expectation() {
    let expectation = Some(Freshness {
        warn_after_seconds: Some(30),
        error_after_seconds: Some(120),
    });
    assert_eq!(freshness(&newest(30), expectation).state, "fresh");
    assert_eq!(freshness(&newest(31), expectation).state, "lagging");
    assert_eq!(freshness(&newest(121), expectation).state, "stalled");
    let empty = Newest {
        has_rows: false,
        ..newest(0)
    };
    let judged = freshness(&empty, expectation);
    assert_eq!((judged.state, judged.lag_seconds), ("stalled", None));
    // Only error_after: never lagging.
    let error_only = Some(Freshness {
        warn_after_seconds: None,
        error_after_seconds: Some(60),
    });
    assert_eq!(freshness(&newest(59), error_only).state, "fresh");
    // No expectation: the lag is reported, unjudged.
    let unchecked = freshness(&newest(500), None);
    assert_eq!(
        (unchecked.state, unchecked.lag_seconds),
        ("unchecked", Some(500))
    );
    // No time column: unknown.
    assert_eq!(freshness(&Newest::default(), expectation).state, "unknown");
}
