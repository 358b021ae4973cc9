//! `stb compile` without recompiling what did not change.
//!
//! A compile that publishes leaves a record next to its artifacts ([`state`]): a hash of
//! the project around the models, each model's key (its pipeline's settings and its file),
//! each model's interface (relation, kinds, references), and every artifact's size and
//! modification time. The next compile takes the fast path when only model files changed,
//! each keeping its interface, none read by a test or an audit, and no artifact was touched
//! since: it analyses and renders just those models, rewrites just the files whose bytes
//! differ (temporary file, then rename), splices their entries into `manifest.json`, and
//! leaves every other file alone, modification time included. Anything else (a setting, a
//! source, a test, a new or renamed model, a changed relation or reference, a stray edit
//! under `target/`, a different `stb` binary, warnings) takes the whole compile, which
//! writes the record afresh. Both paths give byte-identical artifacts.

mod fingerprint;
mod splice;
mod state;

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::Path;

use stb_diagnostics::{Diagnostic, Diagnostics};
use stb_project::Project;

use crate::{Output, codes, model};
use state::{ModelRecord, Stamp, State};

/// The record's format: bumped whenever what it holds or means changes.
pub(crate) const FORMAT: u32 = 1;

/// What identifies the compiler that wrote a record: its version and its executable's
/// size and modification time, so a rebuilt `stb` (same version, new code) starts over.
pub(crate) fn tool_identity() -> String {
    let executable = std::env::current_exe()
        .ok()
        .and_then(|path| Stamp::of(&path));
    format!("{} {executable:?}", env!("CARGO_PKG_VERSION"))
}

/// What a whole compile learns about its models that the record keeps.
pub(crate) struct Facts {
    /// In project order: (name, interface, bare relation).
    models: Vec<(String, String, String)>,
    /// Models a test embeds or an audit reads.
    quality: BTreeSet<String>,
}

impl Facts {
    pub(crate) fn of(
        analysed: &[model::AnalysedModel<'_>],
        tests: &[crate::sql_tests::CompiledTest],
        audits: &[crate::audits::CompiledAudit],
    ) -> Self {
        let mut quality = BTreeSet::new();
        for test in tests {
            quality.extend(test.targets.iter().chain(&test.reads).cloned());
        }
        for audit in audits {
            quality.extend(audit.models.iter().chain(&audit.model).cloned());
        }
        Self {
            models: analysed
                .iter()
                .map(|item| {
                    (
                        item.model.name.clone(),
                        fingerprint::interface(item),
                        item.relation.clone(),
                    )
                })
                .collect(),
            quality,
        }
    }
}

/// What a compile that published did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Published {
    pub pipelines: usize,
    pub models: usize,
    /// Every artifact, sorted.
    pub artifacts: Vec<String>,
    pub warnings: Vec<Diagnostic>,
    /// `None`: every model was compiled; otherwise why not (or that it was not needed).
    pub whole: Option<&'static str>,
    /// Models analysed and rendered again.
    pub recompiled: usize,
    /// Artifact files written (created or replaced); the rest were left as they were.
    pub written: usize,
}

/// Why a compile that publishes stopped.
#[derive(Debug)]
pub enum Failure {
    /// The project does not compile; nothing was written.
    Compile(Diagnostics),
    /// Writing failed.
    Publish(Diagnostic),
}

/// Compiles `project` and writes its artifacts under `target_dir`, recompiling only what
/// changed since the last compile there unless `whole` is set.
///
/// # Errors
/// The project's problems (nothing written), or a failure to write.
pub fn compile_and_publish(
    project: &Project,
    target_dir: &Path,
    whole: bool,
) -> Result<Published, Failure> {
    let keys = fingerprint::keys(project);
    let reason = if whole {
        "asked for"
    } else {
        match State::load(target_dir) {
            None => "no record of an earlier compile",
            Some(state) => match fast_path(project, target_dir, &keys, state)? {
                Ok(published) => return Ok(published),
                Err(reason) => reason,
            },
        }
    };
    whole_compile(project, target_dir, &keys, reason)
}

/// Everything compiled and published, and the record written afresh.
fn whole_compile(
    project: &Project,
    target_dir: &Path,
    keys: &fingerprint::Keys,
    reason: &'static str,
) -> Result<Published, Failure> {
    let (compiled, facts) =
        crate::compile_recording(project, Output::Artifacts, true).map_err(Failure::Compile)?;
    // The files are about to change: no later compile may trust the old record.
    State::forget(target_dir);
    crate::publish::publish(&compiled, target_dir).map_err(Failure::Publish)?;
    if compiled.warnings.is_empty()
        && let Some(facts) = &facts
        && let Some(state) = record(&compiled, facts, keys, target_dir)
    {
        // Only speed rides on the record: a compile that cannot save it still succeeded.
        let _ = state.save(target_dir);
    }
    Ok(Published {
        pipelines: compiled.pipelines,
        models: compiled.models,
        artifacts: compiled.files.keys().cloned().collect(),
        warnings: compiled.warnings,
        whole: Some(reason),
        recompiled: compiled.models,
        written: compiled.files.len(),
    })
}

