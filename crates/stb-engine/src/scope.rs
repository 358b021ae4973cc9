//! What a plan or a build covers, as the user asked for it: parsed once (the CLI from its
//! flags, the dev server from a request body) and handed to the engine whole, never turned
//! back into command-line flags.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};
use stb_compile::Compiled;
use stb_plan::direct::model_graph;
use stb_plan::options::{Mode as FlagMode, ScopeFlags, StartTime, validate};

use crate::EngineError;
use crate::direct::Resolved;

/// The scope of a plan or a build. Serialised, it names the members in camelCase (as the
/// dev server's request bodies do: `startTime`, `includeMissingUpstream`, `fullRefresh`,
/// `deploymentId`); a member left out takes its default (every model, no flag), and a start
/// time that does not read is refused as the document is read.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default, deny_unknown_fields)]
pub struct Scope {
    /// Selectors (`name`, `model:name`, `pipeline:name`); empty: every model.
    pub select: Vec<String>,
    /// `--start-time`, read where it entered (a flag, a request body) and never again:
    /// a scope cannot hold one that does not read.
    pub start_time: Option<StartTime>,
    /// `--changed`: the models whose query or identity differs from their last build.
    pub changed: bool,
    pub include_missing_upstream: bool,
    /// `--full-refresh` and `--deployment-id`: virtual pipelines only, so a direct plan
    /// refuses them instead of ignoring them.
    pub full_refresh: bool,
    pub deployment_id: Option<String>,
}

impl Scope {
    fn flags(&self) -> ScopeFlags {
        ScopeFlags {
            select: self.select.clone(),
            start_time: self.start_time.clone(),
            changed: self.changed,
            include_missing_upstream: self.include_missing_upstream,
            full_refresh: self.full_refresh,
            deployment_id: self.deployment_id.clone(),
        }
    }

    /// Refuses flag combinations that cannot mean anything for any pipeline (the
    /// virtual-only flags are refused by the direct planner once the scope is known).
    ///
    /// # Errors
    /// `STB-PLAN-001` and its message and hint.
    pub fn check_any(&self) -> Result<(), EngineError> {
        validate(&self.flags(), FlagMode::Virtual)
            .map(|_| ())
            .map_err(EngineError::from)
    }

    /// Refuses flag combinations that cannot mean anything for direct pipelines.
    ///
    /// # Errors
    /// `STB-PLAN-001` and its message and hint.
    pub fn check(&self) -> Result<Option<StartTime>, EngineError> {
        validate(&self.flags(), FlagMode::Direct).map_err(EngineError::from)
    }

    /// Checks the flags and resolves the selectors against the compiled models, before
    /// anything connects.
    ///
    /// # Errors
    /// A flag combination that cannot mean anything, or an unknown selector.
    pub fn resolve(&self, compiled: &Compiled) -> Result<Resolved, EngineError> {
        let start_time = self.check()?;
        let selected = if self.select.is_empty() {
            None
        } else {
            let graph = model_graph(&compiled.plan_models);
            Some(stb_graph::select_for_build(&graph, &self.select)?)
        };
        Ok(Resolved {
            request: self.clone(),
            start_time,
            selected,
        })
    }

    /// The part of a mixed scope that is `models`: selected by name, keeping the flags
    /// that apply to that kind (`virtual_part`: `--full-refresh`, `--deployment-id`,
    /// `--start-time`; otherwise `--start-time` and `--include-missing-upstream`).
    #[must_use]
    pub fn part(&self, models: &BTreeSet<String>, virtual_part: bool) -> Self {
        Self {
            select: models.iter().map(|m| format!("model:{m}")).collect(),
            start_time: self.start_time.clone(),
            changed: false,
            include_missing_upstream: !virtual_part && self.include_missing_upstream,
            full_refresh: virtual_part && self.full_refresh,
            deployment_id: self.deployment_id.clone().filter(|_| virtual_part),
        }
    }

    /// The virtual planner's request.
    #[must_use]
    pub fn staged_request(&self) -> crate::staged::Request {
        crate::staged::Request {
            select: self.select.clone(),
            start_time: self.start_time.clone(),
            full_refresh: self.full_refresh,
            deployment_id: self.deployment_id.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Scope;

    #[test]
    fn a_scope_reads_the_camel_case_body_and_defaults_what_is_left_out() {
        let scope: Scope = serde_json::from_str(
            r#"{"select": ["pipeline:orders"], "startTime": "2026-01-01", "fullRefresh": true}"#,
        )
        .expect("a scope");
        assert_eq!(
            scope,
            Scope {
                select: vec!["pipeline:orders".to_owned()],
                start_time: stb_plan::options::parse_start_time("2026-01-01").ok(),
                full_refresh: true,
                ..Scope::default()
            }
        );
        // The start time is read with the body: one that does not read is refused there.
        let bad = serde_json::from_str::<Scope>(r#"{"select": ["a"], "startTime": "yesterday"}"#);
        assert!(bad.is_err_and(|e| e.to_string().contains("is not a date")));
        let back: Scope =
            serde_json::from_value(serde_json::to_value(&scope).expect("json")).expect("scope");
        assert_eq!(back, scope);
        // A misspelt member is refused, not ignored.
        let typo = serde_json::from_str::<Scope>(r#"{"start_time": "2026-01-01"}"#);
        assert!(typo.is_err());
    }
}
