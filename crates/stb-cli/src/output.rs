//! Printing results and errors, as text for people or JSON for scripts.

use std::io::Write;
use std::process::ExitCode;

use serde::Serialize;

/// A user-facing error: stable code, message, hint.
pub(crate) struct Failure {
    pub code: &'static str,
    pub message: String,
    pub hint: String,
}

impl From<stb_localstack::LocalStackError> for Failure {
    fn from(error: stb_localstack::LocalStackError) -> Self {
        Self {
            code: error.code(),
            message: error.to_string(),
            hint: error.hint(),
        }
    }
}

impl From<stb_engine::EngineError> for Failure {
    fn from(error: stb_engine::EngineError) -> Self {
        Self {
            code: error.code,
            message: error.message,
            hint: error.hint,
        }
    }
}

impl From<stb_diagnostics::Diagnostic> for Failure {
    fn from(diagnostic: stb_diagnostics::Diagnostic) -> Self {
        Self {
            code: diagnostic.code,
            message: diagnostic.message,
            hint: diagnostic.hint,
        }
    }
}

/// Prints `failure` (to stdout as JSON with `--json`, else to stderr) and returns exit code 1.
pub(crate) fn fail(failure: &Failure, json: bool) -> ExitCode {
    if json {
        let value = serde_json::json!({
            "error": { "code": failure.code, "message": failure.message, "hint": failure.hint }
        });
        print_json(&value);
    } else {
        let mut stderr = std::io::stderr().lock();
        let _ = writeln!(stderr, "error[{}]: {}", failure.code, failure.message);
        let _ = writeln!(stderr, "  hint: {}", failure.hint);
    }
    ExitCode::from(1)
}

pub(crate) fn print_json<T: Serialize>(value: &T) {
    let text =
        serde_json::to_string_pretty(value).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"));
    let mut stdout = std::io::stdout().lock();
    let _ = writeln!(stdout, "{text}");
}

/// Progress lines on stderr, so stdout stays clean for `--json` and `eval`.
pub(crate) struct StderrProgress;

impl stb_localstack::Progress for StderrProgress {
    fn step(&mut self, message: &str) {
        let _ = writeln!(std::io::stderr().lock(), "==> {message}");
    }

    fn detail(&mut self, message: &str) {
        let _ = writeln!(std::io::stderr().lock(), "    {message}");
    }
}

/// Prints every diagnostic (as JSON with `json`) and returns exit code 1.
pub(crate) fn report(diagnostics: stb_diagnostics::Diagnostics, json: bool) -> ExitCode {
    let sorted = diagnostics.into_sorted();
    if json {
        print_json(&serde_json::json!({ "errors": sorted }));
    } else {
        let mut stderr = std::io::stderr().lock();
        for diagnostic in &sorted {
            let _ = writeln!(stderr, "{diagnostic}");
        }
        let _ = writeln!(stderr, "\n{} error(s); nothing was changed.", sorted.len());
    }
    ExitCode::from(1)
}

/// Asks `question` on stderr (stdout may carry JSON) and reads one line from stdin: the
/// answer as typed, without its line ending (`None` at end of input). Callers decide how
/// strictly to compare it.
pub(crate) fn ask(question: &str) -> Option<String> {
    use std::io::BufRead;
    let _ = write!(std::io::stderr().lock(), "{question}");
    let _ = std::io::stderr().flush();
    let mut answer = String::new();
    match std::io::stdin().lock().read_line(&mut answer) {
        Ok(0) | Err(_) => None,
        Ok(_) => {
            let line = answer.strip_suffix('\n').unwrap_or(&answer);
            Some(line.strip_suffix('\r').unwrap_or(line).to_owned())
        }
    }
}
