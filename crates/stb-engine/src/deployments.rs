//! Deployments after their build: the inventory (`stb deployment list | show`), promotion
//! and rollback. The inventory is rebuilt from the metadata (headers, recorded objects,
//! publications) and the catalog (stable bindings, existing copies) in six queries.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;
use stb_plan::deployment::split_physical;
use stb_warehouse::deployments::{
    Binding, HeaderRow, ObjectRow, PublicationRow, bindings as live_bindings, publish, read_all,
};
use stb_warehouse::{Client, TargetLock};

use crate::EngineError;

/// Unknown, incomplete or unusable deployment.
pub const DEPLOYMENT_CODE: &str = "STB-DEPLOY-001";
/// A relation a promotion or rollback needs is gone.
pub const MISSING_CODE: &str = "STB-DEPLOY-002";
/// A rollback has nothing sound to go back to.
pub const ROLLBACK_CODE: &str = "STB-DEPLOY-003";

/// One deployment as `stb deployment list` shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Record {
    pub deployment_id: String,
    /// `metadata_missing`, `incomplete`, `physical_missing`, `active`, `superseded`, `staged`.
    pub state: &'static str,
    pub created_at: Option<String>,
    /// `incomplete`, `published` or `staged`.
    pub persisted_status: &'static str,
    pub root_names: Vec<String>,
    pub physical_relation_names: Vec<String>,
    pub missing_physical_relation_names: Vec<String>,
    pub active_binding_names: Vec<String>,
    pub latest_published_at: Option<String>,
    pub boundary_time: Option<String>,
}

/// What the target holds, as read once.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct State {
    pub headers: Vec<HeaderRow>,
    pub objects: Vec<ObjectRow>,
    pub publications: Vec<PublicationRow>,
    /// Stable view -> the relation it selects from.
    pub bindings: BTreeMap<String, String>,
    pub relations: BTreeSet<String>,
    /// Each relation's columns (name, type), as the catalog shows them.
    pub columns: BTreeMap<String, Vec<(String, String)>>,
    /// Each table's sorting key as the catalog prints it (what a data diff matches rows
    /// by); empty for views.
    pub sorting_keys: BTreeMap<String, String>,
    /// Each relation's engine.
    pub engines: BTreeMap<String, String>,
}

/// Reads the deployment metadata and the catalog of `database`.
///
/// # Errors
/// A read failed.
pub fn read_state(client: &Client, database: &str) -> Result<State, EngineError> {
    let metadata = read_all(client, database).map_err(|e| EngineError::from(&e))?;
    let catalog = client
        .load_catalog(database)
        .map_err(|e| EngineError::from(&e))?;
    Ok(State {
        headers: metadata.headers,
        objects: metadata.objects,
        publications: metadata.publications,
        bindings: live_bindings(&catalog, database),
        relations: catalog.relations().iter().map(|r| r.name.clone()).collect(),
        columns: catalog
            .relations()
            .iter()
            .map(|r| {
                (
                    r.name.clone(),
                    r.columns
                        .iter()
                        .map(|c| (c.name.clone(), c.data_type.clone()))
                        .collect(),
                )
            })
            .collect(),
        sorting_keys: catalog
            .relations()
            .iter()
            .filter(|r| !r.sorting_key.is_empty())
            .map(|r| (r.name.clone(), r.sorting_key.clone()))
            .collect(),
        engines: catalog
            .relations()
            .iter()
            .map(|r| (r.name.clone(), r.engine.clone()))
            .collect(),
    })
}

