//! The reference implementation's source distribution (Python StreamBuild 0.41.10), which
//! the conformance lane runs: its `tests/fixtures/*` and `examples/*` projects.
//!
//! It is fetched once into the user's cache, never into the repository, and only read in
//! place: a test copies a project to a temporary directory before adapting anything. A
//! fetch that fails fails the test that asked, with pip's or tar's own output; the lane
//! never skips, in CI (`CI=true`) or anywhere else.

use std::io::ErrorKind;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// The distribution's name on PyPI.
pub const PACKAGE: &str = "streambuild";
/// The version the lane is pinned to: the reference this edition is compared with.
pub const VERSION: &str = "0.41.10";
/// Environment variable naming the cache directory (default
/// `$XDG_CACHE_HOME/streambuild/reference`, else `~/.cache/streambuild/reference`).
pub const REFERENCE_DIR_ENV: &str = "STB_REFERENCE_DIR";

/// How long a process waits for another one's fetch; a lock file older than this was left
/// by a process that died while fetching, and is taken over.
const FETCH_WAIT: Duration = Duration::from_secs(600);

/// Where the distribution is cached.
#[must_use]
pub fn cache_dir() -> PathBuf {
    if let Some(dir) = non_empty_env(REFERENCE_DIR_ENV) {
        return PathBuf::from(dir);
    }
    let cache = non_empty_env("XDG_CACHE_HOME").map_or_else(
        || {
            non_empty_env("HOME")
                .map_or_else(|| PathBuf::from("/tmp"), PathBuf::from)
                .join(".cache")
        },
        PathBuf::from,
    );
    cache.join("streambuild/reference")
}

fn non_empty_env(name: &str) -> Option<std::ffi::OsString> {
    std::env::var_os(name).filter(|value| !value.is_empty())
}

/// The unpacked distribution (`<cache>/streambuild-0.41.10`), fetched on first use.
///
/// # Panics
/// When it is not cached and cannot be fetched: the message holds pip's or tar's output.
pub fn distribution() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| fetch_once(&cache_dir()))
}

/// Every project the distribution ships: each directory under `tests/fixtures` and
/// `examples` holding a `streambuild_project.toml`, as (directory name, path), sorted. The
/// directories are walked rather than named, so a project a new release adds is listed.
///
/// # Panics
/// When the distribution cannot be fetched.
#[must_use]
pub fn projects() -> Vec<(String, PathBuf)> {
    let root = distribution();
    let mut found = Vec::new();
    for top in ["tests/fixtures", "examples"] {
        collect_projects(&root.join(top), &mut found);
    }
    found.sort();
    found
}

/// Adds the project directories under `dir` (a project's own subdirectories are not
/// searched: they are its models, tests and the like). Symbolic links are not followed.
fn collect_projects(dir: &Path, found: &mut Vec<(String, PathBuf)>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        if !entry.file_type().is_ok_and(|kind| kind.is_dir()) {
            continue;
        }
        let path = entry.path();
        if path.join("streambuild_project.toml").is_file() {
            found.push((entry.file_name().to_string_lossy().into_owned(), path));
        } else {
            collect_projects(&path, found);
        }
    }
}

/// An unpacked tree is complete once it holds the sdist's `PKG-INFO`: the tree is moved
/// into place in one rename, so a partial one is never seen there.
fn is_complete(unpacked: &Path) -> bool {
    unpacked.join("PKG-INFO").is_file()
}

/// Returns the unpacked tree, fetching it unless it is cached. Test processes run in
/// parallel (nextest runs each test in a process of its own), so one of them fetches
/// under a lock file and the others wait for its result.
fn fetch_once(cache: &Path) -> PathBuf {
    let unpacked = cache.join(format!("{PACKAGE}-{VERSION}"));
    if is_complete(&unpacked) {
        return unpacked;
    }
    std::fs::create_dir_all(cache).unwrap_or_else(|error| {
        panic!(
            "cannot create the reference cache {}: {error}",
            cache.display()
        )
    });
    let lock_path = cache.join(".fetch.lock");
    let deadline = Instant::now() + FETCH_WAIT;
    loop {
        if is_complete(&unpacked) {
            return unpacked;
        }
        match std::fs::File::create_new(&lock_path) {
            Ok(_) => {
                let _lock = LockFile(&lock_path);
                // Another process may have finished between the check and the lock.
                if !is_complete(&unpacked) {
                    fetch(cache, &unpacked).unwrap_or_else(|message| {
                        panic!(
                            "the reference distribution {PACKAGE}=={VERSION} could not be fetched into {} (CI={}): {message}\n  hint: the conformance lane needs PyPI once; or run the same pip download and `tar xzf` into that directory (or set {REFERENCE_DIR_ENV})",
                            cache.display(),
                            std::env::var("CI").unwrap_or_default()
                        )
                    });
                }
                return unpacked;
            }
            Err(error) if error.kind() == ErrorKind::AlreadyExists => {
                if is_stale(&lock_path) {
                    let _ = std::fs::remove_file(&lock_path);
                    continue;
                }
                assert!(
                    Instant::now() < deadline,
                    "waited {FETCH_WAIT:?} for another process to fetch the reference distribution (lock {})",
                    lock_path.display()
                );
                std::thread::sleep(Duration::from_millis(500));
            }
            Err(error) => panic!("cannot create {}: {error}", lock_path.display()),
        }
    }
}

