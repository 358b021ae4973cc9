//! Fixture projects for compile tests.

use std::path::Path;

use stb_compile::Compiled;
use stb_diagnostics::Diagnostic;
use stb_project::DiscoverOptions;

/// A project with a managed Kafka source, an adopted table with renamed lineage columns,
/// a chain of table models with a typed side reference, and a terminal view.
pub(crate) const SHOP: &[(&str, &str)] = &[
    (
        "streambuild_project.toml",
        "name = \"shop\"\ndefault_target = \"dev\"\n\n[defaults.sources.kafka]\nretention = { duration = \"7d\" }\n\n[targets.dev]\ndatabase = \"shop_dev\"\n",
    ),
    (
        "sources/orders.yml",
        "sources:\n  - name: orders\n    kind: kafka\n    broker_list: \"localhost:9092\"\n    topic: shop.orders\n    settings:\n      kafka_num_consumers: \"1\"\n    replay_boundary:\n      mode: offsets\n  - name: customers\n    kind: stream_table\n    table_name: customers_existing\n    replay_boundary:\n      mode: timestamp\n      columns:\n        _replay_timestamp: updated_at\n",
    ),
    (
        "pipelines/pl__orders/staging/orders_clean.sql",
        "MODEL (\n  order_by [\"order_id\", \"_replay_partition\", \"_replay_offset\"],\n  partition_by \"_replay_partition\",\n  description \"orders ); cleaned\",\n);\n\nSELECT\n  JSONExtractString(kafka_value, 'order_id')::String AS order_id,\n  JSONExtractUInt(kafka_value, 'customer_id')::UInt64 AS customer_id,\n  _replay_partition::Int32 AS _replay_partition,\n  _replay_offset::Int64 AS _replay_offset,\n  coalesce(_replay_timestamp, _replay_landed_at)::DateTime64(3) AS _replay_timestamp\nFROM __source(\"orders\") -- the landing table\n",
    ),
    (
        "pipelines/pl__orders/order_customers.sql",
        "MODEL (\n  engine \"ReplacingMergeTree(_replay_timestamp)\",\n  order_by [\"order_id\"],\n  retention (duration \"30d\", timestamp_column _replay_timestamp),\n  settings (index_granularity 8192),\n);\nSELECT o.order_id::String AS order_id, c.name::String AS customer_name, o._replay_timestamp::DateTime64(3) AS _replay_timestamp\nFROM __ref(\"orders_clean\") AS o\nLEFT JOIN __ref(\"customer_names\", ref_type='reference') AS c ON o.customer_id = c.customer_id;\n",
    ),
    (
        "pipelines/pl__customers/customer_names.sql",
        "MODEL (order_by [\"customer_id\"]);\nSELECT id::UInt64 AS customer_id, name::String AS name, updated_at::DateTime64(3) AS _replay_timestamp FROM __source(\"customers\")\n",
    ),
    (
        "pipelines/pl__reporting/customer_counts.sql",
        "MODEL (kind view);\nSELECT customer_name::String AS customer_name, count()::UInt64 AS orders\nFROM __ref(\"order_customers\")\nGROUP BY customer_name\n",
    ),
];

pub(crate) fn write(dir: &Path, files: &[(&str, &str)]) {
    for (path, text) in files {
        let full = dir.join(path);
        std::fs::create_dir_all(full.parent().expect("parent")).expect("mkdir");
        std::fs::write(full, text).expect("write");
    }
}

/// Discovers and compiles `files`, with `overrides` replacing same-named files.
pub(crate) fn compile_files(
    files: &[(&str, &str)],
    overrides: &[(&str, &str)],
) -> Result<Compiled, Vec<Diagnostic>> {
    let dir = tempfile::tempdir().expect("tempdir");
    write(dir.path(), files);
    write(dir.path(), overrides);
    compile_dir(dir.path())
}

pub(crate) fn compile_dir(dir: &Path) -> Result<Compiled, Vec<Diagnostic>> {
    let project = stb_project::discover(&DiscoverOptions {
        project_dir: Some(dir.to_path_buf()),
        cwd: dir.to_path_buf(),
        ..Default::default()
    })
    .map_err(stb_diagnostics::Diagnostics::into_sorted)?;
    stb_compile::compile(&project).map_err(stb_diagnostics::Diagnostics::into_sorted)
}

/// Compiles `SHOP` with `overrides`, expecting exactly one diagnostic: (code, location, message).
pub(crate) fn single_error(overrides: &[(&str, &str)]) -> (String, String, String) {
    let diagnostics = compile_files(SHOP, overrides).expect_err("should fail");
    assert_eq!(diagnostics.len(), 1, "{diagnostics:#?}");
    let d = &diagnostics[0];
    (
        d.code.to_owned(),
        d.location
            .as_ref()
            .map(ToString::to_string)
            .unwrap_or_default(),
        d.message.clone(),
    )
}
