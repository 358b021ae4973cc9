//! One small broken project per rule: each asserts the error code and where it points.

use crate::support::{DELETE, expect_error};

const PROJECT: &str = "streambuild_project.toml";

/// The base project file with `extra` appended.
fn project_with(extra: &str) -> String {
    format!(
        "name = \"shop\"\ndefault_target = \"dev\"\n\n[targets.dev]\ndatabase = \"shop_dev\"\n{extra}"
    )
}

macro_rules! invalid {
    ($name:ident, [$(($path:expr, $text:expr)),* $(,)?], $code:expr, $location:expr) => {
        #[test]
        fn $name() {
            let files: Vec<(&str, String)> = vec![$(($path, String::from($text))),*];
            let borrowed: Vec<(&str, &str)> = files.iter().map(|(p, t)| (*p, t.as_str())).collect();
            expect_error(&borrowed, $code, $location);
        }
    };
}

// --- streambuild_project.toml ---------------------------------------------------------------

invalid!(
    unknown_top_level_key,
    [(PROJECT, project_with("\n[pipelines]\nx = 1\n"))],
    "STB-CONFIG-004",
    "streambuild_project.toml:7:2"
);
invalid!(
    unknown_defaults_key,
    [(
        PROJECT,
        project_with("\n[defaults]\npipeline_mod = \"direct\"\n")
    )],
    "STB-CONFIG-004",
    "streambuild_project.toml:8:1"
);
invalid!(
    unknown_target_key,
    [(PROJECT, project_with("pipeline_mode = \"direct\"\n"))],
    "STB-CONFIG-004",
    "streambuild_project.toml:6:1"
);
invalid!(
    missing_name,
    [(PROJECT, "default_target = \"dev\"\n[targets.dev]\n")],
    "STB-CONFIG-012",
    "streambuild_project.toml:1:1"
);
invalid!(
    interpolated_name,
    [(
        PROJECT,
        "name = \"${x}\"\ndefault_target = \"dev\"\n[targets.dev]\n"
    )],
    "STB-CONFIG-011",
    "streambuild_project.toml:1:8"
);
invalid!(
    missing_default_target,
    [(PROJECT, "name = \"shop\"\n[targets.dev]\n")],
    "STB-CONFIG-012",
    "streambuild_project.toml:1:1"
);
invalid!(
    unknown_default_target,
    [(
        PROJECT,
        "name = \"shop\"\ndefault_target = \"prod\"\n[targets.dev]\n"
    )],
    "STB-CONFIG-009",
    "streambuild_project.toml:2:18"
);
invalid!(
    toml_syntax_error,
    [(PROJECT, "name = \"shop\"\ndefault_target = = \"dev\"\n")],
    "STB-CONFIG-003",
    "streambuild_project.toml:2:18"
);
invalid!(
    legacy_yaml_project,
    [("streambuild_project.yml", "name: shop\n")],
    "STB-CONFIG-002",
    "streambuild_project.yml"
);
invalid!(
    bad_pipeline_mode,
    [(
        PROJECT,
        project_with("[defaults]\npipeline_mode = \"staged\"\n")
    )],
    "STB-CONFIG-006",
    "streambuild_project.toml:7:17"
);
invalid!(
    presumed_failed_too_short,
    [(
        PROJECT,
        project_with("[defaults]\nrun_presumed_failed_after = \"30s\"\n")
    )],
    "STB-CONFIG-006",
    "streambuild_project.toml:7:29"
);
invalid!(
    compound_duration,
    [(
        PROJECT,
        project_with("[defaults]\nrun_presumed_failed_after = \"1h30m\"\n")
    )],
    "STB-CONFIG-006",
    "streambuild_project.toml:7:29"
);
invalid!(
    zero_max_pipelines,
    [(PROJECT, project_with("[build]\nmax_pipelines = 0\n"))],
    "STB-CONFIG-006",
    "streambuild_project.toml:7:17"
);
invalid!(
    boolean_max_pipelines,
    [(PROJECT, project_with("[build]\nmax_pipelines = true\n"))],
    "STB-CONFIG-005",
    "streambuild_project.toml:7:17"
);
invalid!(
    zero_max_replay_rows,
    [(PROJECT, project_with("[build]\nmax_replay_rows = 0\n"))],
    "STB-CONFIG-006",
    "streambuild_project.toml:7:19"
);
invalid!(
    zero_replay_chunk_rows,
    [(
        PROJECT,
        project_with("[targets.dev.build]\nreplay_chunk_rows = 0\n")
    )],
    "STB-CONFIG-006",
    "streambuild_project.toml:7:21"
);
invalid!(
    replay_max_memory_usage_that_is_no_size,
    [(
        PROJECT,
        project_with("[build]\nreplay_max_memory_usage = \"plenty\"\n")
    )],
    "STB-CONFIG-006",
    "streambuild_project.toml:7:27"
);
invalid!(
    max_replay_bytes_without_a_unit_that_reads,
    [(
        PROJECT,
        project_with("[targets.dev.build]\nmax_replay_bytes = \"lots\"\n")
    )],
    "STB-CONFIG-006",
    "streambuild_project.toml:7:20"
);
invalid!(
    target_limit_without_project_default,
    [(
        PROJECT,
        project_with("[targets.dev.build]\nmax_pipelines = 2\n")
    )],
    "STB-CONFIG-008",
    "streambuild_project.toml:4:10"
);
invalid!(
    invalid_timezone,
    [(PROJECT, project_with("[ui]\ntimezone = \"Mars/Base\"\n"))],
    "STB-CONFIG-006",
    "streambuild_project.toml:7:12"
);
invalid!(
    bad_reference_scope,
    [(
        PROJECT,
        project_with("[dependencies]\nmodel_reference_scope = \"global\"\n")
    )],
    "STB-CONFIG-006",
    "streambuild_project.toml:7:25"
);
invalid!(
    self_reference_allowed,
    [(
        PROJECT,
        project_with(
            "[[dependencies.allowed_cross_pipeline_references]]\nupstream_pipeline = \"pl__orders\"\ndownstream_pipeline = \"pl__orders\"\n"
        )
    )],
    "STB-CONFIG-010",
    "streambuild_project.toml:6:1"
);
invalid!(
    unknown_pipeline_in_allowlist,
    [(
        PROJECT,
        project_with(
            "[[dependencies.allowed_cross_pipeline_references]]\nupstream_pipeline = \"pl__orders\"\ndownstream_pipeline = \"pl__missing\"\n"
        )
    )],
    "STB-CONFIG-010",
    "streambuild_project.toml:6:1"
);
invalid!(
    prefix_with_unknown_variable,
    [(
        PROJECT,
        project_with("[naming]\npipeline_prefix = \"${prefix}\"\n")
    )],
    "STB-CONFIG-007",
    "streambuild_project.toml:7:19"
);
invalid!(
    variable_cycle_in_database,
    [(
        PROJECT,
        "name = \"shop\"\ndefault_target = \"dev\"\n[vars]\na = \"${b}\"\nb = \"${a}\"\n[targets.dev]\ndatabase = \"${a}\"\n"
    )],
    "STB-CONFIG-007",
    "streambuild_project.toml:7:12"
);
invalid!(
    unknown_connection_key,
    [(PROJECT, project_with("[connection]\nhostname = \"x\"\n"))],
    "STB-CONFIG-004",
    "streambuild_project.toml:7:1"
);
invalid!(
    string_connection_port,
    [(PROJECT, project_with("[connection]\nport = \"8123\"\n"))],
    "STB-CONFIG-005",
    "streambuild_project.toml:7:8"
);
invalid!(
    interpolated_variable_key,
    [(PROJECT, project_with("[vars]\n\"${x}\" = 1\n"))],
    "STB-CONFIG-011",
    "streambuild_project.toml:7:1"
);
invalid!(
    retention_true,
    [(
        PROJECT,
        project_with("[defaults.models]\nretention = true\n")
    )],
    "STB-CONFIG-005",
    "streambuild_project.toml:7:13"
);
invalid!(
    freshness_warn_after_error,
    [(
        PROJECT,
        project_with("[defaults.freshness]\nwarn_after = \"10m\"\nerror_after = \"1m\"\n")
    )],
    "STB-CONFIG-006",
    "streambuild_project.toml:7:14"
);

