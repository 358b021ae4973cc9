//! Mixed builds (a direct and a virtual pipeline under one lock) that cannot succeed leave
//! production as they found it (issue 33): broken SQL and DDL are refused before either
//! phase runs; a direct phase that fails on a late replay row is undone while the virtual
//! phase's new deployment stays staged beside production (never promoted, as the reference
//! does); and a build killed at any statement of either phase is given back (or finished)
//! by `stb unlock`, which finds the direct phase through the lock's first phase.

use std::path::Path;

use serde_json::Value;
use stb_test_support::{TestDatabase, execute};

use crate::failure_safety::{
    FAILS_LATE, SIDE, SUMMING, assert_graph_matches,
    broken_sql_and_ddl_are_refused_before_anything_changes, built, count, files,
    fixed_and_rebuilt_by_changed, holds_the_rebuild, insert_events, side_sql, stb, target_state,
    unlock_and_check, write,
};

#[test]
fn broken_sql_and_ddl_are_refused_before_a_mixed_build_changes_anything() {
    broken_sql_and_ddl_are_refused_before_anything_changes("mixed");
}

/// The relations of a deployment id's physical name (`<logical>__<YYYYMMDDTHHMMSSZ_x>`).
fn is_deployment_copy(line: &str) -> bool {
    let name = line.split('\t').next().unwrap_or_default();
    name.rsplit("__").next().is_some_and(|tail| {
        tail.len() > 17
            && tail.as_bytes()[8] == b'T'
            && tail[..8].bytes().all(|b| b.is_ascii_digit())
            && tail[15..17] == *"Z_"
    })
}

/// The target's relations after a build, less the copies of deployments staged since
/// `before` (new relations carrying a deployment id), and those copies' names.
fn production_after(
    database: &str,
    before: &[(String, String)],
) -> (Vec<(String, String)>, Vec<String>) {
    let known: Vec<&str> = before
        .iter()
        .map(|(line, _)| line.split('\t').next().unwrap_or_default())
        .collect();
    let (staged, kept): (Vec<_>, Vec<_>) =
        target_state(database).into_iter().partition(|(line, _)| {
            let name = line.split('\t').next().unwrap_or_default();
            !known.contains(&name) && is_deployment_copy(line)
        });
    let names = staged
        .into_iter()
        .map(|(line, _)| line.split('\t').next().unwrap_or_default().to_owned())
        .collect();
    (kept, names)
}

/// Changes both pipelines: `clean` (direct) to `amount`, `side` (virtual) to triple its
/// amounts, so both phases have work.
fn change_both(dir: &Path, database: &str, amount: &str) {
    write(dir, &files(database, "mixed", amount, SUMMING));
    std::fs::write(dir.join(SIDE), side_sql("(amount * 3)::UInt64 AS amount")).expect("write");
}

#[test]
fn a_mixed_build_whose_direct_phase_fails_mid_replay_gives_production_back() {
    let db = TestDatabase::create("undo_mixed");
    let dir = built(&db.name, "mixed");
    let before = target_state(&db.name);
    change_both(dir.path(), &db.name, FAILS_LATE);
    let build = stb(dir.path(), &["build", "--auto-approve", "--json"]);
    assert_eq!(build.status.code(), Some(1));
    let result: Value = serde_json::from_slice(&build.stdout).expect("JSON");
    assert_eq!(result["virtual"]["status"], "succeeded", "{result}");
    assert_eq!(result["direct"]["status"], "failed", "{result}");
    assert_eq!(result["direct"]["failed_step"], "replay_clean", "{result}");
    assert_eq!(result["direct"]["restored"]["finished"], false, "{result}");
    assert_eq!(
        result["direct"]["restored"]["errors"],
        serde_json::json!([]),
        "{result}"
    );
    let staged_id = result["virtual"]["deployment_id"]
        .as_str()
        .expect("the staged deployment");
    let (production, staged) = production_after(&db.name, &before);
    assert_eq!(production, before, "production was not given back");
    assert!(
        !staged.is_empty() && staged.iter().all(|name| name.ends_with(staged_id)),
        "only the new deployment's copies are new: {staged:?}"
    );
    // Staged, not promoted: readers still see the active deployment.
    let listed = stb(dir.path(), &["deployment", "list", "--json"]);
    let listed = String::from_utf8_lossy(&listed.stdout);
    assert!(listed.contains(staged_id), "{listed}");
    insert_events(&db.name, 40, 50);
    assert_eq!(count(&db.name, "tbl__clean"), 150, "live rows flow");
    assert_eq!(
        count(&db.name, "tbl__side"),
        150,
        "live rows reach the active side"
    );
    assert_graph_matches(&db.name);
    // Fixed, --changed rebuilds what failed.
    fixed_and_rebuilt_by_changed(dir.path(), &db.name, "mixed");
}

/// Statements completed by every run of `database`'s target so far.
fn completed(database: &str) -> u64 {
    execute(&format!(
        "SELECT countIf(event_kind = 'statement_completed') FROM {database}._streambuild_run_events FORMAT TSV"
    ))
    .trim()
    .parse()
    .expect("count")
}

/// Waits (at most 60 s) until `database`'s runs have completed `total` statements.
fn wait_for_completed(database: &str, total: u64) {
    let reached = stb_test_support::wait_for(std::time::Duration::from_secs(60), || {
        completed(database) >= total
    });
    assert!(reached, "{total} statements never completed");
}

