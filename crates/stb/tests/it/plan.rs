//! `stb plan` for direct pipelines against the local stack: read-only, SQL changes against
//! the last fingerprint, adopted tables checked first.

use serde_json::Value;
use stb_test_support::{TestDatabase, execute, stack};

fn project(database: &str) -> tempfile::TempDir {
    let files = [
        (
            "streambuild_project.toml".to_owned(),
            format!("name = \"crm\"\ndefault_target = \"dev\"\n[targets.dev]\ndatabase = \"{database}\"\n"),
        ),
        (
            "sources/customers.yml".to_owned(),
            "sources:\n  - name: customers\n    kind: stream_table\n    table_name: customers_existing\n    replay_boundary:\n      mode: timestamp\n      columns:\n        _replay_timestamp: updated_at\n".to_owned(),
        ),
        (
            "pipelines/pl__crm/customer_names.sql".to_owned(),
            "MODEL (order_by [\"customer_id\"]);\nSELECT id::UInt64 AS customer_id, name::String AS name, updated_at::DateTime64(3) AS _replay_timestamp\nFROM __source(\"customers\")\n".to_owned(),
        ),
        (
            "pipelines/pl__crm/name_counts.sql".to_owned(),
            "MODEL (kind view);\nSELECT name::String AS name, count()::UInt64 AS n FROM __ref(\"customer_names\") GROUP BY name\n".to_owned(),
        ),
    ];
    stb_test_support::project_dir(&files)
}

fn plan(dir: &tempfile::TempDir, extra: &[&str]) -> std::process::Output {
    let mut args = vec!["plan"];
    args.extend_from_slice(extra);
    stb_test_support::stb_on_project(dir.path(), &args, "")
}

fn tables(database: &str) -> String {
    execute(&format!(
        "SELECT name FROM system.tables WHERE database = '{database}' ORDER BY name"
    ))
}

#[test]
fn a_direct_plan_reads_only_and_reports_sql_changes() {
    let db = TestDatabase::create("plan_direct");
    execute(&format!(
        "CREATE TABLE {}.customers_existing (id UInt64, name String, updated_at DateTime64(3)) ENGINE = MergeTree ORDER BY id",
        db.name
    ));
    let dir = project(&db.name);
    let before = tables(&db.name);
    let output = plan(&dir, &["--json"]);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stdout)
    );
    let json: Value = serde_json::from_slice(&output.stdout).expect("JSON");
    assert_eq!(json["mode"], "direct");
    assert_eq!(json["entries"][0]["model"], "customer_names");
    assert_eq!(json["entries"][0]["is_replay_root"], true);
    assert_eq!(json["entries"][0]["sql_change"]["status"], "first_baseline");
    assert_eq!(json["replay_roots"][0]["driving_input"], "customers");
    assert_eq!(json["replay_roots"][0]["replay_boundary_mode"], "timestamp");
    assert_eq!(
        json["replay_roots"][0]["skips_keys_already_written"],
        serde_json::Value::Null,
        "timestamps are no key"
    );
    assert_eq!(
        json["entries"][0]["relation_names"],
        serde_json::json!(["tbl__customer_names", "mv__customer_names"])
    );
    let artifact: Value = serde_json::from_str(
        &std::fs::read_to_string(dir.path().join("target/run/plan/plan.json")).expect("plan.json"),
    )
    .expect("JSON");
    let steps = artifact["steps"].as_array().expect("steps");
    assert_eq!(steps[0]["step_id"], "prepare_target_database");
    assert_eq!(
        steps.last().map(|s| s["template"].clone()),
        Some(Value::Bool(true))
    );
    assert_eq!(json["entries"][1]["model"], "name_counts");
    assert_eq!(json["prerequisite_scope"][0]["name"], "customers");
    assert_eq!(
        json["prerequisite_scope"][0]["present"], true,
        "the adopted table exists"
    );
    assert_eq!(tables(&db.name), before, "a plan creates nothing");

    // A recorded baseline with other SQL: the change and its diff are shown.
    stb_warehouse_metadata(&db.name);
    execute(&format!(
        "INSERT INTO {0}._streambuild_direct_fingerprints (fingerprint_id, logical_model_identity, definition_sql, definition_hash, identity_metadata, workflow_id, tool_version, applied_at) VALUES ('f1', '{0}.customer_names', 'SELECT 1\n', 'h', '{{}}', 'w', 't', now64(3))",
        db.name
    ));
    let output = plan(&dir, &["--select", "customer_names"]);
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{text}");
    assert!(
        text.contains("customer_names  query_changed  (reason: selected)"),
        "{text}"
    );
    assert!(
        text.contains("name_counts  first_baseline  (reason: downstream_of_selected)"),
        "{text}"
    );
    assert!(text.contains("-SELECT 1"), "{text}");
    assert!(text.contains("[replay source] customers"), "{text}");
    assert!(
        text.contains("2 models selected, 3 relations rebuilt, 1 replay roots"),
        "{text}"
    );
}