// --- streambuild_local.toml -----------------------------------------------------------------

invalid!(
    local_max_pipelines,
    [("streambuild_local.toml", "[build]\nmax_pipelines = 3\n")],
    "STB-CONFIG-008",
    "streambuild_local.toml:1:2"
);
invalid!(
    local_unsupported_key,
    [(
        "streambuild_local.toml",
        "[naming]\npipeline_prefix = \"\"\n"
    )],
    "STB-CONFIG-004",
    "streambuild_local.toml:1:2"
);
invalid!(
    local_defaults_beyond_mode,
    [("streambuild_local.toml", "[defaults]\nmodel_ttl = \"x\"\n")],
    "STB-CONFIG-004",
    "streambuild_local.toml:2:1"
);
invalid!(
    local_unknown_target,
    [("streambuild_local.toml", "target = \"staging\"\n")],
    "STB-CONFIG-009",
    "streambuild_local.toml:1:10"
);
invalid!(
    local_target_production,
    [(
        "streambuild_local.toml",
        "[targets.dev]\nproduction = true\n"
    )],
    "STB-CONFIG-004",
    "streambuild_local.toml:2:1"
);

// --- pipelines ------------------------------------------------------------------------------

invalid!(
    pipeline_without_prefix,
    [
        ("pipelines/pl__orders/orders_clean.sql", DELETE),
        (
            "pipelines/orders_pipeline/orders_clean.sql",
            "SELECT id::UInt64 AS id FROM __source(\"orders\")"
        )
    ],
    "STB-DISCOVER-003",
    "pipelines/orders_pipeline"
);
invalid!(
    pipeline_without_models,
    [("pipelines/pl__empty/README.md", "nothing here")],
    "STB-DISCOVER-002",
    "pipelines/pl__empty"
);
invalid!(
    pipeline_toml_unknown_key,
    [(
        "pipelines/pl__orders/pipeline.toml",
        "source = \"orders\"\n"
    )],
    "STB-CONFIG-004",
    "pipelines/pl__orders/pipeline.toml:1:1"
);
invalid!(
    protection_on_virtual_pipeline,
    [(
        "pipelines/pl__orders/pipeline.toml",
        "mode = \"virtual\"\n\n[protection]\n"
    )],
    "STB-DISCOVER-004",
    "pipelines/pl__orders/pipeline.toml:3:1"
);
invalid!(
    protection_bad_confirmation,
    [(
        "pipelines/pl__orders/pipeline.toml",
        "[protection]\nconfirmation = \"-yes please\"\n"
    )],
    "STB-DISCOVER-004",
    "pipelines/pl__orders/pipeline.toml:2:16"
);
invalid!(
    replay_policy_on_direct_pipeline,
    [(
        "pipelines/pl__orders/pipeline.toml",
        "mode = \"direct\"\nbounded_replay_fallback = \"full\"\n"
    )],
    "STB-DISCOVER-005",
    "pipelines/pl__orders/pipeline.toml:2:27"
);
invalid!(
    project_replay_default_without_virtual_pipeline,
    [(
        PROJECT,
        project_with("[defaults]\nreplay_on_change = { breaking = \"full\" }\n")
    )],
    "STB-DISCOVER-005",
    "streambuild_project.toml:7:20"
);
invalid!(
    duplicate_model_stem,
    [(
        "pipelines/pl__orders/nested/orders_clean.sql",
        "SELECT 1::UInt8 AS x FROM __source(\"orders\")"
    )],
    "STB-DISCOVER-006",
    "pipelines/pl__orders/orders_clean.sql"
);
invalid!(
    model_named_like_source,
    [(
        "pipelines/pl__orders/orders.sql",
        "SELECT 1::UInt8 AS x FROM __source(\"orders\")"
    )],
    "STB-DISCOVER-007",
    "pipelines/pl__orders/orders.sql"
);
invalid!(
    pipeline_named_like_model,
    [
        (
            "pipelines/pl__x/pl__orders.sql",
            "SELECT 1::UInt8 AS x FROM __source(\"orders\")"
        ),
        (
            PROJECT,
            project_with("[naming]\npipeline_prefix = \"pl__\"\n")
        )
    ],
    "STB-DISCOVER-007",
    "pipelines/pl__x/pl__orders.sql"
);
invalid!(
    two_sources_in_one_model,
    [(
        "pipelines/pl__orders/orders_clean.sql",
        "SELECT 1::UInt8 AS x FROM __source(\"orders\") JOIN __source(\"other\") USING x"
    )],
    "STB-DISCOVER-020",
    "pipelines/pl__orders/orders_clean.sql:1:51"
);
invalid!(
    unknown_driving_input,
    [(
        "pipelines/pl__orders/orders_clean.sql",
        "SELECT 1::UInt8 AS x FROM __ref(\"nowhere\")"
    )],
    "STB-DISCOVER-021",
    "pipelines/pl__orders/orders_clean.sql:1:27"
);
invalid!(
    unclosed_ref_call,
    [(
        "pipelines/pl__orders/orders_clean.sql",
        "SELECT 1\nFROM __source(\"orders\""
    )],
    "STB-DISCOVER-020",
    "pipelines/pl__orders/orders_clean.sql:2:6"
);
invalid!(
    non_utf8_model,
    [("pipelines/pl__orders/bad.sql", "\u{1}SELECT 'caf\u{e9}'")],
    "STB-DISCOVER-018",
    "pipelines/pl__orders/bad.sql"
);

