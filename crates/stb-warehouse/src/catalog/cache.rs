//! What a plan read of each relation, kept from one plan to the next.
//!
//! A plan reads every relation of the target database: engine, keys, identity and columns
//! of tables, plain views' definitions (a virtual project's stable views are bound by
//! theirs: `SELECT * FROM db.<copy>`), materialized views by name. The server answers from
//! each relation's stored metadata on every read, formatting definitions from their syntax
//! trees: for 15,000 models' 37,000 relations on the local engine, the tables' keys and
//! the materialized views' names 0.42 s, the columns 0.68 s, the views' definitions 1.1 s,
//! while the names of all relations with the identity and modification time of all but
//! materialized views cost 0.45 s (materialized views are read by name every time: the
//! server opens each view to give its identity or time). A relation keeps what was read
//! while it keeps both: `CREATE OR REPLACE` gives it a new
//! identity (`uuid`) in an `Atomic` database, `EXCHANGE TABLES` swaps identities, and any
//! other change (columns, keys, settings, a view's query) rewrites its metadata, which
//! moves its modification time. The time has one-second steps, so a relation changed in
//! the last two seconds (by the server's clock) is never kept: a second change within the
//! same second could not be told from the first. A relation without a modification time
//! (a database that keeps no metadata files) is never kept either. An empty cache is
//! filled from the reads alone, each relation under the identity and time of its own row,
//! and only when that time is two seconds or more before the read began and its columns
//! were read under the same identity (they come from another query: a change between the
//! two must not be kept).
//!
//! The only definitions kept are plain views' (a query naming relations, as the server
//! shows it to any reader, its secrets masked where the server masks them). The
//! definitions a plan reads of anything else (landings' Kafka tables, adopted tables,
//! other engines) may carry credentials; those relations are few and read every time.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::CatalogRelation;

/// What a plan read of each relation, by name, for one database of one server.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CatalogCache {
    /// What the entries hold ([`FORMAT`]); a cache saved by an earlier `stb` (0 when it
    /// has no such member, 2 when it kept plain views only) starts over.
    #[serde(default)]
    format: u32,
    /// The server (address and version: another version may word a definition
    /// differently) and database the relations belong to; entries of any other are not
    /// used.
    identity: String,
    #[serde(default)]
    relations: BTreeMap<String, CachedRelation>,
    /// Whether a read changed the entries since the cache was made or loaded.
    #[serde(skip)]
    changed: bool,
}

/// What the entries hold: 3 since every relation a plan reads is kept, not only plain
/// views.
const FORMAT: u32 = 3;

/// One relation as a plan read it, with what says it is still the same relation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct CachedRelation {
    /// The relation's `uuid` when it was listed (a materialized view's read leaves its
    /// `uuid` out, the listing does not).
    pub(crate) uuid: String,
    /// `metadata_modification_time` in seconds since the epoch.
    pub(crate) modified: u64,
    /// As the plan's read gave it, columns included.
    pub(crate) relation: CatalogRelation,
}

/// What a relation is now, as the server lists it without reading it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ListedRelation {
    pub(crate) name: String,
    pub(crate) uuid: String,
    pub(crate) modified: u64,
    /// Changed in the last two seconds: read, but not kept.
    pub(crate) recent: bool,
}

impl ListedRelation {
    /// Whether what is read of the relation now may be kept under this listing: not
    /// changed just now, with a modification time, and with an identity of its own (a
    /// database that gives none, `Ordinary`, lists every relation with the zero uuid, so
    /// a rename within the same second could not be told).
    fn keepable(&self) -> bool {
        !self.recent
            && self.modified != 0
            && !self.uuid.is_empty()
            && self.uuid != "00000000-0000-0000-0000-000000000000"
    }
}

impl CatalogCache {
    /// Whether a read changed what the cache holds (worth saving).
    #[must_use]
    pub fn changed(&self) -> bool {
        self.changed
    }

