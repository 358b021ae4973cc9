//! Virtual deployments as the warehouse holds them: stable bindings (views selecting `*`
//! from one relation) in the catalog, and the object-state rows each deployment recorded
//! in `_streambuild_virtual_object_state`.

pub mod boundaries;

use std::collections::BTreeMap;

use crate::catalog::Catalog;
use crate::{Client, WarehouseError};

const OBJECT_STATE: &str = "_streambuild_virtual_object_state";

fn literal(text: &str) -> String {
    stb_ddl::string_literal(text)
}

/// Every stable binding of `database`: a view whose query is `SELECT * FROM <database>.<x>`,
/// by view name, with the relation `x` it selects from.
#[must_use]
pub fn bindings(catalog: &Catalog, database: &str) -> BTreeMap<String, String> {
    let prefix = format!("SELECT * FROM {}.", stb_ddl::identifier(database));
    catalog
        .relations()
        .iter()
        .filter(|r| r.engine == "View")
        .filter_map(|r| {
            let target = r.as_select.trim().strip_prefix(&prefix)?;
            Some((r.name.clone(), unquote(target)?))
        })
        .collect()
}

/// A name as `identifier` wrote it: bare, or back-quoted with `\` escapes.
fn unquote(text: &str) -> Option<String> {
    let Some(inner) = text.strip_prefix('`') else {
        let plain = !text.is_empty() && text.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        return plain.then(|| text.to_owned());
    };
    let inner = inner.strip_suffix('`')?;
    let mut name = String::with_capacity(inner.len());
    let mut chars = inner.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            name.push(chars.next()?);
        } else if c == '`' {
            return None; // an unescaped quote inside: not one name
        } else {
            name.push(c);
        }
    }
    Some(name)
}

/// One object of a deployment, as the build records it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectState<'a> {
    pub deployment_id: &'a str,
    /// `table`, `materialized_view` or `view`.
    pub object_type: &'a str,
    /// The logical relation (`tbl__orders`).
    pub logical_name: &'a str,
    /// The deployment's relation (`tbl__orders__<id>`).
    pub physical_name: &'a str,
    pub model: &'a str,
    pub is_selected_root: bool,
    /// The object's spec (what the next plan compares).
    pub fingerprint: &'a str,
    /// Materialized views and views: the query with logical names.
    pub canonical_query: Option<&'a str>,
}

