//! `stb plan` for virtual pipelines against the local stack: a greenfield deployment, then
//! the same project staged and published as a build records it (physical copies, stable
//! views, object-state rows), and the plans that follow edits to it.

use std::path::Path;

use serde_json::Value;
use stb_plan::deployment::DeploymentId;
use stb_plan::virtual_plan::object_fingerprint;
use stb_test_support::{TestDatabase, execute, stack};
use stb_warehouse::deployments::{ObjectState, record_objects};

const ACTIVE: &str = "20261130T120000Z_a1b2c3";

const CLEAN: &str = "MODEL (order_by [\"_replay_partition\", \"_replay_offset\"]);\nSELECT _replay_partition::UInt32 AS _replay_partition, _replay_offset::UInt64 AS _replay_offset, amount::UInt64 AS amount\nFROM __source(\"events\")\n";

fn project(database: &str, extra: &[(&str, &str)]) -> tempfile::TempDir {
    let mut files: Vec<(String, String)> = vec![
        (
            "streambuild_project.toml".into(),
            format!("name = \"v\"\ndefault_target = \"dev\"\n[targets.dev]\ndatabase = \"{database}\"\n"),
        ),
        (
            "sources/events.yml".into(),
            "sources:\n  - name: events\n    kind: stream_table\n    table_name: events\n    replay_boundary:\n      mode: offsets\n      columns:\n        _replay_partition: p\n        _replay_offset: o\n        _replay_timestamp: ts\n".into(),
        ),
        ("pipelines/pl__v/pipeline.toml".into(), "mode = \"virtual\"\n".into()),
        ("pipelines/pl__v/clean.sql".into(), CLEAN.into()),
        (
            "pipelines/pl__v/report.sql".into(),
            "MODEL (kind view);\nSELECT count()::UInt64 AS n FROM __ref(\"clean\")\n".into(),
        ),
    ];
    files.extend(
        extra
            .iter()
            .map(|(p, t)| ((*p).to_owned(), (*t).to_owned())),
    );
    stb_test_support::project_dir(&files)
}

fn stb(dir: &Path, args: &[&str]) -> std::process::Output {
    stb_test_support::stb_on_project(dir, args, "")
}

fn plan_json(dir: &Path, extra: &[&str]) -> Value {
    let mut args = vec!["plan", "--json"];
    args.extend_from_slice(extra);
    let output = stb(dir, &args);
    assert!(
        output.status.success(),
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).expect("JSON")
}