/// Every deployment, newest id first.
#[must_use]
pub fn inventory(state: &State) -> Vec<Record> {
    let mut ids: BTreeSet<&str> = state
        .headers
        .iter()
        .map(|h| h.deployment_id.as_str())
        .collect();
    ids.extend(state.objects.iter().map(|o| o.deployment_id.as_str()));
    // Copies and bindings that no metadata explains.
    let orphans: BTreeSet<String> = state
        .relations
        .iter()
        .chain(state.bindings.values())
        .filter_map(|name| split_physical(name).map(|(_, id)| id.to_string()))
        .filter(|id| !ids.contains(id.as_str()))
        .collect();
    let mut records: Vec<Record> = ids
        .iter()
        .map(|id| record(state, id))
        .chain(orphans.iter().map(|id| orphan_record(state, id)))
        .collect();
    // Newest first: by id, whose timestamp has whole seconds; deployments built within
    // the same second by when their objects were recorded (the build's order), not by
    // their random suffix.
    let recorded_at = |id: &str| {
        state
            .objects
            .iter()
            .filter(|o| o.deployment_id == id)
            .map(|o| o.observed_at.as_str())
            .min()
            .unwrap_or_default()
    };
    records.sort_by(|a, b| {
        let key = |r: &Record| {
            (
                r.deployment_id.get(..16).unwrap_or_default().to_owned(),
                recorded_at(&r.deployment_id).to_owned(),
            )
        };
        key(b)
            .cmp(&key(a))
            .then_with(|| b.deployment_id.cmp(&a.deployment_id))
    });
    records
}

fn record(state: &State, id: &str) -> Record {
    let header = state.headers.iter().find(|h| h.deployment_id == id);
    let objects: Vec<&ObjectRow> = state
        .objects
        .iter()
        .filter(|o| o.deployment_id == id)
        .collect();
    let physical: Vec<String> = objects.iter().map(|o| o.physical_name.clone()).collect();
    let missing: Vec<String> = physical
        .iter()
        .filter(|p| !state.relations.contains(*p))
        .cloned()
        .collect();
    let active: Vec<String> = active_bindings(state, id);
    let published: Vec<&PublicationRow> = state
        .publications
        .iter()
        .filter(|p| p.deployment_id == id)
        .collect();
    let persisted_status = if header.is_none() {
        "incomplete"
    } else if published.is_empty() {
        "staged"
    } else {
        "published"
    };
    let lifecycle = if header.is_none() {
        "incomplete"
    } else if objects.is_empty() || !missing.is_empty() {
        "physical_missing"
    } else if !active.is_empty() {
        "active"
    } else if !published.is_empty() {
        "superseded"
    } else {
        "staged"
    };
    let mut roots: Vec<String> = objects
        .iter()
        .filter(|o| o.is_selected_root)
        .map(|o| o.model.clone())
        .collect();
    roots.sort();
    roots.dedup();
    Record {
        deployment_id: id.to_owned(),
        state: lifecycle,
        created_at: header
            .map(|h| h.created_at.clone())
            .or_else(|| objects.iter().map(|o| o.observed_at.clone()).min()),
        persisted_status,
        root_names: roots,
        physical_relation_names: physical,
        missing_physical_relation_names: missing,
        active_binding_names: active,
        latest_published_at: published.iter().map(|p| p.published_at.clone()).max(),
        boundary_time: header.map(|h| h.boundary_time.clone()),
    }
}

fn orphan_record(state: &State, id: &str) -> Record {
    let physical: Vec<String> = state
        .relations
        .iter()
        .filter(|name| split_physical(name).is_some_and(|(_, d)| d.as_str() == id))
        .cloned()
        .collect();
    Record {
        deployment_id: id.to_owned(),
        state: "metadata_missing",
        created_at: None,
        persisted_status: "incomplete",
        root_names: Vec::new(),
        physical_relation_names: physical,
        missing_physical_relation_names: Vec::new(),
        active_binding_names: active_bindings(state, id),
        latest_published_at: None,
        boundary_time: None,
    }
}

/// The stable views that select from deployment `id`'s copies.
fn active_bindings(state: &State, id: &str) -> Vec<String> {
    state
        .bindings
        .iter()
        .filter(|(logical, physical)| {
            split_physical(physical).is_some_and(|(name, d)| d.as_str() == id && name == *logical)
        })
        .map(|(logical, _)| logical.clone())
        .collect()
}

/// A promotion or rollback: what it switched.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Publication {
    pub deployment_id: String,
    pub operation: &'static str,
    pub previous_deployment_id: Option<String>,
    pub publication_id: String,
    pub published_at: String,
    /// `(stable view, physical relation)`, in the order they were switched.
    pub bindings: Vec<(String, String)>,
}

