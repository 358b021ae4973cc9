//! Planning a destruction from values only: the project, the compiled models and what
//! [`super::read`] found.

use std::collections::{BTreeMap, BTreeSet};

use stb_compile::Compiled;
use stb_ddl::QualifiedName;
use stb_plan::deployment::split_physical;
use stb_project::Project;

use super::{DESTRUCTION_CODE, DestructionPlan, Doomed, Live, Operation};
use crate::EngineError;

/// What to destroy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request<'a> {
    pub operation: Operation,
    /// The selected pipelines (`destroy`); a reset takes every one.
    pub pipelines: &'a [String],
    /// Also what older manifests recorded for the selected pipelines.
    pub include_orphans: bool,
    /// `[targets.X] production = true`, or a target named prod/production.
    pub production: bool,
    /// `[targets.X.destruction] max_table_size_to_drop`, in bytes.
    pub max_table_size_to_drop: Option<u64>,
}

/// A destruction the target's state refuses (readers left, a size limit, production).
fn refuse(message: String, hint: &str) -> EngineError {
    EngineError::new(DESTRUCTION_CODE, message, hint).of_kind(crate::ErrorKind::Conflict)
}

/// Plans the destruction `request` asks for.
///
/// # Errors
/// An unknown pipeline, a pipeline left out that reads a selected one, or a view that
/// reads an owned relation and is not owned itself.
pub fn plan(
    project: &Project,
    compiled: &Compiled,
    request: &Request<'_>,
    live: &Live,
) -> Result<DestructionPlan, EngineError> {
    let newest = live.manifests.first();
    let mut known: BTreeSet<&str> = project.pipelines.iter().map(|p| p.name.as_str()).collect();
    known.extend(
        live.manifest_pipelines
            .values()
            .flatten()
            .map(String::as_str),
    );
    let selected: BTreeSet<&str> = match request.operation {
        Operation::ResetTarget => known.clone(),
        Operation::DestroyPipelines => {
            if request.pipelines.is_empty() {
                return Err(refuse(
                    "stb destroy needs the pipelines to destroy".to_owned(),
                    "name them: --select pipeline:<name> (repeat for more)",
                ));
            }
            for name in request.pipelines {
                if !known.contains(name.as_str()) {
                    return Err(refuse(
                        format!("no pipeline '{name}' in the project or in the target's manifests"),
                        "`stb discover` lists the project's pipelines",
                    ));
                }
            }
            request.pipelines.iter().map(String::as_str).collect()
        }
    };
    refuse_readers_left_out(compiled, &selected)?;
    let owned = owned(project, compiled, request, live, &selected, newest);
    refuse_external_readers(live, &owned)?;
    let mut relations: Vec<Doomed> = live
        .relations
        .iter()
        .filter(|r| !stb_warehouse::metadata::is_lifecycle_table(&r.name))
        .filter_map(|r| {
            let (pipeline, role) = owned.get(&r.name)?;
            let is_view = matches!(r.engine.as_str(), "View" | "MaterializedView" | "LiveView");
            let target = QualifiedName::new(&live.database, &r.name);
            let statement = if is_view {
                format!("DROP VIEW IF EXISTS {target} SYNC")
            } else {
                let mut text = format!("DROP TABLE IF EXISTS {target} SYNC");
                if let Some(limit) = request.max_table_size_to_drop {
                    text.push_str(&format!(" SETTINGS max_table_size_to_drop = {limit}"));
                }
                text
            };
            // A virtual model's table is a stable view over its active copy.
            let role = if role == "table" && r.engine == "View" {
                "stable_view".to_owned()
            } else {
                role.clone()
            };
            Some(Doomed {
                name: r.name.clone(),
                engine: r.engine.clone(),
                pipeline: pipeline.clone(),
                role,
                rows: (!is_view).then_some(r.rows).flatten(),
                bytes: (!is_view).then_some(r.bytes).flatten(),
                statement,
            })
        })
        .collect();
    // Readers before what they read: views, then materialized views, then tables, then
    // the Kafka tables landings read; by name within each.
    let rank = |engine: &str| match engine {
        "View" | "LiveView" => 0,
        "MaterializedView" => 1,
        "Kafka" => 3,
        _ => 2,
    };
    relations.sort_by(|a, b| {
        rank(&a.engine)
            .cmp(&rank(&b.engine))
            .then(a.name.cmp(&b.name))
    });
    let pipelines: BTreeSet<String> = relations
        .iter()
        .filter_map(|d| d.pipeline.clone())
        .chain(match request.operation {
            Operation::DestroyPipelines => selected.iter().map(|p| (*p).to_owned()).collect(),
            Operation::ResetTarget => Vec::new(),
        })
        .collect();
    let pipelines: Vec<String> = pipelines.into_iter().collect();
    let fingerprint = stb_plan::sql_change::sql_hash(&format!(
        "{}\n{}\n{}\n{}",
        request.operation.command(),
        live.database,
        newest.map_or("", String::as_str),
        relations
            .iter()
            .map(|d| format!("{}\t{}", d.name, d.engine))
            .collect::<Vec<_>>()
            .join("\n")
    ));
    Ok(DestructionPlan {
        operation: request.operation,
        database: live.database.clone(),
        target: project.target.clone(),
        challenges: challenges(&pipelines, request, &live.database),
        total_rows: relations.iter().filter_map(|d| d.rows).sum(),
        total_bytes: relations.iter().filter_map(|d| d.bytes).sum(),
        max_table_size_to_drop: request.max_table_size_to_drop,
        pipelines,
        relations,
        fingerprint,
    })
}