/// The statements a mixed rebuild that completes runs: in its virtual phase, and in all.
fn reference_counts(name: &str) -> (u64, u64) {
    let reference = TestDatabase::create(name);
    let dir = built(&reference.name, "mixed");
    let baseline = completed(&reference.name);
    change_both(
        dir.path(),
        &reference.name,
        "(amount * 2)::UInt64 AS amount",
    );
    // The first phase runs under the invocation given; the direct phase has its own.
    let invocation = format!("reference-{}", reference.name);
    let child = stb_test_support::spawn_on_project(
        dir.path(),
        &["build", "--auto-approve", "--json"],
        &invocation,
    );
    let output = child.wait_with_output().expect("the reference build ends");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let virtual_phase: u64 = execute(&format!(
        "SELECT countIf(event_kind = 'statement_completed') FROM {}._streambuild_run_events WHERE invocation_id = '{invocation}' FORMAT TSV",
        reference.name
    ))
    .trim()
    .parse()
    .expect("count");
    let total = completed(&reference.name) - baseline;
    assert!(
        virtual_phase >= 5 && total >= virtual_phase + 10,
        "{virtual_phase} of {total} statements"
    );
    (virtual_phase, total)
}

/// A target built mixed and promoted, its rebuild killed after `k` completed statements:
/// the database, the project, and what the target held before.
type Killed = (TestDatabase, tempfile::TempDir, Vec<(String, String)>, u64);

fn killed_after(k: u64) -> Killed {
    let db = TestDatabase::create(&format!("kill_mixed_{k}"));
    let dir = built(&db.name, "mixed");
    let before = target_state(&db.name);
    let baseline = completed(&db.name);
    change_both(dir.path(), &db.name, "(amount * 2)::UInt64 AS amount");
    let invocation = format!("kill-mixed-{k}-{}", db.name);
    let mut child = stb_test_support::spawn_on_project(
        dir.path(),
        &["build", "--auto-approve", "--json"],
        &invocation,
    );
    wait_for_completed(&db.name, baseline + k);
    child.kill().expect("SIGKILL");
    let _ = child.wait();
    (db, dir, before, k)
}

/// Kills a mixed rebuild after each of `ks` completed statements (targets prepared two
/// at a time), runs `stb unlock` on each and checks what it left: no aside, no complete
/// deployment missing a copy, and production as it was (or, when the direct phase was
/// finished, its new rows). Whether each was finished.
fn kill_mixed_at(ks: &[u64]) -> Vec<Option<bool>> {
    let killed: Vec<Killed> = stb_test_support::two_at_a_time(ks, killed_after);
    std::thread::sleep(stb_test_support::SHORT_SIGNAL_SILENCE);
    let mut outcomes = Vec::new();
    for (db, dir, before, k) in &killed {
        let finished = unlock_and_check(&db.name, dir.path(), &format!("kill {k}"));
        outcomes.push(finished);
        // A deployment the virtual phase completed keeps every copy: unlock gives back
        // only the phase it stopped in.
        let listed = stb(dir.path(), &["deployment", "list", "--json"]);
        let listed: Value = serde_json::from_slice(&listed.stdout).expect("JSON");
        let broken: Vec<&Value> = listed["deployments"]
            .as_array()
            .expect("deployments")
            .iter()
            .filter(|d| d["state"] == "physical_missing")
            .collect();
        assert!(broken.is_empty(), "kill {k}: {broken:?}");
        let (production, _) = production_after(&db.name, before);
        let completed = finished.is_none() && production != *before && holds_the_rebuild(&db.name);
        if completed {
            // Killed after the direct phase's last statement: on the far side of its
            // replays too.
            *outcomes.last_mut().expect("pushed") = Some(true);
        }
        if finished != Some(true) && !completed {
            // Killed in the virtual phase, between the phases, or in the direct phase
            // before its replays completed: production is as the build found it (a
            // deployment the virtual phase completed stays staged beside it). (A build
            // killed after its last statement is complete: nothing to give back.)
            assert_eq!(&production, before, "kill {k}");
            insert_events(&db.name, 40, 50);
            assert_eq!(count(&db.name, "tbl__clean"), 150, "kill {k}: live flow");
            assert_eq!(count(&db.name, "tbl__side"), 150, "kill {k}: live flow");
            assert_graph_matches(&db.name);
        }
    }
    eprintln!(
        "given back (Some(false)), finished or complete (Some(true)), untouched (None): {outcomes:?}"
    );
    outcomes
}

#[test]
fn a_mixed_build_killed_in_its_virtual_phase_leaves_production_and_unlock_cleans_up() {
    let (virtual_phase, _) = reference_counts("kill_mixed_reference_v");
    // After every statement of the virtual phase, its last included (between the phases).
    let outcomes = kill_mixed_at(&(1..=virtual_phase).collect::<Vec<_>>());
    assert!(!outcomes.contains(&Some(true)), "{outcomes:?}");
    assert!(outcomes.contains(&Some(false)), "{outcomes:?}");
}

#[test]
fn a_mixed_build_killed_in_its_direct_phase_is_given_back_or_finished_by_unlock() {
    let (virtual_phase, total) = reference_counts("kill_mixed_reference_d");
    let outcomes = kill_mixed_at(&(virtual_phase + 1..total).collect::<Vec<_>>());
    // The kills landed on both sides of the direct phase's replays.
    assert!(outcomes.contains(&Some(false)), "{outcomes:?}");
    assert!(outcomes.contains(&Some(true)), "{outcomes:?}");
}
