//! Embeds the web UI (`web/dist`, built by `scripts/build-ui.sh`) in the server: one
//! `include_bytes!` per file, generated into `$OUT_DIR/ui_assets.rs`. Without a built UI
//! the table is empty and the server says how to build it.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

fn files(dir: &Path, into: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut entries: Vec<_> = entries.filter_map(Result::ok).map(|e| e.path()).collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            files(&path, into);
        } else {
            into.push(path);
        }
    }
}

fn main() {
    let manifest = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap_or_default());
    let dist = manifest.join("../../web/dist");
    println!("cargo:rerun-if-changed={}", dist.display());
    println!("cargo:rerun-if-changed=build.rs");
    let mut found = Vec::new();
    files(&dist, &mut found);
    let mut table = String::from("pub(crate) static ASSETS: &[(&str, &[u8])] = &[\n");
    for path in &found {
        let Ok(relative) = path.strip_prefix(&dist) else {
            continue;
        };
        let route = format!("/{}", relative.to_string_lossy().replace('\\', "/"));
        let absolute = path.canonicalize().unwrap_or_else(|_| path.clone());
        let _ = writeln!(
            table,
            "    ({route:?}, include_bytes!({:?})),",
            absolute.to_string_lossy()
        );
    }
    table.push_str("];\n");
    let out = PathBuf::from(std::env::var("OUT_DIR").unwrap_or_default()).join("ui_assets.rs");
    if let Err(error) = std::fs::write(&out, table) {
        println!("cargo:warning=cannot write {}: {error}", out.display());
    }
}
