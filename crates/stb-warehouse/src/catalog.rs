//! What exists in a database, read in a fixed number of queries whatever the number of
//! relations.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use crate::client::{Client, Rows};
use crate::error::{ErrorKind, WarehouseError};

mod cache;
mod cache_file;

pub use cache::CatalogCache;
use cache::ListedRelation;

/// One column of a relation.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct CatalogColumn {
    pub name: String,
    pub data_type: String,
    pub default_expression: String,
}

/// A relation's columns, in position order.
pub type Columns = std::sync::Arc<Vec<CatalogColumn>>;

/// One table, view or materialized view.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct CatalogRelation {
    pub name: String,
    pub engine: String,
    pub sorting_key: String,
    pub partition_key: String,
    /// Empty unless [`Self::defined`].
    pub create_table_query: String,
    /// Empty unless [`Self::defined`].
    pub as_select: String,
    pub uuid: String,
    /// Shared, not copied, between the catalog and the plan-to-plan cache that keeps it
    /// ([`CatalogCache`]): a 10,000-model project's columns are 100,000 entries.
    pub columns: Columns,
    /// Whether `create_table_query` and `as_select` were read: always in a
    /// [`Depth::Full`] read; in a [`Depth::Plan`] read only for the relations it names and
    /// those that are neither tables of the `MergeTree` family nor materialized views.
    pub defined: bool,
}

/// How much of each relation a catalog read asks the server for.
///
/// The server formats a relation's definition (`create_table_query`, `as_select`) from
/// its stored syntax tree on every read: about 300 µs per materialized view and 100 µs per
/// table on the local engine, 3.6 s for the 20,000 relations of a 10,000-model project,
/// while a plan needs a few of them. Even a materialized view's engine or identity costs
/// about 50 µs (the server opens the view to answer), its name alone nothing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Depth {
    /// Every relation's definition, identity and columns.
    Full,
    /// What a plan reads: every relation's name; the engine, keys, identity and columns of
    /// every relation but materialized views (listed with their engine, nothing else);
    /// definitions (and columns) of the relations named here and definitions of every
    /// relation that is neither a `MergeTree`-family table nor a materialized view (views,
    /// Kafka tables, ...).
    /// Refreshable views come from `system.view_refreshes`.
    Plan { defined: Vec<String> },
}

/// A database's relations, by name. Looked up by name once per relation a plan touches,
/// so the lookup is a map's, not a scan of every relation (a scan made a 10,000-model plan
/// quadratic).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Catalog {
    /// The server's time zone.
    pub timezone: String,
    relations: Vec<CatalogRelation>,
    /// Each relation's index in `relations`, by name.
    by_name: std::collections::HashMap<String, usize>,
    /// The refreshable materialized views; `None` when the server could not say.
    refreshable: Option<BTreeSet<String>>,
}

impl Catalog {
    /// A catalog of `relations` (a name given twice keeps its last relation); the
    /// refreshable views are the materialized views whose definition says `REFRESH`.
    #[must_use]
    pub fn new(timezone: impl Into<String>, relations: Vec<CatalogRelation>) -> Self {
        let by_name = relations
            .iter()
            .enumerate()
            .map(|(index, relation)| (relation.name.clone(), index))
            .collect();
        let refreshable = relations
            .iter()
            .filter(|r| {
                r.engine == "MaterializedView" && r.create_table_query.contains(" REFRESH ")
            })
            .map(|r| r.name.clone())
            .collect();
        Self {
            timezone: timezone.into(),
            relations,
            by_name,
            refreshable: Some(refreshable),
        }
    }

    /// This catalog with `views` as its refreshable materialized views (`None`: the server
    /// could not say).
    #[must_use]
    pub fn with_refreshable(mut self, views: Option<BTreeSet<String>>) -> Self {
        self.refreshable = views;
        self
    }

    /// The refreshable materialized views (they write into tables on their own schedule,
    /// not as client queries); `None` when the server could not say which.
    #[must_use]
    pub fn refreshable(&self) -> Option<&BTreeSet<String>> {
        self.refreshable.as_ref()
    }

    #[must_use]
    pub fn relation(&self, name: &str) -> Option<&CatalogRelation> {
        self.by_name.get(name).map(|&index| &self.relations[index])
    }

    /// Every relation, in the order the warehouse listed them.
    #[must_use]
    pub fn relations(&self) -> &[CatalogRelation] {
        &self.relations
    }

    /// This catalog without `name` and, when given, with `replacement` in its place.
    #[must_use]
    pub fn with_relation(self, name: &str, replacement: Option<CatalogRelation>) -> Self {
        let mut relations: Vec<CatalogRelation> = self
            .relations
            .into_iter()
            .filter(|r| r.name != name)
            .collect();
        relations.extend(replacement);
        let kept = self.refreshable;
        let mut catalog = Self::new(self.timezone, relations);
        // What the server said about the others stays; unknown stays unknown.
        catalog.refreshable = kept.map(|kept| {
            kept.into_iter()
                .filter(|view| view != name)
                .chain(catalog.refreshable.take().into_iter().flatten())
                .collect()
        });
        catalog
    }
}

