use super::*;

fn table(name: &str, pipeline: &str, driving: &str, side: &[&str]) -> PlanModel {
    let mut reads = vec![driving.to_owned()];
    reads.extend(side.iter().map(|s| (*s).to_owned()));
    PlanModel {
        name: name.into(),
        pipeline: pipeline.into(),
        is_table: true,
        relations: vec![
            (RelationKind::Table, format!("tbl__{name}")),
            (RelationKind::MaterializedView, format!("mv__{name}")),
        ],
        reads,
        driving_input: Some(driving.into()),
        has_mutable_ref: false,
        ..PlanModel::default()
    }
}

fn view(name: &str, reads: &[&str]) -> PlanModel {
    PlanModel {
        name: name.into(),
        pipeline: "pl__reporting".into(),
        is_table: false,
        relations: vec![(RelationKind::View, format!("vw__{name}"))],
        reads: reads.iter().map(|s| (*s).to_owned()).collect(),
        driving_input: None,
        has_mutable_ref: false,
        ..PlanModel::default()
    }
}

/// orders (source) -> clean -> enriched (+ customers side) -> summary (view);
/// customers (adopted) -> customer_names
fn project() -> (Vec<PlanModel>, Vec<PlanSource>) {
    let models = vec![
        table("clean", "pl__orders", "orders", &[]),
        table("customer_names", "pl__customers", "customers", &[]),
        table("enriched", "pl__orders", "clean", &["customer_names"]),
        view("summary", &["enriched"]),
    ];
    let sources = vec![
        PlanSource {
            name: "orders".into(),
            framework_managed: true,
            scheduled_pull: false,
            relation: Some("raw__orders".into()),
            ..PlanSource::default()
        },
        PlanSource {
            name: "customers".into(),
            framework_managed: false,
            scheduled_pull: false,
            relation: Some("customers_table".into()),
            ..PlanSource::default()
        },
    ];
    (models, sources)
}

fn reasons(plan: &DirectPlan) -> Vec<(&str, &str)> {
    plan.entries
        .iter()
        .map(|e| (e.model.as_str(), e.reason.as_str()))
        .collect()
}

fn everything_exists(_: &str) -> bool {
    true
}

#[test]
fn everything_is_planned_with_one_root_per_driving_chain() {
    let (models, sources) = project();
    let plan = plan_direct(
        &models,
        &sources,
        &Selection::new(&model_graph(&models), None),
        &everything_exists,
    )
    .expect("plan");
    let reasons: Vec<(&str, &str, bool)> = plan
        .entries
        .iter()
        .map(|e| (e.model.as_str(), e.reason.as_str(), e.is_replay_root))
        .collect();
    assert_eq!(
        reasons,
        [
            ("clean", "all_models", true),
            ("customer_names", "all_models", true),
            ("enriched", "all_models", true),
            ("summary", "all_models", false),
        ]
    );
    // enriched joins customer_names, which this build rebuilds: it replays from clean in a
    // second stage, once customer_names is complete, instead of riding clean's replay.
    assert_eq!(
        plan.replay_roots,
        [
            ReplayRoot {
                model: "clean".into(),
                driving_input: "orders".into(),
                propagated: vec![],
                stage: 0,
                waits_for: vec![],
            },
            ReplayRoot {
                model: "customer_names".into(),
                driving_input: "customers".into(),
                propagated: vec![],
                stage: 0,
                waits_for: vec![],
            },
            ReplayRoot {
                model: "enriched".into(),
                driving_input: "clean".into(),
                propagated: vec![],
                stage: 1,
                waits_for: vec!["customer_names".into()],
            },
        ]
    );
    assert_eq!(plan.replay_roots[2].reason(), "side_input_rebuilt");
    assert_eq!(plan.replay_roots[0].reason(), "driving_input_not_rebuilt");
    let names = |list: &[(RelationKind, String)]| {
        list.iter()
            .map(|(_, n)| n.as_str())
            .collect::<Vec<_>>()
            .join(" ")
    };
    assert_eq!(
        names(&plan.teardown),
        "vw__summary mv__enriched mv__customer_names mv__clean tbl__enriched tbl__customer_names tbl__clean"
    );
    assert_eq!(
        names(&plan.creation),
        "tbl__clean tbl__customer_names tbl__enriched mv__customer_names mv__clean vw__summary mv__enriched"
    );
    let prerequisites: Vec<(&str, bool)> = plan
        .prerequisites
        .iter()
        .map(|p| (p.name.as_str(), p.framework_managed))
        .collect();
    assert_eq!(prerequisites, [("customers", false), ("orders", true)]);
    // Sources are looked up by the relation models read.
    let only_landing = plan_direct(
        &models,
        &sources,
        &Selection::new(&model_graph(&models), None),
        &|r| r == "raw__orders",
    )
    .expect("plan");
    let present: Vec<(&str, bool)> = only_landing
        .prerequisites
        .iter()
        .map(|p| (p.name.as_str(), p.present))
        .collect();
    assert_eq!(present, [("customers", false), ("orders", true)]);
}

