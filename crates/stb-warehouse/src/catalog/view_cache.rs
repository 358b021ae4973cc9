//! Plain views' definitions kept from one plan to the next.
//!
//! A virtual project's stable views are bound by their definition (`SELECT * FROM
//! db.<copy>`), so a plan reads every one. The server formats each from its stored syntax
//! tree on every read: 1.2-1.5 s for the 10,000 views of a 10,000-model project, while
//! their names, identities and modification times cost it 0.14 s. A view keeps its
//! definition while it keeps both: `CREATE OR REPLACE VIEW` gives it a new identity
//! (`uuid`) in an `Atomic` database, and any other change rewrites its metadata, which
//! moves its modification time. The time has one-second steps, so a view changed in the
//! last two seconds (by the server's clock) is never kept: a second change within the same
//! second could not be told from the first.
//!
//! A view's columns are kept beside its definition (the server fixes them when the view
//! is created or altered, which the same two keys follow), so the plan's columns read
//! covers tables only: at 20,000 models under a deployed project's Kafka consumers, that
//! read was the slowest of the catalog's.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::CatalogColumn;

/// Views' definitions by name, for one database of one server.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ViewCache {
    /// What the entries hold ([`FORMAT`]); a cache saved by an earlier `stb` (0 when it
    /// has no such member) starts over.
    #[serde(default)]
    format: u32,
    /// The server (address and version: another version may word a definition
    /// differently) and database the views belong to; entries of any other are not used.
    identity: String,
    views: BTreeMap<String, CachedView>,
    /// Whether a read changed the entries since the cache was made or loaded.
    #[serde(skip)]
    changed: bool,
}

/// What the entries hold: 2 since views' columns are kept with their definitions.
const FORMAT: u32 = 2;

/// One view's definition and columns, with what says it is still the same view.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct CachedView {
    pub(crate) uuid: String,
    /// `metadata_modification_time` in seconds since the epoch.
    pub(crate) modified: u64,
    pub(crate) create_table_query: String,
    pub(crate) as_select: String,
    /// In position order (a view's columns are fixed when it is created or altered).
    #[serde(default)]
    pub(crate) columns: Vec<CatalogColumn>,
}

/// What a view is now, as the server lists it without its definition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ListedView {
    pub(crate) name: String,
    pub(crate) uuid: String,
    pub(crate) modified: u64,
    /// Changed in the last two seconds: read, but not kept.
    pub(crate) recent: bool,
}

impl ViewCache {
    /// Whether a read changed what the cache holds (worth saving).
    #[must_use]
    pub fn changed(&self) -> bool {
        self.changed
    }