const ATTEMPTS: u64 = 3;

/// Each relation's engine and `create_table_query`, by name.
pub type Definitions = BTreeMap<String, (String, String)>;

fn text(rows: &Rows, row: usize, column: &str) -> String {
    rows.text(row, column).unwrap_or_default()
}

impl Client {
    /// Whether `database.name` exists; one query.
    ///
    /// # Errors
    /// The catalog could not be read.
    pub fn table_exists(&self, database: &str, name: &str) -> Result<bool, WarehouseError> {
        // `EXISTS` asks the database for the one name; a filter on `system.tables` took
        // 75 ms in a database of 30,000 relations (the local engine lists them all).
        let rows = self.query(&format!(
            "EXISTS TABLE {}",
            stb_ddl::QualifiedName::new(database, name)
        ))?;
        Ok(rows.text(0, "result").is_some_and(|r| r == "1"))
    }

    /// The engine and `create_table_query` of each of `names` that exists in `database`;
    /// one query. (What a build records to undo itself, and reads again to do it.)
    ///
    /// # Errors
    /// The catalog could not be read.
    pub fn definitions(
        &self,
        database: &str,
        names: &[String],
    ) -> Result<Definitions, WarehouseError> {
        self.definitions_stamped(database, names, &[])
            .map(|(definitions, _)| definitions)
    }

    /// [`Self::definitions`], with the [`catalog_stamp_sql`] of `stamp_databases` read in
    /// the same request (`None` when no database is given): a build reads what it may
    /// have to give back and learns whether anything its checks judged changed, in one
    /// round trip, under the target lock.
    ///
    /// # Errors
    /// The catalog could not be read.
    pub fn definitions_stamped(
        &self,
        database: &str,
        names: &[String],
        stamp_databases: &[String],
    ) -> Result<(Definitions, Option<String>), WarehouseError> {
        if stamp_databases.is_empty() && names.is_empty() {
            return Ok((BTreeMap::new(), None));
        }
        // No relation has an empty name: the stamp travels in a row of its own.
        let mut parts = Vec::new();
        if !names.is_empty() {
            parts.push(format!(
                "SELECT name, engine, create_table_query FROM system.tables WHERE database = {} AND name IN ({})",
                stb_ddl::string_literal(database),
                name_list(names)
            ));
        }
        if !stamp_databases.is_empty() {
            parts.push(format!(
                "SELECT '' AS name, '' AS engine, ({}) AS create_table_query",
                catalog_stamp_sql(stamp_databases)
            ));
        }
        let rows = self.query(&parts.join(" UNION ALL "))?;
        let mut definitions = BTreeMap::new();
        let mut stamp = None;
        for row in 0..rows.data.len() {
            let name = text(&rows, row, "name");
            let create = text(&rows, row, "create_table_query");
            if name.is_empty() {
                stamp = Some(create);
            } else {
                definitions.insert(name, (text(&rows, row, "engine"), create));
            }
        }
        Ok((definitions, stamp))
    }

    /// `name` and `columns` of the `system.tables` rows of `names` in `database` that meet
    /// `condition` (` AND ...`, or empty); no query for no names.
    fn tables_named(
        &self,
        database: &str,
        names: &[String],
        columns: &str,
        condition: &str,
    ) -> Result<Rows, WarehouseError> {
        if names.is_empty() {
            return Ok(Rows::default());
        }
        self.query(&format!(
            "SELECT name, {columns} FROM system.tables WHERE database = {} AND name IN ({}){condition}",
            stb_ddl::string_literal(database),
            name_list(names)
        ))
    }

    /// The rows each of `tables` holds, as its parts count them (`system.tables.total_rows`;
    /// tables whose engine keeps no count are left out), and their bytes
    /// (`total_bytes`, when the engine knows them). One query.
    ///
    /// # Errors
    /// The catalog could not be read.
    pub fn stored(
        &self,
        database: &str,
        tables: &[String],
    ) -> Result<BTreeMap<String, Stored>, WarehouseError> {
        let rows = self.tables_named(
            database,
            tables,
            "toString(total_rows) AS total_rows, toString(total_bytes) AS total_bytes",
            " AND total_rows IS NOT NULL",
        )?;
        Ok((0..rows.data.len())
            .filter_map(|row| {
                let count = text(&rows, row, "total_rows").parse().ok()?;
                let stored = Stored {
                    rows: count,
                    // `NULL` reads as text that is not a number.
                    bytes: text(&rows, row, "total_bytes").parse().ok(),
                };
                Some((text(&rows, row, "name"), stored))
            })
            .collect())
    }

