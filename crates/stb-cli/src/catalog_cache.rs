//! The plain views' definitions a plan keeps between runs (`target/.catalog_cache.json`,
//! see [`stb_warehouse::ViewCache`]): a virtual project's plan reads only the stable views
//! changed since the last one. Only a cache: a file that is missing, unreadable or from
//! another server or database means the definitions are read from the server, and a
//! cache that cannot be written is left unwritten.

use std::path::{Path, PathBuf};

use stb_warehouse::ViewCache;

fn path(root: &Path) -> PathBuf {
    root.join("target").join(".catalog_cache.json")
}

/// The cache the last plan of the project left, or an empty one.
pub(crate) fn load(root: &Path) -> ViewCache {
    std::fs::read(path(root))
        .ok()
        .and_then(|bytes| serde_json::from_slice(&bytes).ok())
        .unwrap_or_default()
}

/// Saves `cache` when a read changed it: written beside and renamed over, so a plan
/// running at the same time reads the old cache or the new one, never half of one.
pub(crate) fn save(root: &Path, cache: &ViewCache) {
    if !cache.changed() {
        return;
    }
    let target = path(root);
    let Some(dir) = target.parent() else { return };
    let temp = dir.join(format!(".catalog_cache.{}.tmp", std::process::id()));
    let written = std::fs::create_dir_all(dir)
        .and_then(|()| {
            let file = std::fs::File::create(&temp)?;
            let mut writer = std::io::BufWriter::new(file);
            serde_json::to_writer(&mut writer, cache)?;
            std::io::Write::flush(&mut writer)
        })
        .and_then(|()| std::fs::rename(&temp, &target));
    if written.is_err() {
        let _ = std::fs::remove_file(&temp);
    }
}
