//! The file-creation floor for the compile benchmark: the least a program must spend to
//! create a compile's artifact tree. Reads every file under `<from>` into memory (not timed),
//! then creates the same directories and files under `<to>` (which must not exist) and
//! prints the seconds that took and the file count. Directories first, then the files in
//! path order on every core (contiguous shares), `std::fs` only, no staging or renaming:
//! the I/O the compiler's publish step does, without any of its work.
//!
//! Usage: stb-bench-floor <from> <to>

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

fn collect(root: &Path, dir: &Path, out: &mut Vec<(PathBuf, Vec<u8>)>) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path.is_dir() {
            collect(root, &path, out)?;
        } else {
            let relative = path.strip_prefix(root).unwrap_or(&path).to_path_buf();
            out.push((relative, std::fs::read(&path)?));
        }
    }
    Ok(())
}

fn create(to: &Path, files: &[(PathBuf, Vec<u8>)]) -> std::io::Result<()> {
    std::fs::create_dir(to)?;
    let directories: std::collections::BTreeSet<PathBuf> = files
        .iter()
        .filter_map(|(relative, _)| to.join(relative).parent().map(Path::to_path_buf))
        .collect();
    for directory in &directories {
        std::fs::create_dir_all(directory)?;
    }
    let threads = std::thread::available_parallelism().map_or(1, std::num::NonZero::get);
    let share = files.len().div_ceil(threads).max(1);
    std::thread::scope(|scope| {
        let workers: Vec<_> = files
            .chunks(share)
            .map(|chunk| {
                scope.spawn(move || {
                    chunk.iter().try_for_each(|(relative, contents)| {
                        std::fs::write(to.join(relative), contents)
                    })
                })
            })
            .collect();
        workers.into_iter().try_for_each(|worker| {
            worker
                .join()
                .unwrap_or_else(|_| Err(std::io::Error::other("a writer thread panicked")))
        })
    })
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [from, to] = args.as_slice() else {
        eprintln!("usage: stb-bench-floor <from> <to>");
        return ExitCode::from(2);
    };
    let mut files = Vec::new();
    if let Err(error) = collect(Path::new(from), Path::new(from), &mut files) {
        eprintln!("stb-bench-floor: reading {from}: {error}");
        return ExitCode::FAILURE;
    }
    // In path order, as the compiler writes them: directory order (a hash order on ext4)
    // scatters the writes and measured several times slower.
    files.sort();
    let start = Instant::now();
    if let Err(error) = create(Path::new(to), &files) {
        eprintln!("stb-bench-floor: writing {to}: {error}");
        return ExitCode::FAILURE;
    }
    println!("{:.2} {}", start.elapsed().as_secs_f64(), files.len());
    ExitCode::SUCCESS
}