#[test]
fn a_selection_takes_its_downstream_and_its_own_roots() {
    let (models, sources) = project();
    let selected: BTreeSet<String> = ["enriched".to_owned()].into();
    let plan = plan_direct(
        &models,
        &sources,
        &Selection::new(&model_graph(&models), Some(selected)),
        &everything_exists,
    )
    .expect("plan");
    assert_eq!(
        reasons(&plan),
        [
            ("enriched", "selected"),
            ("summary", "downstream_of_selected")
        ]
    );
    // clean is not rebuilt: enriched replays from it.
    assert_eq!(plan.replay_roots.len(), 1);
    assert_eq!(plan.replay_roots[0].model, "enriched");
    assert_eq!(plan.replay_roots[0].driving_input, "clean");
    let prerequisites: Vec<&str> = plan.prerequisites.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(prerequisites, ["clean", "customer_names"]);
}

#[test]
fn a_missing_prerequisite_model_fails_and_names_its_pipeline() {
    let (models, sources) = project();
    let selected: BTreeSet<String> = ["enriched".to_owned()].into();
    let error = plan_direct(
        &models,
        &sources,
        &Selection::new(&model_graph(&models), Some(selected)),
        &|relation| relation != "tbl__customer_names",
    )
    .expect_err("missing");
    assert!(
        error.message.contains("'customer_names' is read by the selection but does not exist (built by pipeline pl__customers; add it to the selection)"),
        "{}",
        error.message
    );
}

#[test]
fn scheduled_pulls_are_not_replayed_and_mutable_refs_warn() {
    let (mut models, mut sources) = project();
    sources[1].scheduled_pull = true;
    sources[1].framework_managed = true;
    models[2].has_mutable_ref = true;
    let plan = plan_direct(
        &models,
        &sources,
        &Selection::new(&model_graph(&models), None),
        &everything_exists,
    )
    .expect("plan");
    // customer_names is refreshed by the warehouse, never replayed; enriched, which joins
    // it, still waits for its rebuild before it replays.
    let roots: Vec<&str> = plan.replay_roots.iter().map(|r| r.model.as_str()).collect();
    assert_eq!(roots, ["clean", "enriched"]);
    assert_eq!(plan.warnings.len(), 1);
    assert!(plan.warnings[0].starts_with("mutable_ref_replay_not_guaranteed: 'enriched'"));
}

#[test]
fn changed_picks_models_without_a_matching_baseline_and_their_downstream() {
    let (mut models, sources) = project();
    for model in &mut models {
        model.query = format!("SELECT 1 AS {}", model.name);
    }
    let graph = model_graph(&models);
    let built = |query: &str, identity: String| RecordedModel {
        definition_hash: crate::sql_change::sql_hash(query),
        definition_sql: query.to_owned(),
        identity,
    };
    let recorded = |name: &str| {
        let model = models.iter().find(|m| m.name == name)?;
        match name {
            // No baseline: changed.
            "customer_names" => None,
            // Same query, same identity (written with other spacing): unchanged.
            "clean" => Some(built(&model.query, model.identity().replace(':', ": "))),
            // Same query, another output contract: changed.
            "enriched" => Some(built(
                &model.query,
                model.identity().replace(
                    "\"output_columns\":[]",
                    "\"output_columns\":[{\"name\":\"x\",\"type\":\"UInt8\"}]",
                ),
            )),
            _ => Some(built(&model.query, model.identity())),
        }
    };
    let selection = Selection::changed(&graph, &models, &recorded, &everything_exists);
    let plan = plan_direct(&models, &sources, &selection, &everything_exists).expect("plan");
    assert_eq!(
        reasons(&plan),
        [
            ("customer_names", "changed"),
            ("enriched", "changed"),
            ("summary", "downstream_of_selected"),
        ]
    );
    // An unchanged model whose table is gone is rebuilt too.
    let without_clean = |relation: &str| !relation.ends_with("__clean");
    let selection = Selection::changed(&graph, &models, &recorded, &without_clean);
    assert!(selection.scope.contains("clean"), "{:?}", selection.scope);
}

