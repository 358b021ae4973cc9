//! Projects that must discover cleanly, and what discovery learns from them.

use stb_project::pipelines::ModelKind;
use stb_project::project_config::Mode;
use stb_project::sources::SourceKind;

use crate::support::{discover_files, discover_in, write};

/// Every authoring feature of the brief's project layout, in one project.
pub(crate) const FULL: &[(&str, &str)] = &[
    (
        "streambuild_project.toml",
        r#"name = "orders"
default_target = "dev"

[connection]
host = "localhost"
port = 8123
username = "default"
password = "${ENV:STB_TEST_NEVER_SET_PASSWORD}"
settings = { max_threads = 4, async_insert = true }

[vars]
region = "eu"
db_suffix = "${region}"

[defaults]
pipeline_mode = "direct"
run_presumed_failed_after = "10m"
kafka_broker_list = "kafka:9092"
freshness = { warn_after = "1m", error_after = "5m" }
audits = { severity = "warning", every = "10m", warmup = "0s" }
deployment_readiness = { maximum_lag = "2m", minimum_staged_row_ratio = 0.25 }

[defaults.sources.kafka]
retention = { duration = "7d", cap_at = "landed" }

[defaults.models]
retention = false

[build]
max_pipelines = 20
max_replay_rows = 500000000
max_replay_bytes = "200GiB"
replay_chunk_rows = 10000000
replay_max_threads = 4
replay_max_memory_usage = "8GiB"

[targets.dev]
database = "analytics_${db_suffix}"

[targets.prod]
database = "analytics_prod"
production = true

[targets.prod.build]
max_pipelines = 10
max_replay_rows = 100000000
replay_chunk_rows = 2000000
replay_max_rows_per_second = 1000000

[targets.prod.destruction]
max_table_size_to_drop = "100GiB"

[naming]
pipeline_prefix = "pl__"
pipeline_naming_macro = "pipeline_name"
table_prefix = "tbl__"
view_prefix = "view__"

[dependencies]
model_reference_scope = "pipeline"

[[dependencies.allowed_cross_pipeline_references]]
upstream_pipeline = "pl__orders"
downstream_pipeline = "pl__reporting"

[ui]
timezone = "Europe/London"

[audit_scheduler]
enabled = true

[sensors]
enabled = false
tick_retention_days = 7
"#,
    ),
    (
        "sources/orders.yml",
        r#"sources:
  - name: orders
    kind: kafka
    topic: source.orders
    consumer_group: "orders_${region}"
    settings:
      kafka_num_consumers: "1"
    freshness:
      warn_after: 30s
      error_after: 2m
    replay_boundary:
      mode: offsets
  - name: customers
    kind: stream_table
    table_name: customers_existing
    replay_boundary:
      mode: offsets
      columns:
        _replay_partition: event_partition
        _replay_offset: event_offset
        _replay_timestamp: event_time
"#,
    ),
    (
        "macros/common.py",
        r#"from streambuild.compiler.macros.models import PipelineNamingContext


def pipeline_name(ctx: PipelineNamingContext) -> str:
    """Pipelines that read a source are named after it."""
    return ctx.name if ctx.source_name is None else f"pl__{ctx.source_name}"


def region_name(code: str) -> str:
    return {"eu": "'Europe'"}.get(code, "'Other'")
"#,
    ),
    (
        "macros/_private/helpers.py",
        "raise RuntimeError('private files are never loaded')\n",
    ),
    (
        "pipelines/pl__orders/pipeline.toml",
        "mode = \"direct\"\n\n[protection]\nwarning = \"Feeds the finance close.\"\n\n[execution.replay.settings]\nmax_threads = 4\n",
    ),
    (
        "pipelines/pl__orders/staging/orders_clean.sql",
        r#"MODEL (
  engine "MergeTree()",
  order_by ["order_id", "_replay_partition", "_replay_offset"],
  description "orders; cleaned );",
);

SELECT
  JSONExtractString(kafka_value, 'order_id')::String AS order_id,
  _replay_partition::Int32 AS _replay_partition,
  _replay_offset::Int64 AS _replay_offset,
  _replay_timestamp::DateTime64(3) AS _replay_timestamp
FROM __source("orders")
"#,
    ),
    (
        "pipelines/pl__orders/order_totals.sql",
        "SELECT o.order_id::String AS order_id, c.name::String AS customer -- __ref('ignored')\nFROM __ref(\"orders_clean\") AS o\nLEFT JOIN __ref('customer_names', ref_type='reference') AS c ON o.order_id = c.order_id\n",
    ),
    (
        "pipelines/pl__customers/customer_names.sql",
        "SELECT event_offset::UInt64 AS order_id, 'x'::String AS name FROM __source(\"customers\")\n",
    ),
    (
        "pipelines/pl__reporting/pipeline.toml",
        "mode = \"virtual\"\nreplay_on_change = { breaking = \"full\", non_breaking = \"bounded-30m\" }\nbounded_replay_fallback = \"bounded_without_history\"\n",
    ),
    (
        "pipelines/pl__reporting/daily_orders.sql",
        "MODEL (kind view);\nSELECT count()::UInt64 AS orders FROM __ref(\"order_totals\")\n",
    ),
    (
        "tests/order_totals.sql",
        "-- tests are read by later commands\n",
    ),
    ("audits/no_empty_ids.sql", "SELECT 1\n"),
    (
        "pipelines/README.md",
        "files directly in pipelines/ are ignored\n",
    ),
    // The base fixture's model; this project defines it under staging/ instead.
    (
        "pipelines/pl__orders/orders_clean.sql",
        crate::support::DELETE,
    ),
];

