//! Every example project's plan against an empty target (only its adopted tables), offline, as its JSON document:
//! read back into [`Document`] and written again, byte for byte. The web UI's copy of these
//! documents (`web/src/lib/plan-examples.ts`, type-checked by `npm run check` against the
//! UI's `Plan` type) must be exactly what they are now: a member the UI does not know, or
//! one it expects and the plan lacks, fails one side or the other.
//! `STB_UPDATE_PLAN_EXAMPLES=1` rewrites the UI's copy after a deliberate change.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use stb_plan::virtual_plan::Deployed;
use stb_warehouse::fingerprints::Fingerprints;
use stb_warehouse::{Catalog, CatalogColumn, CatalogRelation};

use super::{Document, MixedJson};
use crate::direct::{Reads, Settings};
use crate::scope::Scope;
use crate::staged::Route;

const DATABASE: &str = "shop";
/// The deployment id of every example's virtual part.
const DEPLOYMENT: &str = "20261205T120000Z_abcdef";

fn repository() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// A target holding nothing the project builds: only the tables it adopts (StreamBuild
/// never creates those), with the columns their replay boundaries map.
fn empty_target(project: &stb_project::Project) -> Reads {
    let adopted = project
        .sources
        .iter()
        .filter(|s| s.kind == stb_project::sources::SourceKind::StreamTable)
        .filter_map(|source| {
            let columns = source
                .columns
                .iter()
                .map(|(role, physical)| CatalogColumn {
                    name: physical.clone(),
                    data_type: if role.contains("timestamp") || role.contains("landed_at") {
                        "DateTime64(3)".to_owned()
                    } else {
                        "UInt64".to_owned()
                    },
                    default_expression: String::new(),
                })
                .collect::<Vec<_>>();
            Some(CatalogRelation {
                name: source.table_name.clone()?,
                engine: "MergeTree".to_owned(),
                sorting_key: String::new(),
                partition_key: String::new(),
                create_table_query: String::new(),
                as_select: String::new(),
                uuid: String::new(),
                defined: true,
                columns: columns.into(),
            })
        })
        .collect();
    Reads {
        database: DATABASE.to_owned(),
        catalog: Catalog::new("UTC", adopted),
        fingerprints: Fingerprints::Absent,
        catalog_stamp: None,
        cluster: None,
    }
}

/// The example's plan of every model against an empty target, as `stb plan --json` would
/// print it (without a warehouse to validate against or measure with).
fn example_plan(dir: &Path) -> String {
    let mut project = stb_project::discover(&stb_project::DiscoverOptions {
        project_dir: Some(dir.to_path_buf()),
        cwd: dir.to_path_buf(),
        ..Default::default()
    })
    .unwrap_or_else(|d| panic!("{} discovers: {d:?}", dir.display()));
    project.database = Some(DATABASE.to_owned());
    let compiled = stb_compile::compile(&project)
        .unwrap_or_else(|d| panic!("{} compiles: {d:?}", dir.display()));
    let reads = empty_target(&project);
    let direct = |models: Option<&BTreeSet<String>>| {
        let scope = models.map_or_else(Scope::default, |m| Scope::default().part(m, false));
        let resolved = scope.resolve(&compiled).expect("a direct scope");
        crate::direct::prepare(&project, &compiled, &resolved, &reads, Settings::default())
            .unwrap_or_else(|e| panic!("{} plans: {e}", dir.display()))
    };
    let staged = |models: &BTreeSet<String>| {
        let request = crate::staged::Request {
            deployment_id: Some(DEPLOYMENT.to_owned()),
            ..Default::default()
        };
        let staged = crate::staged::prepare(
            &compiled,
            DATABASE,
            &request,
            models,
            Deployed::default(),
            0,
            "abcdef",
        )
        .unwrap_or_else(|e| panic!("{} stages: {e}", dir.display()));
        let build = crate::staged::prepare_build(
            &project,
            &compiled,
            &staged,
            &staged.deployed,
            &reads,
            Settings::default(),
        )
        .unwrap_or_else(|e| panic!("{} plans its deployment's build: {e}", dir.display()));
        (staged, build)
    };
    let text = |document: &Document<'_>| serde_json::to_string_pretty(document).expect("json");
    match crate::staged::route(&project, &compiled, &[], false).expect("routes") {
        Route::Direct => text(&Document::Direct(crate::direct::json::json(&direct(None)))),
        Route::Virtual(models) => {
            let (staged, build) = staged(&models);
            text(&Document::Virtual(
                crate::staged::json::json(&staged)
                    .with_plan_hash(build.plan_hash())
                    .with_replay_cost(&build),
            ))
        }
        Route::Mixed {
            direct_models,
            virtual_models,
            ..
        } => {
            let (staged, build) = staged(&virtual_models);
            let direct = direct(Some(&direct_models));
            let hashes = format!("{}\n{}", build.plan_hash(), direct.plan_hash());
            text(&Document::Mixed(Box::new(MixedJson {
                direct: crate::direct::json::json(&direct),
                execution_order: ["virtual".into(), "direct".into()],
                mode: "mixed".into(),
                plan_hash: stb_warehouse::statements::sha256_hex(&hashes),
                // Nothing measured offline: both phases' costs are empty.
                replay_cost: serde_json::to_value(stb_plan::cost::summarise(
                    &[],
                    None,
                    build.replay_budget,
                ))
                .expect("json"),
                staged: Some(crate::staged::json::json(&staged).with_replay_cost(&build)),
            })))
        }
    }
}