/// Appends `objects` as state kind `deployment` in `database`. Ids are content hashes, so a
/// retried identical insert writes identical ids.
///
/// # Errors
/// The insert failed.
pub fn record_objects(
    client: &Client,
    database: &str,
    objects: &[ObjectState<'_>],
) -> Result<(), WarehouseError> {
    insert_objects(client, database, "deployment", None, objects)
}

/// Appends `objects` as state kind `reconcile`, observation `record_id`: the specs the
/// live objects of their (active) deployment are adopted as. The next virtual plan prefers
/// them to that deployment's own, being newer.
///
/// # Errors
/// The insert failed.
pub fn record_reconciled(
    client: &Client,
    database: &str,
    record_id: &str,
    objects: &[ObjectState<'_>],
) -> Result<(), WarehouseError> {
    insert_objects(client, database, "reconcile", Some(record_id), objects)
}

fn insert_objects(
    client: &Client,
    database: &str,
    kind: &str,
    observation: Option<&str>,
    objects: &[ObjectState<'_>],
) -> Result<(), WarehouseError> {
    if let Some(sql) = objects_sql(database, kind, observation, objects) {
        client.execute(&sql, None)?;
    }
    Ok(())
}

/// The insert [`record_objects`] runs (`None` for no object): a virtual build runs it as
/// a step of its workflow, so its step files hold it.
#[must_use]
pub fn record_objects_sql(database: &str, objects: &[ObjectState<'_>]) -> Option<String> {
    objects_sql(database, "deployment", None, objects)
}

fn objects_sql(
    database: &str,
    kind: &str,
    observation: Option<&str>,
    objects: &[ObjectState<'_>],
) -> Option<String> {
    if objects.is_empty() {
        return None;
    }
    use std::fmt::Write as _;
    let db = literal(database);
    // One string, written row by row: a deployment of 10,000 models records 20,000
    // objects (tens of megabytes of SQL), and rows joined afterwards were three copies.
    let mut sql = format!(
        "INSERT INTO {} (state_id, observation_id, state_kind, deployment_id, logical_database_name, logical_object_type, logical_object_name, physical_database_name, physical_relation_name, logical_model_database, logical_model_name, is_selected_root, object_fingerprint, canonical_query, observed_at) VALUES ",
        stb_ddl::QualifiedName::new(database, OBJECT_STATE),
    );
    // Reserved up front (quotes and escapes aside): growing by doubling would copy it.
    sql.reserve(
        objects
            .iter()
            .map(|o| {
                260 + 2 * database.len()
                    + o.deployment_id.len()
                    + o.logical_name.len()
                    + o.physical_name.len()
                    + o.model.len()
                    + o.fingerprint.len()
                    + o.canonical_query.map_or(4, str::len)
                    + observation.map_or(64, str::len)
            })
            .sum(),
    );
    for (index, o) in objects.iter().enumerate() {
        let mut content = format!(
            "{}\u{0}{}\u{0}{}\u{0}{}",
            o.deployment_id, o.object_type, o.logical_name, o.fingerprint
        );
        if let Some(observation) = observation {
            content.push('\u{0}');
            content.push_str(observation);
        }
        let id = crate::statements::sha256_hex(&content);
        if index > 0 {
            sql.push_str(", ");
        }
        let _ = write!(
            sql,
            "({}, {}, {}, {}, {db}, {}, {}, {db}, {}, {db}, {}, {}, {}, {}, now64(3, 'UTC'))",
            literal(&id),
            literal(observation.unwrap_or(&id)),
            literal(kind),
            literal(o.deployment_id),
            literal(o.object_type),
            literal(o.logical_name),
            literal(o.physical_name),
            literal(o.model),
            u8::from(o.is_selected_root),
            literal(o.fingerprint),
            o.canonical_query.map_or_else(|| "NULL".to_owned(), literal),
        );
    }
    Some(sql)
}

/// The specs recorded for `wanted` (deployment id, logical relation) pairs, newest record
/// first (a `reconcile` record newer than the deployment's own wins), in one query:
/// logical relation -> fingerprint. Pairs with no record are absent;
/// so is everything when no deployment was ever recorded in `database`.
///
/// # Errors
/// The read failed.
pub fn recorded_specs(
    client: &Client,
    database: &str,
    wanted: &[(String, String)],
) -> Result<BTreeMap<String, String>, WarehouseError> {
    if wanted.is_empty() || !client.table_exists(database, OBJECT_STATE)? {
        return Ok(BTreeMap::new());
    }
    // Filtered by deployment only, the pairs picked here: a list of 20,000 (id, name)
    // tuples took the server 1.6 s to parse, the deployments' rows 0.1 s to read.
    let ids: std::collections::BTreeSet<&str> = wanted.iter().map(|(id, _)| id.as_str()).collect();
    let wanted: std::collections::HashSet<(&str, &str)> = wanted
        .iter()
        .map(|(id, name)| (id.as_str(), name.as_str()))
        .collect();
    let rows = client.query(&format!(
        "SELECT deployment_id AS id, logical_object_name AS name, argMax(object_fingerprint, observed_at) AS spec FROM {} WHERE state_kind IN ('deployment', 'reconcile') AND deployment_id IN ({}) GROUP BY deployment_id, logical_object_name",
        stb_ddl::QualifiedName::new(database, OBJECT_STATE),
        ids.iter().map(|id| literal(id)).collect::<Vec<_>>().join(", ")
    ))?;
    Ok((0..rows.data.len())
        .filter_map(|row| {
            let (id, name) = (rows.text(row, "id")?, rows.text(row, "name")?);
            wanted
                .contains(&(id.as_str(), name.as_str()))
                .then_some(())?;
            Some((name, rows.text(row, "spec")?))
        })
        .collect())
}

const DEPLOYMENTS: &str = "_streambuild_virtual_deployments";

/// Whether deployment `id` is complete: its header row exists.
///
/// # Errors
/// The read failed.
pub fn is_complete(client: &Client, database: &str, id: &str) -> Result<bool, WarehouseError> {
    if !client.table_exists(database, DEPLOYMENTS)? {
        return Ok(false);
    }
    let rows = client.query(&complete_check_sql(database, id))?;
    Ok(rows.text(0, "complete").is_some_and(|n| n != "0"))
}

/// The query [`is_complete`] asks once the deployment tables exist: one row, `complete`
/// 1 when deployment `id` has its header. A virtual build's restore point carries it, so
/// `stb unlock` never gives back a deployment that completed before its build was killed.
#[must_use]
pub fn complete_check_sql(database: &str, id: &str) -> String {
    format!(
        "SELECT count() > 0 AS complete FROM {} WHERE deployment_id = {}",
        stb_ddl::QualifiedName::new(database, DEPLOYMENTS),
        literal(id)
    )
}

/// A complete deployment's header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Header<'a> {
    pub deployment_id: &'a str,
    pub workflow_fingerprint: &'a str,
    pub replay_lineage_mode: &'a str,
    /// `YYYY-MM-DD HH:MM:SS.fff` (UTC).
    pub created_at: &'a str,
}

/// Writes `header`, unless the deployment has one already (the first wins): from then on
/// the deployment is complete. Its boundary time is the warehouse's clock now.
///
/// # Errors
/// The insert failed.
pub fn complete(
    client: &Client,
    database: &str,
    header: &Header<'_>,
) -> Result<(), WarehouseError> {
    client.execute(&complete_sql(database, header), None)?;
    Ok(())
}

/// The insert [`complete`] runs: a virtual build runs it as the last step of its
/// workflow, so its step files hold it.
#[must_use]
pub fn complete_sql(database: &str, header: &Header<'_>) -> String {
    let table = stb_ddl::QualifiedName::new(database, DEPLOYMENTS);
    let id = literal(header.deployment_id);
    format!(
        "INSERT INTO {table} (deployment_id, workflow_fingerprint, replay_lineage_mode, boundary_time, created_at, tool_version) SELECT {id}, {}, {}, now64(3, 'UTC'), toDateTime64({}, 3, 'UTC'), {} WHERE NOT EXISTS (SELECT 1 FROM {table} WHERE deployment_id = {id})",
        literal(header.workflow_fingerprint),
        literal(header.replay_lineage_mode),
        literal(header.created_at),
        literal(env!("CARGO_PKG_VERSION")),
    )
}

const PUBLICATIONS: &str = "_streambuild_virtual_publications";

/// A deployment's header row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeaderRow {
    pub deployment_id: String,
    pub created_at: String,
    pub boundary_time: String,
    pub replay_lineage_mode: String,
}

/// An object a deployment recorded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectRow {
    pub deployment_id: String,
    pub object_type: String,
    pub logical_name: String,
    pub physical_name: String,
    pub model: String,
    pub is_selected_root: bool,
    pub observed_at: String,
}

/// One binding a promotion or rollback switched.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PublicationRow {
    pub publication_id: String,
    pub deployment_id: String,
    pub operation: String,
    pub previous_deployment_id: Option<String>,
    pub logical_name: String,
    pub physical_name: String,
    pub published_at: String,
}

/// What the deployment tables hold.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Metadata {
    pub headers: Vec<HeaderRow>,
    pub objects: Vec<ObjectRow>,
    pub publications: Vec<PublicationRow>,
}