    /// How many relations the cache holds.
    #[must_use]
    pub fn len(&self) -> usize {
        self.relations.len()
    }

    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.relations.is_empty()
    }

    /// Starts over when the cache describes another server or database, or was saved in
    /// another format.
    pub(crate) fn bind(&mut self, identity: &str) {
        if self.identity != identity || self.format != FORMAT {
            *self = Self {
                format: FORMAT,
                identity: identity.to_owned(),
                relations: BTreeMap::new(),
                changed: true,
            };
        }
    }

    /// The kept read of `listed`, when it is the same relation as when it was kept and
    /// was read as deeply as `defined` (whether its definition is wanted now) asks.
    pub(crate) fn get(
        &self,
        listed: &ListedRelation,
        defined: impl Fn(&CatalogRelation) -> bool,
    ) -> Option<&CatalogRelation> {
        self.relations
            .get(&listed.name)
            .filter(|kept| {
                listed.keepable() && kept.uuid == listed.uuid && kept.modified == listed.modified
            })
            .map(|kept| &kept.relation)
            .filter(|relation| relation.defined == defined(relation))
    }

    /// Keeps only `listed` relations (the others were dropped), with `read` ones replacing
    /// or adding theirs. Not kept: a relation changed just now, a definition other than a
    /// plain view's, and an incomplete read (a relation still being created, or dropped
    /// between the reads: no definition where one was read, or no columns where they were
    /// read; the catalog read retries until it is complete, which a kept incomplete entry
    /// would never be).
    pub(crate) fn update(
        &mut self,
        listed: &[ListedRelation],
        read: Vec<(ListedRelation, CatalogRelation)>,
    ) {
        let before = self.relations.len();
        let present: std::collections::HashSet<&str> =
            listed.iter().map(|r| r.name.as_str()).collect();
        self.relations
            .retain(|name, _| present.contains(name.as_str()));
        if self.relations.len() != before {
            self.changed = true;
        }
        for (listing, relation) in read {
            if !listing.keepable() || !worth_keeping(&relation) {
                if self.relations.remove(&listing.name).is_some() {
                    self.changed = true;
                }
                continue;
            }
            let kept = CachedRelation {
                uuid: listing.uuid,
                modified: listing.modified,
                relation,
            };
            if self.relations.get(&listing.name) != Some(&kept) {
                self.relations.insert(listing.name, kept);
                self.changed = true;
            }
        }
    }
}