/// The bindings promoting `id` switches: its tables, then its views, by name.
///
/// # Errors
/// The deployment is unknown or incomplete, or a copy is gone.
pub fn promotion_bindings(state: &State, id: &str) -> Result<Vec<Binding>, EngineError> {
    let record = inventory(state)
        .into_iter()
        .find(|r| r.deployment_id == id)
        .ok_or_else(|| {
            EngineError::new(
                DEPLOYMENT_CODE,
                format!("no deployment {id} in this target"),
                "`stb deployment list` shows the deployments",
            )
        })?;
    if record.persisted_status == "incomplete" {
        return Err(EngineError::new(
            DEPLOYMENT_CODE,
            format!(
                "deployment {id} is incomplete (its build did not finish): it cannot be promoted"
            ),
            "build again with --deployment-id to finish it, or build a new deployment",
        ));
    }
    if !record.missing_physical_relation_names.is_empty() {
        return Err(EngineError::new(
            MISSING_CODE,
            format!(
                "deployment {id} has missing staged relations: {}",
                record.missing_physical_relation_names.join(", ")
            ),
            "build a new deployment",
        ));
    }
    let mut objects: Vec<&ObjectRow> = state
        .objects
        .iter()
        .filter(|o| o.deployment_id == id && (o.object_type == "table" || o.object_type == "view"))
        .collect();
    objects.sort_by(|a, b| {
        (a.object_type != "table", &a.logical_name)
            .cmp(&(b.object_type != "table", &b.logical_name))
    });
    Ok(objects
        .into_iter()
        .map(|o| Binding {
            logical_name: o.logical_name.clone(),
            physical_name: o.physical_name.clone(),
        })
        .collect())
}

/// One publication event: its rows grouped.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Event<'s> {
    id: &'s str,
    deployment_id: &'s str,
    published_at: &'s str,
    bindings: BTreeSet<(&'s str, &'s str)>,
}

fn events(state: &State) -> Vec<Event<'_>> {
    let mut by_id: BTreeMap<&str, Event<'_>> = BTreeMap::new();
    for row in &state.publications {
        by_id
            .entry(row.publication_id.as_str())
            .or_insert_with(|| Event {
                id: &row.publication_id,
                deployment_id: &row.deployment_id,
                published_at: &row.published_at,
                bindings: BTreeSet::new(),
            })
            .bindings
            .insert((&row.logical_name, &row.physical_name));
    }
    let mut events: Vec<Event<'_>> = by_id.into_values().collect();
    events.sort_by(|a, b| (a.published_at, a.id).cmp(&(b.published_at, b.id)));
    events
}

/// What a rollback asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RollbackTo {
    Previous,
    Deployment(String),
}

/// The current deployment and the bindings a rollback restores.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RollbackPlan {
    pub current_deployment_id: String,
    pub target_deployment_id: String,
    pub bindings: Vec<Binding>,
}

