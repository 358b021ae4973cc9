//! Checks a plan's statements against the warehouse before a build may change anything
//! ([`stb_plan::validation`] says what is checked and how nothing is touched). `stb plan`
//! fails on what it finds; `stb build` runs the same checks again under the target lock,
//! before its first change.

use std::time::Instant;

use stb_diagnostics::{Diagnostic, Diagnostics, Location, Position};
use stb_plan::validation::{Check, Subject, Unchecked, validation};
use stb_warehouse::Client;

use crate::direct::Planned;

/// A model's SQL or DDL fails the warehouse's own check.
pub const INVALID_CODE: &str = "STB-PLAN-006";

/// What a passed validation checked.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Validated {
    /// Statements the warehouse accepted.
    pub checked: usize,
    /// Models, or parts of them, it could not check, and why.
    pub unchecked: Vec<UncheckedModel>,
    pub elapsed_ms: u64,
    /// The catalog's stamp ([`catalog_stamp`]) read at or before the plan read what the
    /// checks judge (with its catalog): the same stamp later means their inputs are
    /// unchanged since. `None` when it could not be read (or
    /// offline).
    #[serde(skip)]
    pub catalog_stamp: Option<String>,
}

/// The catalog's stamp a validation records, for a build's re-check under the lock.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stamp {
    /// Read with the plan's catalog; `None`: it could not be, read it before the checks.
    Read(Option<String>),
    /// The plan is only shown: nothing will compare it.
    NotNeeded,
}

#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct UncheckedModel {
    pub model: String,
    pub reason: String,
}

impl From<Unchecked> for UncheckedModel {
    fn from(unchecked: Unchecked) -> Self {
        Self {
            model: unchecked.name,
            reason: unchecked.reason,
        }
    }
}

/// Runs the checks of `planned`; every failure, located in the model's (or source's)
/// file. A warehouse that cannot be reached is one diagnostic too. `stamp` is the
/// catalog's stamp read at or before the plan read what these checks judge (the plan's
/// own catalog read carries it): [`Stamp::Read`] with `None` reads it now, first;
/// [`Stamp::NotNeeded`] (a plan that is only shown) reads none.
///
/// # Errors
/// Each model whose statement the warehouse refused, with ClickHouse's message.
pub fn validate(
    client: &Client,
    project: &stb_project::Project,
    sources: &[stb_plan::direct::PlanSource],
    planned: &Planned,
    stamp: Stamp,
) -> Result<Validated, Diagnostics> {
    let started = Instant::now();
    let scope = planned.executed_models();
    let created = created_landings(sources, &planned.workflow.steps);
    let plan = validation(&scope, &planned.models, sources, &|r| !created.contains(r));
    // Read before the checks: a change after this point changes the stamp.
    let stamp = match stamp {
        Stamp::Read(Some(read)) => Some(read),
        Stamp::Read(None) => catalog_stamp(
            client,
            &stamp_databases(&planned.workflow.database, sources),
        ),
        Stamp::NotNeeded => None,
    };
    run_checks(client, project, plan, started, false).map(|validated| Validated {
        catalog_stamp: stamp,
        ..validated
    })
}

/// The raw tables of the landings the build creates: those with a preparation step
/// (every other landing exists). Collected once: the check asks for every relation a
/// statement reads, and a scan of the steps per question grew with the plan twice over.
fn created_landings<'a>(
    sources: &'a [stb_plan::direct::PlanSource],
    steps: &[stb_plan::workflow::Step],
) -> std::collections::HashSet<&'a str> {
    let step_ids: std::collections::HashSet<&str> = steps.iter().map(|s| s.id.as_str()).collect();
    sources
        .iter()
        .filter(|source| step_ids.contains(format!("prepare_source_raw__{}", source.name).as_str()))
        .filter_map(|source| source.landing.as_ref().map(|l| l.raw_table.as_str()))
        .collect()
}

/// The databases whose relations a plan's statements can read: its target's and those
/// its sources name (`db.table`).
#[must_use]
pub fn stamp_databases(database: &str, sources: &[stb_plan::direct::PlanSource]) -> Vec<String> {
    let mut databases = vec![database.to_owned()];
    for source in sources {
        if let Some((database, _)) = source.relation.as_deref().and_then(|r| r.split_once('.')) {
            let database = database.trim_matches('`').to_owned();
            if !databases.contains(&database) {
                databases.push(database);
            }
        }
    }
    databases
}