/// Whether a read of a relation is complete and holds no definition but a plain view's.
fn worth_keeping(relation: &CatalogRelation) -> bool {
    if relation.defined {
        relation.engine == "View"
            && !relation.create_table_query.is_empty()
            && !relation.columns.is_empty()
    } else {
        // Materialized views are listed by name on every read, never kept.
        relation.engine != "MaterializedView" && !relation.columns.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::{CatalogCache, CatalogRelation, ListedRelation};
    use crate::catalog::CatalogColumn;

    fn listed(name: &str, uuid: &str, modified: u64, recent: bool) -> ListedRelation {
        ListedRelation {
            name: name.into(),
            uuid: uuid.into(),
            modified,
            recent,
        }
    }

    fn column() -> CatalogColumn {
        CatalogColumn {
            name: "id".into(),
            data_type: "String".into(),
            default_expression: String::new(),
        }
    }

    fn view(name: &str, target: &str) -> CatalogRelation {
        CatalogRelation {
            name: name.into(),
            engine: "View".into(),
            sorting_key: String::new(),
            partition_key: String::new(),
            create_table_query: format!("CREATE VIEW db.{name} AS SELECT * FROM db.{target}"),
            as_select: format!("SELECT * FROM db.{target}"),
            uuid: "u".into(),
            columns: vec![column()].into(),
            defined: true,
        }
    }

    fn table(name: &str, engine: &str) -> CatalogRelation {
        CatalogRelation {
            engine: engine.into(),
            sorting_key: "id".into(),
            create_table_query: String::new(),
            as_select: String::new(),
            defined: false,
            ..view(name, "x")
        }
    }

    /// Whether a plan wants a relation's definition: views' only.
    fn views_defined(relation: &CatalogRelation) -> bool {
        relation.engine == "View"
    }

    /// `cache` after a read that listed only `relation` and read it.
    fn read_only(cache: &mut CatalogCache, listing: &ListedRelation, relation: CatalogRelation) {
        cache.update(
            std::slice::from_ref(listing),
            vec![(listing.clone(), relation)],
        );
    }

    #[test]
    fn a_relation_is_served_from_the_cache_only_while_its_identity_and_time_hold() {
        let mut cache = CatalogCache::default();
        cache.bind("127.0.0.1:8123 db 25.1");
        let v = listed("v", "u1", 100, false);
        read_only(&mut cache, &v, view("v", "a"));
        assert!(cache.changed());
        assert_eq!(
            cache.get(&v, views_defined).map(|r| r.as_select.as_str()),
            Some("SELECT * FROM db.a")
        );
        for (other, why) in [
            (listed("v", "u2", 100, false), "replaced"),
            (listed("v", "u1", 101, false), "altered"),
            (listed("v", "u1", 100, true), "changed just now"),
            (listed("w", "u1", 100, false), "another relation"),
        ] {
            assert!(cache.get(&other, views_defined).is_none(), "{why}");
        }
    }

    #[test]
    fn a_relation_read_without_the_definition_wanted_now_is_read_again() {
        let mut cache = CatalogCache::default();
        cache.bind("server db");
        let t = listed("t", "ut", 5, false);
        read_only(&mut cache, &t, table("t", "MergeTree"));
        assert!(cache.get(&t, |_| false).is_some());
        // The table is now named among the relations whose definition a plan reads.
        assert!(cache.get(&t, |_| true).is_none());
    }

    #[test]
    fn tables_are_kept_without_definitions_and_views_with_theirs_and_nothing_else_is() {
        let mut cache = CatalogCache::default();
        cache.bind("server db");
        let mut kafka = table("k", "Kafka");
        kafka.defined = true;
        kafka.create_table_query =
            "CREATE TABLE db.k (id String) ENGINE = Kafka SETTINGS kafka_sasl_password = '[HIDDEN]'"
                .into();
        let mut landing_view = table("mv", "MaterializedView");
        landing_view.defined = true;
        landing_view.create_table_query =
            "CREATE MATERIALIZED VIEW db.mv TO db.t AS SELECT 1".into();
        let reads = [
            (
                listed("t", "ut", 1, false),
                table("t", "ReplacingMergeTree"),
            ),
            (listed("m", "um", 1, false), {
                let mut mv = table("m", "MaterializedView");
                mv.columns = Default::default();
                mv.uuid.clear();
                mv
            }),
            (listed("k", "uk", 1, false), kafka),
            (listed("mv", "umv", 1, false), landing_view),
            (listed("v", "uv", 1, false), view("v", "t")),
        ];
        let listing: Vec<ListedRelation> = reads.iter().map(|(l, _)| l.clone()).collect();
        cache.update(&listing, reads.to_vec());
        let kept: Vec<&str> = cache.relations.keys().map(String::as_str).collect();
        assert_eq!(
            kept,
            ["t", "v"],
            "materialized views are read every time, definitions but a view's never kept"
        );
        let text = serde_json::to_string(&cache).expect("saved");
        assert!(!text.contains("kafka_sasl"), "{text}");
    }

    #[test]
    fn recent_incomplete_and_dropped_relations_are_not_kept() {
        let mut cache = CatalogCache::default();
        cache.bind("server db");
        let (a, b) = (listed("a", "ua", 1, false), listed("b", "ub", 1, false));
        cache.update(
            &[a.clone(), b.clone()],
            vec![(a.clone(), view("a", "x")), (b.clone(), view("b", "y"))],
        );
        assert_eq!(cache.len(), 2);
        // b is gone; a was replaced a second ago.
        read_only(&mut cache, &listed("a", "ua2", 9, true), view("a", "z"));
        assert!(cache.is_empty());
        // A view read while it was being created (no definition yet) is not kept either.
        let c = listed("c", "uc", 1, false);
        let mut empty = view("c", "x");
        empty.create_table_query.clear();
        read_only(&mut cache, &c, empty);
        assert!(cache.get(&c, views_defined).is_none());
        // Nor a view or a table whose columns were not read (dropped between the reads).
        let mut without_columns = view("c", "x");
        without_columns.columns = Default::default();
        read_only(&mut cache, &c, without_columns);
        let mut bare_table = table("c", "MergeTree");
        bare_table.columns = Default::default();
        read_only(&mut cache, &c, bare_table);
        assert!(cache.is_empty());
        // Nor a relation without a modification time.
        read_only(&mut cache, &listed("d", "ud", 0, false), view("d", "x"));
        assert!(cache.is_empty());
    }

    #[test]
    fn a_cache_saved_by_an_earlier_format_starts_over() {
        // What stb wrote when it kept plain views only.
        let old = serde_json::json!({
            "format": 2,
            "identity": "one",
            "views": {"v": {"uuid": "u", "modified": 1, "create_table_query": "CREATE VIEW v AS SELECT 1",
                            "as_select": "SELECT 1", "columns": []}},
        });
        let mut old: CatalogCache = serde_json::from_value(old).expect("an old cache reads");
        old.bind("one");
        assert!(old.is_empty());
        assert!(old.changed());
    }

    #[test]
    fn another_server_or_database_starts_an_empty_cache() {
        let mut cache = CatalogCache::default();
        cache.bind("one");
        read_only(&mut cache, &listed("v", "u", 1, false), view("v", "a"));
        let text = serde_json::to_string(&cache).expect("saved");
        let saved: CatalogCache = serde_json::from_str(&text).expect("loaded");
        assert!(!saved.changed(), "a loaded cache has nothing new to save");
        let mut saved = saved;
        saved.bind("one");
        assert_eq!(saved.len(), 1);
        assert!(!saved.changed());
        // The same read again changes nothing worth saving.
        read_only(&mut saved, &listed("v", "u", 1, false), view("v", "a"));
        assert!(!saved.changed());
        saved.bind("two");
        assert!(saved.is_empty());
        assert!(saved.changed());
    }
}