/// Everything the deployment tables hold for `database`, in three queries (none when no
/// metadata exists yet).
///
/// # Errors
/// A read failed.
pub fn read_all(client: &Client, database: &str) -> Result<Metadata, WarehouseError> {
    if !client.table_exists(database, DEPLOYMENTS)? {
        return Ok(Metadata::default());
    }
    let table = |name: &str| stb_ddl::QualifiedName::new(database, name).to_string();
    let text =
        |rows: &crate::Rows, row: usize, column: &str| rows.text(row, column).unwrap_or_default();
    let headers = client.query(&format!(
        "SELECT deployment_id, toString(min(created_at)) AS created_at, toString(min(boundary_time)) AS boundary_time, any(replay_lineage_mode) AS mode FROM {} GROUP BY deployment_id",
        table(DEPLOYMENTS)
    ))?;
    let headers = (0..headers.data.len())
        .map(|r| HeaderRow {
            deployment_id: text(&headers, r, "deployment_id"),
            created_at: text(&headers, r, "created_at"),
            boundary_time: text(&headers, r, "boundary_time"),
            replay_lineage_mode: text(&headers, r, "mode"),
        })
        .collect();
    let objects = client.query(&format!(
        "SELECT deployment_id, logical_object_type AS object_type, logical_object_name AS logical, ifNull(physical_relation_name, '') AS physical, ifNull(logical_model_name, '') AS model, max(is_selected_root) AS root, toString(min(observed_at)) AS observed_at FROM {} WHERE state_kind = 'deployment' AND deployment_id IS NOT NULL GROUP BY deployment_id, object_type, logical, physical, model ORDER BY deployment_id, object_type, logical",
        table(OBJECT_STATE)
    ))?;
    let objects = (0..objects.data.len())
        .map(|r| ObjectRow {
            deployment_id: text(&objects, r, "deployment_id"),
            object_type: text(&objects, r, "object_type"),
            logical_name: text(&objects, r, "logical"),
            physical_name: text(&objects, r, "physical"),
            model: text(&objects, r, "model"),
            is_selected_root: text(&objects, r, "root") == "1"
                || text(&objects, r, "root") == "true",
            observed_at: text(&objects, r, "observed_at"),
        })
        .collect();
    let publications = client.query(&format!(
        "SELECT publication_id, deployment_id, operation, previous_deployment_id AS previous, logical_view_name AS logical, physical_relation_name AS physical, toString(published_at) AS published_at FROM {} ORDER BY published_at, publication_id, logical",
        table(PUBLICATIONS)
    ))?;
    let publications = (0..publications.data.len())
        .map(|r| PublicationRow {
            publication_id: text(&publications, r, "publication_id"),
            deployment_id: text(&publications, r, "deployment_id"),
            operation: text(&publications, r, "operation"),
            previous_deployment_id: publications.text(r, "previous").filter(|p| !p.is_empty()),
            logical_name: text(&publications, r, "logical"),
            physical_name: text(&publications, r, "physical"),
            published_at: text(&publications, r, "published_at"),
        })
        .collect();
    Ok(Metadata {
        headers,
        objects,
        publications,
    })
}

