//! The record an incremental compile leaves in the target directory
//! (`target/.compile_state.json`): what the artifacts were compiled from, and how each
//! artifact file looked (size, modification time) when it was written, so a later compile
//! can trust the files it does not rewrite without reading them.

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;

use serde::{Deserialize, Serialize};

/// The record's file name inside the target directory.
pub(crate) const FILE: &str = ".compile_state.json";

/// One model as the last compile saw it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub(crate) struct ModelRecord {
    pub name: String,
    /// Its pipeline's name: with the name, where its artifacts live.
    pub pipeline: String,
    /// [`super::fingerprint::keys`]: what its artifacts were compiled from.
    pub key: String,
    /// [`super::fingerprint::interface`]: what other artifacts rely on.
    pub interface: String,
    /// Its bare relation name (references to it splice this in).
    pub relation: String,
    /// A test or audit embeds or reads it: an edit to it takes a whole compile.
    pub quality: bool,
    /// Where its entry's value (`{...}`) sits in `manifest.json`, in bytes.
    pub manifest: (usize, usize),
}

/// An artifact file as written: enough to notice that someone changed it since.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
pub(crate) struct Stamp {
    pub size: u64,
    pub modified_ns: u64,
}

impl Stamp {
    /// The file's stamp now; `None` when it is missing or unreadable.
    pub(crate) fn of(path: &Path) -> Option<Self> {
        let metadata = fs::metadata(path).ok()?;
        let modified = metadata.modified().ok()?;
        let since = modified.duration_since(std::time::UNIX_EPOCH).ok()?;
        Some(Self {
            size: metadata.len(),
            modified_ns: u64::try_from(since.as_nanos()).ok()?,
        })
    }
}

/// The whole record.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub(crate) struct State {
    /// [`super::fingerprint::keys`]'s context: the project around its models, with the
    /// record's format and the compiler's identity.
    pub context: String,
    pub pipelines: usize,
    /// In project order.
    pub models: Vec<ModelRecord>,
    /// Every artifact (relative path, POSIX separators), `manifest.json` and
    /// `streambuild_dag.json` included.
    pub files: BTreeMap<String, Stamp>,
    /// Every directory under (and with) `compiled/`: adding or removing a file changes
    /// its directory's modification time, so a file added by hand (or a temporary file a
    /// stopped compile left) shows without listing the directories.
    pub directories: BTreeMap<String, Stamp>,
}

impl State {
    /// The record in `target_dir`, if there is one this compiler can read.
    pub(crate) fn load(target_dir: &Path) -> Option<Self> {
        let bytes = fs::read(target_dir.join(FILE)).ok()?;
        serde_json::from_slice(&bytes).ok()
    }

    /// Writes the record (a temporary file, then a rename: a reader sees the old record or
    /// the new one).
    pub(crate) fn save(&self, target_dir: &Path) -> std::io::Result<()> {
        let text = serde_json::to_vec(self).map_err(std::io::Error::other)?;
        super::write_replacing(&target_dir.join(FILE), &text)
    }

    /// Removes the record: whatever happens next, no later compile trusts it.
    pub(crate) fn forget(target_dir: &Path) {
        let _ = fs::remove_file(target_dir.join(FILE));
    }

    /// Whether a directory of `compiled/` changed since it was recorded (a file added or
    /// removed there): a whole compile's new tree drops what the record does not hold, so
    /// only a whole compile gives the same tree.
    pub(crate) fn directories_changed(&self, target_dir: &Path) -> bool {
        self.directories.is_empty()
            || self
                .directories
                .iter()
                .any(|(path, stamp)| Stamp::of(&target_dir.join(path)).as_ref() != Some(stamp))
    }

    /// The directories of `files` under `compiled/` (and `compiled/` itself), as they are
    /// now.
    pub(crate) fn directories_of<'a>(
        target_dir: &Path,
        files: impl IntoIterator<Item = &'a String>,
    ) -> Option<BTreeMap<String, Stamp>> {
        let mut directories = std::collections::BTreeSet::new();
        for file in files {
            let mut path = Path::new(file.as_str());
            while let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
                if !directories.insert(parent.to_string_lossy().replace('\\', "/")) {
                    break; // its parents are in already
                }
                path = parent;
            }
        }
        directories
            .into_iter()
            .filter(|d| d == "compiled" || d.starts_with("compiled/"))
            .map(|d| Stamp::of(&target_dir.join(&d)).map(|stamp| (d, stamp)))
            .collect()
    }

    /// Whether every recorded artifact still has the size and modification time it was
    /// written with (statted on every core: there are three per model).
    pub(crate) fn files_untouched(&self, target_dir: &Path) -> bool {
        let files: Vec<(&String, &Stamp)> = self.files.iter().collect();
        stb_project::parallel::map_ordered(&files, |(path, stamp)| {
            Stamp::of(&target_dir.join(path)).as_ref() == Some(*stamp)
        })
        .into_iter()
        .all(|same| same)
    }
}