fn stb_warehouse_metadata(database: &str) {
    let client = stb_warehouse::Client::new(stb_warehouse::ConnectionConfig {
        port: stack().clickhouse_port,
        ..Default::default()
    })
    .expect("client");
    stb_warehouse::metadata::migrate(&client, database).expect("metadata");
}

#[test]
fn a_drifted_adopted_table_or_an_unknown_selector_stops_the_plan() {
    let db = TestDatabase::create("plan_adopted");
    execute(&format!(
        "CREATE TABLE {}.customers_existing (id UInt64, name String, updated_at String) ENGINE = MergeTree ORDER BY id",
        db.name
    ));
    let dir = project(&db.name);
    let output = plan(&dir, &["--json"]);
    assert!(!output.status.success());
    let json: Value = serde_json::from_slice(&output.stdout).expect("JSON");
    assert_eq!(json["error"]["code"], "STB-SOURCE-001");
    assert!(
        json["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("'updated_at' (_replay_timestamp) is String")),
        "{json}"
    );
    let output = plan(&dir, &["--json", "--select", "nope"]);
    let json: Value = serde_json::from_slice(&output.stdout).expect("JSON");
    assert_eq!(json["error"]["code"], "STB-SELECT-002", "{json}");
}

/// The project with `[targets.dev.cluster]` holding `cluster`.
fn project_on_cluster(database: &str, cluster: &str) -> tempfile::TempDir {
    let dir = project(database);
    let file = dir.path().join("streambuild_project.toml");
    let mut text = std::fs::read_to_string(&file).expect("project file");
    text.push_str(&format!("\n[targets.dev.cluster]\n{cluster}"));
    std::fs::write(&file, text).expect("project file");
    dir
}

#[test]
fn a_cluster_target_is_refused_where_it_cannot_be_planned_and_the_cloud_plans_as_one_server() {
    let db = TestDatabase::create("plan_cluster");
    execute(&format!(
        "CREATE TABLE {}.customers_existing (id UInt64, name String, updated_at DateTime64(3)) ENGINE = MergeTree ORDER BY id",
        db.name
    ));
    let before = tables(&db.name);
    let refusal = |cluster: &str| {
        let dir = project_on_cluster(&db.name, cluster);
        let output = plan(&dir, &["--json"]);
        assert!(!output.status.success(), "{cluster}");
        let text = String::from_utf8_lossy(&output.stderr).into_owned()
            + &String::from_utf8_lossy(&output.stdout);
        assert_eq!(tables(&db.name), before, "nothing changed: {text}");
        text
    };
    // A sharded replay reads each shard's part of its driving input, which an adopted
    // table does not have.
    let text = refusal("topology = \"sharded\"\nname = \"stb_local\"\nsharding_key = \"rand()\"\n");
    assert!(
        text.contains("STB-CLUSTER-001") && text.contains("has no local part"),
        "{text}"
    );
    // A cluster the server does not list.
    let text = refusal("topology = \"on_cluster\"\nname = \"nowhere\"\n");
    assert!(
        text.contains("STB-CLUSTER-003") && text.contains("'nowhere'"),
        "{text}"
    );
    // A replicated target on a database that is not a Replicated database.
    let text = refusal("topology = \"replicated\"\n");
    assert!(
        text.contains("STB-CLUSTER-002") && text.contains("has the Atomic engine"),
        "{text}"
    );
    // The cloud takes the single server's statements: the plan's work is the same.
    let entries = |dir: &tempfile::TempDir| {
        let output = plan(dir, &["--json"]);
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        let json: Value = serde_json::from_slice(&output.stdout).expect("JSON");
        json["entries"].clone()
    };
    let on_cloud = entries(&project_on_cluster(&db.name, "topology = \"cloud\"\n"));
    assert_eq!(on_cloud[0]["model"], "customer_names");
    assert_eq!(on_cloud, entries(&project(&db.name)));
    // on_cluster over shards of one replica (the local stack's cluster): an adopted table
    // is replayed where it is, and, being the author's, no replica sync is asked of it.
    let dir = project_on_cluster(
        &db.name,
        "topology = \"on_cluster\"\nname = \"stb_local\"\n",
    );
    let output = plan(&dir, &["--json"]);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stdout)
    );
    let json: Value = serde_json::from_slice(&output.stdout).expect("JSON");
    assert_eq!(json["cluster"]["topology"], "on_cluster", "{json}");
    assert_eq!(json["entries"], on_cloud, "the same work as on one server");
    let written =
        std::fs::read_to_string(dir.path().join("target/run/plan/plan.json")).expect("plan.json");
    assert!(
        written.contains("capture_replay_customer_names__shard_1"),
        "{written}"
    );
    assert!(!written.contains("SYSTEM SYNC REPLICA"), "{written}");
    assert_eq!(tables(&db.name), before, "a plan changes nothing");
}