    /// What each of `views` (materialized views of `database`) reads: view -> (database,
    /// relation), from the catalog's view dependencies rather than the views' SQL. One
    /// query.
    ///
    /// # Errors
    /// The catalog could not be read.
    pub fn view_sources(
        &self,
        database: &str,
        views: &[&str],
    ) -> Result<BTreeMap<String, (String, String)>, WarehouseError> {
        if views.is_empty() {
            return Ok(BTreeMap::new());
        }
        let names: Vec<String> = views.iter().map(|v| stb_ddl::string_literal(v)).collect();
        let rows = self.query(&format!(
            "SELECT database, name, view FROM system.tables \
             ARRAY JOIN dependencies_database AS view_database, dependencies_table AS view \
             WHERE view_database = {} AND view IN ({}) ORDER BY database, name",
            stb_ddl::string_literal(database),
            names.join(", ")
        ))?;
        Ok((0..rows.data.len())
            .filter_map(|r| {
                Some((
                    rows.text(r, "view")?,
                    (rows.text(r, "database")?, rows.text(r, "name")?),
                ))
            })
            .collect())
    }

    /// Reads `database`'s relations and columns, every definition included. A relation
    /// whose DDL reads empty (created while the catalog was being read) makes the whole read
    /// start again, up to 3 times.
    ///
    /// # Errors
    /// A failed query, or DDL still empty after the last attempt.
    pub fn load_catalog(&self, database: &str) -> Result<Catalog, WarehouseError> {
        self.load_catalog_stamped(database, &[], &Depth::Full, None)
            .map(|(catalog, _)| catalog)
    }

    /// [`Self::load_catalog`] to `depth`, with the [`catalog_stamp_sql`] of
    /// `stamp_databases` read in the same request as the time zone, before the relations:
    /// a plan that validates what it read needs no request of its own to know whether the
    /// catalog changed since. `None` when no database is given. A [`Depth::Plan`] read
    /// given `cache` reads only the relations that cache does not hold (created, replaced
    /// or altered since), and leaves the cache up to date.
    ///
    /// # Errors
    /// As [`Self::load_catalog`].
    pub fn load_catalog_stamped(
        &self,
        database: &str,
        stamp_databases: &[String],
        depth: &Depth,
        mut cache: Option<&mut CatalogCache>,
    ) -> Result<(Catalog, Option<String>), WarehouseError> {
        let mut attempt = 1;
        loop {
            let (catalog, stamp) =
                self.read_catalog(database, stamp_databases, depth, cache.as_deref_mut())?;
            let incomplete: Vec<&str> = catalog
                .relations
                .iter()
                .filter(|r| r.defined && r.create_table_query.is_empty())
                .map(|r| r.name.as_str())
                .collect();
            if incomplete.is_empty() {
                return Ok((catalog, stamp));
            }
            if attempt >= ATTEMPTS {
                return Err(WarehouseError {
                    kind: ErrorKind::Other,
                    server_code: None,
                    message: format!(
                        "the catalog of '{database}' stayed incomplete (no DDL for {}); is DDL running concurrently?",
                        incomplete.join(", ")
                    ),
                });
            }
            std::thread::sleep(Duration::from_millis(50 * attempt));
            attempt += 1;
        }
    }

    fn read_catalog(
        &self,
        database: &str,
        stamp_databases: &[String],
        depth: &Depth,
        mut cache: Option<&mut CatalogCache>,
    ) -> Result<(Catalog, Option<String>), WarehouseError> {
        let stamp = if stamp_databases.is_empty() {
            String::new()
        } else {
            format!(", ({}) AS stamp", catalog_stamp_sql(stamp_databases))
        };
        let timezone = self.query(&format!(
            "SELECT timezone() AS tz, version() AS version, toString(toUnixTimestamp(now())) AS now{stamp}"
        ))?;
        if let Some(cache) = cache.as_deref_mut() {
            let config = self.config();
            // The user too: grants decide which columns a user sees.
            cache.bind(&format!(
                "{}@{}:{} {} {}",
                config.username,
                config.host,
                config.port,
                database,
                text(&timezone, 0, "version")
            ));
        }
        let db = stb_ddl::string_literal(database);
        let (mut relations, mut by_table) = match depth {
            Depth::Full => (
                ranked(self.query_as(&format!(
                    "SELECT name, engine, sorting_key, partition_key, toString(uuid) AS uuid, create_table_query, as_select, 1 AS defined, 1 AS rank, '0' AS modified FROM system.tables WHERE database = {db} ORDER BY name"
                ))?)
                .into_iter()
                .map(|row| row.relation)
                .collect(),
                columns_of(self.query_as(&format!(
                    "SELECT table, name, type, default_expression, '' AS uuid FROM system.columns WHERE database = {db} ORDER BY table, position"
                ))?),
            ),
            Depth::Plan { defined } => {
                // The server's clock before any relation is read (see
                // `read_plan_catalog_cold`).
                let started = text(&timezone, 0, "now").parse().unwrap_or(0);
                self.read_plan_catalog(&db, defined, cache, started)?
            }
        };
        // From the end: a relation listed twice keeps its last row, which gets the columns.
        // A relation from the cache holds its kept columns, which the read left out.
        for relation in relations.iter_mut().rev() {
            if let Some(table) = by_table.remove(&relation.name) {
                relation.columns = Columns::new(table.columns);
            }
        }
        let mut catalog = Catalog::new(text(&timezone, 0, "tz"), relations);
        if matches!(depth, Depth::Plan { .. }) {
            catalog = catalog.with_refreshable(self.refreshable_views(database));
        }
        Ok((catalog, timezone.text(0, "stamp")))
    }