fn changes(plan: &Value) -> Vec<(String, String)> {
    plan["object_changes"]
        .as_array()
        .expect("changes")
        .iter()
        .map(|c| {
            (
                c["key"]["name"].as_str().unwrap_or_default().to_owned(),
                c["change_type"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect()
}

fn change<'p>(plan: &'p Value, name: &str) -> &'p Value {
    plan["object_changes"]
        .as_array()
        .expect("changes")
        .iter()
        .find(|c| c["key"]["name"] == name)
        .expect(name)
}

/// Stages and publishes every model of the project in `dir` as deployment `ACTIVE`, the
/// way a virtual build records it: the physical copies (reading each other, never the
/// stable views), the stable views, and one object-state row per object.
fn publish_as_built(dir: &Path, database: &str) {
    let project = stb_project::discover(&stb_project::DiscoverOptions {
        project_dir: Some(dir.to_path_buf()),
        cwd: dir.to_path_buf(),
        ..Default::default()
    })
    .expect("discover");
    let compiled = stb_compile::compile(&project).expect("compile");
    let id = DeploymentId::parse(ACTIVE).expect("id");
    let physical = |model: &str| {
        let relation = compiled
            .plan_models
            .iter()
            .find(|m| m.name == model)
            .and_then(|m| m.relations.first())
            .map(|(_, r)| r.clone())
            .expect(model);
        format!("{database}.{}", id.physical(&relation))
    };
    let client = stb_warehouse::Client::new(stb_warehouse::ConnectionConfig {
        port: stack().clickhouse_port,
        ..Default::default()
    })
    .expect("client");
    stb_warehouse::metadata::migrate(&client, database).expect("metadata");
    let mut fingerprints = Vec::new();
    for model in compiled.plan_models.iter() {
        let deployable = &model.deployable;
        let query = deployable.query_with(&physical);
        if let Some(table) = &deployable.table {
            let mut table = table.clone();
            table.name.name = id.physical(&table.name.name);
            execute(&table.render());
        }
        if let Some(view) = &deployable.materialized_view {
            let mut view = view.clone();
            view.name.name = id.physical(&view.name.name);
            view.target.name = id.physical(&view.target.name);
            view.query = query.clone();
            execute(&view.render());
        }
        if let Some(view) = &deployable.view {
            let mut view = view.clone();
            view.name.name = id.physical(&view.name.name);
            view.query = query.clone();
            execute(&view.render());
        }
        for (kind, relation) in &model.relations {
            if *kind != stb_plan::direct::RelationKind::MaterializedView {
                execute(&format!(
                    "CREATE OR REPLACE VIEW {database}.{relation} AS SELECT * FROM {database}.{}",
                    id.physical(relation)
                ));
            }
            fingerprints.push((
                model,
                *kind,
                relation.clone(),
                id.physical(relation),
                object_fingerprint(model, *kind),
            ));
        }
    }
    let objects: Vec<ObjectState<'_>> = fingerprints
        .iter()
        .map(
            |(model, kind, relation, physical, fingerprint)| ObjectState {
                deployment_id: ACTIVE,
                object_type: kind.as_str(),
                logical_name: relation,
                physical_name: physical,
                model: &model.name,
                is_selected_root: false,
                fingerprint,
                canonical_query: None,
            },
        )
        .collect();
    record_objects(&client, database, &objects).expect("object state");
}

fn events_table(database: &str) {
    execute(&format!(
        "CREATE TABLE {database}.events (p UInt32, o UInt64, ts DateTime64(3, 'UTC'), amount UInt64) ENGINE = MergeTree ORDER BY (p, o)"
    ));
}

#[test]
fn a_greenfield_virtual_plan_stages_every_object_and_touches_nothing() {
    let db = TestDatabase::create("vplan_green");
    events_table(&db.name);
    let dir = project(&db.name, &[]);
    let before = execute(&format!(
        "SELECT name FROM system.tables WHERE database = '{}' ORDER BY name",
        db.name
    ));
    let plan = plan_json(dir.path(), &["--deployment-id", ACTIVE]);
    assert_eq!(plan["mode"], "virtual environments");
    assert_eq!(plan["deployment_id"], ACTIVE);
    assert_eq!(plan["deployment_created_at"], "2026-11-30 12:00:00.000");
    assert_eq!(
        changes(&plan),
        [
            ("tbl__clean".to_owned(), "create".to_owned()),
            ("mv__clean".to_owned(), "create".to_owned()),
            ("view__report".to_owned(), "create".to_owned()),
        ]
    );
    assert_eq!(change(&plan, "tbl__clean")["root_state"], "greenfield");
    let subtree = &plan["rebuild_subtrees"][0];
    assert_eq!(subtree["root_key"], "clean");
    assert_eq!(
        subtree["affected_keys"],
        serde_json::json!(["clean", "report"])
    );
    assert_eq!(subtree["upstream_boundary_key"], "events");
    assert_eq!(subtree["execution_mode"], "full_rebuild");
    assert_eq!(
        plan["prepared_shadow_objects"][0]["physical_name"],
        format!("tbl__clean__{ACTIVE}")
    );
    assert_eq!(plan["steps"][3], "backfill-1-clean");
    // Text, fresh ids, read-only.
    let text = stb(dir.path(), &["plan"]);
    let text = String::from_utf8_lossy(&text.stdout).into_owned();
    assert!(text.contains("[replay start] events"), "{text}");
    assert!(
        text.contains("New targets: tbl__clean, mv__clean, view__report"),
        "{text}"
    );
    let fresh = plan_json(dir.path(), &[])["deployment_id"]
        .as_str()
        .map(str::to_owned)
        .expect("id");
    assert!(DeploymentId::parse(&fresh).is_ok(), "{fresh}");
    assert_ne!(fresh, ACTIVE);
    let after = execute(&format!(
        "SELECT name FROM system.tables WHERE database = '{}' ORDER BY name",
        db.name
    ));
    assert_eq!(before, after, "a plan creates nothing");
    // A start time seeds from the active copy: with none deployed there is nothing to
    // seed from.
    let refused = stb(
        dir.path(),
        &[
            "plan",
            "--json",
            "--select",
            "clean",
            "--start-time",
            "2026-11-01",
        ],
    );
    assert!(!refused.status.success());
    let error: Value = serde_json::from_slice(&refused.stdout).expect("JSON");
    assert!(
        error["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("--start-time needs an active deployment of 'clean'")),
        "{error}"
    );
    let bad = stb(
        dir.path(),
        &["plan", "--json", "--deployment-id", "20261131T000000Z_x"],
    );
    let error: Value = serde_json::from_slice(&bad.stdout).expect("JSON");
    assert_eq!(error["error"]["code"], "STB-PLAN-001");
}

#[test]
fn a_published_deployment_plans_nothing_until_the_project_changes() {
    let db = TestDatabase::create("vplan_deployed");
    events_table(&db.name);
    let dir = project(&db.name, &[]);
    publish_as_built(dir.path(), &db.name);

    let unchanged = plan_json(dir.path(), &[]);
    assert!(
        changes(&unchanged).iter().all(|(_, c)| c == "no_op"),
        "{unchanged}"
    );
    assert_eq!(
        change(&unchanged, "tbl__clean")["root_state"],
        "active_view_present"
    );
    assert_eq!(
        change(&unchanged, "tbl__clean")["active_deployment_id"],
        ACTIVE
    );
    assert_eq!(unchanged["rebuild_subtrees"], serde_json::json!([]));
    let text = String::from_utf8_lossy(&stb(dir.path(), &["plan"]).stdout).into_owned();
    assert!(text.contains("No changes"), "{text}");

    // The same types spelt another way (aliases the server reads as UInt32 and UInt64):
    // no change, and no diff to review.
    let respelt = CLEAN
        .replace("::UInt32", "::integer unsigned")
        .replace("amount::UInt64", "amount::BIGINT  UNSIGNED");
    std::fs::write(dir.path().join("pipelines/pl__v/clean.sql"), &respelt).expect("write");
    let plan = plan_json(dir.path(), &[]);
    assert!(changes(&plan).iter().all(|(_, c)| c == "no_op"), "{plan}");
    assert_eq!(plan["sql_diffs"], serde_json::json!([]), "{plan}");

    // A filter: same columns, new query. An ordinary rebuild of clean and what reads it.
    let filtered = CLEAN.replace(
        "FROM __source(\"events\")\n",
        "FROM __source(\"events\")\nWHERE amount > 0\n",
    );
    std::fs::write(dir.path().join("pipelines/pl__v/clean.sql"), &filtered).expect("write");
    let plan = plan_json(dir.path(), &[]);
    assert_eq!(change(&plan, "mv__clean")["change_type"], "rebuild");
    assert_eq!(change(&plan, "tbl__clean")["change_type"], "no_op");
    assert_eq!(change(&plan, "view__report")["change_type"], "no_op");
    assert_eq!(
        plan["rebuild_subtrees"][0]["affected_keys"],
        serde_json::json!(["clean", "report"])
    );
    assert_eq!(
        plan["rebuild_subtrees"][0]["execution_mode"],
        "full_rebuild"
    );

    // An added column: non-breaking, seeded from the active table (it keeps the lineage).
    let added = CLEAN.replace(" AS amount\n", " AS amount, 'x'::String AS note\n");
    std::fs::write(dir.path().join("pipelines/pl__v/clean.sql"), &added).expect("write");
    let plan = plan_json(dir.path(), &[]);
    let table = change(&plan, "tbl__clean");
    assert_eq!(table["change_type"], "rebuild");
    assert_eq!(table["schema_change_kind"], "non_breaking");
    assert_eq!(table["seed_compatibility"], "seedable");
    // No replay_on_change: seeded from the active copy's frontier, from the deployment's
    // instant on.
    let subtree = &plan["rebuild_subtrees"][0];
    assert_eq!(
        subtree["execution_mode"], "seeded_bounded_rebuild",
        "{plan}"
    );
    assert_eq!(subtree["execution_lookback_seconds"], Value::Null);
    assert!(subtree["execution_start_time"].is_string(), "{plan}");

    // A retyped column: breaking, and its rows cannot be copied.
    let retyped = CLEAN.replace("amount::UInt64", "amount::Int64");
    std::fs::write(dir.path().join("pipelines/pl__v/clean.sql"), &retyped).expect("write");
    let plan = plan_json(dir.path(), &[]);
    let table = change(&plan, "tbl__clean");
    assert_eq!(table["schema_change_kind"], "breaking");
    assert_eq!(table["seed_compatibility"], "non_seedable");
    assert_eq!(
        plan["rebuild_subtrees"][0]["execution_mode"],
        "full_rebuild"
    );

    // Back to what is deployed, then forced.
    std::fs::write(dir.path().join("pipelines/pl__v/clean.sql"), CLEAN).expect("write");
    let forced = plan_json(dir.path(), &["--select", "report", "--full-refresh"]);
    assert_eq!(change(&forced, "view__report")["change_type"], "rebuild");
    assert_eq!(forced["rebuild_subtrees"][0]["root_key"], "report");
    assert_eq!(forced["rebuild_subtrees"][0]["execution_mode"], "deploy");
}

#[test]
fn a_scope_with_direct_and_virtual_pipelines_plans_both_phases() {
    let db = TestDatabase::create("vplan_mixed");
    events_table(&db.name);
    let direct = "MODEL (order_by [\"_replay_partition\", \"_replay_offset\"]);\nSELECT _replay_partition::UInt32 AS _replay_partition, _replay_offset::UInt64 AS _replay_offset\nFROM __source(\"events\")\n";
    let dir = project(&db.name, &[("pipelines/pl__d/plain.sql", direct)]);
    // Both phases, virtual first.
    let mixed = plan_json(dir.path(), &["--deployment-id", ACTIVE]);
    assert_eq!(mixed["mode"], "mixed");
    assert_eq!(
        mixed["execution_order"],
        serde_json::json!(["virtual", "direct"])
    );
    assert_eq!(mixed["virtual"]["mode"], "virtual environments");
    assert_eq!(mixed["virtual"]["deployment_id"], ACTIVE);
    assert_eq!(mixed["direct"]["mode"], "direct");
    let direct_models: Vec<&str> = mixed["direct"]["entries"]
        .as_array()
        .expect("entries")
        .iter()
        .filter_map(|e| e["model"].as_str())
        .collect();
    assert_eq!(direct_models, ["plain"]);
    let text = String::from_utf8_lossy(&stb(dir.path(), &["plan"]).stdout).into_owned();
    assert!(text.starts_with("Mixed Build Plan"), "{text}");
    assert!(
        text.contains("Phase 1/2 VIRTUAL") && text.contains("Phase 2/2 DIRECT"),
        "{text}"
    );
    // Each kind on its own plans alone.
    let virtual_only = plan_json(dir.path(), &["--select", "pipeline:pl__v"]);
    assert_eq!(virtual_only["mode"], "virtual environments");
    let direct_only = plan_json(dir.path(), &["--select", "pipeline:pl__d"]);
    assert_eq!(direct_only["mode"], "direct");
    // A direct plan refuses the virtual-only flags instead of ignoring them.
    let output = stb(
        dir.path(),
        &[
            "plan",
            "--json",
            "--select",
            "pipeline:pl__d",
            "--full-refresh",
        ],
    );
    let error: Value = serde_json::from_slice(&output.stdout).expect("JSON");
    assert_eq!(error["error"]["code"], "STB-PLAN-001");
}

/// Waits until no relation of `database` changed in the last two seconds by the server's
/// clock: only then does a plan keep the stable views' definitions for the next one.
fn wait_until_settled(database: &str) {
    loop {
        let recent = execute(&format!(
            "SELECT count() FROM system.tables WHERE database = '{database}' AND metadata_modification_time > now() - 2"
        ));
        if recent.trim() == "0" {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
}

#[test]
fn a_stable_view_rebound_after_a_plan_is_seen_by_the_next_plan() {
    let db = TestDatabase::create("vplan_view_cache");
    events_table(&db.name);
    let dir = project(&db.name, &[]);
    publish_as_built(dir.path(), &db.name);
    wait_until_settled(&db.name);

    let first = plan_json(dir.path(), &[]);
    assert_eq!(change(&first, "tbl__clean")["active_deployment_id"], ACTIVE);
    let cache_file = dir.path().join("target/.catalog_cache.json");
    let cache: Value =
        serde_json::from_slice(&std::fs::read(&cache_file).expect("the plan kept the views"))
            .expect("cache JSON");
    assert_eq!(
        cache["relations"]["tbl__clean"]["relation"]["as_select"],
        format!("SELECT * FROM {0}.tbl__clean__{1}", db.name, ACTIVE),
        "{cache}"
    );

    // Someone points the stable view elsewhere by hand: the next plan reads it again.
    execute(&format!(
        "CREATE OR REPLACE VIEW {0}.tbl__clean AS SELECT * FROM {0}.events",
        db.name
    ));
    let rebound = plan_json(dir.path(), &[]);
    assert_eq!(
        change(&rebound, "tbl__clean")["active_deployment_id"],
        Value::Null,
        "{rebound}"
    );
    std::fs::remove_file(&cache_file).expect("cache removed");
    let uncached = plan_json(dir.path(), &[]);
    let comparable = |plan: &Value| {
        let id = plan["deployment_id"].as_str().expect("id").to_owned();
        let created = plan["deployment_created_at"]
            .as_str()
            .expect("time")
            .to_owned();
        let text = plan
            .to_string()
            .replace(&id, "ID")
            .replace(&created, "TIME");
        let mut value: Value = serde_json::from_str(&text).expect("JSON");
        value["plan_hash"] = Value::Null;
        value
    };
    assert_eq!(comparable(&rebound), comparable(&uncached));
}
