use super::*;
use crate::readiness::PartitionReadiness;

fn thresholds() -> DeploymentReadiness {
    DeploymentReadiness {
        maximum_lag_seconds: 30,
        minimum_staged_row_ratio: 0.5,
    }
}

fn offsets_root(staged: u64, active: Option<u64>) -> RootReadiness {
    RootReadiness {
        model: "clean".into(),
        logical_name: "tbl__clean".into(),
        staged_relation: "tbl__clean__20261201T000000Z_aaaaaa".into(),
        staged_exists: true,
        active_relation: active.map(|_| "tbl__clean__20261130T000000Z_bbbbbb".into()),
        replay_source: Some("db.events".into()),
        boundary_mode: Some("offsets"),
        staged_rows: Some(staged),
        active_rows: active,
        partitions: vec![PartitionReadiness::default()],
        partitions_compared: 1,
        lag_seconds: Some(0.0),
        ..RootReadiness::default()
    }
}

#[test]
fn a_caught_up_copy_with_the_active_rows_is_ready() {
    let (verdict, reasons) = judge(&offsets_root(100, Some(100)), &thresholds());
    assert_eq!(verdict, Assessment::Ready, "{reasons:?}");
    assert!(reasons.is_empty());
    // Nothing active to compare with: ready on its own rows.
    assert_eq!(
        judge(&offsets_root(100, None), &thresholds()).0,
        Assessment::Ready
    );
}

#[test]
fn a_missing_or_empty_copy_is_judged_by_what_readers_would_lose() {
    let mut gone = offsets_root(0, Some(10));
    gone.staged_exists = false;
    assert_eq!(judge(&gone, &thresholds()).0, Assessment::NotReady);
    let (verdict, reasons) = judge(&offsets_root(0, Some(10)), &thresholds());
    assert_eq!(verdict, Assessment::NotReady);
    assert!(
        reasons[0].contains("active copy holds 10 rows"),
        "{reasons:?}"
    );
    assert_eq!(
        judge(&offsets_root(0, Some(0)), &thresholds()).0,
        Assessment::Caution
    );
    assert_eq!(
        judge(&offsets_root(0, None), &thresholds()).0,
        Assessment::Caution
    );
}

#[test]
fn lag_beyond_the_maximum_is_not_ready_and_at_it_is_ready() {
    let mut root = offsets_root(100, Some(100));
    root.lag_seconds = Some(30.0);
    assert_eq!(judge(&root, &thresholds()).0, Assessment::Ready);
    root.lag_seconds = Some(30.5);
    let (verdict, reasons) = judge(&root, &thresholds());
    assert_eq!(verdict, Assessment::NotReady);
    assert!(reasons[0].contains("30.5 s behind"), "{reasons:?}");
    // A zero maximum accepts only a copy that is fully caught up.
    let strict = DeploymentReadiness {
        maximum_lag_seconds: 0,
        ..thresholds()
    };
    root.lag_seconds = Some(0.001);
    assert_eq!(judge(&root, &strict).0, Assessment::NotReady);
}

#[test]
fn missing_partitions_unknown_freshness_and_few_rows_are_cautions() {
    let mut root = offsets_root(100, Some(100));
    root.partitions_missing = 1;
    root.partitions_compared = 3;
    let (verdict, reasons) = judge(&root, &thresholds());
    assert_eq!(verdict, Assessment::Caution);
    assert!(reasons[0].contains("1 of 3 partitions"), "{reasons:?}");

    let mut unknown = offsets_root(100, Some(100));
    unknown.lag_seconds = None;
    unknown.partitions_lagging = 1;
    assert_eq!(judge(&unknown, &thresholds()).0, Assessment::Caution);
    // Caught up everywhere: no time column is needed to say so.
    unknown.partitions_lagging = 0;
    assert_eq!(judge(&unknown, &thresholds()).0, Assessment::Ready);

    let (verdict, reasons) = judge(&offsets_root(49, Some(100)), &thresholds());
    assert_eq!(verdict, Assessment::Caution);
    assert!(reasons[0].contains("49 rows, 49%"), "{reasons:?}");
    assert_eq!(
        judge(&offsets_root(50, Some(100)), &thresholds()).0,
        Assessment::Ready
    );
}

#[test]
fn scalar_modes_compare_the_newest_rows_of_the_two_copies() {
    let mut root = offsets_root(100, Some(100));
    root.boundary_mode = Some("timestamp");
    root.lag_seconds = Some(31.0);
    assert_eq!(judge(&root, &thresholds()).0, Assessment::NotReady);
    root.lag_seconds = Some(-5.0);
    assert_eq!(judge(&root, &thresholds()).0, Assessment::Ready);
    root.boundary_mode = Some("cursor");
    root.lag_seconds = None;
    root.cursor_gap = Some(7);
    let (verdict, reasons) = judge(&root, &thresholds());
    assert_eq!(verdict, Assessment::Caution);
    assert!(reasons[0].contains("7 behind"), "{reasons:?}");
    root.boundary_mode = None;
    assert_eq!(judge(&root, &thresholds()).0, Assessment::Caution);
}

#[test]
fn the_deployment_takes_its_worst_root_and_its_failed_audits() {
    let mut ready = offsets_root(100, Some(100));
    (ready.assessment, ready.reasons) = judge(&ready, &thresholds());
    let mut lagging = offsets_root(100, Some(100));
    lagging.model = "big".into();
    lagging.lag_seconds = Some(60.0);
    (lagging.assessment, lagging.reasons) = judge(&lagging, &thresholds());
    let (verdict, reasons) = overall(&[ready.clone(), lagging], &[]);
    assert_eq!(verdict, Assessment::NotReady);
    assert!(reasons[0].starts_with("big: "), "{reasons:?}");

    let failed = |severity: &str| {
        let mut audit = AuditResult::unrun("positive", severity, "boom".into());
        audit.status = if severity == "warning" {
            "warning"
        } else {
            "failed"
        };
        audit.failing_rows = 3;
        audit
    };
    let (verdict, reasons) = overall(std::slice::from_ref(&ready), &[failed("error")]);
    assert_eq!(verdict, Assessment::NotReady);
    assert_eq!(reasons, ["audit positive found 3 failing rows"]);
    let (verdict, _) = overall(std::slice::from_ref(&ready), &[failed("warning")]);
    assert_eq!(verdict, Assessment::Caution);
    assert_eq!(overall(&[ready], &[]).0, Assessment::Ready);
}
