//! A plan's catalog read begun before its models are compiled: the catalog a plan reads
//! needs only the project's sources, and at 10,000 models the read (on the server) and the
//! compile (on the client) each take about a second, so the one need not wait for the
//! other.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use stb_plan::direct::PlanSource;
use stb_project::Project;
use stb_warehouse::{Catalog, CatalogCache, Client};

use super::Purpose;
use crate::EngineError;

/// A catalog read begun by [`read_ahead`], taken by [`super::plan`].
pub struct ReadAhead {
    database: String,
    purpose: Purpose,
    sources: Vec<PlanSource>,
    read: Option<std::thread::JoinHandle<CatalogRead>>,
    /// Set when it is dropped unused (the compile failed, say): the read is not waited
    /// for (an error is not held up by a slow or unreachable server) and keeps no cache.
    abandoned: Arc<AtomicBool>,
}

impl Drop for ReadAhead {
    fn drop(&mut self) {
        self.abandoned.store(true, Ordering::SeqCst);
    }
}

type CatalogRead = Result<(Catalog, Option<String>), EngineError>;

/// Begins reading `database`'s catalog as a plan for `purpose` of `project` reads it, on a
/// thread of its own, from the project's sources alone; [`super::plan`] takes it once the
/// compile is done. Its catalog cache (`target/.catalog_cache.json`) is read and kept as a
/// plan's is.
#[must_use]
pub fn read_ahead(
    project: &Project,
    client: &Arc<Client>,
    database: &str,
    purpose: Purpose,
) -> ReadAhead {
    let sources = stb_compile::plan_sources(project);
    let (client, root, read_database, read_sources) = (
        Arc::clone(client),
        project.root.clone(),
        database.to_owned(),
        sources.clone(),
    );
    let abandoned = Arc::new(AtomicBool::new(false));
    let dropped = Arc::clone(&abandoned);
    let read = std::thread::spawn(move || {
        let mut cache = CatalogCache::load(&root);
        let read = crate::direct::read_catalog(
            &client,
            &read_database,
            &read_sources,
            purpose == Purpose::Build,
            Some(&mut cache),
        );
        if !dropped.load(Ordering::SeqCst) {
            cache.save(&root);
        }
        read
    });
    ReadAhead {
        database: database.to_owned(),
        purpose,
        sources,
        read: Some(read),
        abandoned,
    }
}

impl ReadAhead {
    /// Its catalog, when it was read for what this plan reads: the same database and
    /// purpose, and the sources the compile made (they are the same unless the project
    /// changed in between). `None`: the plan reads the catalog itself.
    pub(super) fn catalog_for(
        mut self,
        database: &str,
        purpose: Purpose,
        sources: &[PlanSource],
    ) -> Option<(Catalog, Option<String>)> {
        // Waited for even when it is not used: its cache is saved before the plan's own
        // read loads it.
        let read = self.read.take()?.join().ok()?;
        let fits = self.database == database && self.purpose == purpose && self.sources == sources;
        fits.then_some(read.ok()?)
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

    fn empty() -> CatalogRead {
        Ok((Catalog::new("UTC", Vec::new()), None))
    }

    fn ahead(
        (database, purpose, sources): (&str, Purpose, Vec<PlanSource>),
        read: impl FnOnce() -> CatalogRead + Send + 'static,
        abandoned: Arc<AtomicBool>,
    ) -> ReadAhead {
        ReadAhead {
            database: database.to_owned(),
            purpose,
            sources,
            read: Some(std::thread::spawn(read)),
            abandoned,
        }
    }

    /// A read-ahead whose read answers an empty catalog at once.
    fn answered(database: &str, purpose: Purpose, sources: Vec<PlanSource>) -> ReadAhead {
        ahead((database, purpose, sources), empty, Arc::default())
    }

    #[test]
    fn a_catalog_read_ahead_serves_only_the_plan_it_was_read_for() {
        let sources = vec![source("orders")];
        let used = |ahead: ReadAhead| {
            ahead
                .catalog_for("analytics", Purpose::Show, &sources)
                .is_some()
        };
        assert!(used(answered("analytics", Purpose::Show, sources.clone())));
        assert!(!used(answered("elsewhere", Purpose::Show, sources.clone())));
        // A build's read carries the catalog's stamp, a shown plan's does not.
        assert!(!used(answered(
            "analytics",
            Purpose::Build,
            sources.clone()
        )));
        // The project's sources changed between the read and the compile.
        assert!(!used(answered(
            "analytics",
            Purpose::Show,
            vec![source("returns")]
        )));
    }

    #[test]
    fn a_failed_read_ahead_leaves_the_plan_to_read_the_catalog_itself() {
        let failed = ahead(
            ("analytics", Purpose::Show, Vec::new()),
            || Err(EngineError::new("STB-TEST-001", "refused", "none")),
            Arc::default(),
        );
        assert!(
            failed
                .catalog_for("analytics", Purpose::Show, &[])
                .is_none()
        );
    }

    #[test]
    fn a_read_ahead_dropped_unused_is_not_waited_for_and_keeps_no_cache() {
        let (release, wait) = std::sync::mpsc::channel::<()>();
        let abandoned = Arc::new(AtomicBool::new(false));
        // A read that answers once the test lets it, or gives up after two minutes: a
        // drop that waited for it would return only after it gave up (its receiver gone).
        let unused = ahead(
            ("analytics", Purpose::Show, Vec::new()),
            move || {
                let _ = wait.recv_timeout(std::time::Duration::from_secs(120));
                empty()
            },
            Arc::clone(&abandoned),
        );
        drop(unused);
        assert!(release.send(()).is_ok(), "the drop waited for the read");
        assert!(
            abandoned.load(Ordering::SeqCst),
            "the read sees it was abandoned"
        );
    }
}
