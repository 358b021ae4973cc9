use super::*;

const OLD: &str = "20261201T080000Z_aaaaaa";
const NEW: &str = "20261201T090000Z_bbbbbb";
const PART: &str = "20261201T100000Z_cccccc";

fn header(id: &str) -> HeaderRow {
    HeaderRow {
        deployment_id: id.into(),
        created_at: format!("{} 00:00:00.000", &id[..8]),
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