/// The record of a whole compile just published; `None` when its manifest or models do
/// not line up as expected (the next compile is then whole again).
fn record(
    compiled: &crate::Compiled,
    facts: &Facts,
    keys: &fingerprint::Keys,
    target_dir: &Path,
) -> Option<State> {
    let manifest = compiled.files.get("manifest.json")?;
    let ranges: BTreeMap<String, (usize, usize)> =
        splice::model_ranges(manifest)?.into_iter().collect();
    if facts.models.len() != keys.models.len() || ranges.len() != keys.models.len() {
        return None;
    }
    let mut models = Vec::with_capacity(keys.models.len());
    for ((pipeline, name, key), (fact_name, interface, relation)) in
        keys.models.iter().zip(&facts.models)
    {
        if name != fact_name {
            return None;
        }
        models.push(ModelRecord {
            name: name.clone(),
            pipeline: pipeline.clone(),
            key: key.clone(),
            interface: interface.clone(),
            relation: relation.clone(),
            quality: facts.quality.contains(name),
            manifest: *ranges.get(name)?,
        });
    }
    let paths: Vec<&String> = compiled.files.keys().collect();
    let stamps = stb_project::parallel::map_ordered(&paths, |path| {
        Stamp::of(&target_dir.join(path)).map(|stamp| ((*path).clone(), stamp))
    });
    Some(State {
        context: keys.context.clone(),
        pipelines: compiled.pipelines,
        models,
        files: stamps.into_iter().collect::<Option<_>>()?,
    })
}

/// A model file that changed, compiled again: its artifacts and its manifest entry.
struct Recompiled {
    index: usize,
    files: Vec<(String, String)>,
    fragment: String,
}

/// The fast path. `Ok(Err(reason))`: it does not apply (nothing was written); the caller
/// compiles everything.
fn fast_path(
    project: &Project,
    target_dir: &Path,
    keys: &fingerprint::Keys,
    mut state: State,
) -> Result<Result<Published, &'static str>, Failure> {
    if state.context != keys.context {
        return Ok(Err(
            "the project's settings, sources, tests or audits changed",
        ));
    }
    let models: Vec<_> = project
        .pipelines
        .iter()
        .flat_map(|p| p.models.iter().map(move |m| (p, m)))
        .collect();
    let same_models = state.models.len() == models.len()
        && state
            .models
            .iter()
            .zip(&models)
            .all(|(record, (pipeline, model))| {
                record.name == model.name && record.pipeline == pipeline.name
            });
    if !same_models {
        return Ok(Err("models were added, removed, renamed or moved"));
    }
    if !state.files_untouched(target_dir) {
        return Ok(Err("artifacts were changed since the last compile"));
    }
    let changed: Vec<usize> = (0..models.len())
        .filter(|&i| state.models[i].key != keys.models[i].2)
        .collect();
    if changed.iter().any(|&i| state.models[i].quality) {
        return Ok(Err("a model a test or audit reads changed"));
    }
    let recompiled = match recompile(project, &models, &state, &changed) {
        Ok(recompiled) => recompiled,
        Err(reason) => return Ok(Err(reason)),
    };
    let written = write(target_dir, &mut state, &recompiled).map_err(|problem| {
        // Some files may be new: the next compile must not trust the record.
        State::forget(target_dir);
        Failure::Publish(problem)
    })?;
    for &index in &changed {
        state.models[index].key.clone_from(&keys.models[index].2);
    }
    let _ = state.save(target_dir);
    Ok(Ok(Published {
        pipelines: state.pipelines,
        models: models.len(),
        artifacts: state.files.keys().cloned().collect(),
        warnings: Vec::new(),
        whole: None,
        recompiled: changed.len(),
        written,
    }))
}

/// Analyses and renders the changed models against the recorded relations; a reason
/// instead when one fails (the whole compile reports it) or changes its interface.
fn recompile(
    project: &Project,
    models: &[(
        &stb_project::pipelines::Pipeline,
        &stb_project::pipelines::Model,
    )],
    state: &State,
    changed: &[usize],
) -> Result<Vec<Recompiled>, &'static str> {
    let database = crate::database(project);
    let mut relations: BTreeMap<String, String> = BTreeMap::new();
    for source in &project.sources {
        if let Some(relation) = crate::relations::source_relation(database, source) {
            relations.insert(source.name.clone(), relation);
        }
    }
    for record in &state.models {
        relations.insert(
            record.name.clone(),
            stb_ddl::QualifiedName::new(database, &record.relation).to_string(),
        );
    }
    let sources: BTreeSet<String> = project.sources.iter().map(|s| s.name.clone()).collect();
    let failed = BTreeSet::new();
    let names = model::Names {
        relations: &relations,
        sources: &sources,
        failed: &failed,
    };
    let mut recompiled = Vec::with_capacity(changed.len());
    for &index in changed {
        let (pipeline, model) = models[index];
        let item = model::analyse(model, pipeline, &project.defaults)
            .map_err(|_| "a changed model has problems")?;
        if fingerprint::interface(&item) != state.models[index].interface {
            return Err("a changed model's relation, kind or references changed");
        }
        let header = &item.header;
        if !header.audits.is_empty() || header.columns.iter().any(|c| !c.audits.is_empty()) {
            return Err("a changed model declares audits");
        }
        let compiled = model::realise(
            &item,
            database,
            &names,
            &project.defaults,
            crate::lineage_mode(project, pipeline),
            crate::pulled_by(project, pipeline),
        )
        .map_err(|_| "a changed model has problems")?;
        let files = crate::model_files(&item, &compiled);
        if files
            .iter()
            .any(|(path, _)| !state.files.contains_key(path))
        {
            return Err("a changed model's artifacts changed kind");
        }
        recompiled.push(Recompiled {
            index,
            fragment: crate::manifest::model_fragment(&item, &compiled),
            files,
        });
    }
    Ok(recompiled)
}

