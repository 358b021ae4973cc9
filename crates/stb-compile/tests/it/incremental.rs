//! `stb compile`'s incremental path: an edited model rewrites only the files whose bytes
//! changed, leaves every other file as it was (same inode, same modification time), and
//! the tree is byte-identical to a clean compile of the same project; anything the fast
//! path cannot take compiles everything.

use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use stb_compile::incremental::{Failure, Published, compile_and_publish};
use stb_project::DiscoverOptions;

use crate::support::{SHOP, write};

/// The record the incremental path keeps; every other file is an artifact.
const RECORD: &str = ".compile_state.json";

/// A SQL test reading `customer_counts` through a mock of `order_customers`.
const COUNTS_TEST: (&str, &str) = (
    "tests/customer_counts.sql",
    "TEST (name counts_per_customer);\nWITH\n  __ref__order_customers AS (\n    SELECT 'o1' AS order_id, 'ann' AS customer_name, toDateTime64('2026-11-01 00:00:00', 3, 'UTC') AS _replay_timestamp\n  ),\n  __expected__customer_counts AS (\n    SELECT 'ann' AS customer_name, 1 AS orders\n  )\nSELECT 1\n",
);

struct Fixture {
    dir: tempfile::TempDir,
}

impl Fixture {
    fn new(extra: &[(&str, &str)]) -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        write(dir.path(), SHOP);
        write(dir.path(), extra);
        Self { dir }
    }

    fn target(&self) -> PathBuf {
        self.dir.path().join("target")
    }

    fn edit(&self, path: &str, from: &str, to: &str) {
        let full = self.dir.path().join(path);
        let text = std::fs::read_to_string(&full).expect("read");
        assert!(text.contains(from), "{path} holds {from}");
        std::fs::write(&full, text.replacen(from, to, 1)).expect("write");
    }

    fn compile_into(&self, target: &Path, whole: bool) -> Result<Published, Failure> {
        self.compile_adjusted(target, whole, |_| {})
    }

    /// Discovers the project, lets `adjust` change it, then compiles and publishes.
    fn compile_adjusted(
        &self,
        target: &Path,
        whole: bool,
        adjust: impl Fn(&mut stb_project::Project),
    ) -> Result<Published, Failure> {
        let mut project = stb_project::discover(&DiscoverOptions {
            project_dir: Some(self.dir.path().to_path_buf()),
            cwd: self.dir.path().to_path_buf(),
            ..Default::default()
        })
        .expect("discovers");
        adjust(&mut project);
        compile_and_publish(&project, target, whole)
    }

    fn compile(&self) -> Published {
        self.compile_into(&self.target(), false)
            .unwrap_or_else(|f| panic!("compiles: {f:?}"))
    }

    /// What a clean compile of the project as it is now writes.
    fn clean_tree(&self) -> BTreeMap<String, Vec<u8>> {
        let clean = self.dir.path().join("clean");
        let _ = std::fs::remove_dir_all(&clean);
        let published = self
            .compile_into(&clean, true)
            .unwrap_or_else(|f| panic!("compiles: {f:?}"));
        assert_eq!(published.whole, Some("asked for"));
        tree(&clean)
    }
}

/// Every file under `root` (the record left out), by relative path.
fn tree(root: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut files = BTreeMap::new();
    let mut pending = vec![root.to_path_buf()];
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(&dir).expect("read_dir") {
            let path = entry.expect("entry").path();
            if path.is_dir() {
                pending.push(path);
                continue;
            }
            let relative = path.strip_prefix(root).expect("under root");
            let relative = relative.to_string_lossy().replace('\\', "/");
            if relative != RECORD {
                files.insert(relative, std::fs::read(&path).expect("read"));
            }
        }
    }
    files
}

/// Each artifact's inode and modification time: a rewritten file gets a new inode (it is
/// renamed into place), an untouched one keeps both.
fn identities(root: &Path) -> BTreeMap<String, (u64, i64, i64)> {
    tree(root)
        .into_keys()
        .map(|relative| {
            let metadata = std::fs::metadata(root.join(&relative)).expect("metadata");
            let identity = (metadata.ino(), metadata.mtime(), metadata.mtime_nsec());
            (relative, identity)
        })
        .collect()
}

fn rewritten(
    before: &BTreeMap<String, (u64, i64, i64)>,
    after: &BTreeMap<String, (u64, i64, i64)>,
) -> Vec<String> {
    assert_eq!(
        before.keys().collect::<Vec<_>>(),
        after.keys().collect::<Vec<_>>(),
        "the same artifacts"
    );
    after
        .iter()
        .filter(|(path, identity)| before.get(*path) != Some(identity))
        .map(|(path, _)| path.clone())
        .collect()
}

