//! The model graph and the three selector grammars of StreamBuild, in one place.
//!
//! - plan / build: `--select` tokens (whitespace-split): bare pipeline-or-model names,
//!   `pipeline:<name>`, `model:<name>`; `+` is refused because selections always include
//!   their downstream closure.
//! - test: a model name or `pipeline:<name>`, with an optional leading `+` (ancestors) and
//!   trailing `+` (descendants).
//! - audit: a model name or `pipeline:<name>`, with an optional leading `+`.
//!
//! An unknown name is always an error (the reference once ignored typos).

use std::collections::{BTreeMap, BTreeSet};

use stb_diagnostics::Diagnostic;
use stb_diagnostics::suggest::did_you_mean;

/// Models, their pipelines, and model-to-model edges of every type.
#[derive(Debug, Clone, Default)]
pub struct ModelGraph {
    /// model -> owning pipeline
    model_pipeline: BTreeMap<String, String>,
    /// pipeline -> its models (pipelines without models are kept: selecting one is an error)
    pipelines: BTreeMap<String, BTreeSet<String>>,
    /// upstream -> downstream models
    downstream: BTreeMap<String, BTreeSet<String>>,
    /// downstream -> upstream models
    upstream: BTreeMap<String, BTreeSet<String>>,
}

impl ModelGraph {
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    pub fn add_pipeline(&mut self, pipeline: &str) {
        self.pipelines.entry(pipeline.to_owned()).or_default();
    }

    pub fn add_model(&mut self, pipeline: &str, model: &str) {
        self.pipelines
            .entry(pipeline.to_owned())
            .or_default()
            .insert(model.to_owned());
        self.model_pipeline
            .insert(model.to_owned(), pipeline.to_owned());
    }

    /// `downstream` reads `upstream` (driving input, reference or mutable reference).
    pub fn add_edge(&mut self, upstream: &str, downstream: &str) {
        self.downstream
            .entry(upstream.to_owned())
            .or_default()
            .insert(downstream.to_owned());
        self.upstream
            .entry(downstream.to_owned())
            .or_default()
            .insert(upstream.to_owned());
    }

    #[must_use]
    pub fn models(&self) -> BTreeSet<String> {
        self.model_pipeline.keys().cloned().collect()
    }

    #[must_use]
    pub fn pipeline_of(&self, model: &str) -> Option<&str> {
        self.model_pipeline.get(model).map(String::as_str)
    }

    fn reach(
        &self,
        start: &BTreeSet<String>,
        edges: &BTreeMap<String, BTreeSet<String>>,
    ) -> BTreeSet<String> {
        let mut seen = start.clone();
        let mut stack: Vec<String> = start.iter().cloned().collect();
        while let Some(node) = stack.pop() {
            for next in edges.get(&node).into_iter().flatten() {
                if seen.insert(next.clone()) {
                    stack.push(next.clone());
                }
            }
        }
        seen
    }

    /// `models` plus every model downstream of them.
    #[must_use]
    pub fn with_descendants(&self, models: &BTreeSet<String>) -> BTreeSet<String> {
        self.reach(models, &self.downstream)
    }

    /// `models` plus every model upstream of them.
    #[must_use]
    pub fn with_ancestors(&self, models: &BTreeSet<String>) -> BTreeSet<String> {
        self.reach(models, &self.upstream)
    }

    /// Distinct pipelines owning `models`, sorted.
    #[must_use]
    pub fn pipelines_of(&self, models: &BTreeSet<String>) -> Vec<String> {
        let owned: BTreeSet<&String> = models
            .iter()
            .filter_map(|m| self.model_pipeline.get(m))
            .collect();
        owned.into_iter().cloned().collect()
    }

    fn pipeline_models(&self, name: &str) -> Result<BTreeSet<String>, Diagnostic> {
        match self.pipelines.get(name) {
            None => Err(error(
                codes::UNKNOWN,
                format!("Unknown selected pipeline '{name}'"),
                &format!(
                    "{}pipelines: {}",
                    did_you_mean(name, self.pipelines.keys().map(String::as_str)),
                    self.list_pipelines()
                ),
            )),
            Some(models) if models.is_empty() => Err(error(
                codes::EMPTY_PIPELINE,
                format!("Selected pipeline '{name}' does not define any models"),
                "select a pipeline with models",
            )),
            Some(models) => Ok(models.clone()),
        }
    }

