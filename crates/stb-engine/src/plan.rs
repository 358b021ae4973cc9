//! `stb plan` as one operation: a [`Scope`] in, one typed [`Plan`] out (direct, virtual or
//! mixed), with the routing between the three decided here once. The CLI prints it and
//! `stb build` executes it; the dev server answers `/api/plan` with the same value, made in
//! its own process.
//!
//! The edge work is here too: reading the warehouse (a fixed number of queries, what was
//! read of each relation kept between plans in `target/.catalog_cache.json`), measuring the
//! shrink guard and checking every statement against the warehouse. The planning itself is
//! [`crate::direct::prepare`] and [`crate::staged::prepare`], pure.

use std::collections::BTreeSet;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use stb_compile::Compiled;
use stb_diagnostics::Diagnostics;
use stb_project::Project;
use stb_warehouse::{CatalogCache, Client};

use crate::EngineError;
use crate::direct::{Planned, Reads, Settings, measure, read};
use crate::scope::Scope;
use crate::staged::Route;

/// A build's plan differs from the one its `--plan-hash` names.
pub const PLAN_CHANGED_CODE: &str = "STB-BUILD-007";

/// What a plan is prepared for: only shown, or built (which needs the catalog's stamp for
/// its re-check under the lock).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Purpose {
    Show,
    Build,
}

/// One kind's plan (a whole direct or virtual scope, or one phase of a mixed one) and the
/// connection it was read through.
pub struct Prepared {
    pub planned: Planned,
    pub client: Arc<Client>,
    /// For a virtual scope: the deployment's plan, which is what the user confirms.
    pub staged: Option<crate::staged::Planned>,
    /// The warehouse refused some of the plan's statements: located errors; a plan with
    /// them fails and a build stops before it changes anything.
    pub validation: Result<(), Diagnostics>,
}

/// What `scope` plans, routed once: every model in a direct pipeline, every model in a
/// virtual one, or both kinds (the virtual phase is staged first).
pub enum Plan {
    Direct(Prepared),
    /// Its `staged` is always there.
    Virtual(Prepared),
    /// Both phases, each planned as its own build would plan it; the virtual phase's
    /// `staged` is always there.
    Mixed {
        staged: Box<Prepared>,
        direct: Box<Prepared>,
    },
}

/// Plans `scope` against the warehouse `client` reaches (its `database`): checks the flags
/// and selectors before anything here connects, routes the scope to its planner, reads,
/// plans, measures and validates. The catalog comes from `ahead` when it was read for
/// this plan while the models compiled ([`read_ahead`]: begun before these checks, it
/// only reads).
///
/// # Errors
/// Flags or selectors that cannot mean anything, a warehouse read that failed, or a plan
/// that cannot be made (a prerequisite missing, a root that cannot be bounded). Statements
/// the warehouse refuses are not an error here: see [`Plan::refused`].
pub fn plan(
    project: &Project,
    compiled: &Compiled,
    client: &Arc<Client>,
    database: &str,
    scope: &Scope,
    purpose: Purpose,
    // Taken by the first part planned (a mixed plan's virtual phase).
    mut ahead: Option<ReadAhead>,
) -> Result<Plan, EngineError> {
    scope.check_any()?;
    let route = crate::staged::route(project, compiled, &scope.select, scope.changed)?;
    // Once per plan (a mixed plan prepares two parts).
    let cluster = crate::cluster::check_target(
        project,
        client,
        database,
        match purpose {
            Purpose::Show => crate::cluster::Work::ShowPlan,
            Purpose::Build => crate::cluster::Work::Change,
        },
        !matches!(route, Route::Direct),
    )?;
    let cluster = cluster.as_ref();
    let whole = |ahead| {
        prepare(
            project,
            compiled,
            client,
            database,
            scope,
            (purpose, ahead),
            cluster,
        )
    };
    match route {
        Route::Direct => whole(ahead.take()).map(Plan::Direct),
        Route::Virtual(_) => whole(ahead.take()).map(Plan::Virtual),
        Route::Mixed {
            direct_models,
            virtual_models,
            ..
        } => {
            let mut part = |models, virtual_part| {
                prepare(
                    project,
                    compiled,
                    client,
                    database,
                    &scope.part(models, virtual_part),
                    (purpose, ahead.take()),
                    cluster,
                )
            };
            let staged = part(&virtual_models, true)?;
            let direct = part(&direct_models, false)?;
            if staged.staged.is_none() {
                return Err(EngineError::new(
                    crate::direct::VIRTUAL_CODE,
                    "the virtual phase of this mixed scope planned no deployment",
                    "plan each kind on its own (--select pipeline:<name>)",
                ));
            }
            Ok(Plan::Mixed {
                staged: Box::new(staged),
                direct: Box::new(direct),
            })
        }
    }
}