/// Decides a rollback. The current publication is the latest one whose every binding is
/// live (a deployment that copied part of the project binds only its part, so the live
/// set is the union of several publications; the reference asked for the whole live set
/// to equal one publication, which partial deployments never satisfy).
///
/// # Errors
/// Nothing is published, the live bindings match no publication, the target is the
/// current deployment or was never published, or its copies are gone.
pub fn plan_rollback(state: &State, to: &RollbackTo) -> Result<RollbackPlan, EngineError> {
    let refuse = |message: String, hint: &str| EngineError::new(ROLLBACK_CODE, message, hint);
    let events = events(state);
    let live = |binding: &(&str, &str)| {
        state
            .bindings
            .get(binding.0)
            .is_some_and(|p| p == binding.1)
    };
    if state.bindings.is_empty() || events.is_empty() {
        return Err(refuse(
            "Rollback requires an active published deployment".to_owned(),
            "promote a deployment first (`stb deployment promote <id>`)",
        ));
    }
    let Some(current_at) = events.iter().rposition(|e| e.bindings.iter().all(live)) else {
        return Err(refuse(
            "Active bindings do not match a complete publication; repair the target before rollback"
                .to_owned(),
            "`stb deployment list` shows what is active; promote a deployment to bind it whole",
        ));
    };
    let current = &events[current_at];
    let target = match to {
        RollbackTo::Previous => events[..current_at]
            .iter()
            .rev()
            .find(|e| e.bindings != current.bindings)
            .ok_or_else(|| {
                refuse(
                    format!(
                        "deployment {} has no earlier publication to roll back to",
                        current.deployment_id
                    ),
                    "name a deployment: `stb deployment rollback <id>`",
                )
            })?,
        RollbackTo::Deployment(id) => {
            if id == current.deployment_id {
                return Err(refuse(
                    format!("deployment {id} is already active"),
                    "`stb deployment list` shows the others",
                ));
            }
            events
                .iter()
                .rev()
                .find(|e| e.deployment_id == id)
                .ok_or_else(|| {
                    refuse(
                        format!("deployment {id} has no successful publication"),
                        "promote it instead: `stb deployment promote <id>`",
                    )
                })?
        }
    };
    let missing: Vec<&str> = target
        .bindings
        .iter()
        .map(|(_, physical)| *physical)
        .filter(|p| !state.relations.contains(*p))
        .collect();
    if !missing.is_empty() {
        return Err(EngineError::new(
            MISSING_CODE,
            format!(
                "deployment {} has missing retained relations: {}",
                target.deployment_id,
                missing.join(", ")
            ),
            "roll back to another deployment, or build a new one",
        ));
    }
    let mut bindings: Vec<(&str, &str)> = target.bindings.iter().copied().collect();
    let is_view = |logical: &str| {
        state
            .objects
            .iter()
            .any(|o| o.logical_name == logical && o.object_type == "view")
    };
    bindings.sort_by_key(|(logical, _)| (is_view(logical), *logical));
    Ok(RollbackPlan {
        current_deployment_id: current.deployment_id.to_owned(),
        target_deployment_id: target.deployment_id.to_owned(),
        bindings: bindings
            .into_iter()
            .map(|(logical, physical)| Binding {
                logical_name: logical.to_owned(),
                physical_name: physical.to_owned(),
            })
            .collect(),
    })
}

/// Switches `bindings` under the target lock and records the publication.
///
/// # Errors
/// The lock is held, or a switch or the record failed (the message says which views
/// were switched).
pub fn switch(
    client: &Client,
    database: &str,
    owner: &str,
    deployment_id: &str,
    operation: &'static str,
    previous: Option<&str>,
    bindings: &[Binding],
) -> Result<Publication, EngineError> {
    let lock =
        TargetLock::acquire(client, database, owner, true).map_err(|e| EngineError::from(&e))?;
    let published = publish(
        client,
        database,
        deployment_id,
        operation,
        previous,
        bindings,
    );
    let released = lock.release();
    let (publication_id, published_at) = published.map_err(|e| {
        EngineError::new(
            crate::build::FAILED_CODE,
            e.message,
            "the views listed as switched point at the new relations; run the command again to finish",
        )
    })?;
    released.map_err(|e| EngineError::from(&e))?;
    Ok(Publication {
        deployment_id: deployment_id.to_owned(),
        operation,
        previous_deployment_id: previous.map(str::to_owned),
        publication_id,
        published_at,
        bindings: bindings
            .iter()
            .map(|b| (b.logical_name.clone(), b.physical_name.clone()))
            .collect(),
    })
}

/// One side of a diff: what readers see now, or a deployment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Endpoint {
    Active,
    Deployment(String),
}

impl Endpoint {
    /// `active` or a deployment id.
    ///
    /// # Errors
    /// Anything else.
    pub fn parse(text: &str) -> Result<Self, EngineError> {
        if text == "active" {
            return Ok(Self::Active);
        }
        stb_plan::deployment::DeploymentId::parse(text)
            .map(|id| Self::Deployment(id.to_string()))
            .map_err(|e| {
                EngineError::new(
                    DEPLOYMENT_CODE,
                    e.to_string(),
                    "use `active` or a deployment id",
                )
            })
    }

    fn label(&self) -> String {
        match self {
            Self::Active => "active".to_owned(),
            Self::Deployment(id) => id.clone(),
        }
    }
}

/// `ID` (what promoting it would change: `active:ID`) or `FROM:TO`.
///
/// # Errors
/// An endpoint that is neither `active` nor a deployment id.
pub fn parse_range(text: &str) -> Result<(Endpoint, Endpoint), EngineError> {
    match text.split_once(':') {
        Some((from, to)) => Ok((Endpoint::parse(from)?, Endpoint::parse(to)?)),
        None => Ok((Endpoint::Active, Endpoint::parse(text)?)),
    }
}