    /// A [`Depth::Plan`] read: (relations, columns). Without a cache, three queries side by
    /// side ([`Self::read_plan_relations`]). With an empty one (the first plan after a
    /// deployment, or after `stb` or the server changed), the same three queries, each
    /// relation kept under the identity and modification time read in its own row: a
    /// listing first would only say that everything is to be read, and at 10,000 deployed
    /// models it costs 0.2 s before the reads can start. With a cache that holds something,
    /// a listing first: every relation's name, and the identity and modification time of
    /// each but materialized views (which a plan reads by name alone, and whose identity or
    /// time the server opens each view to give). The relations the cache holds unchanged
    /// come from it, with their columns; only the others are read (every relation when more
    /// than half are missing: a long list of names costs the server more than it saves).
    /// The relations come back with their columns; the columns returned apart are those of
    /// no relation read. `started`: the server's clock (seconds since the epoch) before
    /// this read began.
    fn read_plan_catalog(
        &self,
        db: &str,
        defined: &[String],
        cache: Option<&mut CatalogCache>,
        started: u64,
    ) -> Result<(Vec<CatalogRelation>, ColumnsByTable), WarehouseError> {
        let Some(cache) = cache else {
            let (rows, columns) = self.read_plan_relations(db, defined, None)?;
            return Ok((rows.into_iter().map(|row| row.relation).collect(), columns));
        };
        if cache.is_empty() {
            return self.read_plan_catalog_cold(db, defined, cache, started);
        }
        let (listed, views_by_name) = self.list_relations(db)?;
        let named: std::collections::HashSet<&str> = defined.iter().map(String::as_str).collect();
        let wants_definition = |relation: &CatalogRelation| {
            named.contains(relation.name.as_str()) || !is_heavy(&relation.engine)
        };
        let mut relations: Vec<CatalogRelation> = Vec::with_capacity(listed.len());
        let mut missing: Vec<&str> = Vec::new();
        for relation in &listed {
            match cache.get(relation, wants_definition) {
                Some(kept) => relations.push(kept.clone()),
                None => missing.push(relation.name.as_str()),
            }
        }
        // Materialized views by name, as the read gives them, but those whose definition
        // is wanted (a landing's), which are read.
        for name in &views_by_name {
            if named.contains(name.as_str()) {
                missing.push(name.as_str());
            } else {
                relations.push(materialized_view(name));
            }
        }
        if missing.is_empty() {
            cache.update(&listed, Vec::new());
            relations.sort_by(|a, b| a.name.cmp(&b.name));
            return Ok((relations, ColumnsByTable::new()));
        }
        let only =
            (missing.len() * 2 <= listed.len() + views_by_name.len()).then_some(missing.as_slice());
        let (read, mut columns) = self.read_plan_relations(db, defined, only)?;
        let served: std::collections::HashSet<&str> =
            relations.iter().map(|r| r.name.as_str()).collect();
        let fresh = latest_with_columns(read, &mut columns, |name| served.contains(name));
        drop(served);
        let by_name: std::collections::HashMap<&str, &ListedRelation> =
            listed.iter().map(|r| (r.name.as_str(), r)).collect();
        let kept: Vec<(ListedRelation, CatalogRelation)> = fresh
            .iter()
            .filter_map(|row| {
                by_name
                    .get(row.relation.name.as_str())
                    .map(|listing| ((*listing).clone(), row.relation.clone()))
            })
            .collect();
        cache.update(&listed, kept);
        relations.extend(fresh.into_iter().map(|row| row.relation));
        relations.sort_by(|a, b| a.name.cmp(&b.name));
        // What is left are the columns of relations not read (created after the others
        // were read, or served already): the catalog holds neither.
        Ok((relations, ColumnsByTable::new()))
    }

