use super::*;

const OLD: &str = "20261201T080000Z_aaaaaa";
const NEW: &str = "20261201T090000Z_bbbbbb";
const PART: &str = "20261201T100000Z_cccccc";

fn header(id: &str) -> HeaderRow {
    HeaderRow {
        deployment_id: id.into(),
        created_at: stb_plan::deployment::DeploymentId::parse(id)
            .expect("id")
            .created_at(),
        boundary_time: String::new(),
        replay_lineage_mode: "offsets".into(),
    }
}

fn object(id: &str, kind: &str, logical: &str, model: &str) -> ObjectRow {
    ObjectRow {
        deployment_id: id.into(),
        object_type: kind.into(),
        logical_name: logical.into(),
        physical_name: format!("{logical}__{id}"),
        model: model.into(),
        is_selected_root: model == "a",
        observed_at: String::new(),
    }
}

/// Deployment `id` copies model a (table + view) and model r (a view).
fn full(id: &str) -> Vec<ObjectRow> {
    vec![
        object(id, "table", "tbl__a", "a"),
        object(id, "materialized_view", "mv__a", "a"),
        object(id, "view", "view__r", "r"),
    ]
}

fn publication(id: &str, event: &str, at: &str, logical: &str) -> PublicationRow {
    PublicationRow {
        publication_id: event.into(),
        deployment_id: id.into(),
        operation: "promote".into(),
        previous_deployment_id: None,
        logical_name: logical.into(),
        physical_name: format!("{logical}__{id}"),
        published_at: at.into(),
    }
}

/// OLD published at 1, NEW published at 2 and live; both retained.
fn two_published() -> State {
    let mut state = State {
        headers: vec![header(OLD), header(NEW)],
        ..State::default()
    };
    for id in [OLD, NEW] {
        state.objects.extend(full(id));
        for o in full(id) {
            state.relations.insert(o.physical_name);
        }
    }
    for (id, event, at) in [
        (OLD, "1_old", "2026-12-01 08:10:00.000"),
        (NEW, "2_new", "2026-12-01 09:10:00.000"),
    ] {
        state
            .publications
            .push(publication(id, event, at, "tbl__a"));
        state
            .publications
            .push(publication(id, event, at, "view__r"));
    }
    state
        .bindings
        .insert("tbl__a".into(), format!("tbl__a__{NEW}"));
    state
        .bindings
        .insert("view__r".into(), format!("view__r__{NEW}"));
    state
}

#[test]
fn the_inventory_tells_active_superseded_staged_incomplete_and_orphans_apart() {
    let mut state = two_published();
    // A staged deployment, an incomplete one, and a copy nobody recorded.
    state.headers.push(header(PART));
    state.objects.extend(full(PART));
    for o in full(PART) {
        state.relations.insert(o.physical_name);
    }
    state
        .objects
        .push(object("20261201T110000Z_dddddd", "table", "tbl__a", "a"));
    state
        .relations
        .insert("tbl__a__20261201T120000Z_eeeeee".into());
    let records = inventory(&state);
    let states: Vec<(&str, &str, &str)> = records
        .iter()
        .map(|r| (r.deployment_id.as_str(), r.state, r.persisted_status))
        .collect();
    assert_eq!(
        states,
        [
            ("20261201T120000Z_eeeeee", "metadata_missing", "incomplete"),
            ("20261201T110000Z_dddddd", "incomplete", "incomplete"),
            (PART, "staged", "staged"),
            (NEW, "active", "published"),
            (OLD, "superseded", "published"),
        ]
    );
    let new = &records[3];
    assert_eq!(new.active_binding_names, ["tbl__a", "view__r"]);
    assert_eq!(new.root_names, ["a"]);
    assert_eq!(
        new.latest_published_at.as_deref(),
        Some("2026-12-01 09:10:00.000")
    );
    // A copy dropped by hand.
    state.relations.remove(&format!("tbl__a__{OLD}"));
    let old = inventory(&state)
        .into_iter()
        .find(|r| r.deployment_id == OLD)
        .expect("old");
    assert_eq!(old.state, "physical_missing");
    assert_eq!(
        old.missing_physical_relation_names,
        [format!("tbl__a__{OLD}")]
    );
}