#[test]
fn the_full_project_discovers_cleanly() {
    let dir = tempfile::tempdir().expect("tempdir");
    write(dir.path(), FULL);
    let project = discover_in(dir.path(), None).unwrap_or_else(|d| panic!("{d:#?}"));
    assert_eq!(project.name, "orders");
    assert_eq!(project.target, "dev");
    assert_eq!(
        project.database.as_deref(),
        Some("analytics_eu"),
        "vars resolve recursively"
    );
    let names: Vec<&str> = project.pipelines.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["pl__customers", "pl__orders", "pl__reporting"]);

    let orders = &project.pipelines[1];
    assert_eq!(orders.mode, Mode::Direct);
    assert_eq!(orders.source.as_deref(), Some("orders"));
    let protection = orders.protection.as_ref().expect("protected");
    assert_eq!(protection.warning, "Feeds the finance close.");
    assert_eq!(protection.confirmation, "pl__orders");
    let models: Vec<(&str, &str, ModelKind)> = orders
        .models
        .iter()
        .map(|m| (m.name.as_str(), m.file.as_str(), m.kind))
        .collect();
    assert_eq!(
        models,
        [
            (
                "order_totals",
                "pipelines/pl__orders/order_totals.sql",
                ModelKind::Table
            ),
            (
                "orders_clean",
                "pipelines/pl__orders/staging/orders_clean.sql",
                ModelKind::Table
            ),
        ]
    );
    assert_eq!(
        orders.models[0].driving_input.as_deref(),
        Some("orders_clean")
    );
    // The header's description reaches `stb discover --json`; a model without one has none.
    let clean = serde_json::to_value(&orders.models[1]).expect("JSON");
    assert_eq!(clean["description"], "orders; cleaned );");
    let totals = serde_json::to_value(&orders.models[0]).expect("JSON");
    assert!(totals.get("description").is_none(), "{totals}");

    let reporting = &project.pipelines[2];
    assert_eq!(reporting.mode, Mode::Virtual);
    assert_eq!(reporting.source, None, "view-only pipelines have no source");
    assert_eq!(reporting.models[0].kind, ModelKind::View);
    assert_eq!(project.pipelines[0].source.as_deref(), Some("customers"));

    let sources: Vec<(&str, SourceKind)> = project
        .sources
        .iter()
        .map(|s| (s.name.as_str(), s.kind))
        .collect();
    assert_eq!(
        sources,
        [
            ("orders", SourceKind::Kafka),
            ("customers", SourceKind::StreamTable)
        ]
    );
    let macros: Vec<&str> = project.macros.iter().map(|m| m.name.as_str()).collect();
    assert_eq!(
        macros,
        ["pipeline_name", "region_name"],
        "private paths are not loaded"
    );
    assert!(!project.production, "dev is no production target");
    assert_eq!(project.max_table_size_to_drop, None);
    let prod = discover_in(dir.path(), Some("prod")).expect("prod");
    assert!(prod.production);
    assert_eq!(prod.max_table_size_to_drop, Some(100 * 1024 * 1024 * 1024));
    // The replay budget: each limit the target's own, else the project's.
    let gib = 1024 * 1024 * 1024;
    assert_eq!(
        (
            project.replay_budget.max_rows,
            project.replay_budget.max_bytes
        ),
        (Some(500_000_000), Some(200 * gib))
    );
    assert_eq!(
        (prod.replay_budget.max_rows, prod.replay_budget.max_bytes),
        (Some(100_000_000), Some(200 * gib))
    );
    // The replays' chunks and throttles: each value the target's own, else the project's.
    let pacing = |chunk_rows, max_rows_per_second| stb_project::project_config::ReplayPacing {
        chunk_rows: Some(chunk_rows),
        max_threads: Some(4),
        max_memory_usage: Some(8 * gib),
        max_rows_per_second,
    };
    assert_eq!(project.replay_pacing, pacing(10_000_000, None));
    assert_eq!(prod.replay_pacing, pacing(2_000_000, Some(1_000_000)));
    assert_eq!(
        project.replay_pacing.or(Default::default()).settings(),
        [
            ("max_threads".to_owned(), "4".to_owned()),
            ("max_memory_usage".to_owned(), (8 * gib).to_string()),
        ]
    );
    let readiness = project.defaults.deployment_readiness;
    assert_eq!(readiness.maximum_lag_seconds, 120);
    assert!((readiness.minimum_staged_row_ratio - 0.25).abs() < f64::EPSILON);
    // Freshness expectations, typed: the project's default and a source's own.
    let expect = |warn, error| {
        Some(stb_project::policies::Freshness {
            warn_after_seconds: Some(warn),
            error_after_seconds: Some(error),
        })
    };
    assert_eq!(project.defaults.freshness, expect(60, 300));
    let source = |name: &str| {
        project
            .sources
            .iter()
            .find(|s| s.name == name)
            .expect("source")
            .freshness
    };
    assert_eq!(source("orders"), expect(30, 120));
    assert_eq!(source("customers"), None, "the default applies, not copied");
}

