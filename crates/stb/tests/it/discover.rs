//! `stb discover` as users run it: text, JSON, errors and exit codes.

use assert_cmd::Command;
use predicates::prelude::*;
use serde_json::Value;

fn project(files: &[(&str, &str)]) -> tempfile::TempDir {
    stb_test_support::project_dir(files)
}

const VALID: &[(&str, &str)] = &[
    (
        "streambuild_project.toml",
        "name = \"shop\"\ndefault_target = \"dev\"\n[targets.dev]\ndatabase = \"shop_${env_name}\"\n[vars]\nenv_name = \"dev\"\n",
    ),
    (
        "sources/orders.yml",
        "sources:\n  - name: orders\n    kind: kafka\n    broker_list: b:9092\n    topic: orders\n    replay_boundary: {mode: offsets}\n",
    ),
    ("pipelines/pl__orders/pipeline.toml", "[protection]\n"),
    (
        "pipelines/pl__orders/orders_clean.sql",
        "SELECT id::UInt64 AS id FROM __source(\"orders\")\n",
    ),
];

fn stb() -> Command {
    Command::cargo_bin("stb").expect("the stb binary")
}

#[test]
fn text_output_lists_pipelines_models_and_sources() {
    let dir = project(VALID);
    stb()
        .current_dir(dir.path().join("pipelines"))
        .arg("discover")
        .assert()
        .success()
        .stdout(predicate::str::contains(
            "project shop  target dev  database shop_dev",
        ))
        .stdout(predicate::str::contains(
            "pl__orders  direct  source orders  protected (--confirm pl__orders)",
        ))
        .stdout(predicate::str::contains(
            "pipelines/pl__orders/orders_clean.sql",
        ));
}

#[test]
fn json_output_and_vars_override() {
    let dir = project(VALID);
    let output = stb()
        .args([
            "discover",
            "--json",
            "--vars",
            "{\"env_name\": \"ci\"}",
            "--project-dir",
        ])
        .arg(dir.path())
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let json: Value = serde_json::from_slice(&output).expect("JSON");
    assert_eq!(json["database"], "shop_ci");
    assert_eq!(
        json["pipelines"][0]["protection"]["confirmation"],
        "pl__orders"
    );
    assert_eq!(json["pipelines"][0]["models"][0]["driving_input"], "orders");
    assert_eq!(json["sources"][0]["kind"], "kafka");
}

#[test]
fn errors_are_reported_with_codes_locations_and_exit_1() {
    let mut files = VALID.to_vec();
    files.push((
        "streambuild_project.toml",
        "name = \"shop\"\ndefault_target = \"dev\"\nnmae = 1\n[targets.dev]\n",
    ));
    files.retain(|(p, t)| *p != "streambuild_project.toml" || t.contains("nmae"));
    let dir = project(&files);
    stb()
        .current_dir(dir.path())
        .arg("discover")
        .assert()
        .code(1)
        .stderr(predicate::str::contains("error[STB-CONFIG-004] streambuild_project.toml:3:1: the project file contains unsupported key 'nmae'"))
        .stderr(predicate::str::contains("hint: did you mean 'name'? allowed keys:"));
    let output = stb()
        .current_dir(dir.path())
        .args(["discover", "--json"])
        .assert()
        .code(1)
        .get_output()
        .stdout
        .clone();
    let json: Value = serde_json::from_slice(&output).expect("JSON");
    assert_eq!(json["errors"][0]["code"], "STB-CONFIG-004");
    assert_eq!(json["errors"][0]["location"]["line"], 3);
}

