//! What compile writes, byte for byte, and how it publishes.

use crate::support::{SHOP, compile_dir, compile_files, write};

#[test]
fn artifact_set_and_contents() {
    let compiled = compile_files(SHOP, &[]).unwrap_or_else(|d| panic!("{d:#?}"));
    assert_eq!((compiled.pipelines, compiled.models), (3, 4));
    let paths: Vec<&str> = compiled.files.keys().map(String::as_str).collect();
    insta::assert_snapshot!("artifact_paths", paths.join("\n"));
    for (path, content) in &compiled.files {
        assert!(
            content.ends_with('\n') && !content.ends_with("\n\n"),
            "{path} ends with exactly one newline"
        );
        assert!(
            content.is_ascii() || !path.ends_with(".json"),
            "{path}: JSON is ASCII"
        );
        insta::assert_snapshot!(path.replace('/', "__"), content);
    }
}

#[test]
fn references_are_spliced_into_the_authors_bytes() {
    let compiled = compile_files(SHOP, &[]).unwrap_or_else(|d| panic!("{d:#?}"));
    let query = &compiled.files["compiled/models/pl__orders/order_customers.sql"];
    assert!(query.contains("FROM shop_dev.tbl__orders_clean AS o\nLEFT JOIN shop_dev.tbl__customer_names AS c ON o.customer_id = c.customer_id;"), "{query}");
    let clean = &compiled.files["compiled/models/pl__orders/orders_clean.sql"];
    assert!(
        clean.ends_with("FROM shop_dev.raw__orders -- the landing table\n"),
        "comments and spacing are kept: {clean}"
    );
    let customers = &compiled.files["compiled/models/pl__customers/customer_names.sql"];
    assert!(
        customers.contains(
            "FROM (SELECT *, updated_at AS _replay_timestamp FROM shop_dev.customers_existing)"
        ),
        "{customers}"
    );
}

#[test]
fn compiling_twice_gives_identical_bytes_and_publishing_keeps_run() {
    let dir = tempfile::tempdir().expect("tempdir");
    write(dir.path(), SHOP);
    let first = compile_dir(dir.path()).expect("compile");
    let second = compile_dir(dir.path()).expect("compile again");
    assert_eq!(first, second);

    let target = dir.path().join("target");
    std::fs::create_dir_all(target.join("run/build")).expect("mkdir");
    std::fs::write(target.join("run/build/execution.json"), "{}").expect("write");
    std::fs::create_dir_all(target.join("compiled/stale")).expect("mkdir");
    std::fs::write(target.join("compiled/stale/old.sql"), "old").expect("write");
    stb_compile::publish::publish(&first, &target).expect("publish");
    let tree = |root: &std::path::Path| {
        let mut files = Vec::new();
        collect(root, root, &mut files);
        files.sort();
        files
    };
    let once = tree(&target);
    stb_compile::publish::publish(&second, &target).expect("publish again");
    assert_eq!(once, tree(&target), "byte-identical trees");
    assert!(
        target.join("run/build/execution.json").is_file(),
        "target/run is left alone"
    );
    assert!(
        !target.join("compiled/stale").exists(),
        "stale artifacts vanish"
    );
    let leftovers: Vec<_> = std::fs::read_dir(&target)
        .expect("read")
        .filter_map(Result::ok)
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with('.'))
        .collect();
    assert!(
        leftovers.is_empty(),
        "no staging directories left: {leftovers:?}"
    );
}

fn collect(root: &std::path::Path, dir: &std::path::Path, out: &mut Vec<(String, Vec<u8>)>) {
    for entry in std::fs::read_dir(dir).expect("read").filter_map(Result::ok) {
        let path = entry.path();
        if path.is_dir() {
            collect(root, &path, out);
        } else {
            let relative = path
                .strip_prefix(root)
                .expect("under root")
                .to_string_lossy()
                .into_owned();
            out.push((relative, std::fs::read(&path).expect("read")));
        }
    }
}

#[test]
fn secrets_from_the_environment_never_reach_artifacts() {
    // PATH is always set: it stands in for a secret read from the environment.
    let path_value = std::env::var("PATH").expect("PATH");
    let sources = SHOP[1].1.replace(
        "kafka_num_consumers: \"1\"",
        "kafka_sasl_username: \"${ENV:PATH}\"",
    );
    let sources = sources.as_str();
    let compiled = compile_files(SHOP, &[("sources/orders.yml", sources)])
        .unwrap_or_else(|d| panic!("{d:#?}"));
    for (path, content) in &compiled.files {
        assert!(
            !content.contains(&path_value),
            "{path} leaks an environment value"
        );
    }
    assert!(
        compiled.files["compiled/resources/sources/orders/kafka__orders.sql"]
            .contains("kafka_sasl_username = '***'")
    );
}

#[test]
fn postgres_pulls_become_refreshable_views_without_their_password() {
    let sources = "sources:\n  - name: accounts\n    kind: postgres\n    host: pg.internal\n    port: 5433\n    database: app\n    table: accounts\n    user: reader\n    password_env: STB_TEST_PG_PASSWORD_NEVER_SET\n    refresh: 5 minutes\n    append: false\n";
    let model = "MODEL (order_by [\"id\"]);\nSELECT id::UInt64 AS id, name::String AS name FROM __source(\"accounts\")\n";
    let files = [
        (
            "streambuild_project.toml",
            "name = \"crm\"\ndefault_target = \"dev\"\n[targets.dev]\ndatabase = \"crm\"\n",
        ),
        ("sources/accounts.yml", sources),
        ("pipelines/pl__accounts/account_names.sql", model),
    ];
    let compiled = compile_files(&files, &[]).unwrap_or_else(|d| panic!("{d:#?}"));
    insta::assert_snapshot!(
        "postgres_refreshable_view",
        compiled.files["compiled/resources/models/pl__accounts/account_names.mv.sql"]
    );
    let manifest: serde_json::Value =
        serde_json::from_str(&compiled.files["manifest.json"]).expect("JSON");
    assert_eq!(
        manifest["pipelines"]["pl__accounts"]["replay_lineage_mode"],
        "offsets"
    );
}
