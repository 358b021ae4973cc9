//! `access.yml`: the project's roles for `stb dev`, each a list of grants of permissions
//! at project scope, target scope, or on named pipelines. Strict: unknown keys, unknown
//! permissions, a permission at a scope it does not exist at, unknown pipelines and
//! duplicates are errors with their line and column. `admin` and `viewer` are system roles
//! and cannot be defined here.

use std::collections::BTreeSet;

use serde::Serialize;
use stb_diagnostics::{Diagnostic, Diagnostics, Location};

use crate::codes;
use crate::reader::Reader;
use crate::tree::{Node, Value, parse_yaml};

/// The file, at the project root.
pub const FILE_NAME: &str = "access.yml";

/// Every permission and the scopes it exists at: (name, on pipelines, project, target).
pub const PERMISSIONS: &[(&str, bool, bool, bool)] = &[
    ("project.reload", false, true, false),
    ("source.messages.read", false, true, true),
    ("quality.test.run", true, true, false),
    ("quality.audit.run", true, true, false),
    ("build.direct.run", true, false, false),
    ("deployment.create", true, false, false),
    ("build.cancel", true, false, false),
    ("build.kill", false, false, true),
    ("deployment.promote", true, false, false),
    ("deployment.cleanup", false, false, true),
    ("pipeline.destroy", true, false, false),
    ("target.reset", false, false, true),
    ("automation.manage", false, true, true),
];

/// Where a grant applies.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "scope", content = "pipelines")]
pub enum GrantScope {
    Project,
    Target,
    Pipelines(Vec<String>),
}

/// Permissions at one scope.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Grant {
    #[serde(flatten)]
    pub scope: GrantScope,
    pub permissions: Vec<String>,
}

/// A project role.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AccessRole {
    pub name: String,
    pub description: Option<String>,
    pub grants: Vec<Grant>,
}

/// The compiled policy, with a fingerprint that ignores how the YAML was ordered.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AccessPolicy {
    pub roles: Vec<AccessRole>,
    pub fingerprint: String,
}

impl AccessPolicy {
    #[must_use]
    pub fn role(&self, name: &str) -> Option<&AccessRole> {
        self.roles.iter().find(|r| r.name == name)
    }
}