    /// [`Self::read_plan_catalog`] into an empty cache: every relation read, and each but
    /// materialized views kept under the identity and modification time of its own row.
    /// A relation's columns come from another query than its row, read at another moment:
    /// one changed in between must not be kept as the row and the columns mix them. Two
    /// rules keep it out. Its time: a relation changed in the two seconds before the read
    /// began (`started`) or since is read but not kept, as a listing's would be (an
    /// `ALTER` or a `CREATE OR REPLACE` moves the time past the kept one). Its identity:
    /// the columns' read gives each table's identity as it was before their columns were
    /// read, and a relation is kept only when that is its row's (`EXCHANGE TABLES`, or a
    /// rename of an older table into its place, keeps the old times and swaps
    /// identities).
    fn read_plan_catalog_cold(
        &self,
        db: &str,
        defined: &[String],
        cache: &mut CatalogCache,
        started: u64,
    ) -> Result<(Vec<CatalogRelation>, ColumnsByTable), WarehouseError> {
        let (read, mut columns) = self.read_plan_relations(db, defined, None)?;
        let mut fresh = latest_with_columns(read, &mut columns, |_| false);
        let kept: Vec<(ListedRelation, CatalogRelation)> = fresh
            .iter()
            .filter_map(|row| Some((cold_listing(row, started)?, row.relation.clone())))
            .collect();
        let listed: Vec<ListedRelation> = kept.iter().map(|(listing, _)| listing.clone()).collect();
        cache.update(&listed, kept);
        fresh.reverse();
        Ok((
            fresh.into_iter().map(|row| row.relation).collect(),
            ColumnsByTable::new(),
        ))
    }

    /// Every relation of `db` but materialized views with its identity and modification
    /// time, and the materialized views' names, in one query: every name, and the others'
    /// rows, a name without one being a materialized view's (0.34 s for the 37,000
    /// relations of 15,000 models on the local engine, against 1.2 s of the server's time
    /// for the reads the cache spares). A relation created while the server answers may
    /// be taken for a materialized view, as [`plan_relations_sql`] may take it.
    fn list_relations(
        &self,
        db: &str,
    ) -> Result<(Vec<ListedRelation>, Vec<String>), WarehouseError> {
        // name, uuid, modified, recent, rank
        let rows: Vec<(String, String, String, u8, u8)> = self.query_as(&format!(
            "SELECT * FROM (\
             SELECT name, toString(uuid) AS uuid, {MODIFIED} AS modified, metadata_modification_time > now() - 2 AS recent, toUInt8(1) AS rank FROM system.tables WHERE database = {db} AND engine != 'MaterializedView' \
             UNION ALL SELECT name, '', '0', toUInt8(0), toUInt8(0) FROM system.tables WHERE database = {db}\
             ) ORDER BY name, rank"
        ))?;
        let mut listed: Vec<ListedRelation> = Vec::with_capacity(rows.len() / 2);
        let mut views: Vec<String> = Vec::new();
        for (name, uuid, modified, recent, rank) in rows {
            // Name order, each name's bare row first: a listed row takes it back.
            if rank == 1 {
                if views.last() == Some(&name) {
                    views.pop();
                }
                listed.push(ListedRelation {
                    name,
                    uuid,
                    // A time that does not read as a number is never kept.
                    modified: modified.parse().unwrap_or(0),
                    recent: recent != 0,
                });
            } else {
                views.push(name);
            }
        }
        Ok((listed, views))
    }

    /// A [`Depth::Plan`] read of the relations and their columns (`only` those named when
    /// given): three queries side by side, the plain views' definitions apart from the
    /// other relations: the server answers them at once, and at 10,000 deployed models
    /// each is a second or so (the 10,000 views' definitions 1.2 s, everything else
    /// 0.5 s, the columns 0.75 s), 1.8 s one after the other. The relations come in name
    /// order, a relation listed twice (created between the parts) with its real row last.
    fn read_plan_relations(
        &self,
        db: &str,
        defined: &[String],
        only: Option<&[&str]>,
    ) -> Result<(Vec<Ranked>, ColumnsByTable), WarehouseError> {
        let only_sql = |column: &str| {
            only.map(|names| format!(" AND {column} IN ({})", name_list(names)))
                .unwrap_or_default()
        };
        // Each table's identity comes from a scalar subquery, which the server answers
        // before it reads any column: an identity that differs from the table's row says
        // the table was swapped between the reads (see `read_plan_catalog_cold`).
        let columns_sql = format!(
            "WITH (SELECT (groupArray(name), groupArray(toString(uuid))) FROM system.tables WHERE database = {db} AND (engine != 'MaterializedView' OR name IN ({named})){only_name}) AS identities \
             SELECT table, name, type, default_expression, transform(table, identities.1, identities.2, '') AS uuid FROM system.columns WHERE database = {db} AND (table IN (SELECT name FROM system.tables WHERE database = {db} AND engine != 'MaterializedView'{only_name}) OR table IN ({named})){only_table} ORDER BY table, position",
            named = name_list(defined),
            only_name = only_sql("name"),
            only_table = only_sql("table"),
        );
        // Each answer is turned into relations or columns on the thread that read it:
        // its JSON is freed where it was allocated, and only the compact form is kept.
        let (views, others, columns) = std::thread::scope(|scope| {
            let views = scope.spawn(|| {
                self.query_as(&plan_views_sql(db, defined, only))
                    .map(ranked)
            });
            let columns = scope.spawn(|| self.query_as(&columns_sql).map(columns_of));
            let others = self
                .query_as(&plan_relations_sql(db, defined, only))
                .map(ranked);
            (joined(views), others, joined(columns))
        });
        let mut relations = others?;
        relations.extend(views?);
        // Name order, and a relation listed twice (created between the reads) with its
        // real row last, which the catalog keeps.
        relations.sort_by(|a, b| (&a.relation.name, a.rank).cmp(&(&b.relation.name, b.rank)));
        Ok((relations, columns?))
    }

