//! Authorization, decided per request without side effects: a system admin may do
//! anything; anyone else needs a project role (from `access.yml`, assigned in the control
//! store for this project and this target or every target) whose grants cover the
//! permission at the requested scope, or every pipeline the action touches.

use std::collections::BTreeSet;

use serde::Serialize;
use stb_project::access::{AccessPolicy, GrantScope, PERMISSIONS};

/// What an action asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope<'a> {
    Project,
    Target,
    /// The pipelines the action touches (derived by the server, never from the client).
    Pipelines(&'a [String]),
}

/// The answer, with why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Decision {
    pub allowed: bool,
    /// `system_admin`, `granted`, `policy_absent`, `no_matching_assignment`,
    /// `stale_assignment`, `missing_permission`, `empty_pipeline_scope` or
    /// `missing_pipelines`.
    pub reason: &'static str,
    pub missing_pipelines: Vec<String>,
}

fn deny(reason: &'static str) -> Decision {
    Decision {
        allowed: false,
        reason,
        missing_pipelines: Vec::new(),
    }
}

fn allow(reason: &'static str) -> Decision {
    Decision {
        allowed: true,
        reason,
        missing_pipelines: Vec::new(),
    }
}

/// Decides `permission` at `scope` for a principal with system admin `is_admin` and the
/// project roles `assigned` (already narrowed to this project and target).
#[must_use]
pub fn decide(
    is_admin: bool,
    policy: Option<&AccessPolicy>,
    assigned: &[String],
    permission: &str,
    scope: Scope<'_>,
) -> Decision {
    if is_admin {
        return allow("system_admin");
    }
    let Some(policy) = policy else {
        return deny("policy_absent");
    };
    if assigned.is_empty() {
        return deny("no_matching_assignment");
    }
    let roles: Vec<_> = assigned
        .iter()
        .filter_map(|name| policy.role(name))
        .collect();
    if roles.is_empty() {
        return deny("stale_assignment");
    }
    let grants = roles
        .iter()
        .flat_map(|role| &role.grants)
        .filter(|grant| grant.permissions.iter().any(|p| p == permission));
    match scope {
        Scope::Project | Scope::Target => {
            // A project grant also covers a target request.
            let covered = grants.clone().any(|grant| {
                grant.scope == GrantScope::Project
                    || (scope == Scope::Target && grant.scope == GrantScope::Target)
            });
            if covered {
                allow("granted")
            } else {
                deny("missing_permission")
            }
        }
        Scope::Pipelines(affected) => {
            if affected.is_empty() {
                return deny("empty_pipeline_scope");
            }
            let mut covered: BTreeSet<&str> = BTreeSet::new();
            let mut everything = false;
            for grant in grants {
                match &grant.scope {
                    GrantScope::Project => everything = true,
                    GrantScope::Pipelines(names) => {
                        covered.extend(names.iter().map(String::as_str))
                    }
                    GrantScope::Target => {}
                }
            }
            let missing: Vec<String> = affected
                .iter()
                .filter(|p| !everything && !covered.contains(p.as_str()))
                .cloned()
                .collect();
            if missing.is_empty() {
                allow("granted")
            } else {
                Decision {
                    allowed: false,
                    reason: "missing_pipelines",
                    missing_pipelines: missing,
                }
            }
        }
    }
}

/// What a principal may do, for the UI to enable its controls (the server still decides
/// every request).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Capabilities {
    pub system_admin: bool,
    pub project: String,
    pub target: String,
    /// Permissions granted at project or target scope.
    pub permissions: Vec<String>,
    /// Per permission, the pipelines it is granted on.
    pub pipeline_permissions: std::collections::BTreeMap<String, Vec<String>>,
    /// Assigned roles the policy no longer defines.
    pub stale_roles: Vec<String>,
}

/// Destructive permissions are shown to admins only.
const ADMIN_ONLY: [&str; 2] = ["pipeline.destroy", "target.reset"];

/// The capabilities of a principal (see [`decide`] for the rules).
#[must_use]
pub fn capabilities(
    is_admin: bool,
    policy: Option<&AccessPolicy>,
    assigned: &[String],
    project: &str,
    target: &str,
) -> Capabilities {
    let mut result = Capabilities {
        system_admin: is_admin,
        project: project.to_owned(),
        target: target.to_owned(),
        permissions: Vec::new(),
        pipeline_permissions: std::collections::BTreeMap::new(),
        stale_roles: Vec::new(),
    };
    if is_admin {
        result.permissions = PERMISSIONS.iter().map(|(p, ..)| (*p).to_owned()).collect();
        return result;
    }
    let Some(policy) = policy else {
        result.stale_roles = assigned.to_vec();
        return result;
    };
    let mut scoped = BTreeSet::new();
    for name in assigned {
        let Some(role) = policy.role(name) else {
            result.stale_roles.push(name.clone());
            continue;
        };
        for grant in &role.grants {
            for permission in grant
                .permissions
                .iter()
                .filter(|p| !ADMIN_ONLY.contains(&p.as_str()))
            {
                match &grant.scope {
                    GrantScope::Project | GrantScope::Target => {
                        scoped.insert(permission.clone());
                    }
                    GrantScope::Pipelines(names) => {
                        let list = result
                            .pipeline_permissions
                            .entry(permission.clone())
                            .or_default();
                        for name in names {
                            if !list.contains(name) {
                                list.push(name.clone());
                            }
                        }
                    }
                }
            }
        }
    }
    result.permissions = scoped.into_iter().collect();
    result
}