#[test]
fn promotion_switches_tables_before_views_and_needs_a_complete_deployment() {
    let state = two_published();
    let bindings = promotion_bindings(&state, OLD).expect("bindings");
    let names: Vec<&str> = bindings.iter().map(|b| b.logical_name.as_str()).collect();
    assert_eq!(names, ["tbl__a", "view__r"]);
    assert_eq!(bindings[0].physical_name, format!("tbl__a__{OLD}"));
    assert_eq!(
        promotion_bindings(&state, "20261201T000000Z_zz")
            .expect_err("unknown")
            .code,
        DEPLOYMENT_CODE
    );
    let mut incomplete = state.clone();
    incomplete.headers.retain(|h| h.deployment_id != OLD);
    let refused = promotion_bindings(&incomplete, OLD).expect_err("incomplete");
    assert!(
        refused.message.contains("incomplete"),
        "{}",
        refused.message
    );
    let mut dropped = state;
    dropped.relations.remove(&format!("view__r__{OLD}"));
    assert_eq!(
        promotion_bindings(&dropped, OLD).expect_err("missing").code,
        MISSING_CODE
    );
}

#[test]
fn rollback_previous_restores_the_publication_before_the_current_one() {
    let state = two_published();
    let plan = plan_rollback(&state, &RollbackTo::Previous).expect("rollback");
    assert_eq!(plan.current_deployment_id, NEW);
    assert_eq!(plan.target_deployment_id, OLD);
    let restored: Vec<(&str, &str)> = plan
        .bindings
        .iter()
        .map(|b| (b.logical_name.as_str(), b.physical_name.as_str()))
        .collect();
    assert_eq!(restored[0].0, "tbl__a");
    assert_eq!(restored[1], ("view__r", format!("view__r__{OLD}").as_str()));

    // Named: the current one is refused, an unpublished one too.
    let active = plan_rollback(&state, &RollbackTo::Deployment(NEW.into())).expect_err("active");
    assert!(
        active.message.contains("already active"),
        "{}",
        active.message
    );
    let never = plan_rollback(&state, &RollbackTo::Deployment(PART.into())).expect_err("never");
    assert!(
        never.message.contains("no successful publication"),
        "{}",
        never.message
    );
}

#[test]
fn rollback_refuses_without_a_sound_current_publication() {
    // Nothing published.
    let empty = State::default();
    let refused = plan_rollback(&empty, &RollbackTo::Previous).expect_err("nothing");
    assert!(
        refused
            .message
            .contains("requires an active published deployment")
    );
    // A stable view switched by hand to another deployment's copy.
    let mut repaired = two_published();
    repaired
        .bindings
        .insert("view__r".into(), format!("view__r__{OLD}"));
    repaired
        .bindings
        .insert("tbl__a".into(), format!("tbl__a__{PART}"));
    let refused = plan_rollback(&repaired, &RollbackTo::Previous).expect_err("drift");
    assert!(
        refused
            .message
            .contains("do not match a complete publication"),
        "{}",
        refused.message
    );
    // Only one publication: nothing before it.
    let mut single = two_published();
    single.publications.retain(|p| p.deployment_id == NEW);
    let refused = plan_rollback(&single, &RollbackTo::Previous).expect_err("first");
    assert!(
        refused.message.contains("no earlier publication"),
        "{}",
        refused.message
    );
    // The previous copies were dropped.
    let mut dropped = two_published();
    dropped.relations.remove(&format!("tbl__a__{OLD}"));
    assert_eq!(
        plan_rollback(&dropped, &RollbackTo::Previous)
            .expect_err("gone")
            .code,
        MISSING_CODE
    );
}