// --- sources --------------------------------------------------------------------------------

const SOURCES: &str = "sources/orders.yml";

invalid!(
    source_invalid_yaml,
    [(SOURCES, "sources:\n  - name: [orders\n")],
    "STB-DISCOVER-008",
    "sources/orders.yml:2:11"
);
invalid!(
    source_file_without_list,
    [(SOURCES, "name: orders\n")],
    "STB-DISCOVER-009",
    "sources/orders.yml:1:1"
);
invalid!(
    source_unknown_kind,
    [(SOURCES, "sources:\n  - name: orders\n    kind: s3\n")],
    "STB-DISCOVER-010",
    "sources/orders.yml:3:11"
);
invalid!(
    source_unknown_key,
    [(
        SOURCES,
        "sources:\n  - name: orders\n    kind: kafka\n    broker_list: b:9092\n    topic: t\n    partitions: 3\n    replay_boundary: {mode: offsets}\n"
    )],
    "STB-CONFIG-004",
    "sources/orders.yml:6:5"
);
invalid!(
    kafka_without_topic,
    [(
        SOURCES,
        "sources:\n  - name: orders\n    kind: kafka\n    broker_list: b:9092\n    replay_boundary: {mode: offsets}\n"
    )],
    "STB-DISCOVER-010",
    "sources/orders.yml:2:5"
);
invalid!(
    kafka_with_boundary_columns,
    [(
        SOURCES,
        "sources:\n  - name: orders\n    kind: kafka\n    broker_list: b:9092\n    topic: t\n    replay_boundary:\n      mode: offsets\n      columns: {_replay_offset: o}\n"
    )],
    "STB-DISCOVER-010",
    "sources/orders.yml:8:7"
);
invalid!(
    kafka_cursor_boundary,
    [(
        SOURCES,
        "sources:\n  - name: orders\n    kind: kafka\n    broker_list: b:9092\n    topic: t\n    replay_boundary: {mode: cursor}\n"
    )],
    "STB-DISCOVER-010",
    "sources/orders.yml:6:29"
);
invalid!(
    kafka_numeric_setting,
    [(
        SOURCES,
        "sources:\n  - name: orders\n    kind: kafka\n    broker_list: b:9092\n    topic: t\n    settings:\n      kafka_num_consumers: 3\n    replay_boundary: {mode: offsets}\n"
    )],
    "STB-DISCOVER-010",
    "sources/orders.yml:7:28"
);
invalid!(
    kafka_typed_setting_redefined,
    [(
        SOURCES,
        "sources:\n  - name: orders\n    kind: kafka\n    broker_list: b:9092\n    topic: t\n    settings:\n      kafka_topic_list: other\n    replay_boundary: {mode: offsets}\n"
    )],
    "STB-DISCOVER-010",
    "sources/orders.yml:7:7"
);
invalid!(
    kafka_ttl_and_retention,
    [(
        SOURCES,
        "sources:\n  - name: orders\n    kind: kafka\n    broker_list: b:9092\n    topic: t\n    ttl: landed + INTERVAL 1 DAY\n    retention: {duration: 7d}\n    replay_boundary: {mode: offsets}\n"
    )],
    "STB-DISCOVER-010",
    "sources/orders.yml:7:16"
);
invalid!(
    kafka_without_brokers,
    [(
        SOURCES,
        "sources:\n  - name: orders\n    kind: kafka\n    topic: t\n    replay_boundary: {mode: offsets}\n"
    )],
    "STB-DISCOVER-010",
    "sources/orders.yml:2:5"
);
invalid!(
    source_without_boundary,
    [(
        SOURCES,
        "sources:\n  - name: orders\n    kind: kafka\n    broker_list: b:9092\n    topic: t\n"
    )],
    "STB-DISCOVER-010",
    "sources/orders.yml:2:5"
);
invalid!(
    adopted_without_table,
    [(
        SOURCES,
        "sources:\n  - name: orders\n    kind: stream_table\n    replay_boundary:\n      mode: timestamp\n      columns: {_replay_timestamp: ts}\n"
    )],
    "STB-DISCOVER-010",
    "sources/orders.yml:2:5"
);
invalid!(
    adopted_offsets_missing_roles,
    [(
        SOURCES,
        "sources:\n  - name: orders\n    kind: stream_table\n    table_name: events\n    replay_boundary:\n      mode: offsets\n      columns: {_replay_offset: o}\n"
    )],
    "STB-DISCOVER-010",
    "sources/orders.yml:7:16"
);
invalid!(
    adopted_with_kafka_fields,
    [(
        SOURCES,
        "sources:\n  - name: orders\n    kind: stream_table\n    table_name: events\n    topic: t\n    replay_boundary:\n      mode: timestamp\n      columns: {_replay_timestamp: ts}\n"
    )],
    "STB-DISCOVER-010",
    "sources/orders.yml:5:5"
);
invalid!(
    adopted_landed_at_mode,
    [(
        SOURCES,
        "sources:\n  - name: orders\n    kind: stream_table\n    table_name: events\n    replay_boundary:\n      mode: landed_at\n      columns: {_replay_landed_at: l}\n"
    )],
    "STB-DISCOVER-010",
    "sources/orders.yml:6:13"
);
invalid!(
    source_name_not_identifier,
    [(
        "sources/more.yml",
        "sources:\n  - name: order-events\n    kind: kafka\n    broker_list: b:9092\n    topic: t\n    replay_boundary: {mode: offsets}\n"
    )],
    "STB-DISCOVER-012",
    "sources/more.yml:2:11"
);
invalid!(
    duplicate_source_across_files,
    [(
        "sources/more.yml",
        "sources:\n  - name: orders\n    kind: kafka\n    broker_list: b:9092\n    topic: t2\n    replay_boundary: {mode: offsets}\n"
    )],
    "STB-DISCOVER-011",
    "sources/orders.yml:2:5"
);
invalid!(
    adopted_sources_conflict,
    [(
        "sources/adopted.yml",
        "sources:\n  - name: a1\n    kind: stream_table\n    table_name: events\n    replay_boundary:\n      mode: timestamp\n      columns: {_replay_timestamp: ts}\n  - name: a2\n    kind: stream_table\n    table_name: events\n    replay_boundary:\n      mode: timestamp\n      columns: {_replay_timestamp: event_time}\n"
    )],
    "STB-DISCOVER-013",
    "sources/adopted.yml:8:5"
);
invalid!(
    source_field_unknown_variable,
    [(
        SOURCES,
        "sources:\n  - name: orders\n    kind: kafka\n    broker_list: \"${brokers}\"\n    topic: t\n    replay_boundary: {mode: offsets}\n"
    )],
    "STB-CONFIG-007",
    "sources/orders.yml:4:18"
);