/// What must be typed: the pipelines (all when three or fewer, else the first, middle and
/// last of the sorted list), `PRODUCTION` for a reset of a production target, and the
/// database for a reset that names no pipeline.
fn challenges(pipelines: &[String], request: &Request<'_>, database: &str) -> Vec<String> {
    let mut typed: Vec<String> = if pipelines.len() <= 3 {
        pipelines.to_vec()
    } else {
        vec![
            pipelines[0].clone(),
            pipelines[pipelines.len() / 2].clone(),
            pipelines[pipelines.len() - 1].clone(),
        ]
    };
    if request.operation == Operation::ResetTarget {
        if typed.is_empty() {
            typed.push(database.to_owned());
        }
        if request.production {
            typed.push("PRODUCTION".to_owned());
        }
    }
    typed
}

/// The pipelines left out of `selected` that read a model of a selected one, each with
/// what it reads: destroying the selection would leave them reading nothing.
#[must_use]
pub fn readers_left_out<'a>(
    compiled: &'a Compiled,
    selected: &BTreeSet<&str>,
) -> BTreeMap<&'a str, BTreeSet<&'a str>> {
    let pipeline_of: BTreeMap<&str, &str> = compiled
        .plan_models
        .iter()
        .map(|m| (m.name.as_str(), m.pipeline.as_str()))
        .collect();
    let mut blocked: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for model in compiled.plan_models.iter() {
        if selected.contains(model.pipeline.as_str()) {
            continue;
        }
        for read in &model.reads {
            if pipeline_of
                .get(read.as_str())
                .is_some_and(|p| selected.contains(p))
            {
                blocked
                    .entry(model.pipeline.as_str())
                    .or_default()
                    .insert(read.as_str());
            }
        }
    }
    blocked
}

/// Such readers must be selected too.
fn refuse_readers_left_out(
    compiled: &Compiled,
    selected: &BTreeSet<&str>,
) -> Result<(), EngineError> {
    let blocked = readers_left_out(compiled, selected);
    if blocked.is_empty() {
        return Ok(());
    }
    let listed: Vec<String> = blocked
        .iter()
        .map(|(pipeline, reads)| {
            format!(
                "{pipeline} (reads {})",
                reads.iter().copied().collect::<Vec<_>>().join(", ")
            )
        })
        .collect();
    Err(refuse(
        format!(
            "pipelines left out read what would be destroyed: {}",
            listed.join("; ")
        ),
        "select them too (--select pipeline:<name>), or change them first",
    ))
}