/// The catalog's stamp now ([`stb_warehouse::catalog_stamp_sql`]); `None` when it could
/// not be read.
#[must_use]
pub fn catalog_stamp(client: &Client, databases: &[String]) -> Option<String> {
    let rows = client
        .query(&format!(
            "SELECT ({}) AS stamp",
            stb_warehouse::catalog_stamp_sql(databases)
        ))
        .ok()?;
    rows.text(0, "stamp")
}

/// Checks every model of a compiled project offline, on a scratch engine with no tables
/// of its own (`client`, from `stb compile --validate`): landings and model tables are made
/// from their typed definitions, each query is explained against them. A model that reads
/// an adopted table (whose columns only the target's warehouse knows) or a table function
/// is listed as unchecked, with why; the models downstream of it are checked against its
/// typed table.
///
/// # Errors
/// Each model whose statement the engine refused, located in its file.
pub fn validate_offline(
    client: &Client,
    project: &stb_project::Project,
    compiled: &stb_compile::Compiled,
) -> Result<Validated, Diagnostics> {
    let started = Instant::now();
    let scope: Vec<&str> = compiled
        .plan_models
        .iter()
        .map(|m| m.name.as_str())
        .collect();
    let plan = validation(
        &scope,
        &compiled.plan_models,
        &compiled.plan_sources,
        &|_| false,
    );
    run_checks(client, project, plan, started, true)
}

/// The warehouse's codes for a table or database it does not have.
const UNKNOWN_RELATION_CODES: [u32; 2] = [60, 81];

/// Tables a session creates before the next session starts: the engine's cost per
/// statement grows with the temporary tables its session holds (measured on the local
/// engine: a `CREATE TEMPORARY TABLE` took 9 ms with 500 in the session and 75 ms with
/// 3,000), so a 10,000-model validation in one session grew with the square of the models.
const TABLES_PER_SESSION: usize = 100;
/// Requests sent side by side: the warehouse answers several at once.
const PARALLEL_REQUESTS: usize = 4;
/// Queries explained in one request (`EXPLAIN SELECT 1 FROM (q1) UNION ALL ...`): the
/// engine analyses each query of the union as it would alone, so a request costs its
/// analyses, not a round trip each. Bounded by count and by size, well under
/// ClickHouse's default `max_query_size` (256 KiB).
const QUERIES_PER_REQUEST: usize = 50;
const QUERY_BYTES_PER_REQUEST: usize = 160 * 1024;

/// What became of one check.
#[derive(Debug, Clone)]
enum Outcome {
    Passed,
    Refused(stb_warehouse::WarehouseError),
    /// Not run: a stand-in it reads could not be made.
    UpstreamFailed,
}

impl Outcome {
    fn of(result: Result<(), stb_warehouse::WarehouseError>) -> Self {
        result.map_or_else(Self::Refused, |()| Self::Passed)
    }

    /// No answer at all: the warehouse, not the statement.
    fn unanswered(&self) -> bool {
        matches!(self, Self::Refused(error) if error.server_code.is_none())
    }
}

/// Runs `plan`'s checks; every refusal located, in plan order.
fn run_checks(
    client: &Client,
    project: &stb_project::Project,
    plan: stb_plan::validation::Validation,
    started: Instant,
    offline: bool,
) -> Result<Validated, Diagnostics> {
    let outcomes = outcomes(client, &plan.checks);
    let mut diagnostics = Diagnostics::new();
    let mut unchecked: Vec<UncheckedModel> = plan
        .unchecked
        .into_iter()
        .map(UncheckedModel::from)
        .collect();
    let mut reported: Vec<(&str, Option<u32>)> = Vec::new();
    let mut checked = 0;
    for (check, outcome) in plan.checks.iter().zip(outcomes) {
        let error = match outcome {
            Some(Outcome::Passed) => {
                checked += 1;
                continue;
            }
            Some(Outcome::UpstreamFailed) => {
                unchecked.push(UncheckedModel {
                    model: check.name.clone(),
                    reason: "an upstream model it reads failed its own check".into(),
                });
                continue;
            }
            Some(Outcome::Refused(error)) => error,
            // Not run: the warehouse stopped answering (said below, once).
            None => continue,
        };
        if error.server_code.is_none() {
            diagnostics.push(warehouse_diagnostic(&error));
            break;
        }
        let reason = error.server_code;
        if offline && reason.is_some_and(|code| UNKNOWN_RELATION_CODES.contains(&code)) {
            // A relation only the target has (a dimension table, a dictionary's source).
            unchecked.push(UncheckedModel {
                model: check.name.clone(),
                reason: format!(
                    "it reads a relation the scratch engine does not have: {}",
                    stb_warehouse::plain_message(&error.message)
                ),
            });
        } else if check.authored {
            // A bad type fails a model's query and its table alike: said once.
            if !reported.contains(&(check.name.as_str(), reason)) {
                let hint = if offline { OFFLINE_HINT } else { ONLINE_HINT };
                diagnostics.push(located(project, check, &error.message, hint));
                reported.push((check.name.as_str(), reason));
            }
        } else {
            unchecked.push(UncheckedModel {
                model: check.name.clone(),
                reason: format!(
                    "its stand-in could not be made: {}",
                    stb_warehouse::plain_message(&error.message)
                ),
            });
        }
    }
    if !diagnostics.is_empty() {
        return Err(diagnostics);
    }
    Ok(Validated {
        checked,
        unchecked,
        elapsed_ms: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
        catalog_stamp: None,
    })
}