    /// The refreshable materialized views of `database`, from `system.view_refreshes`;
    /// a server older than that table (before 23.12) is asked for the views whose
    /// definition says `REFRESH` instead (slow, but those servers have few such views).
    /// `None` when neither can be read.
    fn refreshable_views(&self, database: &str) -> Option<BTreeSet<String>> {
        let db = stb_ddl::string_literal(database);
        let rows = self
            .query(&format!(
                "SELECT view FROM system.view_refreshes WHERE database = {db}"
            ))
            .or_else(|_| {
                self.query(&format!(
                    "SELECT name AS view FROM system.tables WHERE database = {db} AND engine = 'MaterializedView' AND position(create_table_query, ' REFRESH ') > 0"
                ))
            })
            .ok()?;
        Some(
            (0..rows.data.len())
                .map(|row| text(&rows, row, "view"))
                .collect(),
        )
    }
}

/// A relation's modification time in seconds since the epoch, as text (see
/// [`CatalogCache`]).
const MODIFIED: &str = "toString(toUnixTimestamp(metadata_modification_time))";

/// Relations whose definition a plan leaves unread unless it names them: the relations
/// a project has many of (its models' tables and materialized views).
fn is_heavy(engine: &str) -> bool {
    engine.ends_with("MergeTree") || engine == "MaterializedView"
}

/// A materialized view as a [`Depth::Plan`] read lists it: by name alone.
fn materialized_view(name: &str) -> CatalogRelation {
    CatalogRelation {
        name: name.to_owned(),
        engine: "MaterializedView".to_owned(),
        sorting_key: String::new(),
        partition_key: String::new(),
        create_table_query: String::new(),
        as_select: String::new(),
        uuid: String::new(),
        columns: Columns::default(),
        defined: false,
    }
}

/// A relation as a read of `system.tables` answers it, in the reads' column order:
/// name, engine, sorting key, partition key, uuid, `create_table_query`, `as_select`,
/// whether the definition was read, the row's rank, and its modification time in seconds
/// since the epoch (`0` where the read leaves it out).
type RelationRow = (
    String,
    String,
    String,
    String,
    String,
    String,
    String,
    u8,
    u8,
    String,
);

/// A relation as one read answered it, without its columns.
struct Ranked {
    /// Its place among rows of the same name: the highest is its real row (see
    /// [`plan_relations_sql`]).
    rank: u8,
    relation: CatalogRelation,
    /// `metadata_modification_time` in seconds since the epoch, read in the same row as
    /// the rest (0 where the read leaves it out).
    modified: u64,
    /// The identity the read of its columns gave it (see [`TableColumns`]); `None`
    /// until its columns are attached.
    columns_identity: Option<String>,
}

/// What a read into an empty cache ([`Client::read_plan_catalog_cold`]) keeps `row`
/// under, as a listing would have listed it; `None` for a materialized view (never kept)
/// and for a relation whose columns were read under another identity than its row.
fn cold_listing(row: &Ranked, started: u64) -> Option<ListedRelation> {
    let relation = &row.relation;
    if relation.engine == "MaterializedView"
        || row.columns_identity.as_deref() != Some(relation.uuid.as_str())
    {
        return None;
    }
    Some(ListedRelation {
        name: relation.name.clone(),
        uuid: relation.uuid.clone(),
        modified: row.modified,
        // A server whose clock could not be read keeps nothing.
        recent: started == 0 || row.modified + 2 > started,
    })
}

/// The relations of a read, each with its rank and modification time.
fn ranked(rows: Vec<RelationRow>) -> Vec<Ranked> {
    rows.into_iter()
        .map(
            |(
                name,
                engine,
                sorting_key,
                partition_key,
                uuid,
                create_table_query,
                as_select,
                defined,
                rank,
                modified,
            )| Ranked {
                rank,
                relation: CatalogRelation {
                    name,
                    engine,
                    sorting_key,
                    partition_key,
                    create_table_query,
                    as_select,
                    uuid,
                    columns: Columns::default(),
                    defined: defined == 1,
                },
                // A time that does not read as a number is never kept.
                modified: modified.parse().unwrap_or(0),
                columns_identity: None,
            },
        )
        .collect()
}

