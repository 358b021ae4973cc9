//! The plan `stb plan` shows and `stb build` runs: the CLI's edge around the engine
//! (connect, read, plan, measure), shared by both commands.

use std::sync::Arc;

use stb_engine::direct::{Planned, Settings, measure, prepare as plan, read};

use stb_engine::staged::Route;

use crate::args::{ConnectionArgs, ScopeArgs};
use crate::output::Failure;

/// A plan and the connection it was read through.
pub(crate) struct Prepared {
    pub(crate) planned: Planned,
    pub(crate) client: Arc<stb_warehouse::Client>,
    /// For a virtual scope: the deployment's plan, which is what the user confirms.
    pub(crate) staged: Option<stb_engine::staged::Planned>,
    /// The warehouse refused some of the plan's statements: located errors; a plan with
    /// them fails and a build stops before it changes anything.
    pub(crate) validation: Result<(), stb_diagnostics::Diagnostics>,
}

/// Checks the flags and selectors, connects, reads the warehouse, plans and measures the
/// shrink guard. A scope of virtual pipelines plans a new deployment and its build.
/// What a plan is prepared for: only shown, or built (which needs the catalog's stamp for
/// its re-check under the lock).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Purpose {
    Show,
    Build,
}

pub(crate) fn prepare(
    project: &stb_project::Project,
    compiled: &stb_compile::Compiled,
    connection: &ConnectionArgs,
    scope: &ScopeArgs,
    purpose: Purpose,
) -> Result<Prepared, Failure> {
    // Flags and selectors are checked before anything connects.
    let scope_kind =
        match stb_engine::staged::route(project, compiled, &scope.select, scope.changed)? {
            Route::Direct => ScopeKind::Direct(scope.request().resolve(compiled)?),
            Route::Virtual(models) => ScopeKind::Virtual(models),
            Route::Mixed {
                direct,
                virtual_pipelines,
                ..
            } => {
                return Err(stb_engine::staged::mixed_refusal(&direct, &virtual_pipelines).into());
            }
        };
    let (client, database) = connection.connect(project)?;
    let reads = {
        let mut views = crate::catalog_cache::load(&project.root);
        let reads = read(
            &client,
            &database,
            compiled,
            purpose == Purpose::Build,
            Some(&mut views),
        )?;
        // Saved now and let go: the plan keeps its own copies in the catalog.
        crate::catalog_cache::save(&project.root, &views);
        reads
    };
    let settings = Settings::from_env(&|name| std::env::var(name).ok())?;
    let (mut planned, staged) = match &scope_kind {
        ScopeKind::Direct(resolved) => (plan(project, compiled, resolved, &reads, settings)?, None),
        ScopeKind::Virtual(models) => {
            let staged = plan_deployment(compiled, &client, &reads, scope, models)?;
            let mut planned = stb_engine::staged::prepare_build(
                project,
                compiled,
                &staged,
                &staged.deployed,
                &reads,
                settings,
            )?;
            // Nothing differs from the active deployment: no deployment to build.
            planned.nothing_changed = staged.plan.deployed_models.is_empty();
            (planned, Some(staged))
        }
    };
    measure(&client, &mut planned)?;
    // Every statement the build would run, checked before anyone is asked to confirm it.
    let validation = stb_engine::validation::validate(
        &client,
        project,
        &compiled.plan_sources,
        &planned,
        match purpose {
            Purpose::Build => stb_engine::validation::Stamp::Read(reads.catalog_stamp.clone()),
            Purpose::Show => stb_engine::validation::Stamp::NotNeeded,
        },
    )
    .map(|validated| planned.validated = Some(validated));
    let mut staged = staged;
    if let Some(staged) = &mut staged {
        staged
            .warnings
            .extend(stb_engine::staged::measured_warnings(&planned));
    }
    Ok(Prepared {
        planned,
        client: Arc::new(client),
        staged,
        validation,
    })
}

/// Every statement the warehouse refused across `parts` (a mixed scope's two phases), so
/// the author fixes them in one go; `None` when all passed.
pub(crate) fn refused(parts: &[&Prepared]) -> Option<stb_diagnostics::Diagnostics> {
    let mut invalid = stb_diagnostics::Diagnostics::new();
    for part in parts {
        if let Err(found) = &part.validation {
            invalid.extend(found.clone());
        }
    }
    (!invalid.is_empty()).then_some(invalid)
}

/// The hash a reviewer approves for `parts` (one, or a mixed scope's two phases in order).
pub(crate) fn plan_hash(parts: &[&Prepared]) -> String {
    match parts {
        [one] => one.planned.plan_hash(),
        _ => {
            let joined: Vec<String> = parts.iter().map(|p| p.planned.plan_hash()).collect();
            stb_warehouse::statements::sha256_hex(&joined.join("\n"))
        }
    }
}

/// Refuses a build whose plan is not the one reviewed (`--plan-hash`).
pub(crate) fn check_plan_hash(expected: Option<&str>, parts: &[&Prepared]) -> Result<(), Failure> {
    let Some(expected) = expected else {
        return Ok(());
    };
    let actual = plan_hash(parts);
    if actual == expected {
        return Ok(());
    }
    Err(Failure {
        code: PLAN_CHANGED_CODE,
        message: format!(
            "the plan changed since it was reviewed (reviewed {expected}, now {actual}): the project or the warehouse changed; nothing was changed"
        ),
        hint: "plan again, review what changed, and build with the new plan's hash".into(),
    })
}

/// A build's plan differs from the one its `--plan-hash` names.
pub(crate) const PLAN_CHANGED_CODE: &str = "STB-BUILD-007";

/// The record of a build the validation stopped: how many statements the warehouse refused
/// and the first, located (the whole list goes to the terminal or the JSON).
pub(crate) fn invalid_summary(invalid: &stb_diagnostics::Diagnostics) -> String {
    let sorted = invalid.clone().into_sorted();
    let first = sorted.first().map(ToString::to_string).unwrap_or_default();
    format!(
        "{} statement(s) failed the warehouse's check; nothing was changed. {first}",
        sorted.len()
    )
}

/// What a scope needs planned.
enum ScopeKind {
    Direct(stb_engine::direct::Resolved),
    Virtual(std::collections::BTreeSet<String>),
}

/// What a fresh deployment id is made of: the clock now and six random hex characters.
pub(crate) fn fresh_id_inputs() -> (i64, String) {
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
    let suffix = uuid::Uuid::new_v4().simple().to_string()[..6].to_owned();
    (now_ms, suffix)
}

/// Reads the deployed state and plans a deployment of the virtual `models`.
pub(crate) fn plan_deployment(
    compiled: &stb_compile::Compiled,
    client: &stb_warehouse::Client,
    reads: &stb_engine::direct::Reads,
    scope: &ScopeArgs,
    models: &std::collections::BTreeSet<String>,
) -> Result<stb_engine::staged::Planned, Failure> {
    let database = reads.database.as_str();
    let in_scope: Vec<&stb_plan::direct::PlanModel> = compiled
        .plan_models
        .iter()
        .filter(|m| models.contains(&m.name))
        .collect();
    let deployed = stb_engine::staged::read(client, database, &reads.catalog, &in_scope)?;
    let (now_ms, suffix) = fresh_id_inputs();
    let planned = stb_engine::staged::prepare(
        compiled,
        database,
        &scope.staged_request(),
        models,
        deployed,
        now_ms,
        &suffix,
    )?;
    stb_engine::staged::refuse_complete(client, database, &planned.deployment)?;
    Ok(planned)
}