    /// How many views' definitions the cache holds.
    #[must_use]
    pub fn len(&self) -> usize {
        self.views.len()
    }

    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.views.is_empty()
    }

    /// Starts over when the cache describes another server or database.
    pub(crate) fn bind(&mut self, identity: &str) {
        if self.identity != identity || self.format != FORMAT {
            *self = Self {
                format: FORMAT,
                identity: identity.to_owned(),
                views: BTreeMap::new(),
                changed: true,
            };
        }
    }

    /// The kept definition of `view`, when it is the same view as when it was kept.
    pub(crate) fn get(&self, view: &ListedView) -> Option<&CachedView> {
        self.views
            .get(&view.name)
            .filter(|kept| !view.recent && kept.uuid == view.uuid && kept.modified == view.modified)
    }

    /// Keeps only `listed` views (the others were dropped), with `read` definitions
    /// replacing or adding theirs; a recent view's definition is not kept, nor an empty
    /// one or one without columns (a view still being created, or dropped between the
    /// reads: the catalog read retries until it is complete, which a kept empty
    /// definition would never be).
    pub(crate) fn update(&mut self, listed: &[ListedView], read: Vec<(ListedView, CachedView)>) {
        let before = self.views.len();
        let present: std::collections::HashSet<&str> =
            listed.iter().map(|v| v.name.as_str()).collect();
        self.views.retain(|name, _| present.contains(name.as_str()));
        if self.views.len() != before {
            self.changed = true;
        }
        for (view, definition) in read {
            if view.recent
                || definition.create_table_query.is_empty()
                || definition.columns.is_empty()
            {
                if self.views.remove(&view.name).is_some() {
                    self.changed = true;
                }
                continue;
            }
            self.views.insert(view.name, definition);
            self.changed = true;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{CachedView, CatalogColumn, ListedView, ViewCache};

    fn listed(name: &str, uuid: &str, modified: u64, recent: bool) -> ListedView {
        ListedView {
            name: name.into(),
            uuid: uuid.into(),
            modified,
            recent,
        }
    }

    fn definition(uuid: &str, modified: u64, target: &str) -> CachedView {
        CachedView {
            uuid: uuid.into(),
            modified,
            create_table_query: format!("CREATE VIEW db.v AS SELECT * FROM db.{target}"),
            as_select: format!("SELECT * FROM db.{target}"),
            columns: vec![CatalogColumn {
                name: "id".into(),
                data_type: "String".into(),
                default_expression: String::new(),
            }],
        }
    }

    /// `cache` after a read that listed only `view` and read its definition.
    fn read_only(cache: &mut ViewCache, view: &ListedView, target: &str) {
        cache.update(
            std::slice::from_ref(view),
            vec![(view.clone(), definition(&view.uuid, view.modified, target))],
        );
    }

    #[test]
    fn a_view_is_served_from_the_cache_only_while_its_identity_and_time_hold() {
        let mut cache = ViewCache::default();
        cache.bind("127.0.0.1:8123 db 25.1");
        let v = listed("v", "u1", 100, false);
        read_only(&mut cache, &v, "a");
        assert!(cache.changed());
        assert_eq!(
            cache.get(&v).map(|d| d.as_select.as_str()),
            Some("SELECT * FROM db.a")
        );
        assert!(
            cache.get(&listed("v", "u2", 100, false)).is_none(),
            "replaced"
        );
        assert!(
            cache.get(&listed("v", "u1", 101, false)).is_none(),
            "altered"
        );
        assert!(
            cache.get(&listed("v", "u1", 100, true)).is_none(),
            "changed just now"
        );
        assert!(
            cache.get(&listed("w", "u1", 100, false)).is_none(),
            "another view"
        );
    }

    #[test]
    fn recent_empty_and_dropped_views_are_not_kept() {
        let mut cache = ViewCache::default();
        cache.bind("server db");
        let (a, b) = (listed("a", "ua", 1, false), listed("b", "ub", 1, false));
        cache.update(
            &[a.clone(), b.clone()],
            vec![
                (a.clone(), definition("ua", 1, "x")),
                (b.clone(), definition("ub", 1, "y")),
            ],
        );
        assert_eq!(cache.len(), 2);
        // b is gone; a was replaced a second ago.
        read_only(&mut cache, &listed("a", "ua2", 9, true), "z");
        assert!(cache.is_empty());
        // A view read while it was being created (no definition yet) is not kept either.
        let c = listed("c", "uc", 1, false);
        let mut empty = definition("uc", 1, "x");
        empty.create_table_query.clear();
        cache.update(std::slice::from_ref(&c), vec![(c.clone(), empty)]);
        assert!(cache.get(&c).is_none());
        // Nor one whose columns were not read (dropped between the two reads).
        let mut without_columns = definition("uc", 1, "x");
        without_columns.columns.clear();
        cache.update(std::slice::from_ref(&c), vec![(c.clone(), without_columns)]);
        assert!(cache.get(&c).is_none());
    }

    #[test]
    fn a_cache_saved_before_columns_were_kept_starts_over() {
        let mut cache = ViewCache::default();
        cache.bind("one");
        read_only(&mut cache, &listed("v", "u", 1, false), "a");
        let mut saved = serde_json::to_value(&cache).expect("saved");
        let entries = saved.as_object_mut().expect("an object");
        entries.remove("format");
        entries["views"]["v"]
            .as_object_mut()
            .expect("v kept")
            .remove("columns");
        // The shape an earlier stb wrote reads (the file is only a cache) ...
        let mut old: ViewCache = serde_json::from_value(saved).expect("an old cache reads");
        assert_eq!(old.len(), 1);
        // ... and is dropped once bound, as another server's would be.
        old.bind("one");
        assert!(old.is_empty());
        assert!(old.changed());
    }

    #[test]
    fn another_server_or_database_starts_an_empty_cache() {
        let mut cache = ViewCache::default();
        cache.bind("one");
        read_only(&mut cache, &listed("v", "u", 1, false), "a");
        let text = serde_json::to_string(&cache).expect("saved");
        let saved: ViewCache = serde_json::from_str(&text).expect("loaded");
        assert!(!saved.changed(), "a loaded cache has nothing new to save");
        let mut saved = saved;
        saved.bind("one");
        assert_eq!(saved.len(), 1);
        assert!(!saved.changed());
        saved.bind("two");
        assert!(saved.is_empty());
        assert!(saved.changed());
    }
}