#[test]
fn changed_ignores_a_respelt_type_in_the_query_or_the_columns_and_sees_a_real_change() {
    let (mut models, _) = project();
    for model in &mut models {
        model.query = format!("SELECT x::DateTime64(3) AS {}", model.name);
        model.output_columns = vec![(model.name.clone(), "DateTime64(3)".to_owned())];
    }
    let graph = model_graph(&models);
    let recorded = |name: &str| {
        let model = models.iter().find(|m| m.name == name)?;
        Some(RecordedModel {
            definition_hash: crate::sql_change::sql_hash(&model.query),
            definition_sql: model.query.clone(),
            identity: model.identity(),
        })
    };
    let mut respelt = models.clone();
    for model in &mut respelt {
        model.query = model.query.replace("DateTime64(3)", "datetime64( 3 )");
        model.output_columns[0].1 = "datetime64( 3 )".to_owned();
    }
    let selection = Selection::changed(&graph, &respelt, &recorded, &everything_exists);
    assert!(selection.scope.is_empty(), "{:?}", selection.scope);
    let mut retyped = models.clone();
    retyped[0].query = retyped[0].query.replace("DateTime64(3)", "DateTime64(6)");
    let selection = Selection::changed(&graph, &retyped, &recorded, &everything_exists);
    assert!(
        selection.scope.contains(&retyped[0].name),
        "{:?}",
        selection.scope
    );
}

#[test]
fn missing_upstream_models_join_the_scope_until_nothing_is_missing() {
    let (models, sources) = project();
    let graph = model_graph(&models);
    let selected: BTreeSet<String> = ["summary".to_owned()].into();
    // enriched and clean were never built; customer_names was.
    let present = |relation: &str| relation.ends_with("customer_names");
    let selection =
        Selection::new(&graph, Some(selected)).with_missing_upstream(&graph, &models, &present);
    let plan = plan_direct(&models, &sources, &selection, &present).expect("plan");
    assert_eq!(
        reasons(&plan),
        [
            ("clean", "missing_upstream"),
            ("enriched", "missing_upstream"),
            ("summary", "selected"),
        ]
    );
}

/// alpha <- source; beta <- alpha; gamma <- beta; delta <- alpha joins gamma;
/// epsilon <- delta; zeta <- alpha joins delta (a join on a join); report (view) <- zeta.
fn fan_ins() -> (Vec<PlanModel>, Vec<PlanSource>) {
    let models = vec![
        table("alpha", "pl__a", "orders", &[]),
        table("beta", "pl__a", "alpha", &[]),
        table("gamma", "pl__a", "beta", &[]),
        table("delta", "pl__a", "alpha", &["gamma"]),
        table("epsilon", "pl__a", "delta", &[]),
        table("zeta", "pl__a", "alpha", &["delta"]),
        view("report", &["zeta"]),
    ];
    (models, project().1)
}

fn roots_of(plan: &DirectPlan) -> Vec<(&str, usize, Vec<&str>, Vec<&str>)> {
    plan.replay_roots
        .iter()
        .map(|r| {
            (
                r.model.as_str(),
                r.stage,
                r.propagated.iter().map(String::as_str).collect(),
                r.waits_for.iter().map(String::as_str).collect(),
            )
        })
        .collect()
}

#[test]
fn fan_ins_replay_in_stages_after_their_rebuilt_side_inputs() {
    let (models, sources) = fan_ins();
    let graph = model_graph(&models);
    let plan = plan_direct(
        &models,
        &sources,
        &Selection::new(&graph, None),
        &everything_exists,
    )
    .expect("plan");
    assert_eq!(
        roots_of(&plan),
        [
            ("alpha", 0, vec!["beta", "gamma"], vec![]),
            ("delta", 1, vec!["epsilon"], vec!["gamma"]),
            ("zeta", 2, vec![], vec!["delta"]),
        ]
    );
    let names: Vec<&str> = plan.creation.iter().map(|(_, n)| n.as_str()).collect();
    // Fan-ins' views come last, stage by stage; everything else goes live first.
    assert_eq!(
        &names[names.len() - 3..],
        ["vw__report", "mv__delta", "mv__zeta"]
    );
    assert!(names.contains(&"mv__epsilon"));

    // Selecting gamma: delta joins it, and replays from alpha (not rebuilt) after it.
    let selected = Selection::new(&graph, Some(["gamma".to_owned()].into()));
    let plan = plan_direct(&models, &sources, &selected, &everything_exists).expect("plan");
    assert_eq!(
        roots_of(&plan),
        [
            ("gamma", 0, vec![], vec![]),
            ("delta", 1, vec!["epsilon"], vec!["gamma"]),
            ("zeta", 2, vec![], vec!["delta"]),
        ]
    );
    // Selecting delta alone: gamma is not rebuilt, so delta is an ordinary root.
    let selected = Selection::new(&graph, Some(["delta".to_owned()].into()));
    let plan = plan_direct(&models, &sources, &selected, &everything_exists).expect("plan");
    assert_eq!(
        roots_of(&plan),
        [
            ("delta", 0, vec!["epsilon"], vec![]),
            ("zeta", 1, vec![], vec!["delta"]),
        ]
    );
}
