//! What a compile's output depends on, hashed: the project around the models (one
//! context hash), each pipeline's settings, and each model's own text.
//!
//! The project and its pipelines are destructured field by field, without `..`: a field
//! added to either stops this file compiling until someone decides whether it belongs in
//! the hash, so a new setting cannot leave stale artifacts behind.

use std::fmt::Write as _;

use sha2::{Digest, Sha256};
use stb_project::Project;
use stb_project::pipelines::{Model, Pipeline};

/// A SHA-256 hasher that `write!` can feed without building the text first.
struct Hasher(Sha256);

impl Hasher {
    fn new() -> Self {
        Self(Sha256::new())
    }

    /// One value's debug text, then a separator no debug text contains.
    fn add(&mut self, value: &dyn std::fmt::Debug) {
        let _ = write!(self, "{value:?}\u{0}");
    }

    /// The hash of `parts`, each separated.
    fn of(parts: &[&dyn std::fmt::Debug]) -> String {
        let mut hasher = Self::new();
        for part in parts {
            hasher.add(part);
        }
        hasher.finish()
    }

    fn finish(self) -> String {
        let digest = self.0.finalize();
        let mut hex = String::with_capacity(64);
        for byte in digest {
            let _ = write!(hex, "{byte:02x}");
        }
        hex
    }
}

impl std::fmt::Write for Hasher {
    fn write_str(&mut self, text: &str) -> std::fmt::Result {
        self.0.update(text.as_bytes());
        Ok(())
    }
}

/// The hashes an incremental compile compares against its record.
pub(crate) struct Keys {
    /// Everything but the pipelines' models (their pipelines' settings included).
    pub context: String,
    /// Per model, in project order (pipelines, then files): (pipeline, name, key).
    pub models: Vec<(String, String, String)>,
}

/// Hashes `project`: the context once (each pipeline's settings in it: a pipeline file
/// can change what the whole project may do, such as its mode, so an edit there compiles
/// everything), each model once.
pub(crate) fn keys(project: &Project) -> Keys {
    let base = context(project);
    let settings: Vec<String> = project
        .pipelines
        .iter()
        .map(|pipeline| pipeline_settings(&base, pipeline))
        .collect();
    let context = Hasher::of(&[&base, &settings]);
    let all: Vec<(usize, &Pipeline, &Model)> = project
        .pipelines
        .iter()
        .enumerate()
        .flat_map(|(at, p)| p.models.iter().map(move |m| (at, p, m)))
        .collect();
    let models = stb_project::parallel::map_ordered(&all, |(at, pipeline, model)| {
        (
            pipeline.name.clone(),
            model.name.clone(),
            model_key(&settings[*at], model),
        )
    });
    Keys { context, models }
}

/// The project without its models (and without what a compile never reads: the
/// connection and the access policy, the places secrets live).
fn context(project: &Project) -> String {
    let Project {
        name,
        root,
        target,
        database,
        pipeline_mode,
        max_pipelines,
        // A build's limit on what its replays read: no compiled file depends on it.
        replay_budget: _,
        // How a build's replays are split and throttled: no compiled file depends on it.
        replay_pacing: _,
        production,
        audit_scheduler_enabled,
        max_table_size_to_drop,
        cluster,
        pipelines,
        access: _,
        sources,
        macros,
        defaults,
        connection: _,
        test_files,
        test_originals,
        audit_files,
        generic_audit_files,
        sensors,
    } = project;
    // The pipelines' names and order are context: which pipelines exist. Their settings
    // are hashed per pipeline.
    let pipeline_names: Vec<&String> = pipelines.iter().map(|p| &p.name).collect();
    Hasher::of(&[
        &super::FORMAT,
        &super::tool_identity(),
        name,
        root,
        target,
        database,
        pipeline_mode,
        max_pipelines,
        production,
        audit_scheduler_enabled,
        max_table_size_to_drop,
        cluster,
        sources,
        macros,
        defaults,
        test_files,
        test_originals,
        audit_files,
        generic_audit_files,
        sensors,
        &pipeline_names,
    ])
}

/// One pipeline's settings, without its models, on top of the context.
fn pipeline_settings(context: &str, pipeline: &Pipeline) -> String {
    let Pipeline {
        name,
        directory,
        mode,
        protection,
        source,
        models: _,
        config_file,
        virtual_only,
        table_prefix,
        view_prefix,
        model_retention,
        audit_defaults,
        replay_policy,
    } = pipeline;
    Hasher::of(&[
        &context,
        name,
        directory,
        mode,
        protection,
        source,
        config_file,
        virtual_only,
        table_prefix,
        view_prefix,
        model_retention,
        audit_defaults,
        replay_policy,
    ])
}

/// One model: its pipeline's settings and everything discovery found in its file.
fn model_key(settings: &str, model: &Model) -> String {
    let Model {
        name,
        file,
        kind,
        driving_input,
        refs,
        text,
        // Read from the text, which is hashed below.
        docs: _,
    } = model;
    let mut hasher = Hasher::new();
    for part in [
        &settings as &dyn std::fmt::Debug,
        name,
        file,
        kind,
        driving_input,
        refs,
    ] {
        hasher.add(part);
    }
    // The text itself, not its debug form (which escapes every quote and newline).
    hasher.0.update(text.as_bytes());
    hasher.finish()
}

/// What other artifacts rely on in a model: its relation, kinds, references and driving
/// input. An edit that keeps these changes only the model's own artifacts.
pub(crate) fn interface(item: &crate::model::AnalysedModel<'_>) -> String {
    let mut hasher = Hasher::new();
    for part in [
        &item.relation as &dyn std::fmt::Debug,
        &item.model.kind,
        &item.header.kind,
        &item.model.driving_input,
    ] {
        hasher.add(part);
    }
    for reference in &item.model.refs {
        hasher.add(&(&reference.name, &reference.kind, &reference.ref_type));
    }
    hasher.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hashes_are_sha256_hex_and_separate_their_parts() {
        let mut one = Hasher::new();
        one.add(&"ab");
        one.add(&"c");
        let mut two = Hasher::new();
        two.add(&"a");
        two.add(&"bc");
        let (one, two) = (one.finish(), two.finish());
        assert_eq!(one.len(), 64);
        assert!(one.chars().all(|c| c.is_ascii_hexdigit()));
        assert_ne!(one, two, "a separator keeps ab|c apart from a|bc");
    }
}
