//! Graph rules over model references, and the deterministic topological order.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use stb_diagnostics::{Diagnostic, Location};
use stb_project::Project;
use stb_project::pipelines::ModelKind;
use stb_project::project_config::Mode;

use crate::codes;

/// Views terminal, no direct/virtual edges, the pipeline reference scope, no cycles.
/// `order` is the result of [`order`], computed once by the caller.
pub(crate) fn validate(
    project: &Project,
    order: &Result<Vec<String>, Vec<String>>,
) -> Vec<Diagnostic> {
    let mut problems = Vec::new();
    let owner: BTreeMap<&str, (&str, Mode, ModelKind)> = project
        .pipelines
        .iter()
        .flat_map(|p| {
            p.models
                .iter()
                .map(move |m| (m.name.as_str(), (p.name.as_str(), p.mode, m.kind)))
        })
        .collect();
    let allowed: BTreeSet<(&str, &str)> = project
        .defaults
        .allowed_cross_pipeline_references
        .iter()
        .map(|(u, d)| (u.as_str(), d.as_str()))
        .collect();
    let mut view_readers: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for pipeline in &project.pipelines {
        for model in &pipeline.models {
            for reference in &model.refs {
                let Some((up_pipeline, up_mode, up_kind)) =
                    owner.get(reference.name.as_str()).copied()
                else {
                    continue; // a source, or unknown (reported when references are resolved)
                };
                let here = Location::at(&model.file, reference.position);
                if up_kind == ModelKind::View {
                    view_readers
                        .entry(reference.name.as_str())
                        .or_default()
                        .push(model.name.as_str());
                }
                if up_mode != pipeline.mode {
                    let (virtual_pipeline, direct_pipeline) = if pipeline.mode == Mode::Virtual {
                        (pipeline.name.as_str(), up_pipeline)
                    } else {
                        (up_pipeline, pipeline.name.as_str())
                    };
                    problems.push(
                        Diagnostic::new(
                            codes::GRAPH,
                            format!("Pipeline '{virtual_pipeline}' is virtual but model '{}' references model '{}' in direct pipeline '{direct_pipeline}'. Relations between direct and virtual pipelines are not allowed.", model.name, reference.name),
                            "read the shared source instead, or give both pipelines the same mode",
                        )
                        .at(here.clone()),
                    );
                }
                if project.defaults.pipeline_reference_scope
                    && up_pipeline != pipeline.name
                    && !allowed.contains(&(up_pipeline, pipeline.name.as_str()))
                {
                    problems.push(
                        Diagnostic::new(
                            codes::GRAPH,
                            format!(
                                "Model '{}' in pipeline '{}' references model '{}' in pipeline '{up_pipeline}', but dependencies.model_reference_scope is 'pipeline' and no directional allowed_cross_pipeline_references entry permits this edge.",
                                model.name, pipeline.name, reference.name
                            ),
                            "add an allowed_cross_pipeline_references entry for this direction",
                        )
                        .at(here),
                    );
                }
            }
        }
    }
    for (view, mut readers) in view_readers {
        readers.sort_unstable();
        readers.dedup();
        let file = project
            .pipelines
            .iter()
            .flat_map(|p| &p.models)
            .find(|m| m.name == view)
            .map(|m| m.file.clone())
            .unwrap_or_default();
        problems.push(
            Diagnostic::new(
                codes::GRAPH,
                format!(
                    "View model '{view}' must be terminal; referenced by downstream model(s): {}",
                    readers.join(", ")
                ),
                "make it a table model (remove kind view) if other models read it",
            )
            .at(Location::file(file)),
        );
    }
    if let Err(cycle) = order {
        problems.push(Diagnostic::new(
            codes::GRAPH,
            format!("Dependency cycle detected involving: {}", cycle.join(", ")),
            "break the cycle: a model cannot read itself through other models",
        ));
    }
    problems
}

/// Node ids (`source:<n>`, `model:<n>`) in dependency order; ties broken by (type, name).
///
/// # Errors
/// The nodes left on a cycle.
pub(crate) fn order(project: &Project) -> Result<Vec<String>, Vec<String>> {
    let mut nodes: BTreeSet<String> = project
        .sources
        .iter()
        .map(|s| format!("source:{}", s.name))
        .collect();
    let sources: BTreeSet<&str> = project.sources.iter().map(|s| s.name.as_str()).collect();
    let models: BTreeSet<&str> = project
        .pipelines
        .iter()
        .flat_map(|p| p.models.iter().map(|m| m.name.as_str()))
        .collect();
    let mut incoming: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for model in project.pipelines.iter().flat_map(|p| &p.models) {
        let id = format!("model:{}", model.name);
        nodes.insert(id.clone());
        let deps = incoming.entry(id).or_default();
        for reference in &model.refs {
            if models.contains(reference.name.as_str()) {
                deps.insert(format!("model:{}", reference.name));
            } else if sources.contains(reference.name.as_str()) {
                deps.insert(format!("source:{}", reference.name));
            }
        }
    }
    // Kahn's algorithm, always taking the smallest ready id: "model:*" sorts before
    // "source:*", as in the reference. Linear in nodes + edges (plus the ordered set).
    let mut dependents: HashMap<&String, Vec<&String>> = HashMap::new();
    for (node, deps) in &incoming {
        for dep in deps {
            dependents.entry(dep).or_default().push(node);
        }
    }
    let mut remaining: HashMap<&String, usize> = nodes
        .iter()
        .map(|n| (n, incoming.get(n).map_or(0, BTreeSet::len)))
        .collect();
    let mut ready: BTreeSet<&String> = remaining
        .iter()
        .filter(|(_, count)| **count == 0)
        .map(|(n, _)| *n)
        .collect();
    let mut done: Vec<String> = Vec::with_capacity(nodes.len());
    let mut placed: HashSet<&String> = HashSet::new();
    while let Some(node) = ready.pop_first() {
        placed.insert(node);
        done.push(node.clone());
        for dependent in dependents.get(node).into_iter().flatten() {
            if let Some(count) = remaining.get_mut(*dependent) {
                *count -= 1;
                if *count == 0 {
                    ready.insert(dependent);
                }
            }
        }
    }
    if done.len() == nodes.len() {
        Ok(done)
    } else {
        Err(nodes
            .iter()
            .filter(|n| !placed.contains(n))
            .cloned()
            .collect())
    }
}