/// Of `rows` in (name, rank) order, each relation's real row (its last) with its
/// `columns` (taken out of them), but those `skipped`; in reverse name order.
fn latest_with_columns(
    rows: Vec<Ranked>,
    columns: &mut ColumnsByTable,
    skipped: impl Fn(&str) -> bool,
) -> Vec<Ranked> {
    let mut latest: Vec<Ranked> = Vec::with_capacity(rows.len());
    for mut row in rows.into_iter().rev() {
        let name = row.relation.name.as_str();
        if skipped(name) || latest.last().is_some_and(|last| last.relation.name == name) {
            continue;
        }
        if let Some(table) = columns.remove(name) {
            row.relation.columns = Columns::new(table.columns);
            row.columns_identity = Some(table.identity);
        }
        latest.push(row);
    }
    latest
}

/// A table's columns, in position order, and its identity (`uuid`) as the same read gave
/// it before reading them (empty when the read leaves it out).
#[derive(Default)]
struct TableColumns {
    identity: String,
    columns: Vec<CatalogColumn>,
}

/// Each table's columns, by table name.
type ColumnsByTable = BTreeMap<String, TableColumns>;

/// A read of `system.columns`: table, name, type, default expression, the table's
/// identity.
fn columns_of(rows: Vec<(String, String, String, String, String)>) -> ColumnsByTable {
    let mut by_table: ColumnsByTable = BTreeMap::new();
    for (table, name, data_type, default_expression, identity) in rows {
        let entry = by_table.entry(table).or_default();
        entry.identity = identity;
        entry.columns.push(CatalogColumn {
            name,
            data_type,
            default_expression,
        });
    }
    by_table
}

/// A thread's answer, or why it stopped.
fn joined<T>(
    handle: std::thread::ScopedJoinHandle<'_, Result<T, WarehouseError>>,
) -> Result<T, WarehouseError> {
    handle
        .join()
        .unwrap_or_else(|_| Err(other_error("a read of the catalog stopped")))
}

fn other_error(message: &str) -> WarehouseError {
    WarehouseError {
        kind: ErrorKind::Other,
        server_code: None,
        message: message.to_owned(),
    }
}

/// The names of `db`'s relations that are not materialized views (the server answers this
/// without opening each view), `only` those given.
fn not_views_sql(db: &str, only: &str) -> String {
    format!(
        "SELECT name FROM system.tables WHERE database = {db} AND engine != 'MaterializedView'{only}"
    )
}

/// A [`Depth::Plan`] read of `db`'s relations but plain views (`only` those when given),
/// in three parts with the same columns: relations whose definition is read;
/// `MergeTree`-family tables without it; materialized views, by name only (each is what is
/// left when the others are taken out, which the server finds without opening the
/// views). Plain views not named come from [`plan_views_sql`]. A relation created between
/// the parts may be listed twice, its real row ranked last, which [`Catalog::new`] keeps.
fn plan_relations_sql(db: &str, defined: &[String], only: Option<&[&str]>) -> String {
    let named = name_list(defined);
    let heavy = "endsWith(engine, 'MergeTree')";
    let only = only
        .map(|names| format!(" AND name IN ({})", name_list(names)))
        .unwrap_or_default();
    // `rank` puts a relation the views' part lists by mistake (created after that part's
    // list of non-views was read) before its real row, which the catalog then keeps.
    format!(
        "SELECT * FROM (\
         SELECT name, engine, sorting_key, partition_key, toString(uuid) AS uuid, create_table_query, as_select, 1 AS defined, 1 AS rank, {MODIFIED} AS modified \
         FROM system.tables WHERE database = {db} AND ((engine NOT IN ('MaterializedView', 'View') AND NOT {heavy}) OR name IN ({named})){only} \
         UNION ALL SELECT name, engine, sorting_key, partition_key, toString(uuid), '', '', 0, 1, {MODIFIED} \
         FROM system.tables WHERE database = {db} AND engine != 'MaterializedView' AND {heavy} AND name NOT IN ({named}){only} \
         UNION ALL SELECT name, 'MaterializedView', '', '', '', '', '', 0, 0, '0' \
         FROM system.tables WHERE database = {db} AND name NOT IN ({}) AND name NOT IN ({named}){only}\
         ) ORDER BY name, rank",
        not_views_sql(db, &only)
    )
}

/// The plain views of `db` that [`plan_relations_sql`] leaves out (`only` those when
/// given), with their definitions (a virtual project's stable views: their binding is
/// their `as_select`), in the same columns.
fn plan_views_sql(db: &str, defined: &[String], only: Option<&[&str]>) -> String {
    let only = only
        .map(|names| format!(" AND name IN ({})", name_list(names)))
        .unwrap_or_default();
    format!(
        "SELECT name, engine, sorting_key, partition_key, toString(uuid) AS uuid, create_table_query, as_select, 1 AS defined, 1 AS rank, {MODIFIED} AS modified \
         FROM system.tables WHERE database = {db} AND engine = 'View' AND name NOT IN ({}){only} ORDER BY name",
        name_list(defined)
    )
}

