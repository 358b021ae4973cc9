//! The engine's errors: a stable code, a message and a hint, like every user-facing error.

use std::fmt;

/// What kind of refusal an error is: what its caller can do about it. The dev server
/// answers each with its own HTTP status; the CLI exits 1 whatever the kind.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum ErrorKind {
    /// What was asked cannot mean anything (a flag, a selector, a project, a plan that
    /// cannot be made): the caller changes the request or the project.
    #[default]
    Invalid,
    /// What was asked for does not exist (a run, a deployment).
    NotFound,
    /// The target's state stops it now (the lock is held, the plan changed since it was
    /// reviewed, the run is over): the same request may succeed later.
    Conflict,
    /// The warehouse failed or refused a statement.
    Warehouse,
}

/// An error the engine reports to whoever called it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EngineError {
    pub code: &'static str,
    pub message: String,
    pub hint: String,
    pub kind: ErrorKind,
}

impl EngineError {
    /// An [`ErrorKind::Invalid`] error.
    #[must_use]
    pub fn new(code: &'static str, message: impl Into<String>, hint: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            hint: hint.into(),
            kind: ErrorKind::Invalid,
        }
    }

    /// The same error, of `kind`.
    #[must_use]
    pub fn of_kind(self, kind: ErrorKind) -> Self {
        Self { kind, ..self }
    }
}

impl fmt::Display for EngineError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.code, self.message)
    }
}

impl std::error::Error for EngineError {}

impl From<&stb_warehouse::WarehouseError> for EngineError {
    fn from(error: &stb_warehouse::WarehouseError) -> Self {
        Self::new(error.kind.code(), error.message.clone(), error.kind.hint())
            .of_kind(ErrorKind::Warehouse)
    }
}

/// Flags (or a request's scope) that cannot mean anything: `STB-PLAN-001`.
impl From<stb_plan::options::FlagError> for EngineError {
    fn from(error: stb_plan::options::FlagError) -> Self {
        Self::new(stb_plan::options::FLAG_CODE, error.message, error.hint)
    }
}

impl From<stb_diagnostics::Diagnostic> for EngineError {
    fn from(diagnostic: stb_diagnostics::Diagnostic) -> Self {
        Self::new(diagnostic.code, diagnostic.message, diagnostic.hint)
    }
}

impl From<&stb_warehouse::LockError> for EngineError {
    /// A lock that is held is a conflict; one that could not be read or written is the
    /// warehouse's failure.
    fn from(error: &stb_warehouse::LockError) -> Self {
        let kind = match error {
            stb_warehouse::LockError::Warehouse(_) => ErrorKind::Warehouse,
            _ => ErrorKind::Conflict,
        };
        Self::new(error.code(), error.to_string(), error.hint()).of_kind(kind)
    }
}