/// Every example, by name, with its plan's document.
pub(super) fn examples() -> Vec<(String, String)> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(repository().join("examples"))
        .expect("the examples")
        .flatten()
        .map(|entry| entry.path())
        .filter(|path| path.join("streambuild_project.toml").is_file())
        .collect();
    dirs.sort();
    let mut examples: Vec<(String, String)> = dirs
        .iter()
        .map(|dir| {
            let name = dir.file_name().unwrap_or_default().to_string_lossy();
            (name.into_owned(), example_plan(dir))
        })
        .collect();
    // No example mixes the kinds: the deployments example with one direct pipeline beside
    // its virtual one does.
    let mixed = tempfile::tempdir().expect("a directory");
    copy_dir(&repository().join("examples/deployments"), mixed.path());
    let direct = mixed.path().join("pipelines/pl__direct");
    std::fs::create_dir_all(&direct).expect("a pipeline");
    std::fs::write(direct.join("pipeline.toml"), "mode = \"direct\"\n").expect("writes");
    let events = std::fs::read_to_string(
        repository().join("examples/deployments/pipelines/pl__staged/order_events.sql"),
    )
    .expect("the model");
    std::fs::write(direct.join("direct_order_events.sql"), events).expect("writes");
    examples.push(("mixed".to_owned(), example_plan(mixed.path())));
    examples
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("a directory");
    for entry in std::fs::read_dir(from).expect("a directory").flatten() {
        let target = to.join(entry.file_name());
        if entry.path().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).expect("copies");
        }
    }
}

/// The UI's copy: each document as a TypeScript value the compiler checks against `Plan`.
fn ui_examples(examples: &[(String, String)]) -> String {
    let mut out = String::from(
        "// Written by stb-engine's plan examples test (STB_UPDATE_PLAN_EXAMPLES=1 rewrites it):\n\
         // each example project's plan as `stb plan --json` prints it. `npm run check` checks\n\
         // them against the UI's Plan type; the Rust test checks they are today's plans.\n\
         import type { Plan } from \"./plan\";\n\nexport const planExamples: Record<string, Plan> = {\n",
    );
    for (name, json) in examples {
        let indented = json.replace('\n', "\n  ");
        out.push_str(&format!("  {name:?}: {indented},\n"));
    }
    out.push_str("};\n");
    out
}

#[test]
fn every_example_plan_reads_back_as_it_was_written_and_the_ui_holds_it() {
    let examples = examples();
    let kinds: BTreeSet<&str> = examples
        .iter()
        .map(|(_, json)| {
            let document: Document<'_> = serde_json::from_str(json).expect("reads back");
            match document {
                Document::Direct(_) => "direct",
                Document::Virtual(_) => "virtual",
                Document::Mixed(_) => "mixed",
            }
        })
        .collect();
    assert!(examples.len() >= 5, "{} examples", examples.len());
    assert_eq!(kinds, BTreeSet::from(["direct", "mixed", "virtual"]));
    for (name, json) in &examples {
        let document: Document<'_> = serde_json::from_str(json).expect("reads back");
        let again = serde_json::to_string_pretty(&document).expect("json");
        assert_eq!(&again, json, "{name} reads back as it was written");
        // Each kind is told by its members: nothing is read as another kind.
        let value: serde_json::Value = serde_json::from_str(json).expect("json");
        let mode = value["mode"].as_str().unwrap_or_default().to_owned();
        let expected = match document {
            Document::Direct(_) => "direct",
            Document::Virtual(_) => "virtual environments",
            Document::Mixed(_) => "mixed",
        };
        assert_eq!(mode, expected, "{name}");
    }
    let path = repository().join("web/src/lib/plan-examples.ts");
    let written = ui_examples(&examples);
    if std::env::var_os("STB_UPDATE_PLAN_EXAMPLES").is_some() {
        std::fs::write(&path, &written).expect("writes the UI's examples");
    }
    let held = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        held == written,
        "web/src/lib/plan-examples.ts is not today's plans: run `STB_UPDATE_PLAN_EXAMPLES=1 cargo test -p stb-engine plan::examples_tests`, then `npm run check` in web/"
    );
}

#[test]
fn a_plan_of_another_shape_is_refused() {
    let wrong = serde_json::json!({"mode": "direct", "adapter": "clickhouse"});
    assert!(serde_json::from_value::<Document<'_>>(wrong).is_err());
}