impl Plan {
    /// Its phases in the order a build runs them (a mixed plan's virtual phase first).
    #[must_use]
    pub fn parts(&self) -> Vec<&Prepared> {
        match self {
            Self::Direct(one) | Self::Virtual(one) => vec![one],
            Self::Mixed { staged, direct } => vec![&**staged, &**direct],
        }
    }

    /// Every statement the warehouse refused across the phases, so the author fixes them
    /// in one go; `None` when all passed.
    #[must_use]
    pub fn refused(&self) -> Option<Diagnostics> {
        refused(&self.parts())
    }

    /// The hash a reviewer approves.
    #[must_use]
    pub fn hash(&self) -> String {
        plan_hash(&self.parts())
    }

    /// Whether building it would change anything: a virtual phase with a subtree to
    /// rebuild, or a direct phase that rebuilds, creates, tears down, recreates or repairs.
    /// A build of a plan without work records no run, so the dev server refuses it.
    #[must_use]
    pub fn has_work(&self) -> bool {
        match self {
            Self::Direct(one) => direct_has_work(&one.planned),
            Self::Virtual(one) => staged_has_work(one),
            Self::Mixed { staged, direct } => {
                staged_has_work(staged) || direct_has_work(&direct.planned)
            }
        }
    }

    /// Every model the plan names: a direct phase's rebuilt models, a virtual phase's
    /// changed objects' models (unchanged ones included). What a build of it must be
    /// authorised for.
    #[must_use]
    pub fn models(&self) -> BTreeSet<String> {
        let mut models = BTreeSet::new();
        for part in self.parts() {
            match &part.staged {
                Some(staged) => models.extend(
                    staged
                        .plan
                        .object_changes
                        .iter()
                        .map(|change| change.model.clone()),
                ),
                None => models.extend(
                    part.planned
                        .plan
                        .entries
                        .iter()
                        .map(|entry| entry.model.clone()),
                ),
            }
        }
        models
    }

    /// The plan as `stb plan --json` prints it and `/api/plan` answers it.
    #[must_use]
    pub fn document(&self) -> Document<'_> {
        match self {
            Self::Direct(one) => Document::Direct(crate::direct::json::json(&one.planned)),
            Self::Virtual(one) => match &one.staged {
                Some(staged) => Document::Virtual(
                    crate::staged::json::json(staged)
                        .with_plan_hash(self.hash())
                        .with_replay_cost(&one.planned),
                ),
                None => Document::Direct(crate::direct::json::json(&one.planned)),
            },
            Self::Mixed { staged, direct } => Document::Mixed(Box::new(MixedJson {
                direct: crate::direct::json::json(&direct.planned),
                execution_order: ["virtual".into(), "direct".into()],
                mode: "mixed".into(),
                plan_hash: self.hash(),
                replay_cost: serde_json::to_value(replay_cost(&[staged, direct]))
                    .unwrap_or_default(),
                staged: staged.staged.as_ref().map(|deployment| {
                    crate::staged::json::json(deployment).with_replay_cost(&staged.planned)
                }),
            })),
        }
    }
}

fn direct_has_work(planned: &Planned) -> bool {
    !(planned.plan.entries.is_empty()
        && planned.plan.creation.is_empty()
        && planned.plan.teardown.is_empty()
        && planned.recreations.is_empty()
        && planned.repairs.is_empty())
}

/// A virtual phase has steps exactly when it has a subtree to rebuild (each subtree's
/// backfill, audit and publish); without its deployment it is planned as a direct one.
fn staged_has_work(part: &Prepared) -> bool {
    match &part.staged {
        Some(staged) => !staged.plan.rebuild_subtrees.is_empty(),
        None => direct_has_work(&part.planned),
    }
}