/// Each check's outcome, by index; `None` for those not run because the warehouse
/// stopped answering. Tables first, each definition once ([`stb_plan::validation::shapes`]),
/// in sessions of a bounded size; then the queries with their stand-ins inline, many to a
/// request, and a query refused that way again against real stand-ins.
fn outcomes(client: &Client, checks: &[Check]) -> Vec<Option<Outcome>> {
    let mut outcomes: Vec<Option<Outcome>> = vec![None; checks.len()];
    let shapes = stb_plan::validation::shapes(checks);
    let sessions: Vec<&[stb_plan::validation::Shape]> = shapes.chunks(TABLES_PER_SESSION).collect();
    let judged = side_by_side(&sessions, |shapes| {
        let session = session_client(client);
        let mut judged = Vec::new();
        for shape in *shapes {
            let outcome = Outcome::of(session.execute(&checks[shape.check].sql, None).map(|_| ()));
            let unanswered = outcome.unanswered();
            judged.extend(shape.checks.iter().map(|&i| (i, outcome.clone())));
            if unanswered {
                break;
            }
        }
        judged
    });
    let mut failed: std::collections::HashSet<&str> = std::collections::HashSet::new();
    for (index, outcome) in judged {
        if !matches!(outcome, Outcome::Passed) {
            failed.extend(checks[index].creates.as_deref());
        }
        outcomes[index] = Some(outcome);
    }
    if outcomes.iter().flatten().any(Outcome::unanswered) {
        return outcomes;
    }
    let mut runnable = Vec::new();
    for (index, check) in checks.iter().enumerate() {
        if check.inline.is_none() {
            continue;
        }
        if check.reads.iter().any(|r| failed.contains(r.as_str())) {
            outcomes[index] = Some(Outcome::UpstreamFailed);
        } else {
            runnable.push(index);
        }
    }
    let makers: Makers = checks
        .iter()
        .enumerate()
        .filter_map(|(index, check)| check.creates.as_deref().map(|name| (name, index)))
        .collect();
    // Queries of the same text (their stand-ins inline) get the same answer: each text is
    // asked once, for all of them.
    let mut alike: Alike = std::collections::HashMap::new();
    let mut distinct: Vec<usize> = Vec::new();
    for index in runnable {
        let text = checks[index].inline.as_deref().unwrap_or_default();
        alike
            .entry(text)
            .or_insert_with(|| {
                distinct.push(index);
                Vec::new()
            })
            .push(index);
    }
    let batches = query_batches(checks, &distinct);
    let explained = side_by_side(&batches, |batch| {
        explain_batch(client, checks, &makers, &alike, batch)
    });
    for (index, outcome) in explained {
        outcomes[index] = Some(outcome);
    }
    outcomes
}

/// `work` applied to every item of `items`, on a few threads; the results of all, in no
/// particular order.
fn side_by_side<T: Sync, R: Send>(items: &[T], work: impl Fn(&T) -> Vec<R> + Sync) -> Vec<R> {
    let next = std::sync::atomic::AtomicUsize::new(0);
    let results = std::sync::Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for _ in 0..PARALLEL_REQUESTS.min(items.len()) {
            scope.spawn(|| {
                while let Some(item) =
                    items.get(next.fetch_add(1, std::sync::atomic::Ordering::Relaxed))
                {
                    let found = work(item);
                    results
                        .lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner)
                        .extend(found);
                }
            });
        }
    });
    results
        .into_inner()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// `indices` cut into runs that each fit one request.
