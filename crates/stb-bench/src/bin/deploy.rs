//! Stages and publishes every virtual model of a project the way a virtual build records
//! it, without replaying anything: for the plan benchmark, which needs thousands of
//! deployed models. For each model, in topological order, it creates the physical copies
//! of its table (empty), materialized view or view and the stable view selecting from the
//! table or view, and then writes the object-state rows and the deployment's header.
//!
//! With `--direct-baseline` instead of a deployment id it records, for a direct project
//! whose relations exist, the fingerprints a direct build of every model leaves, so that
//! `stb plan --changed` sees a project built and unchanged.
//!
//! Usage: stb-bench-deploy <project-dir> <deployment-id | --direct-baseline>
//! (connection from STREAMBUILD_CLICKHOUSE_HOST/PORT, as for stb)

use std::path::PathBuf;
use std::process::ExitCode;

use stb_plan::deployment::DeploymentId;
use stb_plan::direct::RelationKind;
use stb_plan::virtual_plan::object_fingerprint;
use stb_warehouse::deployments::{Header, ObjectState, complete, record_objects};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [dir, id] = args.as_slice() else {
        eprintln!("usage: stb-bench-deploy <project-dir> <deployment-id | --direct-baseline>");
        return ExitCode::from(2);
    };
    let done = if id == "--direct-baseline" {
        record_direct_baseline(&PathBuf::from(dir))
    } else {
        deploy(&PathBuf::from(dir), id)
    };
    match done {
        Ok(count) => {
            println!("{count}");
            ExitCode::SUCCESS
        }
        Err(message) => {
            eprintln!("stb-bench-deploy: {message}");
            ExitCode::FAILURE
        }
    }
}

/// The project at `dir`, compiled, with a client for its warehouse and its database.
fn open(
    dir: &std::path::Path,
) -> Result<(stb_compile::Compiled, stb_warehouse::Client, String), String> {
    let project = stb_project::discover(&stb_project::DiscoverOptions {
        project_dir: Some(dir.to_path_buf()),
        cwd: dir.to_path_buf(),
        ..Default::default()
    })
    .map_err(|d| format!("{:?}", d.into_sorted().first()))?;
    let compiled =
        stb_compile::compile(&project).map_err(|d| format!("{:?}", d.into_sorted().first()))?;
    let database = compiled
        .plan_models
        .first()
        .and_then(|m| m.reference.split('.').next())
        .ok_or("the project has no models")?
        .to_owned();
    let config = stb_warehouse::ConnectionConfig {
        host: std::env::var(stb_warehouse::ENV_HOST).unwrap_or_else(|_| "127.0.0.1".into()),
        port: std::env::var(stb_warehouse::ENV_PORT)
            .ok()
            .and_then(|p| p.parse().ok())
            .unwrap_or(8123),
        ..Default::default()
    };
    let client = stb_warehouse::Client::new(config).map_err(|e| e.message)?;
    stb_warehouse::metadata::migrate(&client, &database).map_err(|e| e.message)?;
    Ok((compiled, client, database))
}

/// The fingerprints a direct build of every model records (500 models to an insert).
fn record_direct_baseline(dir: &std::path::Path) -> Result<usize, String> {
    let (compiled, client, database) = open(dir)?;
    let identities: Vec<String> = compiled.plan_models.iter().map(|m| m.identity()).collect();
    let definitions: Vec<stb_warehouse::records::ModelDefinition<'_>> = compiled
        .plan_models
        .iter()
        .zip(identities)
        .map(
            |(model, identity)| stb_warehouse::records::ModelDefinition {
                name: &model.name,
                query: &model.query,
                identity,
            },
        )
        .collect();
    for chunk in definitions.chunks(500) {
        stb_warehouse::records::write_fingerprints(&client, &database, "bench", chunk)
            .map_err(|e| e.message)?;
    }
    Ok(definitions.len())
}

fn deploy(dir: &std::path::Path, id: &str) -> Result<usize, String> {
    let id = DeploymentId::parse(id).map_err(|e| e.to_string())?;
    let (compiled, client, database) = open(dir)?;
    let run = |sql: String| {
        client
            .execute(&sql, None)
            .map(|_| ())
            .map_err(|e| e.message)
    };
    let resolve = |model: &str| {
        compiled
            .plan_models
            .iter()
            .find(|m| m.name == model)
            .and_then(|m| m.relations.first())
            .map(|(_, r)| format!("{database}.{}", id.physical(r)))
            .unwrap_or_default()
    };
    let mut rows = Vec::new();
    for model in compiled.plan_models.iter() {
        let deployable = &model.deployable;
        if let Some(table) = &deployable.table {
            run(stb_ddl::Table {
                name: stb_ddl::QualifiedName::new(&database, &id.physical(&table.name.name)),
                ..table.clone()
            }
            .render())?;
        }
        if let Some(view) = &deployable.materialized_view {
            run(stb_ddl::MaterializedView {
                name: stb_ddl::QualifiedName::new(&database, &id.physical(&view.name.name)),
                target: stb_ddl::QualifiedName::new(&database, &id.physical(&view.target.name)),
                query: deployable.query_with(&resolve),
                ..view.clone()
            }
            .render())?;
        }
        if let Some(view) = &deployable.view {
            run(stb_ddl::View {
                name: stb_ddl::QualifiedName::new(&database, &id.physical(&view.name.name)),
                query: deployable.query_with(&resolve),
            }
            .render())?;
        }
        for (kind, relation) in &model.relations {
            if *kind != RelationKind::MaterializedView {
                run(format!(
                    "CREATE OR REPLACE VIEW {database}.{relation} AS SELECT * FROM {database}.{}",
                    id.physical(relation)
                ))?;
            }
            rows.push((
                model.name.clone(),
                *kind,
                relation.clone(),
                id.physical(relation),
                object_fingerprint(model, *kind),
            ));
        }
    }
    let states: Vec<ObjectState<'_>> = rows
        .iter()
        .map(
            |(model, kind, logical, physical, fingerprint)| ObjectState {
                deployment_id: id.as_str(),
                object_type: kind.as_str(),
                logical_name: logical,
                physical_name: physical,
                model,
                is_selected_root: false,
                fingerprint,
                canonical_query: None,
            },
        )
        .collect();
    for chunk in states.chunks(500) {
        record_objects(&client, &database, chunk).map_err(|e| e.message)?;
    }
    let created_at = id.created_at();
    complete(
        &client,
        &database,
        &Header {
            deployment_id: id.as_str(),
            workflow_fingerprint: "bench",
            replay_lineage_mode: "offsets",
            created_at: &created_at,
        },
    )
    .map_err(|e| e.message)?;
    Ok(compiled.plan_models.len())
}