#[test]
fn an_edited_model_rewrites_only_its_changed_files_and_matches_a_clean_compile() {
    let project = Fixture::new(&[]);
    let first = project.compile();
    assert_eq!(first.whole, Some("no record of an earlier compile"));
    assert_eq!(first.recompiled, 4);
    let before = identities(&project.target());

    // A new output column: the model's query, table, view and manifest entry change.
    project.edit(
        "pipelines/pl__orders/order_customers.sql",
        "c.name::String AS customer_name,",
        "c.name::String AS customer_name, upper(c.name)::String AS shouted,",
    );
    let second = project.compile();
    assert_eq!(second.whole, None, "the fast path");
    assert_eq!(second.recompiled, 1);
    assert_eq!(second.written, 4);
    assert_eq!(
        rewritten(&before, &identities(&project.target())),
        [
            "compiled/models/pl__orders/order_customers.sql",
            "compiled/resources/models/pl__orders/order_customers.mv.sql",
            "compiled/resources/models/pl__orders/order_customers.table.sql",
            "manifest.json",
        ]
    );
    assert_eq!(tree(&project.target()), project.clean_tree());
    assert_eq!(second.artifacts, first.artifacts);

    // Nothing changed since: nothing is written.
    let before = identities(&project.target());
    let third = project.compile();
    assert_eq!((third.whole, third.recompiled, third.written), (None, 0, 0));
    assert!(rewritten(&before, &identities(&project.target())).is_empty());
}

#[test]
fn successive_and_simultaneous_edits_keep_the_manifest_exact() {
    let project = Fixture::new(&[]);
    project.compile();
    // Entries sort by model name: each edit moves the entries after it in the manifest,
    // which the next splice must account for.
    let steps: &[&[(&str, &str, &str)]] = &[
        &[(
            "pipelines/pl__customers/customer_names.sql",
            "name::String AS name,",
            "name::String AS name, length(name)::UInt64 AS name_length,",
        )],
        &[(
            "pipelines/pl__orders/order_customers.sql",
            "c.name::String AS customer_name,",
            "c.name::String AS customer_name, 1::UInt8 AS one,",
        )],
        &[
            (
                "pipelines/pl__customers/customer_names.sql",
                " length(name)::UInt64 AS name_length,",
                "",
            ),
            (
                "pipelines/pl__orders/staging/orders_clean.sql",
                "JSONExtractUInt(kafka_value, 'customer_id')::UInt64 AS customer_id,",
                "JSONExtractUInt(kafka_value, 'customer_id')::UInt64 AS customer_id,\n  JSONExtractString(kafka_value, 'note')::String AS a_much_longer_column_name_than_before,",
            ),
            (
                "pipelines/pl__reporting/customer_counts.sql",
                "count()::UInt64 AS orders",
                "count()::UInt64 AS orders, max(order_id)::String AS last_order",
            ),
        ],
    ];
    for (index, edits) in steps.iter().enumerate() {
        for (path, from, to) in *edits {
            project.edit(path, from, to);
        }
        let published = project.compile();
        assert_eq!(published.whole, None, "step {index}");
        assert_eq!(published.recompiled, edits.len(), "step {index}");
        assert_eq!(
            tree(&project.target()),
            project.clean_tree(),
            "step {index}"
        );
    }
}

#[test]
fn an_edit_that_keeps_the_relation_but_changes_storage_stays_incremental() {
    let project = Fixture::new(&[]);
    project.compile();
    project.edit(
        "pipelines/pl__orders/order_customers.sql",
        "retention (duration \"30d\"",
        "retention (duration \"45d\"",
    );
    let published = project.compile();
    assert_eq!((published.whole, published.recompiled), (None, 1));
    assert_eq!(tree(&project.target()), project.clean_tree());
}