/// Writes the recompiled models' files whose bytes differ and the manifest with their
/// entries replaced; updates the record's stamps and manifest ranges. Returns the number
/// of files written.
fn write(
    target_dir: &Path,
    state: &mut State,
    recompiled: &[Recompiled],
) -> Result<usize, Diagnostic> {
    let mut written = 0;
    for (path, content) in recompiled.iter().flat_map(|r| &r.files) {
        let live = target_dir.join(path);
        if fs::read(&live).is_ok_and(|bytes| bytes == content.as_bytes()) {
            continue;
        }
        write_replacing(&live, content.as_bytes()).map_err(|e| failure(&live, &e))?;
        restamp(state, target_dir, path)?;
        written += 1;
    }
    let manifest_path = target_dir.join("manifest.json");
    let manifest = fs::read_to_string(&manifest_path).map_err(|e| failure(&manifest_path, &e))?;
    let mut replacements: Vec<((usize, usize), String, usize)> = recompiled
        .iter()
        .map(|r| (state.models[r.index].manifest, r.fragment.clone(), r.index))
        .collect();
    replacements.sort_by_key(|(range, _, _)| range.0);
    let in_place = replacements.iter().all(|((from, to), _, _)| {
        from < to && manifest.get(*from..*to).is_some_and(|v| v.starts_with('{'))
    });
    if !in_place {
        return Err(failure(
            &manifest_path,
            &std::io::Error::other("the recorded model entries do not match the file"),
        ));
    }
    let pieces: Vec<((usize, usize), String)> = replacements
        .iter()
        .map(|(range, text, _)| (*range, text.clone()))
        .collect();
    let updated = splice::replace(&manifest, &pieces);
    if updated != manifest {
        write_replacing(&manifest_path, updated.as_bytes())
            .map_err(|e| failure(&manifest_path, &e))?;
        restamp(state, target_dir, "manifest.json")?;
        written += 1;
        shift_ranges(state, &replacements);
    }
    Ok(written)
}

/// Moves every recorded manifest range past the replaced entries by how much each grew
/// or shrank.
fn shift_ranges(state: &mut State, replacements: &[((usize, usize), String, usize)]) {
    let mut order: Vec<usize> = (0..state.models.len()).collect();
    order.sort_by_key(|&i| state.models[i].manifest.0);
    let mut pending = replacements.iter().peekable();
    // Bytes added and removed before the current entry (kept apart: offsets are unsigned).
    let (mut grown, mut shrunk) = (0_usize, 0_usize);
    for index in order {
        let (from, to) = state.models[index].manifest;
        let moved = from + grown - shrunk;
        match pending.peek() {
            Some(((replaced_from, _), text, _)) if *replaced_from == from => {
                state.models[index].manifest = (moved, moved + text.len());
                grown += text.len();
                shrunk += to - from;
                pending.next();
            }
            _ => state.models[index].manifest = (moved, to + grown - shrunk),
        }
    }
}

fn restamp(state: &mut State, target_dir: &Path, path: &str) -> Result<(), Diagnostic> {
    let live = target_dir.join(path);
    let stamp = Stamp::of(&live)
        .ok_or_else(|| failure(&live, &std::io::Error::other("written but cannot be read")))?;
    state.files.insert(path.to_owned(), stamp);
    Ok(())
}

fn failure(path: &Path, error: &std::io::Error) -> Diagnostic {
    Diagnostic::new(
        codes::PUBLISH,
        format!("could not write {}: {error}", path.display()),
        "check that the target directory is writable, then compile again: the next compile rewrites every artifact",
    )
}

/// Replaces the file at `path` with `bytes`: a temporary file beside it, then a rename,
/// so a reader sees the old bytes or the new ones.
pub(crate) fn write_replacing(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("file");
    let temporary = path.with_file_name(format!(".{name}.tmp-{}", std::process::id()));
    let result = fs::write(&temporary, bytes).and_then(|()| fs::rename(&temporary, path));
    if result.is_err() {
        let _ = fs::remove_file(&temporary);
    }
    result
}
