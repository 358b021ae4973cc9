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

impl From<stb_server::serve::ServeError> for Failure {
    fn from(error: stb_server::serve::ServeError) -> Self {
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
        eprint_styled(&format!(
            "error[{}]: {}\n  hint: {}\n",
            failure.code, failure.message, failure.hint
        ));
    }
    ExitCode::from(1)
}

/// When to colour: `--color` (auto: at a terminal, unless `NO_COLOR` is set).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum ColorWhen {
    Auto,
    Always,
    Never,
}

/// Applies `--color` to everything written through [`eprint_styled`].
pub(crate) fn set_color(when: ColorWhen) {
    let choice = match when {
        // anstream's auto checks the terminal, NO_COLOR and CLICOLOR_FORCE.
        ColorWhen::Auto => anstream::ColorChoice::Auto,
        ColorWhen::Always => anstream::ColorChoice::Always,
        ColorWhen::Never => anstream::ColorChoice::Never,
    };
    choice.write_global();
}

/// Writes `text` to stderr with its diagnostic markers styled (`error[CODE]` red,
/// `warning[CODE]` yellow, `hint:` cyan, `note:` blue) when stderr takes colour; the
/// stream drops the styles otherwise, so pipes and logs get plain text.
pub(crate) fn eprint_styled(text: &str) {
    let mut stderr = anstream::stderr().lock();
    let _ = stderr.write_all(styled(text).as_bytes());
}

fn styled(text: &str) -> String {
    use anstyle::{AnsiColor, Style};
    let error = Style::new().fg_color(Some(AnsiColor::Red.into())).bold();
    let warning = Style::new().fg_color(Some(AnsiColor::Yellow.into())).bold();
    let hint = Style::new().fg_color(Some(AnsiColor::Cyan.into())).bold();
    let note = Style::new().fg_color(Some(AnsiColor::Blue.into())).bold();
    let mut out = String::with_capacity(text.len() + 64);
    for line in text.split_inclusive('\n') {
        let marked =
            [("error[", error), ("warning[", warning)]
                .into_iter()
                .find_map(|(prefix, style)| {
                    let end = line.find(']').filter(|_| line.starts_with(prefix))?;
                    Some((end + 1, style))
                })
                .or_else(|| {
                    [("  hint:", hint), ("  note:", note)].into_iter().find_map(
                        |(prefix, style)| line.starts_with(prefix).then_some((prefix.len(), style)),
                    )
                });
        match marked {
            Some((end, style)) => {
                out.push_str(&format!("{style}{}{style:#}", &line[..end]));
                out.push_str(&line[end..]);
            }
            None => out.push_str(line),
        }
    }
    out
}

pub(crate) fn print_json<T: Serialize>(value: &T) {
    // Streamed: a large plan's JSON is tens of megabytes, never held whole as text.
    let mut stdout = std::io::BufWriter::new(std::io::stdout().lock());
    if let Err(error) = serde_json::to_writer_pretty(&mut stdout, value) {
        let _ = write!(stdout, "{{\"error\":\"{error}\"}}");
    }
    let _ = writeln!(stdout);
    let _ = stdout.flush();
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
        let mut text: String = sorted.iter().map(|d| format!("{d}\n")).collect();
        text.push_str(&format!(
            "\n{} error(s); nothing was changed.\n",
            sorted.len()
        ));
        eprint_styled(&text);
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

#[cfg(test)]
mod tests {
    use super::styled;

    #[test]
    fn only_the_markers_are_styled() {
        let text = "error[STB-BUILD-003] a.sql:1:2: bad\n  note: here (b.sql:3:4)\n  hint: fix it\nplain\n";
        let painted = styled(text);
        assert_eq!(
            painted,
            "\u{1b}[1m\u{1b}[31merror[STB-BUILD-003]\u{1b}[0m a.sql:1:2: bad\n\
             \u{1b}[1m\u{1b}[34m  note:\u{1b}[0m here (b.sql:3:4)\n\
             \u{1b}[1m\u{1b}[36m  hint:\u{1b}[0m fix it\nplain\n"
        );
        let warning = styled("warning[STB-INIT-001]: careful");
        assert!(warning.starts_with("\u{1b}[1m\u{1b}[33mwarning[STB-INIT-001]\u{1b}[0m: careful"));
    }
}