/// A plan's JSON document, whatever its kind: borrowed from the plan when it is written,
/// owned when it is read back (each kind is told by its members).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Document<'a> {
    Direct(crate::direct::json::DirectJson<'a>),
    Virtual(crate::staged::json::VirtualJson<'a>),
    Mixed(Box<MixedJson<'a>>),
}

/// A mixed plan: both phases under one hash. Members in key order, as the JSON value it
/// was sorted them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MixedJson<'a> {
    pub direct: crate::direct::json::DirectJson<'a>,
    /// `["virtual", "direct"]`: the virtual phase is staged first.
    pub execution_order: [std::borrow::Cow<'a, str>; 2],
    /// `mixed`.
    pub mode: std::borrow::Cow<'a, str>,
    pub plan_hash: String,
    /// Both phases' replays together, against the target's budget (what `stb build`
    /// checks; each phase carries its own too).
    pub replay_cost: serde_json::Value,
    #[serde(rename = "virtual")]
    pub staged: Option<crate::staged::json::VirtualJson<'a>>,
}

/// Connects nothing: plans one kind's `scope` (direct or virtual; a mixed scope is
/// refused, [`plan`] splits it) through `client`, reads the warehouse, plans and measures
/// the shrink guard. A scope of virtual pipelines plans a new deployment and its build.
/// Reached through [`plan`], which checks the target's cluster first and reads its
/// shards (`cluster`: an `on_cluster` or `sharded` target's); its catalog is `ahead`'s
/// when that was read for it.
///
/// # Errors
/// As [`plan`].
pub(crate) fn prepare(
    project: &Project,
    compiled: &Compiled,
    client: &Arc<Client>,
    database: &str,
    scope: &Scope,
    (purpose, ahead): (Purpose, Option<ReadAhead>),
    cluster: Option<&stb_plan::cluster::ClusterTarget>,
) -> Result<Prepared, EngineError> {
    // Flags and selectors are checked before anything is read here (a read ahead only
    // read).
    let scope_kind = match crate::staged::route(project, compiled, &scope.select, scope.changed)? {
        Route::Direct => ScopeKind::Direct(scope.resolve(compiled)?),
        Route::Virtual(models) => ScopeKind::Virtual(models),
        Route::Mixed {
            direct,
            virtual_pipelines,
            ..
        } => return Err(crate::staged::mixed_refusal(&direct, &virtual_pipelines)),
    };
    let ahead = ahead
        .and_then(|ahead| ahead.catalog_for(client, database, purpose, &compiled.plan_sources));
    let reads = match ahead {
        Some(catalog) => crate::direct::read_with(client, database, compiled, catalog?)?,
        None => {
            let mut cache = CatalogCache::load(&project.root);
            let reads = read(
                client,
                database,
                compiled,
                purpose == Purpose::Build,
                Some(&mut cache),
            )?;
            // Saved now and let go: the plan keeps its own copies in the catalog.
            cache.save(&project.root);
            reads
        }
    };
    let reads = Reads {
        cluster: cluster.cloned(),
        ..reads
    };
    let settings = Settings::from_env(&|name| std::env::var(name).ok())?;
    let (mut planned, staged) = match &scope_kind {
        ScopeKind::Direct(resolved) => (
            crate::direct::prepare(project, compiled, resolved, &reads, settings)?,
            None,
        ),
        ScopeKind::Virtual(models) => {
            let staged = plan_deployment(compiled, client, &reads, scope, models)?;
            let mut planned = crate::staged::prepare_build(
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
    measure(client, &mut planned)?;
    // Every statement the build would run, checked before anyone is asked to confirm it.
    let validation = crate::validation::validate(
        client,
        project,
        &compiled.plan_sources,
        &planned,
        match purpose {
            Purpose::Build => crate::validation::Stamp::Read(reads.catalog_stamp.clone()),
            Purpose::Show => crate::validation::Stamp::NotNeeded,
        },
    )
    .map(|validated| planned.validated = Some(validated));
    let mut staged = staged;
    if let Some(staged) = &mut staged {
        staged
            .warnings
            .extend(crate::staged::measured_warnings(&planned));
    }
    Ok(Prepared {
        planned,
        client: Arc::clone(client),
        staged,
        validation,
    })
}

/// Every statement the warehouse refused across `parts` (a mixed scope's two phases), so
/// the author fixes them in one go; `None` when all passed.
#[must_use]
pub fn refused(parts: &[&Prepared]) -> Option<Diagnostics> {
    let mut invalid = Diagnostics::new();
    for part in parts {
        if let Err(found) = &part.validation {
            invalid.extend(found.clone());
        }
    }
    (!invalid.is_empty()).then_some(invalid)
}

/// The hash a reviewer approves for `parts` (one, or a mixed scope's two phases in order).
#[must_use]
pub fn plan_hash(parts: &[&Prepared]) -> String {
    match parts {
        [one] => one.planned.plan_hash(),
        _ => {
            let joined: Vec<String> = parts.iter().map(|p| p.planned.plan_hash()).collect();
            stb_warehouse::statements::sha256_hex(&joined.join("\n"))
        }
    }
}

/// The replays of `parts` (one, or a mixed scope's two phases) together, against the
/// target's budget: what a build checks before anything runs.
#[must_use]
pub fn replay_cost(parts: &[&Prepared]) -> stb_plan::cost::CostSummary {
    let costs: Vec<stb_plan::cost::ReplayCost> = parts
        .iter()
        .flat_map(|p| p.planned.replay_costs.iter().cloned())
        .collect();
    let first = parts.first().map(|p| &p.planned);
    stb_plan::cost::summarise(
        &costs,
        first.and_then(|p| p.replay_throughput),
        first.map(|p| p.replay_budget).unwrap_or_default(),
    )
}

/// Refuses a build whose plan is not the one reviewed (`--plan-hash`).
///
/// # Errors
/// `STB-BUILD-007` with both hashes.
pub fn check_plan_hash(expected: Option<&str>, parts: &[&Prepared]) -> Result<(), EngineError> {
    let Some(expected) = expected else {
        return Ok(());
    };
    let actual = plan_hash(parts);
    if actual == expected {
        return Ok(());
    }
    Err(EngineError::new(
        PLAN_CHANGED_CODE,
        format!(
            "the plan changed since it was reviewed (reviewed {expected}, now {actual}): the project or the warehouse changed; nothing was changed"
        ),
        "plan again, review what changed, and build with the new plan's hash",
    )
    .of_kind(crate::ErrorKind::Conflict))
}

/// The record of a build the validation stopped: how many statements the warehouse refused
/// and the first, located (the whole list goes to the terminal or the JSON).
#[must_use]
pub fn invalid_summary(invalid: &Diagnostics) -> String {
    let sorted = invalid.clone().into_sorted();
    let first = sorted.first().map(ToString::to_string).unwrap_or_default();
    format!(
        "{} statement(s) failed the warehouse's check; nothing was changed. {first}",
        sorted.len()
    )
}

/// What a scope needs planned.
enum ScopeKind {
    Direct(crate::direct::Resolved),
    Virtual(BTreeSet<String>),
}

/// What a fresh deployment id is made of: the clock now and six random hex characters.
fn fresh_id_inputs() -> (i64, String) {
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
    let suffix = uuid::Uuid::new_v4().simple().to_string()[..6].to_owned();
    (now_ms, suffix)
}

/// Reads the deployed state and plans a deployment of the virtual `models`.
fn plan_deployment(
    compiled: &Compiled,
    client: &Client,
    reads: &Reads,
    scope: &Scope,
    models: &BTreeSet<String>,
) -> Result<crate::staged::Planned, EngineError> {
    let database = reads.database.as_str();
    let in_scope: Vec<&stb_plan::direct::PlanModel> = compiled
        .plan_models
        .iter()
        .filter(|m| models.contains(&m.name))
        .collect();
    let deployed = crate::staged::read(client, database, &reads.catalog, &in_scope)?;
    let (now_ms, suffix) = fresh_id_inputs();
    let planned = crate::staged::prepare(
        compiled,
        database,
        &scope.staged_request(),
        models,
        deployed,
        now_ms,
        &suffix,
    )?;
    crate::staged::refuse_complete(client, database, &planned.deployment)?;
    Ok(planned)
}

pub mod markdown;
mod read_ahead;

pub use read_ahead::{ReadAhead, read_ahead};

#[cfg(test)]
mod examples_tests;