#[cfg(test)]
mod tests {
    use stb_project::access::{AccessRole, Grant};

    use super::*;

    fn policy() -> AccessPolicy {
        let grant = |scope, permissions: &[&str]| Grant {
            scope,
            permissions: permissions.iter().map(|p| (*p).to_owned()).collect(),
        };
        AccessPolicy {
            fingerprint: String::new(),
            roles: vec![
                AccessRole {
                    name: "reload_operator".into(),
                    description: None,
                    grants: vec![grant(
                        GrantScope::Project,
                        &["project.reload", "quality.test.run"],
                    )],
                },
                AccessRole {
                    name: "moving_operator".into(),
                    description: None,
                    grants: vec![
                        grant(
                            GrantScope::Pipelines(vec!["pl__moving".into()]),
                            &["build.direct.run", "pipeline.destroy"],
                        ),
                        grant(GrantScope::Target, &["build.kill"]),
                    ],
                },
            ],
        }
    }

    fn roles(names: &[&str]) -> Vec<String> {
        names.iter().map(|n| (*n).to_owned()).collect()
    }

    #[test]
    fn the_decision_follows_the_rules_in_order() {
        let policy = policy();
        let p = Some(&policy);
        let pipelines = |names: &[&str]| roles(names);
        assert_eq!(
            decide(true, None, &[], "target.reset", Scope::Target).reason,
            "system_admin"
        );
        assert_eq!(
            decide(
                false,
                None,
                &roles(&["x"]),
                "project.reload",
                Scope::Project
            )
            .reason,
            "policy_absent"
        );
        assert_eq!(
            decide(false, p, &[], "project.reload", Scope::Project).reason,
            "no_matching_assignment"
        );
        assert_eq!(
            decide(
                false,
                p,
                &roles(&["gone"]),
                "project.reload",
                Scope::Project
            )
            .reason,
            "stale_assignment"
        );
        assert!(
            decide(
                false,
                p,
                &roles(&["reload_operator"]),
                "project.reload",
                Scope::Project
            )
            .allowed
        );
        // A project grant satisfies a target request; a target grant not a project one.
        assert!(
            decide(
                false,
                p,
                &roles(&["reload_operator"]),
                "project.reload",
                Scope::Target
            )
            .allowed
        );
        assert!(
            decide(
                false,
                p,
                &roles(&["moving_operator"]),
                "build.kill",
                Scope::Target
            )
            .allowed
        );
        assert_eq!(
            decide(
                false,
                p,
                &roles(&["moving_operator"]),
                "build.kill",
                Scope::Project
            )
            .reason,
            "missing_permission"
        );
        // Pipelines: full coverage, and never an empty scope.
        let moving = pipelines(&["pl__moving"]);
        assert!(
            decide(
                false,
                p,
                &roles(&["moving_operator"]),
                "build.direct.run",
                Scope::Pipelines(&moving)
            )
            .allowed
        );
        let both = pipelines(&["pl__moving", "pl__orders"]);
        let partial = decide(
            false,
            p,
            &roles(&["moving_operator"]),
            "build.direct.run",
            Scope::Pipelines(&both),
        );
        assert_eq!(
            (partial.allowed, partial.missing_pipelines),
            (false, pipelines(&["pl__orders"]))
        );
        assert_eq!(
            decide(
                false,
                p,
                &roles(&["moving_operator"]),
                "build.direct.run",
                Scope::Pipelines(&[])
            )
            .reason,
            "empty_pipeline_scope"
        );
        // A project grant covers every pipeline.
        assert!(
            decide(
                false,
                p,
                &roles(&["reload_operator"]),
                "quality.test.run",
                Scope::Pipelines(&both)
            )
            .allowed
        );
    }

    #[test]
    fn capabilities_list_what_roles_grant_and_hide_destruction_from_non_admins() {
        let policy = policy();
        let found = capabilities(
            false,
            Some(&policy),
            &roles(&["moving_operator", "gone"]),
            "shop",
            "dev",
        );
        assert_eq!(found.permissions, roles(&["build.kill"]));
        assert_eq!(
            found.pipeline_permissions.get("build.direct.run"),
            Some(&roles(&["pl__moving"]))
        );
        assert!(!found.pipeline_permissions.contains_key("pipeline.destroy"));
        assert_eq!(found.stale_roles, roles(&["gone"]));
        let admin = capabilities(true, None, &[], "shop", "dev");
        assert!(admin.permissions.contains(&"target.reset".to_owned()));
    }
}
