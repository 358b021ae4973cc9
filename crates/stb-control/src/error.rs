//! The store's errors, each with a stable code and a hint.

use std::fmt;

/// What went wrong, as the CLI and the server map it (exit 1 / an HTTP status).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// The database cannot be reached or answered with an error.
    Unavailable,
    /// Its schema is newer than this tool, or not ours.
    Incompatible,
    /// No such user (or role, or assignment).
    NotFound,
    /// It exists already, or was changed by someone else meanwhile.
    Conflict,
    /// A value breaks a rule (username grammar, password length, unknown role).
    Validation,
    /// An account rule refuses it (the last active admin).
    Policy,
}

impl ErrorKind {
    #[must_use]
    pub fn code(self) -> &'static str {
        match self {
            Self::Unavailable => "STB-CONTROL-001",
            Self::Incompatible => "STB-CONTROL-002",
            Self::NotFound => "STB-CONTROL-003",
            Self::Conflict => "STB-CONTROL-004",
            Self::Validation => "STB-CONTROL-005",
            Self::Policy => "STB-CONTROL-006",
        }
    }

    #[must_use]
    pub fn hint(self) -> &'static str {
        match self {
            Self::Unavailable => {
                "check --control-store-url (or STREAMBUILD_CONTROL_STORE_URL) and that the database is up"
            }
            Self::Incompatible => {
                "this store was written by a newer stb: upgrade stb, or point it at another store"
            }
            Self::NotFound => "check the spelling; usernames are compared in lower case",
            Self::Conflict => "pick another name, or change the existing account instead",
            Self::Validation => "fix the value and run the command again",
            Self::Policy => "make another user an active admin first",
        }
    }
}

/// A control-store error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreError {
    pub kind: ErrorKind,
    pub message: String,
}

impl StoreError {
    pub(crate) fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        Self {
            kind,
            message: message.into(),
        }
    }

    pub(crate) fn unavailable(url: &str, error: &sqlx::Error) -> Self {
        Self::new(
            ErrorKind::Unavailable,
            format!("the control store at {url} is unavailable: {error}"),
        )
    }

    pub(crate) fn not_found(username: &str) -> Self {
        Self::new(
            ErrorKind::NotFound,
            format!("User '{username}' was not found"),
        )
    }

    #[must_use]
    pub fn code(&self) -> &'static str {
        self.kind.code()
    }

    #[must_use]
    pub fn hint(&self) -> &'static str {
        self.kind.hint()
    }
}

impl fmt::Display for StoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for StoreError {}

impl From<sqlx::Error> for StoreError {
    fn from(error: sqlx::Error) -> Self {
        // A unique or foreign key violation is a conflict the caller can explain.
        if let sqlx::Error::Database(database) = &error
            && matches!(
                database.kind(),
                sqlx::error::ErrorKind::UniqueViolation
                    | sqlx::error::ErrorKind::ForeignKeyViolation
            )
        {
            return Self::new(ErrorKind::Conflict, database.message().to_owned());
        }
        Self::new(
            ErrorKind::Unavailable,
            format!("the control store failed: {error}"),
        )
    }
}