fn query_batches(checks: &[Check], indices: &[usize]) -> Vec<Vec<usize>> {
    let mut batches: Vec<Vec<usize>> = Vec::new();
    let mut bytes = 0;
    for &index in indices {
        let size = checks[index].inline.as_ref().map_or(0, String::len);
        let full = batches.last().is_none_or(|batch| {
            batch.len() >= QUERIES_PER_REQUEST || bytes + size > QUERY_BYTES_PER_REQUEST
        });
        if full {
            batches.push(Vec::new());
            bytes = 0;
        }
        bytes += size;
        if let Some(batch) = batches.last_mut() {
            batch.push(index);
        }
    }
    batches
}

/// The check that makes each stand-in, by the stand-in's name.
type Makers<'c> = std::collections::HashMap<&'c str, usize>;

/// The checks whose queries read the same with their stand-ins inline, by that text.
type Alike<'c> = std::collections::HashMap<&'c str, Vec<usize>>;

/// Explains `batch`'s queries (one of each text), stand-ins inline, in one request; when
/// the warehouse refuses that, each query alone, so a refusal is always the one the query
/// gets by itself. A query refused inline is explained again, for every check of its
/// text, against real stand-ins ([`explain_with_tables`]).
fn explain_batch(
    client: &Client,
    checks: &[Check],
    makers: &Makers<'_>,
    alike: &Alike<'_>,
    batch: &[usize],
) -> Vec<(usize, Outcome)> {
    let text = |index: usize| checks[index].inline.as_deref().unwrap_or_default();
    let members = |index: usize| alike.get(text(index)).map_or(&[][..], Vec::as_slice);
    let all = |outcome: &Outcome| -> Vec<(usize, Outcome)> {
        batch
            .iter()
            .flat_map(|&i| members(i).iter().map(|&m| (m, outcome.clone())))
            .collect()
    };
    if batch.len() > 1 {
        let union = batch
            .iter()
            .filter_map(|&i| checks[i].inline_query())
            // On lines of their own: a query may end in a `--` comment.
            .map(|query| format!("SELECT 1 FROM (\n{query}\n)"))
            .collect::<Vec<_>>()
            .join("\nUNION ALL ");
        match client.query(&format!("EXPLAIN {union}")) {
            Ok(_) => return all(&Outcome::Passed),
            Err(error) if error.server_code.is_none() => return all(&Outcome::Refused(error)),
            Err(_) => {}
        }
    }
    let mut found = Vec::new();
    for &index in batch {
        let inline = Outcome::of(client.query(text(index)).map(|_| ()));
        let refused = matches!(&inline, Outcome::Refused(e) if e.server_code.is_some());
        for &member in members(index) {
            let outcome = if refused {
                explain_with_tables(client, checks, makers, &checks[member])
            } else {
                inline.clone()
            };
            found.push((member, outcome));
        }
    }
    found
}

/// The query again, in a session of its own, against its stand-ins as temporary tables
/// made from the statements of the checks that make them (a `FINAL` needs an engine that
/// has it): the verdict on a query its inline stand-ins refused.
fn explain_with_tables(
    client: &Client,
    checks: &[Check],
    makers: &Makers<'_>,
    check: &Check,
) -> Outcome {
    let session = session_client(client);
    for read in &check.reads {
        let made = makers
            .get(read.as_str())
            .map(|&maker| session.execute(&checks[maker].sql, None));
        match made {
            Some(Ok(_)) => {}
            Some(Err(error)) if error.server_code.is_none() => return Outcome::Refused(error),
            _ => return Outcome::UpstreamFailed,
        }
    }
    Outcome::of(session.query(&check.sql).map(|_| ()))
}

fn warehouse_diagnostic(error: &stb_warehouse::WarehouseError) -> Diagnostic {
    Diagnostic::new(
        error.kind.code(),
        format!(
            "the plan's statements could not be checked: {}",
            stb_warehouse::plain_message(&error.message)
        ),
        error.kind.hint(),
    )
}

/// A client whose requests share one server session: temporary tables live in it and
/// vanish with it (ClickHouse ends an idle session after `session_timeout` seconds).
fn session_client(client: &Client) -> Client {
    client.with_settings(&[
        (
            "session_id",
            format!("stb-validate-{}", uuid::Uuid::new_v4()),
        ),
        ("session_timeout", "60".to_owned()),
    ])
}

/// The failure as the author sees it: the model's file, the line and column of the first
/// name the warehouse quotes that the file holds, ClickHouse's message, and what to do.
/// What to do about a refusal found by `stb plan` or `stb build`.
const ONLINE_HINT: &str = "fix it and plan again; nothing was changed (every statement a build runs is checked before it may change anything)";
/// What to do about one found by `stb compile --validate`.
const OFFLINE_HINT: &str = "fix it and run `stb compile --validate` again; no artifact was written";