/// The fetch lock, removed when the fetch ends, also when it panics.
struct LockFile<'a>(&'a Path);

impl Drop for LockFile<'_> {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(self.0);
    }
}

fn is_stale(lock_path: &Path) -> bool {
    std::fs::metadata(lock_path)
        .and_then(|metadata| metadata.modified())
        .ok()
        .and_then(|modified| modified.elapsed().ok())
        .is_some_and(|age| age > FETCH_WAIT)
}

/// Downloads the sdist into a staging directory inside the cache, unpacks it there and
/// renames the tree into place (the same file system, so one atomic step). The archive is
/// kept beside the tree, as a manual fetch leaves it.
fn fetch(cache: &Path, unpacked: &Path) -> Result<(), String> {
    let staging = tempfile::Builder::new()
        .prefix(".fetch-")
        .tempdir_in(cache)
        .map_err(|error| format!("cannot make a staging directory: {error}"))?;
    download(staging.path())?;
    let archive_name = format!("{PACKAGE}-{VERSION}.tar.gz");
    let archive = staging.path().join(&archive_name);
    if !archive.is_file() {
        return Err(format!("pip left no {archive_name} in its directory"));
    }
    run(
        Command::new("tar")
            .arg("xzf")
            .arg(&archive)
            .arg("-C")
            .arg(staging.path()),
        "tar xzf",
    )?;
    let extracted = staging.path().join(format!("{PACKAGE}-{VERSION}"));
    if !is_complete(&extracted) {
        return Err(format!(
            "{archive_name} holds no {PACKAGE}-{VERSION}/PKG-INFO"
        ));
    }
    if let Err(error) = std::fs::rename(extracted, unpacked)
        && !is_complete(unpacked)
    {
        return Err(format!(
            "cannot move the tree to {}: {error}",
            unpacked.display()
        ));
    }
    let _ = std::fs::rename(archive, cache.join(archive_name));
    Ok(())
}

/// `pip download` of the pinned sdist into `dir`: with `python3` as the issue writes it,
/// else with the local stack's virtual environment, whose interpreter always has pip
/// (Debian's `python3` may come without it).
fn download(dir: &Path) -> Result<(), String> {
    let mut interpreters = vec![PathBuf::from("python3")];
    let venv_python = stb_localstack::layout::default_venv_dir().join("bin/python");
    if venv_python.is_file() {
        interpreters.push(venv_python);
    }
    let requirement = format!("{PACKAGE}=={VERSION}");
    let mut failures = Vec::new();
    for python in interpreters {
        let attempt = run(
            Command::new(&python)
                .args([
                    "-m",
                    "pip",
                    "download",
                    "--disable-pip-version-check",
                    "--no-deps",
                    "--python-version",
                    "3.12",
                    "--no-binary=:all:",
                    requirement.as_str(),
                    "-d",
                ])
                .arg(dir),
            &format!("{} -m pip download", python.display()),
        );
        match attempt {
            Ok(()) => return Ok(()),
            Err(message) => failures.push(message),
        }
    }
    Err(failures.join("\n"))
}

/// Runs `command`; its output when it cannot start or exits non-zero.
fn run(command: &mut Command, what: &str) -> Result<(), String> {
    let output = command
        .output()
        .map_err(|error| format!("{what} could not start: {error}"))?;
    if output.status.success() {
        return Ok(());
    }
    Err(format!(
        "{what} failed ({})\nstdout: {}\nstderr: {}",
        output.status,
        String::from_utf8_lossy(&output.stdout).trim(),
        String::from_utf8_lossy(&output.stderr).trim()
    ))
}