/// Every relation the selection owns: name -> (pipeline, role).
fn owned(
    project: &Project,
    compiled: &Compiled,
    request: &Request<'_>,
    live: &Live,
    selected: &BTreeSet<&str>,
    newest: Option<&String>,
) -> BTreeMap<String, (Option<String>, String)> {
    let mut owned: BTreeMap<String, (Option<String>, String)> = BTreeMap::new();
    let mut models: BTreeMap<String, String> = BTreeMap::new();
    for model in compiled.plan_models.iter() {
        if selected.contains(model.pipeline.as_str()) {
            models.insert(model.name.clone(), model.pipeline.clone());
            for (kind, relation) in &model.relations {
                owned.insert(
                    relation.clone(),
                    (Some(model.pipeline.clone()), kind.as_str().to_owned()),
                );
            }
        }
    }
    let in_project = |pipeline: &str| project.pipelines.iter().any(|p| p.name == pipeline);
    for resource in &live.resources {
        let is_newest = newest == Some(&resource.manifest_id);
        // A reset wipes what any manifest recorded; a destroy what the newest one did,
        // unless asked for orphans or naming a pipeline only older manifests know.
        let pipeline_owned = selected.contains(resource.pipeline.as_str())
            && (is_newest
                || request.include_orphans
                || request.operation == Operation::ResetTarget
                || !in_project(&resource.pipeline));
        let landing =
            request.operation == Operation::ResetTarget && resource.logical_type == "source";
        if pipeline_owned {
            if resource.logical_type == "model" {
                models
                    .entry(resource.logical_name.clone())
                    .or_insert_with(|| resource.pipeline.clone());
            }
            owned
                .entry(resource.relation.clone())
                .or_insert_with(|| (Some(resource.pipeline.clone()), resource.role.clone()));
        } else if landing {
            owned
                .entry(resource.relation.clone())
                .or_insert_with(|| (None, resource.role.clone()));
        }
    }
    if request.operation == Operation::ResetTarget {
        for source in &compiled.plan_sources {
            if let Some(landing) = &source.landing {
                for (role, relation) in [
                    ("kafka_table", &landing.kafka_table),
                    ("landing_table", &landing.raw_table),
                    ("landing_view", &landing.view),
                ] {
                    owned
                        .entry(relation.clone())
                        .or_insert_with(|| (None, role.to_owned()));
                }
            }
        }
    }
    // Virtual deployments: every copy of an owned model, and its stable views.
    for object in &live.objects {
        if let Some(pipeline) = models.get(&object.model) {
            owned
                .entry(object.physical_name.clone())
                .or_insert_with(|| (Some(pipeline.clone()), "deployment_copy".to_owned()));
            owned
                .entry(object.logical_name.clone())
                .or_insert_with(|| (Some(pipeline.clone()), "stable_view".to_owned()));
        }
    }
    // Copies whose metadata is gone still carry an owned relation's name.
    for relation in &live.relations {
        if let Some((logical, _)) = split_physical(&relation.name)
            && let Some((pipeline, _)) = owned.get(logical).cloned()
        {
            owned
                .entry(relation.name.clone())
                .or_insert_with(|| (pipeline, "deployment_copy".to_owned()));
        }
    }
    owned
}

/// A view or materialized view that is not owned but reads an owned relation would break:
/// it blocks the plan.
fn refuse_external_readers(
    live: &Live,
    owned: &BTreeMap<String, (Option<String>, String)>,
) -> Result<(), EngineError> {
    let present: BTreeSet<&str> = live.relations.iter().map(|r| r.name.as_str()).collect();
    let mut readers = Vec::new();
    for (database, name, create) in &live.readers {
        if database == &live.database && owned.contains_key(name) {
            continue;
        }
        let reads: Vec<&str> = owned
            .keys()
            .filter(|relation| present.contains(relation.as_str()))
            .filter(|relation| {
                mentions(create, &live.database, relation, database == &live.database)
            })
            .map(String::as_str)
            .collect();
        if !reads.is_empty() {
            readers.push(format!("{database}.{name} (reads {})", reads.join(", ")));
        }
    }
    if readers.is_empty() {
        return Ok(());
    }
    Err(refuse(
        format!(
            "views outside the destruction read what it would drop: {}",
            readers.join("; ")
        ),
        "drop or change those views first",
    ))
}

/// Whether `create` names `database.relation` (bare or back-quoted), or, from the same
/// database, `relation` alone as a whole word.
fn mentions(create: &str, database: &str, relation: &str, same_database: bool) -> bool {
    let forms = [
        format!("{database}.{relation}"),
        format!("`{database}`.`{relation}`"),
        format!("{database}.`{relation}`"),
        format!("`{database}`.{relation}"),
    ];
    if forms.iter().any(|f| whole_word(create, f)) {
        return true;
    }
    same_database && whole_word(create, relation)
}

fn whole_word(text: &str, word: &str) -> bool {
    let is_name = |c: char| c.is_ascii_alphanumeric() || c == '_';
    text.match_indices(word).any(|(at, _)| {
        let before = text[..at].chars().next_back();
        let after = text[at + word.len()..].chars().next();
        before.is_none_or(|c| !is_name(c) && c != '.') && after.is_none_or(|c| !is_name(c))
    })
}

#[cfg(test)]
mod tests;
