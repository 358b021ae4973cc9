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

/// Removes the record in `target_dir`: whoever writes artifacts other than through
/// [`compile_and_publish`] calls this first, so no later compile trusts it.
pub(crate) fn forget(target_dir: &Path) {
    State::forget(target_dir);
}

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
    // One compile at a time per target directory: a whole compile's record and a fast
    // path reading the previous one must not interleave. Released when the file closes.
    let _lock = lock(target_dir).map_err(Failure::Publish)?;
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

/// Holds `target_dir/.compile.lock` exclusively, waiting for another compile to finish.
fn lock(target_dir: &Path) -> Result<fs::File, Diagnostic> {
    fs::create_dir_all(target_dir).map_err(|e| failure(target_dir, &e))?;
    let path = target_dir.join(".compile.lock");
    let file = fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(|e| failure(&path, &e))?;
    file.lock().map_err(|e| failure(&path, &e))?;
    Ok(file)
}

/// Everything compiled and published, and the record written afresh.
fn whole_compile(
    project: &Project,
    target_dir: &Path,
    keys: &fingerprint::Keys,
    reason: &'static str,
) -> Result<Published, Failure> {
    let (compiled, facts) =
        crate::compile_recording(project, Output::FilesOnly, true).map_err(Failure::Compile)?;
    // Publishing forgets the old record first: no later compile may trust it.
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
        directories: State::directories_of(target_dir, compiled.files.keys())?,
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
            "the project's settings, pipelines, sources, macros, tests or audits changed",
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
    if !state.files_untouched(target_dir) || state.directories_changed(target_dir) {
        return Ok(Err("artifacts were changed since the last compile"));
    }
    let changed: Vec<usize> = (0..models.len())
        .filter(|&i| state.models[i].key != keys.models[i].2)
        .collect();
    if changed.is_empty() {
        // Nothing to write: the record stays as it is.
        return Ok(Ok(incremental(&state, models.len(), 0, 0)));
    }
    if changed.iter().any(|&i| state.models[i].quality) {
        return Ok(Err("a model a test or audit reads changed"));
    }
    let recompiled = match recompile(project, &models, &state, &changed) {
        Ok(recompiled) => recompiled,
        Err(reason) => return Ok(Err(reason)),
    };
    // Everything is checked before the first write: past it, only I/O can fail.
    let manifest = fs::read_to_string(target_dir.join("manifest.json")).ok();
    let Some((manifest, replacements)) =
        manifest.and_then(|m| entries_in_place(&m, &state, &recompiled).map(|r| (m, r)))
    else {
        return Ok(Err("manifest.json does not match the record of it"));
    };
    // Until the new record is saved, no compile may trust the old one (a crash part-way
    // leaves new files beside it).
    State::forget(target_dir);
    let written = write(
        target_dir,
        &mut state,
        &recompiled,
        &manifest,
        &replacements,
    )
    .map_err(Failure::Publish)?;
    for &index in &changed {
        state.models[index].key.clone_from(&keys.models[index].2);
    }
    // The renames changed their directories' times: recorded again, as written.
    let written_files = recompiled
        .iter()
        .flat_map(|r| r.files.iter().map(|(path, _)| path));
    if let Some(directories) = State::directories_of(target_dir, written_files) {
        state.directories.extend(directories);
        let _ = state.save(target_dir);
    }
    Ok(Ok(incremental(
        &state,
        models.len(),
        changed.len(),
        written,
    )))
}

/// What the fast path did, as its record now describes the artifacts.
fn incremental(state: &State, models: usize, recompiled: usize, written: usize) -> Published {
    Published {
        pipelines: state.pipelines,
        models,
        artifacts: state.files.keys().cloned().collect(),
        warnings: Vec::new(),
        whole: None,
        recompiled,
        written,
    }
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
    let lineage = crate::column_lineage::Names::of_references(project, &relations);
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
            fragment: crate::manifest::model_fragment(&item, &compiled, &lineage),
            files,
        });
    }
    Ok(recompiled)
}

/// Each recompiled model's new entry and the recorded range it replaces, sorted; `None`
/// when a range is not where the record says (the manifest's own `"name": {...}`).
fn entries_in_place<'r>(
    manifest: &str,
    state: &State,
    recompiled: &'r [Recompiled],
) -> Option<Vec<Replacement<'r>>> {
    let mut replacements: Vec<Replacement<'r>> = recompiled
        .iter()
        .map(|r| (state.models[r.index].manifest, r.fragment.as_str(), r.index))
        .collect();
    replacements.sort_by_key(|(range, _, _)| range.0);
    let in_place = replacements.iter().all(|((from, to), _, index)| {
        let key = format!("\n    \"{}\": ", state.models[*index].name);
        from < to
            && manifest
                .get(*from..*to)
                .is_some_and(|v| v.starts_with('{') && v.ends_with('}'))
            && manifest
                .get(..*from)
                .is_some_and(|before| before.ends_with(&key))
    });
    in_place.then_some(replacements)
}

/// A recorded manifest range, the entry that replaces it, and its model's index.
type Replacement<'r> = ((usize, usize), &'r str, usize);

/// Writes the recompiled models' files whose bytes differ and `manifest` with their
/// entries replaced; updates the record's stamps and manifest ranges. Returns the number
/// of files written.
fn write(
    target_dir: &Path,
    state: &mut State,
    recompiled: &[Recompiled],
    manifest: &str,
    replacements: &[Replacement<'_>],
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
    let pieces: Vec<((usize, usize), &str)> = replacements
        .iter()
        .map(|(range, text, _)| (*range, *text))
        .collect();
    let updated = splice::replace(manifest, &pieces);
    if updated != manifest {
        let manifest_path = target_dir.join("manifest.json");
        write_replacing(&manifest_path, updated.as_bytes())
            .map_err(|e| failure(&manifest_path, &e))?;
        restamp(state, target_dir, "manifest.json")?;
        written += 1;
        shift_ranges(state, replacements);
    }
    Ok(written)
}

/// Moves every recorded manifest range past the replaced entries by how much each grew
/// or shrank.
fn shift_ranges(state: &mut State, replacements: &[Replacement<'_>]) {
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