fn located(project: &stb_project::Project, check: &Check, message: &str, hint: &str) -> Diagnostic {
    let (file, text) = match check.subject {
        Subject::Landing => project
            .sources
            .iter()
            .find(|s| s.name == check.name)
            .map(|s| (s.file.clone(), None))
            .unwrap_or_default(),
        Subject::Query | Subject::Storage => project
            .pipelines
            .iter()
            .flat_map(|p| &p.models)
            .find(|m| m.name == check.name)
            .map(|m| (m.file.clone(), Some(m.text.clone())))
            .unwrap_or_default(),
    };
    let what = match check.subject {
        Subject::Query => format!("model '{}': its query does not run", check.name),
        Subject::Storage => format!("model '{}': its table cannot be created", check.name),
        Subject::Landing => format!(
            "source '{}': its landing table cannot be created",
            check.name
        ),
    };
    let mut diagnostic = Diagnostic::new(
        INVALID_CODE,
        format!("{what}: {}", stb_warehouse::plain_message(message)),
        hint,
    );
    if !file.is_empty() {
        let position = text.as_deref().and_then(|t| {
            position_of_quoted(t, message).or_else(|| {
                // Nothing quoted the file holds: point at the part that failed, the
                // header for a table, the query for a query.
                let part = if check.subject == Subject::Storage {
                    "MODEL"
                } else {
                    "SELECT"
                };
                let upper = t.to_ascii_uppercase();
                word_offset(&upper, part).map(|at| Position::of_offset(t, at))
            })
        });
        diagnostic.location = Some(match position {
            Some(position) => Location::at(&file, position),
            None => Location::file(&file),
        });
    }
    diagnostic
}

/// Where in `text` the first name `message` quotes (in backticks or single quotes, or
/// after "family:", "Unknown function" or "Column") first occurs as a whole word.
fn position_of_quoted(text: &str, message: &str) -> Option<Position> {
    // The warehouse's suggestions name what the author did not write.
    let message = message
        .split("Maybe you meant")
        .enumerate()
        .map(|(at, piece)| {
            if at == 0 {
                piece
            } else {
                piece.split_once(']').map_or("", |(_, rest)| rest)
            }
        })
        .collect::<String>();
    let mut names: Vec<&str> = Vec::new();
    for marker in ["family: ", "Unknown function ", "Column "] {
        if let Some((_, after)) = message.split_once(marker) {
            names.extend(
                after
                    .split(|c: char| !(c.is_alphanumeric() || c == '_'))
                    .next(),
            );
        }
    }
    for quote in ['`', '\''] {
        names.extend(message.split(quote).skip(1).step_by(2));
    }
    names
        .into_iter()
        .filter(|name| !name.is_empty() && !name.starts_with("stb_check_"))
        .find_map(|name| word_offset(text, name))
        .map(|offset| Position::of_offset(text, offset))
}

fn word_offset(text: &str, word: &str) -> Option<usize> {
    let is_word = |c: char| c.is_alphanumeric() || c == '_';
    text.match_indices(word).map(|(at, _)| at).find(|&at| {
        let before = text.get(..at).and_then(|s| s.chars().next_back());
        let after = text.get(at + word.len()..).and_then(|s| s.chars().next());
        !before.is_some_and(is_word) && !after.is_some_and(is_word)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_quoted_name_is_found_where_the_author_wrote_it() {
        let text = "MODEL (kind table);\nSELECT order_id,\n  amount_centz::UInt64 AS amount_cents\nFROM __ref('orders')";
        let message = "Code: 47. DB::Exception: Unknown expression or function identifier `amount_centz`. In scope SELECT CAST(amount_centz, 'UInt64') FROM stb_check_1. (UNKNOWN_IDENTIFIER) (version 26.9.2.1)";
        assert_eq!(position_of_quoted(text, message), Some(Position::new(3, 3)));
        let types = "Code: 50. DB::Exception: Unknown data type family: UInt65. Maybe you meant: ['UInt64','Int64']: In scope SELECT CAST(x, 'UInt65') AS x, CAST(o, 'Int64') AS o FROM t. (UNKNOWN_TYPE)";
        let typed = "MODEL (kind table);\nSELECT o::Int64 AS o,\n  x::UInt65 AS x FROM t";
        // Not the suggestion, nor another quoted type the file also holds.
        assert_eq!(position_of_quoted(typed, types), Some(Position::new(3, 6)));
        // A name the file does not hold as a whole word gives no position.
        assert_eq!(position_of_quoted("SELECT amount_centzz", message), None);
    }
}