#[test]
fn the_naming_macro_rejects_a_wrong_directory_name() {
    let mut files = FULL.to_vec();
    files.retain(|(path, _)| !path.starts_with("pipelines/pl__customers/"));
    files.push(("pipelines/pl__clients/customer_names.sql", "SELECT event_offset::UInt64 AS order_id, 'x'::String AS name FROM __source(\"customers\")\n"));
    let diagnostics = discover_files(&files).expect_err("wrong name");
    assert_eq!(diagnostics.len(), 1, "{diagnostics:#?}");
    assert_eq!(diagnostics[0].code, "STB-DISCOVER-015");
    assert_eq!(
        diagnostics[0].message,
        "Pipeline directory 'pl__clients' does not satisfy naming macro 'pipeline_name'; expected 'pipelines/pl__customers'"
    );
    assert_eq!(
        diagnostics[0]
            .location
            .as_ref()
            .map(ToString::to_string)
            .as_deref(),
        Some("pipelines/pl__clients")
    );
}

#[test]
fn the_naming_macro_sees_the_documented_context() {
    let files = [
        (
            "streambuild_project.toml",
            "name = \"shop\"\ndefault_target = \"dev\"\n[targets.dev]\n[naming]\npipeline_naming_macro = \"check\"\n",
        ),
        (
            "macros/check.py",
            r#"from streambuild.compiler.macros.models import PipelineNamingContext
import dataclasses


def check(ctx: PipelineNamingContext) -> str:
    assert ctx.model_names == ("a_model", "orders_clean"), ctx.model_names
    assert ctx.relative_directory == "pipelines/pl__orders"
    assert ctx.mode.value == "direct"
    assert ctx.source_name == "orders"
    try:
        ctx.name = "changed"
    except dataclasses.FrozenInstanceError:
        return ctx.name
    return "mutable"
"#,
        ),
        (
            "pipelines/pl__orders/a_model.sql",
            "SELECT id::UInt64 AS id FROM __ref(\"orders_clean\")\n",
        ),
    ];
    let project = discover_files(&files).unwrap_or_else(|d| panic!("{d:#?}"));
    assert_eq!(project.pipelines[0].name, "pl__orders");
}