#[test]
fn a_partial_deployment_publication_is_current_while_its_bindings_are_live() {
    // NEW copied everything; PART then copied only view__r and was promoted.
    let mut state = two_published();
    state.headers.push(header(PART));
    state.objects.push(object(PART, "view", "view__r", "r"));
    state.relations.insert(format!("view__r__{PART}"));
    state.publications.push(publication(
        PART,
        "3_part",
        "2026-12-01 10:10:00.000",
        "view__r",
    ));
    state
        .bindings
        .insert("view__r".into(), format!("view__r__{PART}"));
    let plan = plan_rollback(&state, &RollbackTo::Previous).expect("rollback");
    assert_eq!(plan.current_deployment_id, PART);
    assert_eq!(plan.target_deployment_id, NEW);
}

#[test]
fn doctor_reports_a_dropped_stable_view_and_how_to_repair_it() {
    let mut state = two_published();
    let healthy = diagnose(&state);
    assert!(
        healthy
            .iter()
            .all(|d| d.state_kind == "active_view_present" && d.repair.is_none())
    );
    let table = healthy
        .iter()
        .find(|d| d.table_name == "tbl__a")
        .expect("tbl__a");
    assert_eq!(table.active_deployment_id.as_deref(), Some(NEW));
    assert_eq!(table.candidate_deployment_ids, [NEW, OLD]);
    // Dropped by hand: missing, and rebound to the last published deployment.
    state.bindings.remove("tbl__a");
    let dropped = diagnose(&state);
    let table = dropped
        .iter()
        .find(|d| d.table_name == "tbl__a")
        .expect("tbl__a");
    assert_eq!(table.state_kind, "logical_view_missing");
    assert_eq!(
        table.repair.as_deref(),
        Some(format!("stb repair active-view --table tbl__a --deployment-id {NEW}").as_str())
    );
    // Pointed at something that is no copy of it.
    state
        .bindings
        .insert("tbl__a".into(), "somewhere_else".into());
    let invalid = diagnose(&state);
    assert_eq!(
        invalid
            .iter()
            .find(|d| d.table_name == "tbl__a")
            .expect("a")
            .state_kind,
        "invalid_active_view"
    );
}

fn retention() -> Retention {
    Retention {
        retention_days: 7,
        minimum_rollback_deployments: 1,
        minimum_age_minutes: 60,
    }
}

#[test]
fn the_janitor_keeps_active_newest_young_and_rollback_deployments() {
    let mut state = two_published();
    // An older published one and a stale staged one, both long ago.
    for id in ["20261101T080000Z_oooooo", "20261102T080000Z_ssssss"] {
        state.headers.push(header(id));
        state.objects.extend(full(id));
        for o in full(id) {
            state.relations.insert(o.physical_name);
        }
    }
    state.publications.push(publication(
        "20261101T080000Z_oooooo",
        "0_older",
        "2026-11-01 09:00:00.000",
        "tbl__a",
    ));
    let now = "2026-12-20 00:00:00.000";
    let plan = plan_cleanup(&state, retention(), now);
    let decided: Vec<(&str, bool)> = plan
        .iter()
        .map(|c| (c.deployment_id.as_str(), c.delete))
        .collect();
    assert_eq!(
        decided,
        [
            (NEW, false),
            (OLD, false),
            ("20261102T080000Z_ssssss", true),
            ("20261101T080000Z_oooooo", true),
        ]
    );
    assert_eq!(plan[0].reason, "currently active");
    assert!(
        plan[1].reason.starts_with("retained as rollback point"),
        "{}",
        plan[1].reason
    );
    assert_eq!(plan[2].reason, "stale unpublished deployment");
    assert_eq!(plan[3].reason, "published before retention window");
    // Views and materialized views go before the table they read.
    assert_eq!(
        plan[2].relations,
        [
            "mv__a__20261102T080000Z_ssssss",
            "view__r__20261102T080000Z_ssssss",
            "tbl__a__20261102T080000Z_ssssss",
        ]
    );
    // A deployment staged a minute ago is kept, whatever else holds.
    let mut young = state.clone();
    let just_built = "20261219T235900Z_yyyyyy";
    young.headers.push(header(just_built));
    young.headers.last_mut().expect("header").created_at = "2026-12-19 23:59:00.000".into();
    young.objects.extend(full(just_built));
    for o in full(just_built) {
        young.relations.insert(o.physical_name);
    }
    // The newest is kept as newest; an unpublished one built a minute ago is kept as young.
    let decided = plan_cleanup(&young, retention(), now);
    let just = decided
        .iter()
        .find(|c| c.deployment_id == just_built)
        .expect("young");
    assert!(!just.delete, "{just:?}");
    let mut second_young = young.clone();
    let newer = "20261219T235950Z_zzzzzz";
    second_young.headers.push(header(newer));
    second_young.objects.extend(full(newer));
    let decided = plan_cleanup(&second_young, retention(), now);
    let just = decided
        .iter()
        .find(|c| c.deployment_id == just_built)
        .expect("young");
    assert!(
        !just.delete && just.reason.starts_with("built within the last 60 minutes"),
        "{just:?}"
    );
}