/// One logical relation compared between two endpoints.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RelationDiff {
    pub name: String,
    /// `added`, `removed`, `changed`, `unchanged` or `physical_missing`.
    pub status: &'static str,
    pub from_relation: Option<String>,
    pub to_relation: Option<String>,
    pub from_rows: Option<u64>,
    pub to_rows: Option<u64>,
    pub columns_added: Vec<String>,
    pub columns_removed: Vec<String>,
    pub columns_retyped: Vec<String>,
}

/// A diff between two endpoints.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Diff {
    pub from: String,
    pub to: String,
    pub relations: Vec<RelationDiff>,
}

/// The stable bindings an endpoint stands for: what readers see now; for a deployment
/// compared with `active`, what they would see once it is promoted (the active bindings
/// with its own over them); for a deployment against another, its own.
fn bindings_of(
    state: &State,
    endpoint: &Endpoint,
    over_active: bool,
) -> Result<BTreeMap<String, String>, EngineError> {
    match endpoint {
        Endpoint::Active => Ok(state.bindings.clone()),
        Endpoint::Deployment(id) => {
            let record = inventory(state)
                .into_iter()
                .find(|r| &r.deployment_id == id);
            if record
                .as_ref()
                .is_none_or(|r| r.persisted_status == "incomplete")
            {
                return Err(EngineError::new(
                    DEPLOYMENT_CODE,
                    format!("deployment {id} is unknown or incomplete: it cannot be compared"),
                    "`stb deployment list` shows the complete ones",
                ));
            }
            let mut bindings = if over_active {
                state.bindings.clone()
            } else {
                BTreeMap::new()
            };
            bindings.extend(
                state
                    .objects
                    .iter()
                    .filter(|o| &o.deployment_id == id && o.object_type != "materialized_view")
                    .map(|o| (o.logical_name.clone(), o.physical_name.clone())),
            );
            Ok(bindings)
        }
    }
}

/// Compares two endpoints relation by relation: their columns (from the catalog) and, given
/// `rows`, their row counts. [`diff_relations`] says which relations need counting.
///
/// # Errors
/// An unknown or incomplete deployment.
pub fn diff(
    state: &State,
    from: &Endpoint,
    to: &Endpoint,
    rows: &BTreeMap<String, u64>,
) -> Result<Diff, EngineError> {
    let over_active = *from == Endpoint::Active || *to == Endpoint::Active;
    let before = bindings_of(state, from, over_active)?;
    let after = bindings_of(state, to, over_active)?;
    let names: BTreeSet<&String> = before.keys().chain(after.keys()).collect();
    let relations = names
        .into_iter()
        .map(|name| {
            let (from_relation, to_relation) = (before.get(name), after.get(name));
            let columns = |r: Option<&String>| {
                r.and_then(|r| state.columns.get(r))
                    .map(|c| c.iter().cloned().collect::<BTreeMap<String, String>>())
            };
            let (old, new) = (columns(from_relation), columns(to_relation));
            let mut entry = RelationDiff {
                name: name.clone(),
                status: "unchanged",
                from_relation: from_relation.cloned(),
                to_relation: to_relation.cloned(),
                from_rows: from_relation.and_then(|r| rows.get(r).copied()),
                to_rows: to_relation.and_then(|r| rows.get(r).copied()),
                columns_added: Vec::new(),
                columns_removed: Vec::new(),
                columns_retyped: Vec::new(),
            };
            let missing = |r: Option<&String>| r.is_some_and(|r| !state.relations.contains(r));
            entry.status = match (from_relation, to_relation) {
                _ if missing(from_relation) || missing(to_relation) => "physical_missing",
                (None, Some(_)) => "added",
                (Some(_), None) => "removed",
                (Some(a), Some(b)) if a == b => "unchanged",
                _ => {
                    let (old, new) = (old.unwrap_or_default(), new.unwrap_or_default());
                    entry.columns_added = new
                        .keys()
                        .filter(|c| !old.contains_key(*c))
                        .cloned()
                        .collect();
                    entry.columns_removed = old
                        .keys()
                        .filter(|c| !new.contains_key(*c))
                        .cloned()
                        .collect();
                    entry.columns_retyped = new
                        .iter()
                        .filter(|(c, t)| old.get(*c).is_some_and(|o| o != *t))
                        .map(|(c, _)| c.clone())
                        .collect();
                    let same_columns = entry.columns_added.is_empty()
                        && entry.columns_removed.is_empty()
                        && entry.columns_retyped.is_empty();
                    if same_columns && entry.from_rows == entry.to_rows {
                        "unchanged"
                    } else {
                        "changed"
                    }
                }
            };
            entry
        })
        .collect();
    Ok(Diff {
        from: from.label(),
        to: to.label(),
        relations,
    })
}