/// A Kafka landing, a table model over it, one over that, and a view, on the sharded
/// target `cluster` (the local stack's one-shard cluster `stb_local`).
fn sharded_project(database: &str, cluster: &str) -> tempfile::TempDir {
    let files = [
        (
            "streambuild_project.toml".to_owned(),
            format!(
                "name = \"shop\"\ndefault_target = \"dev\"\n[targets.dev]\ndatabase = \"{database}\"\n[targets.dev.cluster]\ntopology = \"sharded\"\nname = \"{cluster}\"\nsharding_key = \"cityHash64(id)\"\n"
            ),
        ),
        (
            "sources/orders.yml".to_owned(),
            format!(
                "sources:\n  - name: orders\n    kind: kafka\n    broker_list: \"{}\"\n    topic: plan_cluster_orders\n    replay_boundary: {{mode: offsets}}\n",
                stack().kafka_brokers
            ),
        ),
        (
            "pipelines/pl__shop/order_lines.sql".to_owned(),
            "MODEL (order_by [\"_replay_partition\", \"_replay_offset\"]);\nSELECT _replay_partition::Int32 AS _replay_partition, _replay_offset::Int64 AS _replay_offset, JSONExtractUInt(kafka_value, 'id')::UInt64 AS id\nFROM __source(\"orders\")\n".to_owned(),
        ),
        (
            "pipelines/pl__shop/id_totals.sql".to_owned(),
            "MODEL (engine \"SummingMergeTree(n)\", order_by [\"id\"], sharding_key \"cityHash64(id)\");\nSELECT id::UInt64 AS id, count()::UInt64 AS n FROM __ref(\"order_lines\") GROUP BY id\n".to_owned(),
        ),
        (
            "pipelines/pl__shop/busiest.sql".to_owned(),
            "MODEL (kind view);\nSELECT id::UInt64 AS id, n::UInt64 AS n FROM __ref(\"id_totals\") ORDER BY n DESC LIMIT 10\n".to_owned(),
        ),
    ];
    stb_test_support::project_dir(&files)
}