// --- macros ---------------------------------------------------------------------------------

const NAMING: &str = "[naming]\npipeline_naming_macro = \"pipeline_name\"\n";

invalid!(
    naming_macro_not_defined,
    [
        (PROJECT, project_with(NAMING)),
        ("macros/util.py", "def other() -> str:\n    return 'x'\n")
    ],
    "STB-DISCOVER-014",
    "streambuild_project.toml:7:25"
);
invalid!(
    naming_macro_wrong_signature,
    [
        (PROJECT, project_with(NAMING)),
        (
            "macros/naming.py",
            "def pipeline_name(context) -> str:\n    return context.name\n"
        )
    ],
    "STB-DISCOVER-014",
    "macros/naming.py:1:1"
);
invalid!(
    naming_macro_rejects_directory,
    [
        (PROJECT, project_with(NAMING)),
        (
            "macros/naming.py",
            "def pipeline_name(ctx: PipelineNamingContext) -> str:\n    return f'pl__{ctx.source_name}_events'\n"
        )
    ],
    "STB-DISCOVER-015",
    "pipelines/pl__orders"
);
invalid!(
    naming_macro_raises,
    [
        (PROJECT, project_with(NAMING)),
        (
            "macros/naming.py",
            "def pipeline_name(ctx: PipelineNamingContext) -> str:\n    x = 1\n    raise RuntimeError('no names today')\n"
        )
    ],
    "STB-DISCOVER-016",
    "macros/naming.py:3:1"
);
invalid!(
    naming_macro_returns_number,
    [
        (PROJECT, project_with(NAMING)),
        (
            "macros/naming.py",
            "def pipeline_name(ctx: PipelineNamingContext) -> str:\n    return 42\n"
        )
    ],
    "STB-DISCOVER-016",
    "macros/naming.py:1:1"
);
invalid!(
    macro_name_collision,
    [
        ("macros/a.py", "def shared() -> str:\n    return 'a'\n"),
        ("macros/b.py", "\ndef shared() -> str:\n    return 'b'\n")
    ],
    "STB-DISCOVER-017",
    "macros/b.py:2:1"
);
invalid!(
    macro_file_syntax_error,
    [("macros/broken.py", "def f(:\n    pass\n")],
    "STB-DISCOVER-017",
    "macros/broken.py:1:1"
);