/// The physical relations whose rows a diff compares: both sides of every relation that
/// is bound differently (a relation bound alike is not counted).
///
/// # Errors
/// An unknown or incomplete deployment.
pub fn diff_relations(
    state: &State,
    from: &Endpoint,
    to: &Endpoint,
) -> Result<Vec<String>, EngineError> {
    let over_active = *from == Endpoint::Active || *to == Endpoint::Active;
    let before = bindings_of(state, from, over_active)?;
    let after = bindings_of(state, to, over_active)?;
    let mut counted: BTreeSet<String> = BTreeSet::new();
    for (name, physical) in before.iter().chain(after.iter()) {
        let other = if before.get(name) == Some(physical) {
            after.get(name)
        } else {
            before.get(name)
        };
        if other != Some(physical) && state.relations.contains(physical) {
            counted.insert(physical.clone());
        }
    }
    Ok(counted.into_iter().collect())
}

/// One logical relation's health, as `stb doctor` reports it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Diagnosis {
    pub table_name: String,
    /// `active_view_present`, `invalid_active_view` or `logical_view_missing`.
    pub state_kind: &'static str,
    pub active_deployment_id: Option<String>,
    /// Complete deployments holding a copy of it, newest first.
    pub candidate_deployment_ids: Vec<String>,
    /// What to run, when something is wrong.
    pub repair: Option<String>,
}

/// Every logical relation that has a stable view or deployment copies, and whether its
/// binding is sound: drift between the metadata and the catalog (a stable view dropped or
/// pointed elsewhere by hand) shows here with the command that repairs it.
#[must_use]
pub fn diagnose(state: &State) -> Vec<Diagnosis> {
    let complete: BTreeSet<&str> = state
        .headers
        .iter()
        .map(|h| h.deployment_id.as_str())
        .collect();
    let mut logical: BTreeSet<&str> = state.bindings.keys().map(String::as_str).collect();
    logical.extend(
        state
            .objects
            .iter()
            .filter(|o| o.object_type != "materialized_view")
            .map(|o| o.logical_name.as_str()),
    );
    logical
        .into_iter()
        .map(|name| {
            let mut candidates: Vec<String> = state
                .objects
                .iter()
                .filter(|o| {
                    o.logical_name == name
                        && complete.contains(o.deployment_id.as_str())
                        && state.relations.contains(&o.physical_name)
                })
                .map(|o| o.deployment_id.clone())
                .collect();
            candidates.sort_by(|a, b| b.cmp(a));
            candidates.dedup();
            let bound = state.bindings.get(name);
            let active = bound
                .and_then(|physical| split_physical(physical))
                .filter(|(logical, _)| *logical == name)
                .map(|(_, id)| id.to_string());
            let state_kind = match (bound, &active) {
                (Some(_), Some(_)) => "active_view_present",
                (Some(_), None) => "invalid_active_view",
                (None, _) => "logical_view_missing",
            };
            // The deployment to bind again: the latest one published for this relation.
            let published = state
                .publications
                .iter()
                .filter(|p| p.logical_name == name && state.relations.contains(&p.physical_name))
                .max_by(|a, b| {
                    (&a.published_at, &a.publication_id).cmp(&(&b.published_at, &b.publication_id))
                })
                .map(|p| p.deployment_id.clone());
            let repair = (state_kind != "active_view_present")
                .then_some(published)
                .flatten()
                .map(|id| format!("stb repair active-view --table {name} --deployment-id {id}"));
            Diagnosis {
                table_name: name.to_owned(),
                state_kind,
                active_deployment_id: active,
                candidate_deployment_ids: candidates,
                repair,
            }
        })
        .collect()
}

