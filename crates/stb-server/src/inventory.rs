//! Every API route, who may call it and what it does: the OpenAPI document is rendered
//! from this list, the route × persona test calls every entry in every authentication
//! mode, and a unit test checks that the router serves exactly these paths, so a route
//! cannot be added without declaring its policy.

use serde_json::{Value, json};

/// Who may call a route.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Anyone.
    Public,
    /// Any signed-in, active account.
    SignedIn,
    /// A system admin.
    Admin,
    /// A project permission (system admins always pass), at the scope named.
    Permission(&'static str, Scope),
}

/// Where a permission is decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// On the pipelines the server derives for the action.
    Pipelines,
    Project,
    Target,
}

/// One route.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Route {
    pub method: &'static str,
    /// As the router spells it (`{name}` for a path parameter).
    pub path: &'static str,
    pub access: Access,
    pub summary: &'static str,
}

const fn route(
    method: &'static str,
    path: &'static str,
    access: Access,
    summary: &'static str,
) -> Route {
    Route {
        method,
        path,
        access,
        summary,
    }
}

use Access::{Admin, Permission, Public, SignedIn};

/// The API.
pub const ROUTES: &[Route] = &[
    route("GET", "/api/auth/config", Public, "The authentication mode"),
    route("POST", "/api/auth/login", Public, "Sign in (password mode)"),
    route("GET", "/api/auth/me", SignedIn, "The session"),
    route("POST", "/api/auth/logout", SignedIn, "End the session"),
    route(
        "GET",
        "/api/auth/capabilities",
        SignedIn,
        "What the caller's roles grant here",
    ),
    route(
        "GET",
        "/api/access-policy",
        SignedIn,
        "The compiled access.yml",
    ),
    route(
        "GET",
        "/api/bootstrap",
        SignedIn,
        "A page's first data in one answer (held state only)",
    ),
    route("GET", "/api/openapi.json", SignedIn, "This document"),
    route(
        "GET",
        "/api/status",
        SignedIn,
        "Compile and warehouse status",
    ),
    route(
        "GET",
        "/api/state",
        SignedIn,
        "The warehouse's view of the project (held snapshot)",
    ),
    route(
        "POST",
        "/api/warehouse/refresh",
        SignedIn,
        "Probe the warehouse now and drop the snapshot",
    ),
    route(
        "POST",
        "/api/reload",
        Permission("project.reload", Scope::Project),
        "Compile the project again from disk",
    ),
    route(
        "GET",
        "/api/definitions",
        SignedIn,
        "The held compile's definitions (ETag)",
    ),
    route(
        "GET",
        "/api/lineage/columns/{model}/{column}",
        SignedIn,
        "A column traced through the models to its sources (stb lineage --json)",
    ),
    route(
        "GET",
        "/api/models/{name}",
        SignedIn,
        "One model: its query, statements, checks and the runs that built it",
    ),
    route("GET", "/api/runs", SignedIn, "Recent runs"),
    route("GET", "/api/runs/{invocation_id}", SignedIn, "One run"),
    route(
        "GET",
        "/api/runs/{invocation_id}/events",
        SignedIn,
        "A run's events, live (server-sent events)",
    ),
    route(
        "GET",
        "/api/runs/{invocation_id}/statements/{sequence}",
        SignedIn,
        "The exact SQL of one of a run's statements",
    ),
    route(
        "POST",
        "/api/runs/{invocation_id}/cancel",
        Permission("build.cancel", Scope::Pipelines),
        "Cancel a running build",
    ),
    route("GET", "/api/plan", SignedIn, "What a build would do"),
    route(
        "POST",
        "/api/build",
        Permission("build.direct.run", Scope::Pipelines),
        "Start a build (deployment.create for virtual pipelines)",
    ),
    route(
        "GET",
        "/api/build/current",
        SignedIn,
        "The last build this server started, and its stderr's tail",
    ),
    route("GET", "/api/deployments", SignedIn, "Virtual deployments"),
    route(
        "POST",
        "/api/deployments/cleanup",
        Permission("deployment.cleanup", Scope::Target),
        "The janitor: preview, or drop what the preview listed",
    ),
    route(
        "GET",
        "/api/deployments/{deployment_id}",
        SignedIn,
        "One deployment",
    ),
    route(
        "GET",
        "/api/deployments/{deployment_id}/diff",
        SignedIn,
        "Compare two deployments",
    ),
    route(
        "POST",
        "/api/deployments/{deployment_id}/promote",
        Permission("deployment.promote", Scope::Pipelines),
        "Publish a deployment",
    ),
    route(
        "POST",
        "/api/deployments/{deployment_id}/rollback",
        Permission("deployment.promote", Scope::Pipelines),
        "Switch back to an earlier deployment",
    ),
    route(
        "POST",
        "/api/checks/run",
        Permission("quality.audit.run", Scope::Pipelines),
        "Run one audit (or test: quality.test.run)",
    ),
    route(
        "GET",
        "/api/checks/status",
        SignedIn,
        "Every check's latest result",
    ),
    route(
        "GET",
        "/api/checks/history",
        SignedIn,
        "One check's recorded results, newest first",
    ),
    route(
        "POST",
        "/api/audits/run",
        Permission("quality.audit.run", Scope::Pipelines),
        "Run named audits",
    ),
    route(
        "GET",
        "/api/audit-scheduler",
        SignedIn,
        "The audit scheduler's health",
    ),
    route(
        "GET",
        "/api/sensors",
        SignedIn,
        "The project's sensors with their statuses and last ticks, the dead letters' count and the dispatcher's health",
    ),
    route(
        "GET",
        "/api/sensors/dead-letters",
        SignedIn,
        "The sensor events that were dead-lettered and not yet retried or skipped",
    ),
    route(
        "GET",
        "/api/sensors/{name}/ticks",
        SignedIn,
        "One sensor's ticks, newest first (limit 1-500, after and before as ISO timestamps)",
    ),
    route(
        "POST",
        "/api/sensors/{name}/status",
        Permission("automation.manage", Scope::Target),
        "Start or stop a sensor, or give it back to its declared status (declared_in_code)",
    ),
    route(
        "POST",
        "/api/sensors/dead-letters/retry",
        Permission("automation.manage", Scope::Target),
        "Run a dead-lettered event again as its sensor's next attempt",
    ),
    route(
        "POST",
        "/api/sensors/dead-letters/skip",
        Permission("automation.manage", Scope::Target),
        "Skip a dead-lettered event for good, with a reason",
    ),
    route(
        "GET",
        "/api/topics",
        SignedIn,
        "Broker topics and the sources reading them",
    ),
    route(
        "POST",
        "/api/sources/{name}/messages",
        Permission("source.messages.read", Scope::Target),
        "A page of landed messages",
    ),
    route(
        "POST",
        "/api/sources/{name}/messages/record",
        Permission("source.messages.read", Scope::Target),
        "One landed message",
    ),
    route(
        "POST",
        "/api/sources/{name}/messages/facets",
        Permission("source.messages.read", Scope::Target),
        "The commonest values at a JSON path",
    ),
    route(
        "GET",
        "/api/destruction/pipelines/inactive",
        Admin,
        "Pipelines only the target's manifests still record",
    ),
    route(
        "POST",
        "/api/destruction/plans",
        Admin,
        "Plan a destruction and keep it for review (also pipeline.destroy / target.reset)",
    ),
    route(
        "GET",
        "/api/destruction/plans/{plan_id}",
        Admin,
        "One's own destruction plan",
    ),
    route(
        "POST",
        "/api/destruction/plans/{plan_id}/review",
        Admin,
        "Review a plan (planned again; drift refused)",
    ),
    route(
        "POST",
        "/api/destruction/plans/{plan_id}/execute",
        Admin,
        "Execute a reviewed plan with its challenges typed exactly",
    ),
    route("GET", "/api/admin/audit", Admin, "The account audit log"),
    route("GET", "/api/admin/users", Admin, "Every account"),
    route("POST", "/api/admin/users", Admin, "Create an account"),
    route(
        "PATCH",
        "/api/admin/users/{user_id}",
        Admin,
        "Change an account",
    ),
    route(
        "POST",
        "/api/admin/users/{user_id}/password",
        Admin,
        "Set a password",
    ),
    route(
        "POST",
        "/api/admin/users/{user_id}/roles",
        Admin,
        "Grant a system role",
    ),
    route(
        "DELETE",
        "/api/admin/users/{user_id}/roles/{role}",
        Admin,
        "Revoke a system role",
    ),
    route(
        "GET",
        "/api/admin/users/{user_id}/project-roles",
        Admin,
        "An account's project roles",
    ),
    route(
        "POST",
        "/api/admin/users/{user_id}/project-roles",
        Admin,
        "Assign a project role",
    ),
    route(
        "DELETE",
        "/api/admin/project-roles/{assignment_id}",
        Admin,
        "Revoke a project role",
    ),
];