// --- Postgres sources -----------------------------------------------------------------------

invalid!(
    postgres_bad_refresh,
    [(
        "sources/pg.yml",
        "sources:\n  - name: accounts\n    kind: postgres\n    host: db\n    database: app\n    table: accounts\n    user: reader\n    refresh: every 5 minutes\n"
    )],
    "STB-DISCOVER-010",
    "sources/pg.yml:8:14"
);
invalid!(
    postgres_with_streaming_fields,
    [(
        "sources/pg.yml",
        "sources:\n  - name: accounts\n    kind: postgres\n    host: db\n    database: app\n    table: accounts\n    user: reader\n    refresh: 5 MINUTE\n    replay_boundary: {mode: offsets}\n"
    )],
    "STB-DISCOVER-010",
    "sources/pg.yml:9:5"
);
invalid!(
    postgres_missing_user,
    [(
        "sources/pg.yml",
        "sources:\n  - name: accounts\n    kind: postgres\n    host: db\n    database: app\n    table: accounts\n    refresh: 5 MINUTE\n"
    )],
    "STB-DISCOVER-010",
    "sources/pg.yml:2:5"
);

// --- [targets.<name>.cluster] -----------------------------------------------------------------

invalid!(
    cluster_topology_unknown,
    [(
        PROJECT,
        project_with("\n[targets.dev.cluster]\ntopology = \"shards\"\n")
    )],
    "STB-CONFIG-006",
    "streambuild_project.toml:8:12"
);
invalid!(
    cluster_topology_missing,
    [(
        PROJECT,
        project_with("\n[targets.dev.cluster]\nname = \"analytics\"\n")
    )],
    "STB-CONFIG-012",
    "streambuild_project.toml:7:1"
);
invalid!(
    cluster_name_missing_for_on_cluster,
    [(
        PROJECT,
        project_with("\n[targets.dev.cluster]\ntopology = \"on_cluster\"\n")
    )],
    "STB-CONFIG-012",
    "streambuild_project.toml:7:1"
);
invalid!(
    cluster_shards_sharing_one_path,
    [(
        PROJECT,
        project_with(
            "\n[targets.dev.cluster]\ntopology = \"sharded\"\nname = \"c\"\nsharding_key = \"rand()\"\nzookeeper_path = \"/t/{uuid}\"\n"
        )
    )],
    "STB-CONFIG-006",
    "streambuild_project.toml:11:18"
);
invalid!(
    cluster_replica_without_a_macro,
    [(
        PROJECT,
        project_with(
            "\n[targets.dev.cluster]\ntopology = \"on_cluster\"\nname = \"c\"\nreplica = \"r1\"\n"
        )
    )],
    "STB-CONFIG-006",
    "streambuild_project.toml:10:11"
);
invalid!(
    cluster_sharding_key_without_shards,
    [(
        PROJECT,
        project_with(
            "\n[targets.dev.cluster]\ntopology = \"replicated\"\nsharding_key = \"rand()\"\n"
        )
    )],
    "STB-CONFIG-006",
    "streambuild_project.toml:9:16"
);
invalid!(
    cluster_interpolated,
    [(
        PROJECT,
        project_with("\n[targets.dev.cluster]\ntopology = \"on_cluster\"\nname = \"${cluster}\"\n")
    )],
    "STB-CONFIG-011",
    "streambuild_project.toml:9:8"
);
invalid!(
    cluster_unknown_key,
    [(
        PROJECT,
        project_with("\n[targets.dev.cluster]\ntopology = \"cloud\"\nshards = 3\n")
    )],
    "STB-CONFIG-004",
    "streambuild_project.toml:9:1"
);
invalid!(
    cluster_path_shared_by_every_table,
    [(
        PROJECT,
        project_with(
            "\n[targets.dev.cluster]\ntopology = \"on_cluster\"\nname = \"c\"\nzookeeper_path = \"/clickhouse/tables/{shard}\"\n"
        )
    )],
    "STB-CONFIG-006",
    "streambuild_project.toml:10:18"
);
invalid!(
    cluster_name_on_a_replicated_database,
    [(
        PROJECT,
        project_with("\n[targets.dev.cluster]\ntopology = \"replicated\"\nname = \"c\"\n")
    )],
    "STB-CONFIG-006",
    "streambuild_project.toml:9:8"
);