#[test]
fn a_diff_compares_columns_and_rows_of_what_a_promotion_would_switch() {
    let mut state = two_published();
    // NEW is active; a partial deployment PART copies only view__r, with a new column.
    state.headers.push(header(PART));
    state.objects.push(object(PART, "view", "view__r", "r"));
    state.relations.insert(format!("view__r__{PART}"));
    state.columns.insert(
        format!("view__r__{NEW}"),
        vec![("n".into(), "UInt64".into())],
    );
    state.columns.insert(
        format!("view__r__{PART}"),
        vec![("n".into(), "UInt64".into()), ("m".into(), "UInt8".into())],
    );
    let (from, to) = parse_range(PART).expect("range");
    assert_eq!(
        (from.clone(), to.clone()),
        (Endpoint::Active, Endpoint::Deployment(PART.into()))
    );
    let counted = diff_relations(&state, &from, &to).expect("relations");
    assert_eq!(
        counted,
        [format!("view__r__{NEW}"), format!("view__r__{PART}")]
    );
    let rows = BTreeMap::from([
        (format!("view__r__{NEW}"), 5),
        (format!("view__r__{PART}"), 5),
    ]);
    let diff = diff(&state, &from, &to, &rows).expect("diff");
    let statuses: Vec<(&str, &str)> = diff
        .relations
        .iter()
        .map(|r| (r.name.as_str(), r.status))
        .collect();
    assert_eq!(statuses, [("tbl__a", "unchanged"), ("view__r", "changed")]);
    assert_eq!(diff.relations[1].columns_added, ["m"]);
    // Between two deployments: their own objects; one the other lacks is added/removed.
    let between = diff_relations(
        &state,
        &Endpoint::Deployment(NEW.into()),
        &Endpoint::Deployment(PART.into()),
    )
    .expect("relations");
    assert!(between.contains(&format!("tbl__a__{NEW}")));
    let diff = super::diff(
        &state,
        &Endpoint::Deployment(NEW.into()),
        &Endpoint::Deployment(PART.into()),
        &BTreeMap::new(),
    )
    .expect("diff");
    let table = diff
        .relations
        .iter()
        .find(|r| r.name == "tbl__a")
        .expect("tbl__a");
    assert_eq!(table.status, "removed");
    // A copy dropped by hand, an incomplete or unknown deployment, a bad endpoint.
    let mut dropped = state.clone();
    dropped.relations.remove(&format!("view__r__{PART}"));
    let diff = super::diff(&dropped, &from, &to, &rows).expect("diff");
    assert_eq!(diff.relations[1].status, "physical_missing");
    assert!(parse_range("active:20261301T000000Z_x").is_err());
    let mut incomplete = state;
    incomplete.headers.retain(|h| h.deployment_id != PART);
    assert_eq!(
        super::diff(&incomplete, &from, &to, &rows)
            .expect_err("incomplete")
            .code,
        DEPLOYMENT_CODE
    );
}