#[test]
fn malformed_vars_exit_2_and_no_project_exits_1() {
    let dir = project(VALID);
    stb()
        .current_dir(dir.path())
        .args(["discover", "--vars", "[1]"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("--vars must be a JSON object"));
    let empty = tempfile::tempdir().expect("tempdir");
    stb()
        .current_dir(empty.path())
        .arg("discover")
        .assert()
        .code(1)
        .stderr(predicate::str::contains("STB-CONFIG-001"));
}

#[test]
fn a_macro_that_never_returns_is_stopped_and_reported() {
    let mut files = VALID.to_vec();
    files.retain(|(p, _)| *p != "streambuild_project.toml");
    files.push(("streambuild_project.toml", "name = \"shop\"\ndefault_target = \"dev\"\n[targets.dev]\n[naming]\npipeline_naming_macro = \"slow\"\n"));
    files.push((
        "macros/slow.py",
        "def slow(ctx: PipelineNamingContext) -> str:\n    while True:\n        pass\n",
    ));
    let dir = project(&files);
    let started = std::time::Instant::now();
    stb()
        .current_dir(dir.path())
        .env("STB_MACRO_TIMEOUT_MS", "500")
        .arg("discover")
        .assert()
        .code(1)
        .stderr(predicate::str::contains("error[STB-DISCOVER-016] macros/slow.py:1:1: Macro 'slow' failed: no answer within 0.5s"));
    assert!(
        started.elapsed() < std::time::Duration::from_secs(20),
        "the worker was stopped"
    );
}

#[test]
fn compile_writes_artifacts_and_reports_errors() {
    let mut files = VALID.to_vec();
    files.retain(|(p, _)| *p != "pipelines/pl__orders/orders_clean.sql");
    files.push((
        "pipelines/pl__orders/orders_clean.sql",
        "MODEL (order_by [\"id\"]);\nSELECT id::UInt64 AS id FROM __source(\"orders\")\n",
    ));
    let dir = project(&files);
    std::fs::create_dir_all(dir.path().join("target/run")).expect("mkdir");
    stb()
        .current_dir(dir.path())
        .arg("compile")
        .assert()
        .success()
        .stdout(
            "Wrote compile artifacts to ".to_owned()
                + &dir.path().join("target").display().to_string()
                + "\nPipelines: 1\nModels: 1\n",
        );
    assert!(
        dir.path()
            .join("target/compiled/resources/models/pl__orders/orders_clean.table.sql")
            .is_file()
    );
    assert!(dir.path().join("target/run").is_dir());
    let output = stb()
        .current_dir(dir.path())
        .args(["compile", "--json", "--target-dir", "out"])
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let json: Value = serde_json::from_slice(&output).expect("JSON");
    assert_eq!(json["models"], 1);
    assert!(dir.path().join("out/manifest.json").is_file());

    // A test mock nothing reads compiles, with a warning on stderr and in the JSON.
    std::fs::create_dir_all(dir.path().join("tests")).expect("mkdir");
    std::fs::write(
        dir.path().join("tests/t.sql"),
        "TEST (name t);\nWITH __source__orders AS (SELECT 1 AS id), __ref__ghost AS (SELECT 1),\n  __expected__orders_clean AS (SELECT 1 AS id)\nSELECT 1\n",
    )
    .expect("write");
    stb()
        .current_dir(dir.path())
        .args(["compile", "--check"])
        .assert()
        .success()
        .stderr(predicate::str::contains(
            "warning[STB-COMPILE-008] tests/t.sql:2:61: SQL test 'tests/t.sql' never reaches mock '__ref__ghost'",
        ));
    let output = stb()
        .current_dir(dir.path())
        .args(["compile", "--check", "--json"])
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let json: Value = serde_json::from_slice(&output).expect("JSON");
    assert_eq!(json["warnings"][0]["code"], "STB-COMPILE-008");
    std::fs::remove_dir_all(dir.path().join("tests")).expect("cleanup");

    std::fs::write(
        dir.path().join("pipelines/pl__orders/orders_clean.sql"),
        "MODEL (order_by [\"id\"]);\nSELECT id FROM __source(\"orders\")\n",
    )
    .expect("write");
    stb()
        .current_dir(dir.path())
        .arg("compile")
        .assert()
        .code(1)
        .stderr(predicate::str::contains(
            "error[STB-COMPILE-002] pipelines/pl__orders/orders_clean.sql:2:8",
        ));
}

#[test]
fn compile_recompiles_only_the_edited_model_says_so_and_full_compiles_everything() {
    let dir = project(VALID);
    let compile = |args: &[&str]| -> Value {
        let output = stb()
            .current_dir(dir.path())
            .args(["compile", "--json"])
            .args(args)
            .assert()
            .success()
            .get_output()
            .stdout
            .clone();
        serde_json::from_slice(&output).expect("JSON")
    };
    let model = dir.path().join("pipelines/pl__orders/orders_clean.sql");
    std::fs::write(
        &model,
        "MODEL (order_by [\"id\"]);\nSELECT id::UInt64 AS id FROM __source(\"orders\")\n",
    )
    .expect("write");
    let first = compile(&[]);
    assert_eq!(first["whole_compile"], "no record of an earlier compile");
    assert_eq!(first["recompiled_models"], 1);
    std::fs::write(
        &model,
        "MODEL (order_by [\"id\"]);\nSELECT id::UInt64 AS id FROM __source(\"orders\") -- edited\n",
    )
    .expect("write");
    let second = compile(&[]);
    assert_eq!(second["whole_compile"], Value::Null);
    assert_eq!(second["recompiled_models"], 1);
    assert_eq!(
        second["written_files"], 2,
        "the query and the materialized view that runs it"
    );
    assert_eq!(second["artifacts"], first["artifacts"]);
    stb()
        .current_dir(dir.path())
        .arg("compile")
        .assert()
        .success()
        .stdout(predicate::str::ends_with(
            "Models: 1\nIncremental: recompiled 0 of 1 models, wrote 0 files, left 8 as they were\n",
        ));
    let full = compile(&["--full"]);
    assert_eq!(full["whole_compile"], "asked for");

    // Warnings are not recorded, so a project with one compiles whole and shows it each
    // time.
    std::fs::create_dir_all(dir.path().join("tests")).expect("mkdir");
    std::fs::write(
        dir.path().join("tests/t.sql"),
        "TEST (name t);\nWITH __source__orders AS (SELECT 1 AS id), __ref__ghost AS (SELECT 1),\n  __expected__orders_clean AS (SELECT 1 AS id)\nSELECT 1\n",
    )
    .expect("write");
    for _ in 0..2 {
        stb()
            .current_dir(dir.path())
            .arg("compile")
            .assert()
            .success()
            .stderr(predicate::str::contains(
                "never reaches mock '__ref__ghost'",
            ));
    }
}