/// One switch of a stable view.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Binding {
    pub logical_name: String,
    pub physical_name: String,
}

/// Switches each stable view of `bindings` to its physical relation, one `CREATE OR
/// REPLACE VIEW` at a time (tables before views, as given), then records one publication
/// row per binding. Returns the publication id and its time.
///
/// # Errors
/// A switch or the record failed; the views switched before it stay switched (the
/// error says which).
pub fn publish(
    client: &Client,
    database: &str,
    deployment_id: &str,
    operation: &str,
    previous: Option<&str>,
    bindings: &[Binding],
) -> Result<(String, String), WarehouseError> {
    let now = client.query("SELECT toString(now64(3, 'UTC')) AS now")?;
    let published_at = now.text(0, "now").unwrap_or_default();
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let publication_id = format!(
        "{nanos:020}_{}",
        crate::statements::sha256_hex(&format!("{deployment_id}:{published_at}:{operation}"))
    );
    for (done, binding) in bindings.iter().enumerate() {
        let statement = format!(
            "CREATE OR REPLACE VIEW {} AS SELECT * FROM {}",
            stb_ddl::QualifiedName::new(database, &binding.logical_name),
            stb_ddl::QualifiedName::new(database, &binding.physical_name)
        );
        if let Err(mut error) = client.execute(&statement, None) {
            error.message = format!(
                "{} (switched before it: {}; not switched: {} and after)",
                error.message,
                if done == 0 {
                    "none".to_owned()
                } else {
                    bindings[..done]
                        .iter()
                        .map(|b| b.logical_name.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                },
                binding.logical_name
            );
            return Err(error);
        }
    }
    crate::metadata::migrate(client, database)?;
    let db = literal(database);
    let rows: Vec<String> = bindings
        .iter()
        .map(|b| {
            format!(
                "({}, {}, {}, {}, {db}, {}, {db}, {}, toDateTime64({}, 3, 'UTC'))",
                literal(&publication_id),
                literal(deployment_id),
                literal(operation),
                previous.map_or_else(|| "NULL".to_owned(), literal),
                literal(&b.logical_name),
                literal(&b.physical_name),
                literal(&published_at),
            )
        })
        .collect();
    client.execute(
        &format!(
            "INSERT INTO {} (publication_id, deployment_id, operation, previous_deployment_id, logical_database_name, logical_view_name, physical_database_name, physical_relation_name, published_at) VALUES {}",
            stb_ddl::QualifiedName::new(database, PUBLICATIONS),
            rows.join(", ")
        ),
        None,
    )?;
    Ok((publication_id, published_at))
}

#[cfg(test)]
mod tests {
    use super::unquote;

    #[test]
    fn names_are_read_back_as_identifier_wrote_them() {
        assert_eq!(
            unquote("tbl__a__20261201T090000Z_aaaaaa").as_deref(),
            Some("tbl__a__20261201T090000Z_aaaaaa")
        );
        assert_eq!(unquote("`odd-name`").as_deref(), Some("odd-name"));
        assert_eq!(unquote("`a\\`b`").as_deref(), Some("a`b"));
        assert_eq!(unquote("a b"), None);
        assert_eq!(unquote("x WHERE 1"), None);
        assert_eq!(unquote("`a`b`"), None);
        assert_eq!(unquote(""), None);
    }
}