/// `stb plan` on a sharded target: every DDL statement `ON CLUSTER`, tables split into
/// local parts and `Distributed` tables, each replay root synced, captured and replayed on
/// every shard the server lists; every statement parses on the engine, nothing changes,
/// and `stb build` refuses the target.
#[test]
fn a_sharded_target_s_plan_shows_the_statements_and_the_work_of_every_shard() {
    let db = TestDatabase::create("plan_sharded");
    let before = tables(&db.name);
    let dir = sharded_project(&db.name, "stb_local");
    let output = plan(&dir, &["--json"]);
    assert!(
        output.status.success(),
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    let json: Value = serde_json::from_slice(&output.stdout).expect("JSON");
    let cluster = &json["cluster"];
    assert_eq!(cluster["name"], "stb_local", "{json}");
    assert_eq!(cluster["topology"], "sharded");
    assert_eq!(
        cluster["shards"].as_array().map(Vec::len),
        Some(1),
        "{cluster}"
    );
    assert_eq!(cluster["shards"][0]["shard"], 1);
    assert_eq!(cluster["replays"][0]["model"], "order_lines");
    assert_eq!(
        cluster["replays"][0]["reads"],
        format!("{}.raw__orders_local", db.name)
    );
    assert_eq!(
        cluster["replays"][0]["writes"],
        format!("{}.tbl__order_lines", db.name)
    );
    let written: Value = serde_json::from_str(
        &std::fs::read_to_string(dir.path().join("target/run/plan/plan.json")).expect("plan.json"),
    )
    .expect("plan.json");
    let steps = written["steps"].as_array().expect("steps");
    let step = |id: &str| {
        steps
            .iter()
            .find(|s| s["step_id"] == id)
            .unwrap_or_else(|| panic!("no step {id} in {steps:?}"))
    };
    let local = step("realize_tbl__id_totals_local")["sql"]
        .as_str()
        .expect("sql")
        .to_owned();
    assert!(
        local.contains("ON CLUSTER stb_local") && local.contains("ReplicatedSummingMergeTree("),
        "{local}"
    );
    let distributed = step("realize_tbl__id_totals")["sql"]
        .as_str()
        .expect("sql")
        .to_owned();
    assert!(
        distributed.contains("Distributed('stb_local'") && distributed.contains("cityHash64(id)"),
        "{distributed}"
    );
    let view = step("realize_mv__id_totals")["sql"]
        .as_str()
        .expect("sql")
        .to_owned();
    assert!(
        view.contains(&format!("FROM {}.tbl__order_lines_local", db.name)),
        "a shard's view reads its own rows: {view}"
    );
    assert_eq!(step("sync_input_order_lines__shard_1")["shard"], 1);
    let capture = step("capture_replay_order_lines__shard_1");
    assert_eq!(capture["shard"], 1);
    assert!(
        capture["sql"]
            .as_str()
            .is_some_and(|sql| sql.contains("raw__orders_local")),
        "{capture}"
    );
    assert_eq!(step("replay_order_lines__shard_1")["template"], true);
    // Every statement the plan shows is one the engine reads, in the cluster's form.
    for step in steps {
        let sql = step["sql"].as_str().expect("sql");
        if step["template"] == true || sql.starts_with("--") {
            continue;
        }
        let formatted = execute(&format!(
            "SELECT formatQuery('{}') FORMAT TSVRaw",
            sql.replace('\\', "\\\\").replace('\'', "\\'")
        ));
        assert!(!formatted.trim().is_empty(), "{sql}");
        if step["shard"].is_null() && step["intent"] == "mutation" {
            assert!(formatted.contains("ON CLUSTER stb_local"), "{formatted}");
        }
    }
    assert_eq!(tables(&db.name), before, "a plan changes nothing");
    // The landing view writes into the landing's local part: once the cluster's objects
    // exist (created here in the forms this one server accepts), the next plan is no
    // "drift" and tears them down on the cluster, both parts of every table.
    for step in steps {
        let sql = step["sql"].as_str().expect("sql");
        if step["intent"] == "mutation" && step["shard"].is_null() && !sql.starts_with("--") {
            execute(&stb_test_support::on_one_server(sql, "stb_local"));
        }
    }
    let output = plan(&dir, &["--json"]);
    assert!(
        output.status.success(),
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    let again: Value = serde_json::from_str(
        &std::fs::read_to_string(dir.path().join("target/run/plan/plan.json")).expect("plan.json"),
    )
    .expect("plan.json");
    let ids: Vec<&str> = again["steps"]
        .as_array()
        .expect("steps")
        .iter()
        .filter_map(|s| s["step_id"].as_str())
        .collect();
    for id in [
        "set_aside_tbl__id_totals",
        "realize_tbl__id_totals_local",
        "flush_target_order_lines",
        "sync_target_order_lines__shard_1",
        "drop_previous_tbl__id_totals_local",
    ] {
        assert!(ids.contains(&id), "{id} in {ids:?}");
    }
    assert!(
        !ids.iter()
            .any(|id| id.starts_with("drop_mv__") && id.ends_with("_local")),
        "a view has no local part: {ids:?}"
    );
    // The text plan says where the work runs and that it cannot be built.
    let text = plan(&dir, &[]);
    let text = String::from_utf8_lossy(&text.stdout).into_owned();
    assert!(
        text.contains("Cluster  stb_local (sharded, 1 shard)"),
        "{text}"
    );
    assert!(
        text.contains("`stb build` cannot run this plan yet"),
        "{text}"
    );
    // A build is refused before it connects.
    let after_plans = tables(&db.name);
    let build = stb_test_support::stb_on_project(dir.path(), &["build", "--auto-approve"], "");
    assert!(!build.status.success());
    let refused = String::from_utf8_lossy(&build.stderr).into_owned()
        + &String::from_utf8_lossy(&build.stdout);
    assert!(
        refused.contains("STB-CLUSTER-001") && refused.contains("cannot build"),
        "{refused}"
    );
    assert_eq!(
        tables(&db.name),
        after_plans,
        "a refused build changes nothing"
    );
}

/// `stb plan --format markdown --out FILE`: the comment a pull request gets, written where
/// asked and nowhere else; `--out` of the text plan, or two formats at once, are refused.
#[test]
fn a_plan_is_written_as_markdown_for_a_pull_request() {
    let db = TestDatabase::create("plan_markdown");
    execute(&format!(
        "CREATE TABLE {}.customers_existing (id UInt64, name String, updated_at DateTime64(3)) ENGINE = MergeTree ORDER BY id",
        db.name
    ));
    let dir = project(&db.name);
    let file = dir.path().join("plan.md");
    let path = file.to_string_lossy().into_owned();
    let output = plan(&dir, &["--format", "markdown", "--out", &path]);
    assert!(output.status.success(), "{output:?}");
    assert!(output.stdout.is_empty(), "written to the file only");
    let text = std::fs::read_to_string(&file).expect("the comment");
    assert!(
        text.starts_with(&format!("## StreamBuild plan: `{}` (direct)", db.name)),
        "{text}"
    );
    assert!(
        text.contains("**2 models rebuilt** · **0 rows at risk**"),
        "{text}"
    );
    assert!(
        text.contains("| <code>customer_names</code> | the whole project"),
        "{text}"
    );
    // On stdout without --out; the same text, its plan hash aside.
    let printed = plan(&dir, &["--format", "markdown"]);
    assert!(printed.status.success(), "{printed:?}");
    let printed = String::from_utf8_lossy(&printed.stdout);
    let without_hash = |t: &str| {
        let (before, after) = t.split_once(" · plan `").unwrap_or((t, ""));
        format!(
            "{before}{}",
            after.split_once('`').map_or("", |(_, rest)| rest)
        )
    };
    assert_eq!(without_hash(&printed), without_hash(&text));
    for refused in [
        plan(&dir, &["--out", &path]),
        plan(&dir, &["--json", "--format", "markdown"]),
    ] {
        assert_eq!(refused.status.code(), Some(1), "{refused:?}");
        assert!(
            String::from_utf8_lossy(&refused.stderr).contains("STB-PLAN-001"),
            "{refused:?}"
        );
    }
}

/// `stb plan --json`'s `plan_hash`.
fn plan_hash(dir: &tempfile::TempDir) -> String {
    let output = plan(dir, &["--json"]);
    assert!(output.status.success(), "{output:?}");
    let plan: Value = serde_json::from_slice(&output.stdout).expect("plan JSON");
    plan["plan_hash"].as_str().expect("a plan hash").to_owned()
}

/// Each relation of `database` with its identity and rows: what a refused build must leave.
fn relations_with_rows(database: &str) -> String {
    execute(&format!(
        "SELECT name, toString(uuid), total_rows FROM system.tables WHERE database = '{database}' AND NOT startsWith(name, '_streambuild') ORDER BY name"
    ))
}

#[test]
fn a_build_bound_to_a_reviewed_plan_is_refused_after_a_concurrent_change() {
    let db = TestDatabase::create("plan_hash_bound");
    for statement in [
        format!(
            "CREATE TABLE {}.customers_existing (id UInt64, name String, updated_at DateTime64(3)) ENGINE = MergeTree ORDER BY id",
            db.name
        ),
        format!(
            "INSERT INTO {}.customers_existing VALUES (1, 'ada', '2020-01-01 00:00:00'), (2, 'bob', '2020-01-02 00:00:00')",
            db.name
        ),
    ] {
        execute(&statement);
    }
    let dir = project(&db.name);
    let reviewed = plan_hash(&dir);
    assert_eq!(plan_hash(&dir), reviewed, "nothing changed, the same hash");
    let bound_build = |hash: &str| {
        stb_test_support::stb_on_project(
            dir.path(),
            &["build", "--auto-approve", "--json", "--plan-hash", hash],
            "",
        )
    };
    let refused = |output: &std::process::Output, what: &str| {
        assert_eq!(output.status.code(), Some(1), "{what}: {output:?}");
        let failure: Value = serde_json::from_slice(&output.stdout)
            .unwrap_or_else(|_| panic!("{what}: JSON: {output:?}"));
        assert_eq!(
            failure["error"]["code"], "STB-BUILD-007",
            "{what}: {failure}"
        );
        let message = failure["error"]["message"].as_str().expect("a message");
        assert!(
            message.contains(&reviewed) && message.contains("nothing was changed"),
            "{what}: {message}"
        );
    };

    // Someone else builds the project between the review and this build: the plan would
    // now replace the tables that build made, not create them.
    let other = stb_test_support::stb_on_project(dir.path(), &["build", "--auto-approve"], "");
    assert!(other.status.success(), "{other:?}");
    let after_other = relations_with_rows(&db.name);
    refused(&bound_build(&reviewed), "after a concurrent build");
    assert_eq!(
        relations_with_rows(&db.name),
        after_other,
        "the refused build changed nothing"
    );

    // The project changes after the review: refused too.
    let model = dir.path().join("pipelines/pl__crm/customer_names.sql");
    let edited = std::fs::read_to_string(&model)
        .expect("model")
        .replace("name::String AS name", "upper(name)::String AS name");
    std::fs::write(&model, edited).expect("edited");
    let rebuilt = plan_hash(&dir);
    assert_ne!(rebuilt, reviewed);
    refused(&bound_build(&reviewed), "after an edit");
    assert_eq!(relations_with_rows(&db.name), after_other);

    // The plan reviewed now is the one built.
    let output = bound_build(&rebuilt);
    assert!(output.status.success(), "{output:?}");
    assert_eq!(
        execute(&format!(
            "SELECT name FROM {}.tbl__customer_names ORDER BY customer_id",
            db.name
        )),
        "ADA\nBOB\n"
    );
}

#[test]
fn a_build_whose_replays_read_more_than_the_budget_is_refused_with_the_numbers() {
    let db = TestDatabase::create("plan_budget");
    for statement in [
        format!(
            "CREATE TABLE {}.customers_existing (id UInt64, name String, updated_at DateTime64(3)) ENGINE = MergeTree ORDER BY id",
            db.name
        ),
        format!(
            "INSERT INTO {}.customers_existing SELECT number, concat('c', toString(number)), toDateTime64('2020-01-01 00:00:00', 3) + number FROM numbers(1500)",
            db.name
        ),
    ] {
        execute(&statement);
    }
    let dir = project(&db.name);
    let config = dir.path().join("streambuild_project.toml");
    let mut text = std::fs::read_to_string(&config).expect("project file");
    text.push_str("\n[build]\nmax_replay_rows = 1000\n");
    std::fs::write(&config, text).expect("budget set");

    // The plan says what the replay reads and that it is over the budget.
    let output = plan(&dir, &["--json"]);
    assert!(output.status.success(), "{output:?}");
    let json: Value = serde_json::from_slice(&output.stdout).expect("plan JSON");
    let costs = json["replay_costs"].as_array().expect("costs");
    assert_eq!(costs.len(), 1, "{json}");
    assert_eq!(costs[0]["model"], "customer_names");
    assert_eq!(costs[0]["rows"], 1500, "every retained row: {json}");
    assert!(costs[0]["bytes"].as_u64().is_some_and(|b| b > 0), "{json}");
    assert_eq!(json["replay_cost"]["budget"]["max_rows"], 1000);
    assert_eq!(
        json["replay_cost"]["over_budget"],
        serde_json::json!(["the replays read 1,500 rows, over max_replay_rows = 1,000"])
    );
    let text = plan(&dir, &[]);
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(text.contains("Replay cost  1,500 rows"), "{text}");
    assert!(text.contains("OVER BUDGET"), "{text}");
    let markdown = plan(&dir, &["--format", "markdown"]);
    let markdown = String::from_utf8_lossy(&markdown.stdout);
    assert!(
        markdown.contains("**over the replay budget**")
            && markdown.contains("### Replay cost (1,500 rows"),
        "{markdown}"
    );

    // The build is refused with the numbers, and changes nothing (but its own records).
    let user_tables = || {
        tables(&db.name)
            .lines()
            .filter(|name| !name.starts_with("_streambuild"))
            .map(str::to_owned)
            .collect::<Vec<_>>()
    };
    let before = user_tables();
    let refused =
        stb_test_support::stb_on_project(dir.path(), &["build", "--auto-approve", "--json"], "");
    assert_eq!(refused.status.code(), Some(1), "{refused:?}");
    let failure: Value = serde_json::from_slice(&refused.stdout).expect("failure JSON");
    assert_eq!(failure["error"]["code"], "STB-BUILD-008", "{failure}");
    let message = failure["error"]["message"].as_str().expect("message");
    assert!(
        message.contains("the replays read 1,500 rows, over max_replay_rows = 1,000")
            && message.contains("customer_names  1,500 rows")
            && message.contains("nothing was changed"),
        "{message}"
    );
    assert_eq!(user_tables(), before);
    assert_eq!(before, ["customers_existing"]);

    // Accepted: it builds, and the cost was what it read.
    let accepted = stb_test_support::stb_on_project(
        dir.path(),
        &["build", "--auto-approve", "--json", "--allow-large"],
        "",
    );
    assert!(accepted.status.success(), "{accepted:?}");
    assert_eq!(
        execute(&format!(
            "SELECT count() FROM {}.tbl__customer_names",
            db.name
        )),
        "1500\n"
    );
}