#[test]
fn independent_errors_are_all_reported_in_one_run() {
    let files = [
        (
            "streambuild_project.toml",
            "name = \"shop\"\ndefault_target = \"dev\"\nextra = 1\n[targets.dev]\n[build]\nmax_pipelines = -1\n",
        ),
        (
            "pipelines/orders_x/m.sql",
            "SELECT 1::UInt8 AS x FROM __source(\"orders\")\n",
        ),
        ("sources/bad.yml", "sources:\n  - kind: nope\n"),
    ];
    let diagnostics = discover_files(&files).expect_err("broken");
    let codes: Vec<&str> = diagnostics.iter().map(|d| d.code).collect();
    for expected in [
        "STB-CONFIG-004",
        "STB-CONFIG-006",
        "STB-DISCOVER-003",
        "STB-DISCOVER-010",
    ] {
        assert!(
            codes.contains(&expected),
            "{expected} missing from {codes:?}"
        );
    }
}

#[test]
fn target_selection_order_is_flag_then_local_then_default() {
    let dir = tempfile::tempdir().expect("tempdir");
    write(
        dir.path(),
        &[
            (
                "streambuild_project.toml",
                "name = \"shop\"\ndefault_target = \"dev\"\n[build]\nmax_pipelines = 5\n[targets.dev]\ndatabase = \"d_dev\"\n[targets.prod]\ndatabase = \"d_prod\"\n[targets.prod.build]\nmax_pipelines = 2\n",
            ),
            (
                "streambuild_local.toml",
                "target = \"mine\"\n[targets.mine]\ndatabase = \"d_${who}\"\n[targets.mine.vars]\nwho = \"me\"\n",
            ),
        ],
    );
    let local = discover_in(dir.path(), None).expect("local target");
    assert_eq!(
        local.max_pipelines,
        Some(5),
        "local-only targets inherit the project default"
    );
    assert_eq!(
        (local.target.as_str(), local.database.as_deref()),
        ("mine", Some("d_me")),
        "a local-only target"
    );
    let flagged = discover_in(dir.path(), Some("prod")).expect("flag");
    assert_eq!(flagged.database.as_deref(), Some("d_prod"));
    assert!(
        flagged.production,
        "a target named prod is a production target"
    );
    assert_eq!(flagged.max_pipelines, Some(2), "a target's own limit wins");
    let unknown = discover_in(dir.path(), Some("qa")).expect_err("unknown target");
    assert_eq!(unknown[0].code, "STB-CONFIG-009");
}

#[test]
fn local_mode_override_and_empty_prefix() {
    let files = [
        (
            "streambuild_project.toml",
            "name = \"shop\"\ndefault_target = \"dev\"\n[targets.dev]\n[naming]\npipeline_prefix = \"\"\n",
        ),
        (
            "streambuild_local.toml",
            "[defaults]\npipeline_mode = \"virtual\"\n",
        ),
        (
            "pipelines/pl__orders/orders_clean.sql",
            "SELECT id::UInt64 AS id FROM __source(\"orders\")\n",
        ),
        (
            "pipelines/anything/m2.sql",
            "SELECT id::UInt64 AS id FROM __source(\"orders\")\n",
        ),
    ];
    let project = discover_files(&files).unwrap_or_else(|d| panic!("{d:#?}"));
    assert!(project.pipelines.iter().all(|p| p.mode == Mode::Virtual));
    assert_eq!(project.pipelines[0].name, "anything");
}

#[test]
fn kafka_source_names_can_come_from_the_naming_macro() {
    let files = [
        (
            "streambuild_project.toml",
            "name = \"shop\"\ndefault_target = \"dev\"\n[targets.dev]\n[defaults.sources.kafka]\nnaming_macro = \"topic_name\"\n",
        ),
        (
            "macros/names.py",
            "def topic_name(topic):\n    return topic.split('.')[-1]\n",
        ),
        (
            "sources/orders.yml",
            "sources:\n  - kind: kafka\n    broker_list: b:9092\n    topic: shop.orders\n    replay_boundary: {mode: timestamp}\n",
        ),
    ];
    let project = discover_files(&files).unwrap_or_else(|d| panic!("{d:#?}"));
    assert_eq!(project.sources[0].name, "orders");
    assert_eq!(project.pipelines[0].source.as_deref(), Some("orders"));
}

