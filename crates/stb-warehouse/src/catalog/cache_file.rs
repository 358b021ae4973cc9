//! Where a project keeps its [`CatalogCache`]: `target/.catalog_cache.json`. Only a cache: a
//! file that is missing, unreadable or from another server or database means the
//! definitions are read from the server, and a cache that cannot be written is left
//! unwritten. The CLI and the dev server plan through the same file.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use super::CatalogCache;

/// Tells apart the temporary files of saves running at once in one process (the dev
/// server plans on several threads).
static SAVES: AtomicU64 = AtomicU64::new(0);

fn path(root: &Path) -> PathBuf {
    root.join("target").join(".catalog_cache.json")
}

impl CatalogCache {
    /// The cache the last plan of the project at `root` left, or an empty one.
    #[must_use]
    pub fn load(root: &Path) -> Self {
        std::fs::read(path(root))
            .ok()
            .and_then(|bytes| serde_json::from_slice(&bytes).ok())
            .unwrap_or_default()
    }

    /// Saves the cache for the project at `root` when a read changed it: written beside
    /// and renamed over, so a plan running at the same time reads the old cache or the new
    /// one, never half of one.
    pub fn save(&self, root: &Path) {
        if !self.changed() {
            return;
        }
        let target = path(root);
        let Some(dir) = target.parent() else { return };
        let temp = dir.join(format!(
            ".catalog_cache.{}.{}.tmp",
            std::process::id(),
            SAVES.fetch_add(1, Ordering::Relaxed)
        ));
        let written = std::fs::create_dir_all(dir)
            .and_then(|()| {
                let file = std::fs::File::create(&temp)?;
                let mut writer = std::io::BufWriter::new(file);
                serde_json::to_writer(&mut writer, self)?;
                std::io::Write::flush(&mut writer)
            })
            .and_then(|()| std::fs::rename(&temp, &target));
        if written.is_err() {
            let _ = std::fs::remove_file(&temp);
        }
    }
}
