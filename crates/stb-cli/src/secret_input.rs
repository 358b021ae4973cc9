//! Reading a secret at a terminal without echoing it.

use std::io::{BufRead as _, Write as _};

use rustix::termios::{LocalModes, OptionalActions, tcgetattr, tcsetattr};

/// Prints `prompt` on stderr and reads one line from the terminal with echo off; echo is
/// restored whatever happens.
pub(crate) fn prompt_hidden(prompt: &str) -> std::io::Result<String> {
    let stdin = std::io::stdin();
    let mut err = std::io::stderr().lock();
    let _ = write!(err, "{prompt}");
    let _ = err.flush();
    let saved = tcgetattr(&stdin)?;
    let mut quiet = saved.clone();
    quiet.local_modes.remove(LocalModes::ECHO);
    quiet.local_modes.insert(LocalModes::ECHONL);
    tcsetattr(&stdin, OptionalActions::Now, &quiet)?;
    let mut line = String::new();
    let read = stdin.lock().read_line(&mut line);
    let restored = tcsetattr(&stdin, OptionalActions::Now, &saved);
    read?;
    restored?;
    Ok(line.trim_end_matches(['\n', '\r']).to_owned())
}