#[test]
fn default_confirmation_and_protection_table() {
    let files = [("pipelines/pl__orders/pipeline.toml", "[protection]\n")];
    let project = discover_files(&files).unwrap_or_else(|d| panic!("{d:#?}"));
    let protection = project.pipelines[0].protection.as_ref().expect("protected");
    assert_eq!(protection.confirmation, "pl__orders");
    assert_eq!(
        protection.warning,
        "Pipeline 'pl__orders' is protected. Confirm its operational impact before building."
    );
}

#[test]
fn connection_values_are_not_resolved_by_discovery() {
    // The password variable is never set: discovery must not need it.
    let files = [(
        "streambuild_project.toml",
        "name = \"shop\"\ndefault_target = \"dev\"\n[connection]\npassword = \"${ENV:STB_TEST_UNSET_VARIABLE}\"\n[targets.dev]\n",
    )];
    discover_files(&files).unwrap_or_else(|d| panic!("{d:#?}"));
}

#[test]
fn project_dir_is_found_from_a_nested_directory() {
    let dir = tempfile::tempdir().expect("tempdir");
    write(dir.path(), &[]);
    let nested = dir.path().join("pipelines/pl__orders");
    let project = stb_project::discover(&stb_project::DiscoverOptions {
        cwd: nested,
        ..Default::default()
    })
    .expect("found upwards");
    assert_eq!(project.name, "shop");
    let elsewhere = tempfile::tempdir().expect("tempdir");
    let missing = stb_project::discover(&stb_project::DiscoverOptions {
        cwd: elsewhere.path().to_path_buf(),
        ..Default::default()
    })
    .expect_err("no project");
    assert_eq!(missing.into_sorted()[0].code, "STB-CONFIG-001");
}

#[test]
fn project_dir_without_pipelines_is_an_error_not_a_guess() {
    let dir = tempfile::tempdir().expect("tempdir");
    write(
        dir.path(),
        &[(
            "pipelines/pl__orders/orders_clean.sql",
            crate::support::DELETE,
        )],
    );
    std::fs::create_dir_all(dir.path().join("macros")).expect("mkdir");
    let diagnostics = discover_in(dir.path(), None).expect_err("no pipelines/");
    assert_eq!(diagnostics.len(), 1, "{diagnostics:#?}");
    assert_eq!(diagnostics[0].code, "STB-DISCOVER-001");
}

#[test]
fn a_target_on_a_cluster_gets_its_topology_with_the_default_path_and_replica() {
    let dir = tempfile::tempdir().expect("tempdir");
    write(
        dir.path(),
        &[(
            "streambuild_project.toml",
            "name = \"shop\"\ndefault_target = \"dev\"\n\n[targets.dev]\ndatabase = \"shop_dev\"\n\n[targets.prod]\ndatabase = \"shop\"\n\n[targets.prod.cluster]\ntopology = \"sharded\"\nname = \"analytics\"\nsharding_key = \"cityHash64(id)\"\n",
        )],
    );
    let dev = discover_in(dir.path(), None).unwrap_or_else(|d| panic!("{d:#?}"));
    assert_eq!(
        dev.cluster, None,
        "a target without [cluster] is one server"
    );
    let prod = discover_in(dir.path(), Some("prod")).unwrap_or_else(|d| panic!("{d:#?}"));
    let cluster = prod.cluster.expect("prod is on a cluster");
    assert_eq!(
        cluster.cluster(),
        stb_ddl::cluster::Cluster {
            topology: stb_ddl::cluster::Topology::Sharded,
            name: "analytics".to_owned(),
            zookeeper_path: "/clickhouse/tables/{uuid}/{shard}".to_owned(),
            replica: "{replica}".to_owned(),
        }
    );
    assert_eq!(cluster.sharding_key.as_deref(), Some("cityHash64(id)"));
    // `discover --json` shows it in the project file's words.
    let json = serde_json::to_value(&cluster).expect("JSON");
    assert_eq!(json["topology"], "sharded");
}