    fn model_names(&self) -> impl Iterator<Item = &str> {
        self.model_pipeline.keys().map(String::as_str)
    }

    fn list_pipelines(&self) -> String {
        let names: Vec<&str> = self.pipelines.keys().map(String::as_str).collect();
        if names.is_empty() {
            "none".to_owned()
        } else {
            names.join(", ")
        }
    }
}

pub mod codes {
    //! Selector diagnostic codes.
    pub const SYNTAX: &str = "STB-SELECT-001";
    pub const UNKNOWN: &str = "STB-SELECT-002";
    pub const NAMESPACE: &str = "STB-SELECT-003";
    pub const EMPTY_PIPELINE: &str = "STB-SELECT-004";
    pub const NO_MATCH: &str = "STB-SELECT-005";
    pub const MAX_PIPELINES: &str = "STB-SELECT-006";
}

fn error(code: &'static str, message: String, hint: &str) -> Diagnostic {
    Diagnostic::new(code, message, hint)
}

/// plan/build: the selected models (before closure). Empty selection = every model.
///
/// # Errors
/// A `+`, an unknown namespace, an unknown name, or a pipeline without models.
pub fn select_for_build(
    graph: &ModelGraph,
    arguments: &[String],
) -> Result<BTreeSet<String>, Diagnostic> {
    let tokens: Vec<&str> = arguments
        .iter()
        .flat_map(|a| a.split_whitespace())
        .collect();
    if tokens.is_empty() {
        return Ok(graph.models());
    }
    let mut selected = BTreeSet::new();
    for token in tokens {
        if token.starts_with('+') || token.ends_with('+') {
            return Err(error(
                codes::SYNTAX,
                format!(
                    "Unsupported selector syntax '{token}'. StreamBuild selections already include required downstream closure, so '+' is not supported."
                ),
                "select the model or pipeline itself; everything downstream is rebuilt with it",
            ));
        }
        match token.split_once(':') {
            Some(("pipeline", name)) => selected.extend(graph.pipeline_models(name)?),
            Some(("model", name)) => {
                if !graph.model_pipeline.contains_key(name) {
                    return Err(error(
                        codes::UNKNOWN,
                        format!("Unknown selected model '{name}'"),
                        &format!(
                            "{}model names are SQL file stems; run stb discover to list them",
                            did_you_mean(name, graph.model_names())
                        ),
                    ));
                }
                selected.insert(name.to_owned());
            }
            Some((namespace, _)) => {
                return Err(error(
                    codes::NAMESPACE,
                    format!("Unsupported selector namespace '{namespace}' in '{token}'"),
                    "use pipeline:<name>, model:<name>, or a bare name",
                ));
            }
            None if graph.pipelines.contains_key(token) => {
                selected.extend(graph.pipeline_models(token)?)
            }
            None if graph.model_pipeline.contains_key(token) => {
                selected.insert(token.to_owned());
            }
            None => {
                return Err(error(
                    codes::UNKNOWN,
                    format!("Unknown selected model or pipeline '{token}'"),
                    &format!(
                        "{}run stb discover to list pipelines and models; sources cannot be selected",
                        did_you_mean(
                            token,
                            graph
                                .model_names()
                                .chain(graph.pipelines.keys().map(String::as_str))
                        )
                    ),
                ));
            }
        }
    }
    Ok(selected)
}

/// The build's execution models: the selection and everything downstream of it.
#[must_use]
pub fn execution_models(graph: &ModelGraph, selected: &BTreeSet<String>) -> BTreeSet<String> {
    graph.with_descendants(selected)
}

/// `[build] max_pipelines`, counted on the pipelines owning the execution models.
///
/// # Errors
/// When more pipelines are affected than allowed.
pub fn check_max_pipelines(
    graph: &ModelGraph,
    execution: &BTreeSet<String>,
    limit: Option<u32>,
    target: &str,
) -> Result<(), Diagnostic> {
    let Some(limit) = limit else { return Ok(()) };
    let pipelines = graph.pipelines_of(execution);
    if pipelines.len() <= limit as usize {
        return Ok(());
    }
    Err(error(
        codes::MAX_PIPELINES,
        format!(
            "Build affects {} pipelines, exceeding max_pipelines={limit} for target '{target}': {}",
            pipelines.len(),
            pipelines.join(", ")
        ),
        "select fewer models or pipelines, or raise [build] max_pipelines for this target",
    ))
}