/// What a janitor decided for one deployment.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Cleanup {
    pub deployment_id: String,
    pub delete: bool,
    pub reason: String,
    /// The copies a deletion drops (views and materialized views first, then tables).
    pub relations: Vec<String>,
}

/// The janitor's limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retention {
    pub retention_days: u32,
    pub minimum_rollback_deployments: usize,
    /// Deployments created less than this many minutes ago are never deleted (a build may
    /// have just staged them; the reference deleted those).
    pub minimum_age_minutes: u32,
}

/// Which deployments can go, newest first, each with its reason. `now` is the warehouse's
/// clock as `YYYY-MM-DD HH:MM:SS.fff` (UTC). The newest complete deployment is always
/// kept.
#[must_use]
pub fn plan_cleanup(state: &State, retention: Retention, now: &str) -> Vec<Cleanup> {
    let records = inventory(state);
    let newest_complete = records
        .iter()
        .find(|r| r.persisted_status != "incomplete")
        .map(|r| r.deployment_id.clone());
    let cutoff = |days: u32| shift(now, -i64::from(days) * 86_400);
    let retention_cutoff = cutoff(retention.retention_days);
    let age_cutoff = shift(now, -i64::from(retention.minimum_age_minutes) * 60);
    let mut rollback_points = 0;
    records
        .into_iter()
        .filter(|r| r.state != "metadata_missing")
        .map(|record| {
            let id = record.deployment_id.clone();
            let created = record.created_at.clone().unwrap_or_default();
            let mismatched = state
                .objects
                .iter()
                .any(|o| o.deployment_id == id && !o.physical_name.ends_with(&format!("__{id}")));
            let keep = |reason: &str| (false, reason.to_owned());
            let (delete, reason) = if mismatched {
                keep("physical mappings do not match deployment identity")
            } else if !record.active_binding_names.is_empty() {
                keep("currently active")
            } else if Some(&id) == newest_complete.as_ref() {
                keep("newest deployment")
            } else if created.as_str() > age_cutoff.as_str() {
                keep(&format!(
                    "built within the last {} minutes",
                    retention.minimum_age_minutes
                ))
            } else if record.persisted_status == "published"
                && record.missing_physical_relation_names.is_empty()
                && rollback_points < retention.minimum_rollback_deployments
            {
                rollback_points += 1;
                keep(&format!(
                    "retained as rollback point (minimum {} deployments)",
                    retention.minimum_rollback_deployments
                ))
            } else if record
                .latest_published_at
                .as_deref()
                .is_some_and(|at| at > retention_cutoff.as_str())
            {
                keep(&format!(
                    "published within retention window ({} days)",
                    retention.retention_days
                ))
            } else if record.persisted_status == "published" {
                (true, "published before retention window".to_owned())
            } else {
                (true, "stale unpublished deployment".to_owned())
            };
            let mut relations: Vec<String> = state
                .objects
                .iter()
                .filter(|o| o.deployment_id == id && state.relations.contains(&o.physical_name))
                .map(|o| (o.object_type == "table", o.physical_name.clone()))
                .collect::<BTreeSet<_>>()
                .into_iter()
                .map(|(_, name)| name)
                .collect();
            relations.dedup();
            Cleanup {
                deployment_id: id,
                delete,
                reason,
                relations,
            }
        })
        .collect()
}

/// `YYYY-MM-DD HH:MM:SS.fff` moved by `seconds`; the text unchanged when it is not one.
fn shift(time: &str, seconds: i64) -> String {
    stb_plan::deployment::parse_utc_text(time).map_or_else(
        || time.to_owned(),
        |ms| stb_plan::deployment::utc_text(ms + seconds * 1000),
    )
}

/// Rows in each of `tables` of `database`, in one query (a missing table counts none).
///
/// # Errors
/// The read failed.
pub fn count_rows(
    client: &Client,
    database: &str,
    tables: &[String],
) -> Result<BTreeMap<String, u64>, EngineError> {
    if tables.is_empty() {
        return Ok(BTreeMap::new());
    }
    let parts: Vec<String> = tables
        .iter()
        .map(|t| {
            format!(
                "SELECT {} AS name, count() AS n FROM {}",
                stb_ddl::string_literal(t),
                stb_ddl::QualifiedName::new(database, t)
            )
        })
        .collect();
    let rows = client
        .query(&parts.join(" UNION ALL "))
        .map_err(|e| EngineError::from(&e))?;
    Ok((0..rows.data.len())
        .filter_map(|r| Some((rows.text(r, "name")?, rows.text(r, "n")?.parse().ok()?)))
        .collect())
}

