//! A plan's catalog read begun before its models are compiled: the catalog a plan reads
//! needs only the project's sources, and at 10,000 models the read (on the server) and the
//! compile (on the client) each take about a second, so the one need not wait for the
//! other.

use std::path::PathBuf;
use std::sync::Arc;

use stb_plan::direct::PlanSource;
use stb_project::Project;
use stb_warehouse::{Catalog, CatalogCache, Client};

use super::Purpose;
use crate::EngineError;

/// A catalog read begun by [`read_ahead`], taken by [`super::plan`]. Dropped unused (the
/// compile failed, say), it is not waited for (an error is not held up by a slow or
/// unreachable server) and writes nothing: its cache is saved by the plan that takes it.
pub struct ReadAhead {
    client: Arc<Client>,
    database: String,
    purpose: Purpose,
    sources: Vec<PlanSource>,
    root: PathBuf,
    read: std::thread::JoinHandle<(CatalogRead, CatalogCache)>,
}

/// The catalog and its stamp, or why they could not be read.
pub(super) type CatalogRead = Result<(Catalog, Option<String>), EngineError>;

/// Begins reading `database`'s catalog through `client` as a plan for `purpose` of
/// `project` reads it, on a thread of its own, from the project's sources alone; the plan
/// takes it once the compile is done. The catalog cache (`target/.catalog_cache.json`)
/// is read and kept as a plan's is.
#[must_use]
pub fn read_ahead(
    project: &Project,
    client: &Arc<Client>,
    database: &str,
    purpose: Purpose,
) -> ReadAhead {
    let sources = stb_compile::plan_sources(project);
    let (reader, root, read_database, read_sources) = (
        Arc::clone(client),
        project.root.clone(),
        database.to_owned(),
        sources.clone(),
    );
    let read = std::thread::spawn(move || {
        let mut cache = CatalogCache::load(&root);
        let read = crate::direct::read_catalog(
            &reader,
            &read_database,
            &read_sources,
            purpose == Purpose::Build,
            Some(&mut cache),
        );
        (read, cache)
    });
    ReadAhead {
        client: Arc::clone(client),
        database: database.to_owned(),
        purpose,
        sources,
        root: project.root.clone(),
        read,
    }
}

impl ReadAhead {
    /// What it read, when it was read for what this plan reads: through the same
    /// connection, of the same database, for the same purpose, and from the sources the
    /// compile made (the same unless the project changed in between); its error when that
    /// read failed (the plan's own would fail the same way, after as long a wait).
    /// `None`: the plan reads the catalog itself.
    pub(super) fn catalog_for(
        self,
        client: &Arc<Client>,
        database: &str,
        purpose: Purpose,
        sources: &[PlanSource],
    ) -> Option<CatalogRead> {
        let fits = Arc::ptr_eq(&self.client, client)
            && self.database == database
            && self.purpose == purpose
            && self.sources == sources;
        // Waited for even when it does not fit: the plan's own read loads the cache next.
        let (read, cache) = self.read.join().ok()?;
        if read.is_ok() {
            cache.save(&self.root);
        }
        fits.then_some(read)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn source(name: &str) -> PlanSource {
        PlanSource {
            name: name.to_owned(),
            ..PlanSource::default()
        }
    }

    fn client() -> Arc<Client> {
        Arc::new(
            Client::new(stb_warehouse::ConnectionConfig::default())
                .expect("a client connects lazily"),
        )
    }

    fn ahead(
        client: &Arc<Client>,
        (database, purpose, sources): (&str, Purpose, Vec<PlanSource>),
        root: &std::path::Path,
        read: impl FnOnce() -> CatalogRead + Send + 'static,
    ) -> ReadAhead {
        ReadAhead {
            client: Arc::clone(client),
            database: database.to_owned(),
            purpose,
            sources,
            root: root.to_owned(),
            read: std::thread::spawn(|| (read(), CatalogCache::default())),
        }
    }

    fn empty() -> CatalogRead {
        Ok((Catalog::new("UTC", Vec::new()), None))
    }

    #[test]
    fn a_catalog_read_ahead_serves_only_the_plan_it_was_read_for() {
        let dir = tempfile::tempdir().expect("dir");
        let (mine, other) = (client(), client());
        let sources = vec![source("orders")];
        let used = |read_through: &Arc<Client>, read_for: (&str, Purpose, Vec<PlanSource>)| {
            ahead(read_through, read_for, dir.path(), empty)
                .catalog_for(&mine, "analytics", Purpose::Show, &sources)
                .is_some()
        };
        assert!(used(&mine, ("analytics", Purpose::Show, sources.clone())));
        assert!(!used(&other, ("analytics", Purpose::Show, sources.clone())));
        assert!(!used(&mine, ("elsewhere", Purpose::Show, sources.clone())));
        // A build's read carries the catalog's stamp, a shown plan's does not.
        assert!(!used(&mine, ("analytics", Purpose::Build, sources.clone())));
        // The project's sources changed between the read and the compile.
        assert!(!used(
            &mine,
            ("analytics", Purpose::Show, vec![source("returns")])
        ));
    }

    #[test]
    fn a_failed_read_ahead_gives_the_plan_its_error() {
        let dir = tempfile::tempdir().expect("dir");
        let mine = client();
        let failed = ahead(
            &mine,
            ("analytics", Purpose::Show, Vec::new()),
            dir.path(),
            || Err(EngineError::new("STB-TEST-001", "refused", "none")),
        );
        let read = failed.catalog_for(&mine, "analytics", Purpose::Show, &[]);
        assert!(matches!(read, Some(Err(error)) if error.code == "STB-TEST-001"));
    }

    #[test]
    fn a_read_ahead_dropped_unused_is_not_waited_for() {
        let dir = tempfile::tempdir().expect("dir");
        let (release, wait) = std::sync::mpsc::channel::<()>();
        // A read that answers once the test lets it, or gives up after two minutes: a
        // drop that waited for it would return only after it gave up (its receiver gone).
        let unused = ahead(
            &client(),
            ("analytics", Purpose::Show, Vec::new()),
            dir.path(),
            move || {
                let _ = wait.recv_timeout(std::time::Duration::from_secs(120));
                empty()
            },
        );
        drop(unused);
        assert!(release.send(()).is_ok(), "the drop waited for the read");
    }
}