/// A `stb test` / `stb audit` selector.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScopedSelector {
    pub ancestors: bool,
    pub descendants: bool,
    pub pipeline: bool,
    pub name: String,
}

fn scoped(token: &str, allow_descendants: bool, what: &str) -> Result<ScopedSelector, Diagnostic> {
    let ancestors = token.starts_with('+');
    let rest = token.strip_prefix('+').unwrap_or(token);
    let descendants = rest.ends_with('+');
    let rest = rest.strip_suffix('+').unwrap_or(rest);
    if rest.is_empty() || rest.contains('+') || (descendants && !allow_descendants) {
        return Err(error(
            codes::SYNTAX,
            format!("Unsupported {what} selector syntax '{token}'"),
            if allow_descendants {
                "use name, +name, name+ or +name+"
            } else {
                "use name or +name"
            },
        ));
    }
    let (pipeline, name) = match rest.split_once(':') {
        Some(("pipeline", name)) => (true, name),
        Some((namespace, _)) => {
            return Err(error(
                codes::NAMESPACE,
                format!("Unsupported {what} selector namespace '{namespace}' in '{token}'"),
                "use a model name or pipeline:<name>",
            ));
        }
        None => (false, rest),
    };
    Ok(ScopedSelector {
        ancestors,
        descendants,
        pipeline,
        name: name.to_owned(),
    })
}

/// Parses a `stb test --select` value (not whitespace-split).
///
/// # Errors
/// Misplaced `+`, or a namespace other than `pipeline:`.
pub fn parse_test_selector(token: &str) -> Result<ScopedSelector, Diagnostic> {
    scoped(token, true, "test")
}

/// Parses a `stb audit --select` value: a trailing `+` is refused.
///
/// # Errors
/// Misplaced `+`, or a namespace other than `pipeline:`.
pub fn parse_audit_selector(token: &str) -> Result<ScopedSelector, Diagnostic> {
    scoped(token, false, "audit")
}