/// The warehouse's clock, as `YYYY-MM-DD HH:MM:SS.fff` (UTC).
///
/// # Errors
/// The read failed.
pub fn warehouse_now(client: &Client) -> Result<String, EngineError> {
    let rows = client
        .query("SELECT toString(now64(3, 'UTC')) AS now")
        .map_err(|e| EngineError::from(&e))?;
    Ok(rows.text(0, "now").unwrap_or_default())
}

/// Drops the copies of the deployments `cleanups` marks for deletion, under the target
/// lock, after reading the state again: a copy that became active meanwhile stops it.
/// Metadata rows are kept. Returns the relations dropped.
///
/// # Errors
/// The lock is held, a copy became active, or a drop failed (the message names what was
/// dropped before it).
pub fn apply_cleanup(
    client: &Client,
    database: &str,
    owner: &str,
    cleanups: &[Cleanup],
) -> Result<Vec<String>, EngineError> {
    let lock =
        TargetLock::acquire(client, database, owner, false).map_err(|e| EngineError::from(&e))?;
    let result = drop_unbound(client, database, cleanups);
    let released = lock.release();
    let dropped = result?;
    released.map_err(|e| EngineError::from(&e))?;
    Ok(dropped)
}

fn drop_unbound(
    client: &Client,
    database: &str,
    cleanups: &[Cleanup],
) -> Result<Vec<String>, EngineError> {
    let state = read_state(client, database)?;
    let bound: BTreeSet<&str> = state.bindings.values().map(String::as_str).collect();
    let doomed: Vec<&String> = cleanups
        .iter()
        .filter(|c| c.delete)
        .flat_map(|c| &c.relations)
        .collect();
    if let Some(active) = doomed.iter().find(|r| bound.contains(r.as_str())) {
        return Err(EngineError::new(
            DEPLOYMENT_CODE,
            format!("{active} became active since the janitor planned; nothing was dropped"),
            "run the janitor again",
        ));
    }
    let mut dropped = Vec::new();
    for relation in doomed {
        let statement = format!(
            "DROP TABLE IF EXISTS {} SYNC",
            stb_ddl::QualifiedName::new(database, relation)
        );
        if let Err(error) = client.execute(&statement, None) {
            return Err(EngineError::new(
                crate::build::FAILED_CODE,
                format!(
                    "dropping {relation} failed: {} (dropped before it: {})",
                    error.message,
                    if dropped.is_empty() {
                        "none".to_owned()
                    } else {
                        dropped.join(", ")
                    }
                ),
                "run the janitor again to finish",
            ));
        }
        dropped.push(relation.clone());
    }
    Ok(dropped)
}

/// Binds stable view `table` to deployment `id`'s copy again, under the target lock. No
/// publication is recorded (`stb doctor` shows the binding; a promotion records one).
///
/// # Errors
/// The copy does not exist, the lock is held, or the statement failed.
pub fn repair_active_view(
    client: &Client,
    database: &str,
    owner: &str,
    table: &str,
    id: &stb_plan::deployment::DeploymentId,
) -> Result<String, EngineError> {
    let target = id.physical(table);
    let state = read_state(client, database)?;
    if !state.relations.contains(&target) {
        return Err(EngineError::new(
            MISSING_CODE,
            format!("{target} does not exist in '{database}'"),
            "`stb doctor` lists the deployments that hold a copy of it",
        ));
    }
    let lock =
        TargetLock::acquire(client, database, owner, false).map_err(|e| EngineError::from(&e))?;
    let result = client.execute(
        &format!(
            "CREATE OR REPLACE VIEW {} AS SELECT * FROM {}",
            stb_ddl::QualifiedName::new(database, table),
            stb_ddl::QualifiedName::new(database, &target)
        ),
        None,
    );
    let released = lock.release();
    result.map_err(|e| EngineError::from(&e))?;
    released.map_err(|e| EngineError::from(&e))?;
    Ok(target)
}

pub mod reports;

#[cfg(test)]
mod tests;