fn fingerprint(roles: &[AccessRole]) -> String {
    use sha2::{Digest as _, Sha256};
    let mut canonical: Vec<serde_json::Value> = roles
        .iter()
        .map(|role| {
            let mut grants: Vec<String> = role
                .grants
                .iter()
                .map(|g| {
                    let mut permissions = g.permissions.clone();
                    permissions.sort();
                    let scope = match &g.scope {
                        GrantScope::Pipelines(pipelines) => {
                            let mut sorted = pipelines.clone();
                            sorted.sort();
                            format!("pipelines:{}", sorted.join(","))
                        }
                        GrantScope::Project => "project".to_owned(),
                        GrantScope::Target => "target".to_owned(),
                    };
                    format!("{scope}={}", permissions.join(","))
                })
                .collect();
            grants.sort();
            serde_json::json!({"name": role.name, "description": role.description, "grants": grants})
        })
        .collect();
    canonical.sort_by_key(|v| v["name"].as_str().unwrap_or_default().to_owned());
    Sha256::digest(serde_json::Value::Array(canonical).to_string().as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Reads `text` (the project's `access.yml`); `pipelines` are the project's pipeline
/// names. `None` with diagnostics when it is invalid.
pub(crate) fn read(
    text: &str,
    pipelines: &[String],
    diagnostics: &mut Diagnostics,
) -> Option<AccessPolicy> {
    let root = match parse_yaml(text) {
        Ok(root) => root,
        Err(error) => {
            diagnostics.push(
                Diagnostic::new(
                    codes::ACCESS_POLICY,
                    format!("{FILE_NAME} contains invalid YAML: {}", error.message),
                    "fix the YAML syntax at this position",
                )
                .at(Location::at(FILE_NAME, error.position)),
            );
            return None;
        }
    };
    let before = diagnostics.len();
    let mut reader = Reader::new(FILE_NAME, diagnostics);
    reader.allowed_keys(&root, FILE_NAME, &["roles"]);
    let Some(roles) = root.get("roles").and_then(|r| reader.table(r, "roles")) else {
        reader.missing(
            root.position,
            "roles",
            "add `roles:` mapping role names to grants",
        );
        return None;
    };
    let mut read_roles = Vec::new();
    for (key, node) in roles {
        let name = key.name.clone();
        if name.is_empty() || name.trim() != name {
            reader.report(
                codes::ACCESS_POLICY,
                key.position,
                format!("role name '{name}' is empty or has surrounding whitespace"),
                "name roles like reload_operator",
            );
            continue;
        }
        if matches!(name.as_str(), "admin" | "viewer") {
            reader.report(
                codes::ACCESS_POLICY,
                key.position,
                format!("'{name}' is a system role and cannot be defined in {FILE_NAME}"),
                "choose another name; system roles are granted with `stb admin grant-role`",
            );
            continue;
        }
        if let Some(role) = read_role(&mut reader, &name, node, pipelines) {
            read_roles.push(role);
        }
    }
    if reader.diagnostics.len() > before {
        return None;
    }
    Some(AccessPolicy {
        fingerprint: fingerprint(&read_roles),
        roles: read_roles,
    })
}

fn read_role(
    reader: &mut Reader<'_>,
    name: &str,
    node: &Node,
    pipelines: &[String],
) -> Option<AccessRole> {
    let what = format!("roles.{name}");
    reader.table(node, &what)?;
    reader.allowed_keys(node, &what, &["description", "grants"]);
    let description = node
        .get("description")
        .and_then(|d| reader.non_empty_string(d, &format!("{what}.description")));
    let Some(grants_node) = node.get("grants") else {
        reader.missing(
            node.position,
            &format!("{what}.grants"),
            "list at least one grant",
        );
        return None;
    };
    let Value::Array(items) = &grants_node.value else {
        reader.type_error(grants_node, &format!("{what}.grants"), "a list");
        return None;
    };
    if items.is_empty() {
        reader.report(
            codes::ACCESS_POLICY,
            grants_node.position,
            format!("{what}.grants is empty"),
            "list at least one grant",
        );
        return None;
    }
    let grants: Vec<Grant> = items
        .iter()
        .enumerate()
        .filter_map(|(i, item)| read_grant(reader, &format!("{what}.grants[{i}]"), item, pipelines))
        .collect();
    (grants.len() == items.len()).then(|| AccessRole {
        name: name.to_owned(),
        description,
        grants,
    })
}

/// A list of unique, non-empty strings.
fn unique_strings(reader: &mut Reader<'_>, node: &Node, what: &str) -> Option<Vec<(String, Node)>> {
    let Value::Array(items) = &node.value else {
        reader.type_error(node, what, "a list");
        return None;
    };
    if items.is_empty() {
        reader.report(
            codes::ACCESS_POLICY,
            node.position,
            format!("{what} is empty"),
            "list at least one",
        );
        return None;
    }
    let mut seen = BTreeSet::new();
    let mut out = Vec::new();
    for item in items {
        let text = reader.non_empty_string(item, what)?;
        if !seen.insert(text.clone()) {
            reader.report(
                codes::ACCESS_POLICY,
                item.position,
                format!("'{text}' is listed twice in {what}"),
                "list each once",
            );
            return None;
        }
        out.push((text, item.clone()));
    }
    Some(out)
}

fn read_grant(
    reader: &mut Reader<'_>,
    what: &str,
    node: &Node,
    pipelines: &[String],
) -> Option<Grant> {
    reader.table(node, what)?;
    reader.allowed_keys(node, what, &["permissions", "scope", "pipelines"]);
    let scope = match (node.get("scope"), node.get("pipelines")) {
        (Some(scope), None) => {
            match reader
                .choice(scope, &format!("{what}.scope"), &["project", "target"])?
                .as_str()
            {
                "project" => GrantScope::Project,
                _ => GrantScope::Target,
            }
        }
        (None, Some(list)) => {
            let names = unique_strings(reader, list, &format!("{what}.pipelines"))?;
            for (name, item) in &names {
                if !pipelines.contains(name) {
                    reader.report(
                        codes::ACCESS_POLICY,
                        item.position,
                        format!("{what} names pipeline '{name}', which the project does not have"),
                        "use a pipeline directory name under pipelines/",
                    );
                    return None;
                }
            }
            GrantScope::Pipelines(names.into_iter().map(|(n, _)| n).collect())
        }
        _ => {
            reader.report(
                codes::ACCESS_POLICY,
                node.position,
                format!(
                    "{what} needs exactly one of `scope: project|target` or `pipelines: [...]`"
                ),
                "a grant applies at one scope",
            );
            return None;
        }
    };
    let Some(list) = node.get("permissions") else {
        reader.missing(
            node.position,
            &format!("{what}.permissions"),
            "list the permissions granted",
        );
        return None;
    };
    let permissions = unique_strings(reader, list, &format!("{what}.permissions"))?;
    for (permission, item) in &permissions {
        let Some((_, on_pipelines, project, target)) =
            PERMISSIONS.iter().find(|(name, ..)| name == permission)
        else {
            reader.report(
                codes::ACCESS_POLICY,
                item.position,
                format!("unknown permission '{permission}'"),
                "see docs/security.md for the permissions and their scopes",
            );
            return None;
        };
        let allowed = match scope {
            GrantScope::Project => *project,
            GrantScope::Target => *target,
            GrantScope::Pipelines(_) => *on_pipelines,
        };
        if !allowed {
            reader.report(
                codes::ACCESS_POLICY,
                item.position,
                format!("'{permission}' cannot be granted at this scope"),
                "see docs/security.md for where each permission applies",
            );
            return None;
        }
    }
    Some(Grant {
        scope,
        permissions: permissions.into_iter().map(|(p, _)| p).collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pipelines() -> Vec<String> {
        vec!["pl__orders".into(), "pl__moving".into()]
    }

    fn parse(text: &str) -> Result<AccessPolicy, Vec<String>> {
        let mut diagnostics = Diagnostics::new();
        match read(text, &pipelines(), &mut diagnostics) {
            Some(policy) if diagnostics.is_empty() => Ok(policy),
            _ => Err(diagnostics
                .into_sorted()
                .into_iter()
                .map(|d| {
                    format!(
                        "{} {}",
                        d.location.map(|l| l.to_string()).unwrap_or_default(),
                        d.message
                    )
                })
                .collect()),
        }
    }

    const VALID: &str = "roles:\n  reload_operator:\n    description: Reloads\n    grants:\n      - permissions: [project.reload]\n        scope: project\n  moving_operator:\n    grants:\n      - pipelines: [pl__moving]\n        permissions: [build.direct.run, deployment.create]\n      - scope: target\n        permissions: [build.kill]\n";

    #[test]
    fn a_valid_policy_reads_with_an_order_free_fingerprint() {
        let policy = parse(VALID).expect("valid");
        assert_eq!(policy.roles.len(), 2);
        let moving = policy.role("moving_operator").expect("role");
        assert_eq!(
            moving.grants[0].scope,
            GrantScope::Pipelines(vec!["pl__moving".into()])
        );
        let reordered = "roles:\n  moving_operator:\n    grants:\n      - scope: target\n        permissions: [build.kill]\n      - permissions: [deployment.create, build.direct.run]\n        pipelines: [pl__moving]\n  reload_operator:\n    description: Reloads\n    grants:\n      - scope: project\n        permissions: [project.reload]\n";
        assert_eq!(
            parse(reordered).expect("valid").fingerprint,
            policy.fingerprint
        );
        assert_eq!(policy.fingerprint.len(), 64);
    }

    #[test]
    fn every_mistake_is_an_error_at_its_position() {
        for (text, says) in [
            (
                "roles:\n  admin:\n    grants:\n      - scope: project\n        permissions: [project.reload]\n",
                "system role",
            ),
            (
                "roles:\n  r:\n    grants:\n      - scope: project\n        permissions: [build.direct.run]\n",
                "cannot be granted at this scope",
            ),
            (
                "roles:\n  r:\n    grants:\n      - pipelines: [pl__nope]\n        permissions: [build.direct.run]\n",
                "does not have",
            ),
            (
                "roles:\n  r:\n    grants:\n      - scope: project\n        pipelines: [pl__orders]\n        permissions: [quality.test.run]\n",
                "exactly one of",
            ),
            (
                "roles:\n  r:\n    grants:\n      - scope: project\n        permissions: [project.reload, project.reload]\n",
                "listed twice",
            ),
            (
                "roles:\n  r:\n    grants:\n      - scope: project\n        permissions: [account.manage]\n",
                "unknown permission",
            ),
            ("roles:\n  r:\n    grants: []\n", "is empty"),
            (
                "roles:\n  r:\n    grants:\n      - scope: project\n        permissions: [project.reload]\n    extra: 1\n",
                "extra",
            ),
            ("other: 1\n", "other"),
        ] {
            let errors = parse(text).expect_err(says);
            assert!(
                errors
                    .iter()
                    .any(|e| e.contains(says) && e.starts_with("access.yml:")),
                "{says}: {errors:?}"
            );
        }
    }
}