/// Each change the fast path cannot take: the compile is whole, says why, and the tree
/// matches a clean compile.
#[test]
fn what_the_fast_path_cannot_take_compiles_everything() {
    type Change = fn(&Fixture);
    let cases: &[(&str, Change, &str)] = &[
        (
            "a project setting",
            |p| p.edit("streambuild_project.toml", "\"7d\"", "\"8d\""),
            "the project's settings, pipelines, sources, macros, tests or audits changed",
        ),
        (
            "a relation renamed",
            |p| {
                p.edit(
                    "pipelines/pl__customers/customer_names.sql",
                    "MODEL (order_by",
                    "MODEL (relation_name \"names_v2\", order_by",
                );
            },
            "a changed model's relation, kind or references changed",
        ),
        (
            "a reference added",
            |p| {
                p.edit(
                    "pipelines/pl__orders/staging/orders_clean.sql",
                    "FROM __source(\"orders\")",
                    "FROM __source(\"orders\")\nWHERE JSONExtractUInt(kafka_value, 'customer_id') IN (SELECT customer_id FROM __ref(\"customer_names\", ref_type='reference'))",
                );
            },
            "a changed model's relation, kind or references changed",
        ),
        (
            "a model added",
            |p| {
                write(
                    p.dir.path(),
                    &[(
                        "pipelines/pl__reporting/name_counts.sql",
                        "MODEL (kind view);\nSELECT name::String AS name FROM __ref(\"customer_names\")\n",
                    )],
                );
            },
            "models were added, removed, renamed or moved",
        ),
        (
            "a model read by a test",
            |p| {
                p.edit(
                    "pipelines/pl__reporting/customer_counts.sql",
                    "count()::UInt64 AS orders",
                    "CAST(count() AS UInt64) AS orders",
                );
            },
            "a model a test or audit reads changed",
        ),
        (
            "an artifact edited by hand",
            |p| {
                let file = p
                    .target()
                    .join("compiled/models/pl__orders/order_customers.sql");
                std::fs::write(file, "SELECT 'edited by hand'\n").expect("write");
            },
            "artifacts were changed since the last compile",
        ),
        (
            "a pipeline's settings",
            |p| {
                write(
                    p.dir.path(),
                    &[("pipelines/pl__reporting/pipeline.toml", "[protection]\n")],
                )
            },
            "the project's settings, pipelines, sources, macros, tests or audits changed",
        ),
        (
            "a file added under compiled/",
            |p| {
                let stray = p.target().join("compiled/models/pl__orders/stray.sql");
                std::fs::write(stray, "SELECT 1\n").expect("write");
            },
            "artifacts were changed since the last compile",
        ),
        (
            "a record whose manifest ranges are off",
            |p| {
                let path = p.target().join(RECORD);
                let mut record: serde_json::Value =
                    serde_json::from_slice(&std::fs::read(&path).expect("record")).expect("json");
                for model in record["models"].as_array_mut().expect("models") {
                    let from = model["manifest"][0].as_u64().expect("from");
                    model["manifest"][0] = (from + 1).into();
                }
                std::fs::write(&path, record.to_string()).expect("write");
                p.edit(
                    "pipelines/pl__customers/customer_names.sql",
                    "name::String AS name",
                    "upper(name)::String AS name",
                );
            },
            "manifest.json does not match the record of it",
        ),
        (
            "audits declared in a header",
            |p| {
                p.edit(
                    "pipelines/pl__customers/customer_names.sql",
                    "MODEL (order_by [\"customer_id\"]);",
                    "MODEL (order_by [\"customer_id\"], columns (name (audits [not_null])));",
                );
            },
            "a changed model declares audits",
        ),
    ];
    for (label, change, reason) in cases {
        let project = Fixture::new(&[COUNTS_TEST]);
        assert_eq!(
            project.compile().whole,
            Some("no record of an earlier compile")
        );
        change(&project);
        let published = project.compile();
        assert_eq!(published.whole, Some(*reason), "{label}");
        assert_eq!(tree(&project.target()), project.clean_tree(), "{label}");
        // The whole compile left a fresh record: the next one is incremental again.
        assert_eq!(project.compile().whole, None, "{label}: then incremental");
    }
}

#[test]
fn a_broken_edit_writes_nothing_and_the_fix_is_incremental() {
    let project = Fixture::new(&[]);
    project.compile();
    let before = identities(&project.target());
    let good = "c.name::String AS customer_name,";
    project.edit(
        "pipelines/pl__orders/order_customers.sql",
        good,
        "c.name AS customer_name,",
    );
    let Err(Failure::Compile(problems)) = project.compile_into(&project.target(), false) else {
        panic!("an untyped column does not compile");
    };
    let problems = problems.into_sorted();
    assert_eq!(problems[0].code, "STB-COMPILE-002", "{problems:#?}");
    assert!(rewritten(&before, &identities(&project.target())).is_empty());
    project.edit(
        "pipelines/pl__orders/order_customers.sql",
        "c.name AS customer_name,",
        "c.name::LowCardinality(String) AS customer_name,",
    );
    let fixed = project.compile();
    assert_eq!((fixed.whole, fixed.recompiled), (None, 1));
    assert_eq!(tree(&project.target()), project.clean_tree());
}

/// The orders source's broker list as `${ENV:...}` resolves it: a secret.
fn secret_broker(value: &'static str) -> impl Fn(&mut stb_project::Project) {
    move |project| {
        let source = project.sources.iter_mut().find(|s| s.name == "orders");
        let kafka = source
            .and_then(|s| s.kafka.as_mut())
            .expect("a Kafka source");
        kafka.broker_list = Some(stb_project::sources::Resolved {
            value: value.to_owned(),
            from_environment: true,
        });
    }
}

#[test]
fn a_secret_from_the_environment_is_neither_recorded_nor_part_of_the_key() {
    let project = Fixture::new(&[]);
    let target = project.target();
    let first = project
        .compile_adjusted(&target, false, secret_broker("first-broker.internal:9093"))
        .expect("compiles");
    assert_eq!(first.whole, Some("no record of an earlier compile"));
    let record = std::fs::read_to_string(target.join(RECORD)).expect("record");
    assert!(!record.contains("first-broker"), "{record}");
    let kafka =
        std::fs::read_to_string(target.join("compiled/resources/sources/orders/kafka__orders.sql"))
            .expect("the Kafka table's artifact");
    assert!(
        kafka.contains("***") && !kafka.contains("first-broker"),
        "{kafka}"
    );
    // Artifacts show `***` for it, so another value changes no artifact: the record's
    // hashes do not cover it (a hash of a secret is a way to guess it).
    let again = project
        .compile_adjusted(&target, false, secret_broker("second-broker.internal:9093"))
        .expect("compiles");
    assert_eq!((again.whole, again.written), (None, 0));
}
