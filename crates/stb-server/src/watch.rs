//! `stb dev --watch`: the project's files are polled once a second, and an edit
//! recompiles the project as `POST /api/reload` does; the UI sees the new compile on its
//! next status poll and refreshes. Polling (sizes and modification times) needs no
//! platform file-event API and costs a directory walk per second on a project's few
//! hundred files.

use std::hash::{Hash, Hasher};
use std::io::Write as _;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use crate::AppState;

/// How often the project's files are looked at.
pub const INTERVAL: Duration = Duration::from_secs(1);

/// A digest of every file the project reads: path, size and modification time. Compile
/// output (`target/`), hidden entries and `node_modules/` are left out, so a build that
/// writes `target/run/` does not trigger a recompile.
#[must_use]
pub fn fingerprint(root: &Path) -> u64 {
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    let mut pending = vec![root.to_path_buf()];
    let mut files = Vec::new();
    while let Some(dir) = pending.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.filter_map(Result::ok) {
            let name = entry.file_name();
            let name = name.to_string_lossy();
            if name.starts_with('.') || name == "node_modules" {
                continue;
            }
            let path = entry.path();
            if dir == root && name == "target" {
                continue;
            }
            // Followed through symlinks, as discovery reads them.
            match std::fs::metadata(&path) {
                Ok(meta) if meta.is_dir() => pending.push(path),
                Ok(meta) => files.push((path, meta.len(), meta.modified().ok())),
                Err(_) => {}
            }
        }
    }
    files.sort();
    files.hash(&mut hasher);
    hasher.finish()
}

/// Recompiles whenever the files under `root` change, until the task is aborted. Each
/// recompile is reported on stdout, a failing one with its diagnostics. `compiled` is the
/// [`fingerprint`] of the files the served compile read.
pub async fn run(state: Arc<AppState>, root: std::path::PathBuf, compiled: u64) {
    let digest = |root: std::path::PathBuf| async move {
        tokio::task::spawn_blocking(move || fingerprint(&root))
            .await
            .unwrap_or_default()
    };
    let mut last = compiled;
    loop {
        tokio::time::sleep(INTERVAL).await;
        let now = digest(root.clone()).await;
        if now == last {
            continue;
        }
        last = now;
        let _one_at_a_time = state.reloading.lock().await;
        let said = match crate::work::recompile_and_swap(&state).await {
            Ok(compile) if compile.state == "ok" => format!(
                "recompiled after an edit: ok · {} models · {} sources",
                compile.models, compile.sources
            ),
            Ok(compile) => format!(
                "recompiled after an edit: failing (the last good compile is still served)\n{}",
                render_errors(compile.error.as_ref())
            ),
            Err(error) => format!("could not recompile after an edit: {}", error.detail),
        };
        // A closed stdout (`stb dev --watch | head`) must not end the watch.
        let _ = writeln!(std::io::stdout().lock(), "{said}");
    }
}

/// The diagnostics of a failing compile as `stb compile` prints them.
fn render_errors(error: Option<&serde_json::Value>) -> String {
    let Some(list) = error.and_then(serde_json::Value::as_array) else {
        return String::new();
    };
    list.iter()
        .map(|d| {
            let at = d["location"]["file"]
                .as_str()
                .map_or_else(String::new, |file| {
                    match (
                        d["location"]["line"].as_u64(),
                        d["location"]["column"].as_u64(),
                    ) {
                        (Some(line), Some(column)) => format!(" {file}:{line}:{column}"),
                        _ => format!(" {file}"),
                    }
                });
            let notes: String = d["related"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|note| {
                    let file = note["location"]["file"].as_str().unwrap_or_default();
                    let at = match (
                        note["location"]["line"].as_u64(),
                        note["location"]["column"].as_u64(),
                    ) {
                        (Some(line), Some(column)) => format!("{file}:{line}:{column}"),
                        _ => file.to_owned(),
                    };
                    format!(
                        "  note: {} ({at})\n",
                        note["message"].as_str().unwrap_or_default()
                    )
                })
                .collect();
            format!(
                "error[{}]{at}: {}\n{notes}  hint: {}\n",
                d["code"].as_str().unwrap_or_default(),
                d["message"].as_str().unwrap_or_default(),
                d["hint"].as_str().unwrap_or_default()
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_edit_changes_the_fingerprint_and_compile_output_does_not() {
        let dir = tempfile::tempdir().expect("tempdir");
        let model = dir.path().join("pipelines/pl__a/m.sql");
        std::fs::create_dir_all(model.parent().expect("parent")).expect("mkdir");
        std::fs::write(&model, "SELECT 1").expect("write");
        let before = fingerprint(dir.path());
        std::fs::create_dir_all(dir.path().join("target/run")).expect("mkdir");
        std::fs::write(dir.path().join("target/run/x.sql"), "out").expect("write");
        std::fs::write(dir.path().join(".hidden"), "x").expect("write");
        assert_eq!(
            fingerprint(dir.path()),
            before,
            "output and hidden files are ignored"
        );
        std::fs::write(&model, "SELECT 12").expect("write");
        assert_ne!(fingerprint(dir.path()), before, "an edit is seen");
    }

    #[test]
    fn errors_render_as_the_command_line_prints_them() {
        let error = serde_json::json!([{
            "code": "STB-DISCOVER-021",
            "message": "unknown driving input 'x'",
            "hint": "did you mean 'y'? ...",
            "location": {"file": "pipelines/pl__a/m.sql", "line": 2, "column": 6},
            "related": [{"message": "first here", "location": {"file": "pipelines/pl__b/m.sql", "line": 1, "column": 1}}]
        }]);
        assert_eq!(
            render_errors(Some(&error)),
            "error[STB-DISCOVER-021] pipelines/pl__a/m.sql:2:6: unknown driving input 'x'\n  note: first here (pipelines/pl__b/m.sql:1:1)\n  hint: did you mean 'y'? ...\n"
        );
    }
}
