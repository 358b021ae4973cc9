//! The engine's errors: a stable code, a message and a hint, like every user-facing error.

use std::fmt;

/// An error the engine reports to whoever called it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EngineError {
    pub code: &'static str,
    pub message: String,
    pub hint: String,
}

impl EngineError {
    #[must_use]
    pub fn new(code: &'static str, message: impl Into<String>, hint: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            hint: hint.into(),
        }
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
    }
}

impl From<stb_diagnostics::Diagnostic> for EngineError {
    fn from(diagnostic: stb_diagnostics::Diagnostic) -> Self {
        Self {
            code: diagnostic.code,
            message: diagnostic.message,
            hint: diagnostic.hint,
        }
    }
}

impl From<&stb_warehouse::LockError> for EngineError {
    fn from(error: &stb_warehouse::LockError) -> Self {
        Self::new(error.code(), error.to_string(), error.hint())
    }
}