/// The models a test/audit selection names, with ancestors/descendants as asked.
///
/// # Errors
/// An unknown model or pipeline (bare names are models only).
pub fn resolve_scoped(
    graph: &ModelGraph,
    selectors: &[ScopedSelector],
    what: &str,
) -> Result<BTreeSet<String>, Diagnostic> {
    let mut selected = BTreeSet::new();
    for selector in selectors {
        let base: BTreeSet<String> = if selector.pipeline {
            graph.pipeline_models(&selector.name)?
        } else if graph.model_pipeline.contains_key(&selector.name) {
            BTreeSet::from([selector.name.clone()])
        } else {
            return Err(error(
                codes::UNKNOWN,
                format!("Unknown SQL {what} selector model '{}'", selector.name),
                &format!(
                    "{}bare names select models; use pipeline:<name> for a pipeline",
                    did_you_mean(&selector.name, graph.model_names())
                ),
            ));
        };
        let mut scope = base.clone();
        if selector.ancestors {
            scope.extend(graph.with_ancestors(&base));
        }
        if selector.descendants {
            scope.extend(graph.with_descendants(&base));
        }
        selected.extend(scope);
    }
    Ok(selected)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// pl__orders: orders_clean -> orders_enriched; pl__payments: payments_enriched reads
    /// orders_enriched by reference; pl__empty has no models.
    fn graph() -> ModelGraph {
        let mut graph = ModelGraph::new();
        graph.add_model("pl__orders", "orders_clean");
        graph.add_model("pl__orders", "orders_enriched");
        graph.add_model("pl__payments", "payments_enriched");
        graph.add_pipeline("pl__empty");
        graph.add_edge("orders_clean", "orders_enriched");
        graph.add_edge("orders_enriched", "payments_enriched");
        graph
    }

    fn set(items: &[&str]) -> BTreeSet<String> {
        items.iter().map(|s| (*s).to_owned()).collect()
    }

    fn args(items: &[&str]) -> Vec<String> {
        items.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn build_selectors() {
        let g = graph();
        assert_eq!(select_for_build(&g, &[]).expect("all"), g.models());
        assert_eq!(
            select_for_build(&g, &args(&["pl__orders"])).expect("bare pipeline"),
            set(&["orders_clean", "orders_enriched"])
        );
        assert_eq!(
            select_for_build(&g, &args(&["model:orders_clean payments_enriched"])).expect("split"),
            set(&["orders_clean", "payments_enriched"])
        );
        assert_eq!(
            select_for_build(&g, &args(&["pipeline:pl__payments"])).expect("ns"),
            set(&["payments_enriched"])
        );
        let closure = execution_models(&g, &set(&["orders_clean"]));
        assert_eq!(
            closure,
            set(&["orders_clean", "orders_enriched", "payments_enriched"]),
            "side-reference consumers are rebuilt too"
        );
    }

    #[test]
    fn build_selector_errors() {
        let g = graph();
        let code = |a: &[&str]| select_for_build(&g, &args(a)).expect_err("error").code;
        assert_eq!(code(&["orders_clean+"]), codes::SYNTAX);
        assert_eq!(code(&["+orders_clean"]), codes::SYNTAX);
        assert_eq!(
            code(&["orders_cleen"]),
            codes::UNKNOWN,
            "a typo is an error"
        );
        assert_eq!(code(&["model:nope"]), codes::UNKNOWN);
        assert_eq!(code(&["pipeline:pl__nope"]), codes::UNKNOWN);
        let hint = |a: &[&str]| select_for_build(&g, &args(a)).expect_err("error").hint;
        assert!(
            hint(&["orders_cleen"]).starts_with("did you mean 'orders_clean'? "),
            "{}",
            hint(&["orders_cleen"])
        );
        assert!(hint(&["model:orders_clen"]).starts_with("did you mean 'orders_clean'? "));
        assert!(hint(&["pipeline:pl__order"]).starts_with("did you mean 'pl__orders'? "));
        assert!(!hint(&["model:nope"]).contains("did you mean"));
        assert_eq!(code(&["source:orders"]), codes::NAMESPACE);
        assert_eq!(code(&["pipeline:pl__empty"]), codes::EMPTY_PIPELINE);
        assert_eq!(
            select_for_build(&g, &args(&["orders_cleen"]))
                .expect_err("typo")
                .message,
            "Unknown selected model or pipeline 'orders_cleen'"
        );
    }

    #[test]
    fn max_pipelines_counts_the_expanded_scope() {
        let g = graph();
        let execution = execution_models(&g, &set(&["orders_clean"]));
        assert!(check_max_pipelines(&g, &execution, Some(2), "dev").is_ok());
        assert!(check_max_pipelines(&g, &execution, None, "dev").is_ok());
        let over = check_max_pipelines(&g, &execution, Some(1), "prod").expect_err("over");
        assert_eq!(
            over.message,
            "Build affects 2 pipelines, exceeding max_pipelines=1 for target 'prod': pl__orders, pl__payments"
        );
    }

    #[test]
    fn test_and_audit_selectors() {
        let g = graph();
        let one = |t: &str| {
            resolve_scoped(&g, &[parse_test_selector(t).expect("parse")], "test").expect("resolve")
        };
        assert_eq!(one("orders_enriched"), set(&["orders_enriched"]));
        assert_eq!(
            one("+orders_enriched"),
            set(&["orders_clean", "orders_enriched"])
        );
        assert_eq!(
            one("orders_enriched+"),
            set(&["orders_enriched", "payments_enriched"])
        );
        assert_eq!(
            one("+pipeline:pl__payments"),
            set(&["orders_clean", "orders_enriched", "payments_enriched"])
        );
        assert_eq!(
            parse_test_selector("a+b").expect_err("inner +").code,
            codes::SYNTAX
        );
        assert_eq!(
            parse_test_selector("model:a").expect_err("model ns").code,
            codes::NAMESPACE
        );
        assert_eq!(
            resolve_scoped(
                &g,
                &[parse_test_selector("pl__orders").expect("parse")],
                "test"
            )
            .expect_err("bare pipeline")
            .code,
            codes::UNKNOWN
        );
        assert_eq!(
            parse_audit_selector("orders_clean+")
                .expect_err("trailing +")
                .code,
            codes::SYNTAX
        );
        assert!(
            parse_audit_selector("+orders_clean")
                .expect("leading +")
                .ancestors
        );
    }
}