fn access_text(access: Access) -> String {
    match access {
        Public => "public".to_owned(),
        SignedIn => "signed in".to_owned(),
        Admin => "system admin".to_owned(),
        Permission(permission, scope) => {
            let scope = match scope {
                Scope::Pipelines => "pipelines",
                Scope::Project => "project",
                Scope::Target => "target",
            };
            format!("{permission} ({scope})")
        }
    }
}

fn parameters(path: &str) -> Vec<Value> {
    path.split('/')
        .filter_map(|segment| segment.strip_prefix('{')?.strip_suffix('}'))
        .map(|name| json!({"name": name, "in": "path", "required": true, "schema": {"type": "string"}}))
        .collect()
}

/// The OpenAPI 3.1 document of [`ROUTES`].
#[must_use]
pub fn openapi() -> Value {
    let mut paths = serde_json::Map::new();
    for route in ROUTES {
        let entry = paths
            .entry(route.path)
            .or_insert_with(|| json!({}))
            .as_object_mut();
        let Some(entry) = entry else { continue };
        let mut operation = json!({
            "summary": route.summary,
            "description": format!("Who: {}.", access_text(route.access)),
            "x-streambuild-access": access_text(route.access),
            "parameters": parameters(route.path),
            "responses": {
                "200": {"description": "The answer, JSON"},
                "401": {"description": "Not signed in (`WWW-Authenticate: Session`)"},
                "403": {"description": "Not allowed: `{detail: {message, permission, reason, ...}}`"},
            },
        });
        if route.access == Public {
            operation["security"] = json!([]);
        }
        entry.insert(route.method.to_ascii_lowercase(), operation);
    }
    json!({
        "openapi": "3.1.0",
        "info": {
            "title": "StreamBuild dev server",
            "version": env!("CARGO_PKG_VERSION"),
            "description": "The API of `stb dev` (docs/dev-server.md). Unsafe methods need the X-StreamBuild-CSRF header.",
        },
        "components": {"securitySchemes": {
            "session": {"type": "apiKey", "in": "cookie", "name": "streambuild_session"},
            "proxy": {"type": "apiKey", "in": "header", "name": "X-StreamBuild-User"},
        }},
        "security": [{"session": []}, {"proxy": []}],
        "paths": paths,
    })
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;

    /// The router's paths, read from its source: every `"/api/..."` literal.
    fn routed_paths() -> BTreeSet<String> {
        let source = include_str!("routes.rs");
        source
            .split('"')
            .skip(1)
            .step_by(2)
            .filter(|literal| literal.starts_with("/api/"))
            .map(str::to_owned)
            .collect()
    }

    #[test]
    fn the_router_serves_exactly_the_declared_paths() {
        let declared: BTreeSet<String> = ROUTES.iter().map(|r| r.path.to_owned()).collect();
        assert_eq!(routed_paths(), declared);
    }

    #[test]
    fn every_mutation_declares_a_policy_beyond_signing_in_or_says_why_not() {
        // Unsafe methods open to any signed-in account: each changes nothing in the
        // warehouse or acts only on the caller's own session.
        let open: Vec<&str> = ROUTES
            .iter()
            .filter(|r| r.method != "GET" && matches!(r.access, SignedIn))
            .map(|r| r.path)
            .collect();
        assert_eq!(open, ["/api/auth/logout", "/api/warehouse/refresh"]);
    }

    #[test]
    fn the_document_lists_every_route_with_its_access() {
        let document = openapi();
        for route in ROUTES {
            let operation = &document["paths"][route.path][route.method.to_ascii_lowercase()];
            assert_eq!(operation["summary"], route.summary, "{route:?}");
            assert_eq!(operation["x-streambuild-access"], access_text(route.access));
        }
        assert_eq!(
            document["paths"]["/api/runs/{invocation_id}"]["get"]["parameters"][0]["name"],
            "invocation_id"
        );
    }
}