/// `names` as an SQL list of string literals (`''`, which names nothing, for none).
fn name_list<S: AsRef<str>>(names: &[S]) -> String {
    if names.is_empty() {
        return "''".to_owned();
    }
    names
        .iter()
        .map(|n| stb_ddl::string_literal(n.as_ref()))
        .collect::<Vec<_>>()
        .join(", ")
}

/// A query of one value that fingerprints every relation in `databases`: its name,
/// engine, identity and full definition (an `ALTER` changes the definition, a drop and
/// create the identity). StreamBuild's own lifecycle tables are left out: a build writes
/// them (the target lock is one) and no model reads them. Equal values read at two times
/// mean the relations a plan's checks read did not change in between.
#[must_use]
pub fn catalog_stamp_sql(databases: &[String]) -> String {
    let list = databases
        .iter()
        .map(|d| stb_ddl::string_literal(d))
        .collect::<Vec<_>>()
        .join(", ");
    format!(
        "SELECT concat(toString(count()), ':', toString(sum(cityHash64(database, name, engine, toString(uuid), create_table_query)))) \
         FROM system.tables WHERE database IN ({list}) AND NOT startsWith(name, '_streambuild')"
    )
}

/// What a table holds, as its parts count it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stored {
    pub rows: u64,
    /// `None` when the engine does not know.
    pub bytes: Option<u64>,
}

#[cfg(test)]
mod tests {
    use super::{Catalog, CatalogRelation, Columns};

    fn relation(name: &str, engine: &str) -> CatalogRelation {
        CatalogRelation {
            name: name.into(),
            engine: engine.into(),
            sorting_key: String::new(),
            partition_key: String::new(),
            create_table_query: String::new(),
            as_select: String::new(),
            uuid: String::new(),
            columns: Columns::default(),
            defined: true,
        }
    }

    #[test]
    fn relations_are_found_by_name_and_replaced_whole() {
        let catalog = Catalog::new(
            "UTC",
            (0..20_000)
                .map(|i| relation(&format!("tbl__m{i}"), "MergeTree"))
                .collect(),
        );
        assert_eq!(catalog.relations().len(), 20_000);
        assert_eq!(
            catalog.relation("tbl__m19999").map(|r| r.name.as_str()),
            Some("tbl__m19999")
        );
        assert!(catalog.relation("tbl__m20000").is_none());
        let replaced = catalog.with_relation("tbl__m7", Some(relation("tbl__m7", "Null")));
        assert_eq!(replaced.relations().len(), 20_000);
        assert_eq!(
            replaced.relation("tbl__m7").map(|r| r.engine.as_str()),
            Some("Null")
        );
        assert_eq!(
            replaced.relation("tbl__m8").map(|r| r.engine.as_str()),
            Some("MergeTree"),
            "the others keep their place in the index"
        );
        let removed = replaced.with_relation("tbl__m7", None);
        assert!(removed.relation("tbl__m7").is_none());
        assert_eq!(removed.relations().len(), 19_999);
    }

    fn read_row(engine: &str, modified: u64, columns_identity: Option<&str>) -> super::Ranked {
        let mut relation = relation("tbl__orders", engine);
        relation.uuid = "u1".into();
        super::Ranked {
            rank: 1,
            relation,
            modified,
            columns_identity: columns_identity.map(str::to_owned),
        }
    }

    #[test]
    fn a_cold_read_keeps_a_relation_changed_two_seconds_before_it_began_and_nothing_later() {
        let recent = |modified: u64, started: u64| {
            super::cold_listing(&read_row("MergeTree", modified, Some("u1")), started)
                .map(|listing| listing.recent)
        };
        assert_eq!(recent(98, 100), Some(false), "two seconds before: kept");
        assert_eq!(
            recent(99, 100),
            Some(true),
            "one second before: read, not kept"
        );
        assert_eq!(recent(100, 100), Some(true));
        assert_eq!(recent(5, 0), Some(true), "no clock read: nothing kept");
    }

    #[test]
    fn a_cold_read_never_keeps_a_materialized_view_or_columns_read_under_another_identity() {
        let listing = |row: super::Ranked| super::cold_listing(&row, 100);
        assert!(listing(read_row("MergeTree", 50, Some("u1"))).is_some());
        // Swapped (EXCHANGE TABLES) between the read of its columns and of its row.
        assert!(listing(read_row("MergeTree", 50, Some("u0"))).is_none());
        assert!(
            listing(read_row("MergeTree", 50, None)).is_none(),
            "no columns read"
        );
        assert!(listing(read_row("MaterializedView", 50, Some("u1"))).is_none());
    }
}
