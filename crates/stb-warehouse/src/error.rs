//! Warehouse failures, sorted into what an operator can act on.

/// What went wrong, as far as the operator is concerned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// No answer in time, or the connection failed.
    Timeout,
    /// Wrong user or password.
    Authentication,
    /// The database does not exist.
    DatabaseNotFound,
    /// A table or view does not exist.
    RelationNotFound,
    /// Anything else the server refused.
    Other,
}

impl ErrorKind {
    /// The stable diagnostic code.
    #[must_use]
    pub fn code(self) -> &'static str {
        match self {
            Self::Timeout => "STB-WAREHOUSE-001",
            Self::Authentication => "STB-WAREHOUSE-002",
            Self::DatabaseNotFound => "STB-WAREHOUSE-003",
            Self::RelationNotFound => "STB-WAREHOUSE-004",
            Self::Other => "STB-WAREHOUSE-005",
        }
    }

    /// What to do about it.
    #[must_use]
    pub fn hint(self) -> &'static str {
        match self {
            Self::Timeout => {
                "check that ClickHouse is running and reachable (stb local status for the local stack)"
            }
            Self::Authentication => {
                "check --username/--password or STREAMBUILD_CLICKHOUSE_USERNAME/PASSWORD"
            }
            Self::DatabaseNotFound => "run stb build first, or check the target's database",
            Self::RelationNotFound => "run stb build first to create it",
            Self::Other => "read the server's message above",
        }
    }
}

/// A failed request.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{message}")]
pub struct WarehouseError {
    pub kind: ErrorKind,
    /// ClickHouse's exception code, when the server answered.
    pub server_code: Option<u32>,
    /// The server's message (or the transport's), with the password removed.
    pub message: String,
}

// ClickHouse exception codes that have a kind of their own.
const UNKNOWN_TABLE: u32 = 60;
const UNKNOWN_DATABASE: u32 = 81;
const TIMEOUT_EXCEEDED: u32 = 159;
const AUTHENTICATION_FAILED: u32 = 516;

impl WarehouseError {
    /// Classifies a server error by its exception code, else by its text.
    #[must_use]
    pub fn from_server(server_code: Option<u32>, message: &str, password: &str) -> Self {
        let lower = message.to_ascii_lowercase();
        let kind = match server_code {
            Some(AUTHENTICATION_FAILED) => ErrorKind::Authentication,
            Some(UNKNOWN_DATABASE) => ErrorKind::DatabaseNotFound,
            Some(UNKNOWN_TABLE) => ErrorKind::RelationNotFound,
            Some(TIMEOUT_EXCEEDED) => ErrorKind::Timeout,
            _ if message.contains("AUTHENTICATION_FAILED")
                || lower.contains("authentication failed") =>
            {
                ErrorKind::Authentication
            }
            _ if message.contains("UNKNOWN_DATABASE") => ErrorKind::DatabaseNotFound,
            _ if message.contains("UNKNOWN_TABLE") => ErrorKind::RelationNotFound,
            _ if lower.contains("timeout") || lower.contains("timed out") => ErrorKind::Timeout,
            _ => ErrorKind::Other,
        };
        Self {
            kind,
            server_code,
            message: redact(message.trim(), password),
        }
    }

    /// A request that never got an answer.
    #[must_use]
    pub fn transport(message: &str, password: &str) -> Self {
        Self {
            kind: ErrorKind::Timeout,
            server_code: None,
            message: redact(message, password),
        }
    }
}

/// A ClickHouse exception in the words a reader needs: without its `Code: N.
/// DB::Exception:` prefix, the `In scope <query>` it quotes (the statement the server
/// rewrote, not the author's), its `(version …)` note and its code name, which is kept
/// at the end in plain words (`(ClickHouse UNKNOWN_IDENTIFIER)`). Text that is not such
/// an exception comes back trimmed.
#[must_use]
pub fn plain_message(message: &str) -> String {
    let line = message.lines().next().unwrap_or(message).trim();
    let line = line.split(" (version ").next().unwrap_or(line).trim_end();
    let Some(body) = line
        .split_once("DB::Exception: ")
        .filter(|(prefix, _)| prefix.trim_start().starts_with("Code: "))
        .map(|(_, body)| body)
    else {
        // Not an exception: kept as it is.
        return line.to_owned();
    };
    // `(NAME)` at the end: the exception's code name.
    let (body, name) = match body.strip_suffix(')').and_then(|l| l.rsplit_once(" (")) {
        Some((rest, name))
            if !name.is_empty()
                && name
                    .chars()
                    .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_') =>
        {
            (rest, Some(name))
        }
        _ => (body, None),
    };
    // The query the server quotes is its rewrite, not the author's; a suggestion some
    // servers give after it is kept.
    let (kept, quoted) = match body.to_ascii_lowercase().find(" in scope ") {
        Some(at) => (&body[..at], Some(&body[at..])),
        None => (body, None),
    };
    let mut plain = kept.trim().trim_end_matches(':').trim_end().to_owned();
    if let Some(suggestion) = quoted.and_then(|q| q.find("Maybe you meant").map(|at| &q[at..])) {
        plain.push(' ');
        plain.push_str(suggestion.trim().trim_end_matches('.'));
        plain.push('.');
    }
    match name {
        Some(name) => format!("{plain} (ClickHouse {name})"),
        None => plain,
    }
}

/// Removes the password from text that might echo it (a server quoting a query, a URL).
fn redact(text: &str, password: &str) -> String {
    if password.is_empty() {
        text.to_owned()
    } else {
        text.replace(password, "***")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_exception_reads_plainly_without_the_rewritten_query() {
        assert_eq!(
            plain_message(
                "Code: 47. DB::Exception: Unknown expression or function identifier `amount_centz`. Maybe you meant: ['amount_cents']. In scope SELECT CAST(amount_centz, 'UInt64') FROM stb_check_1 WHERE kind = 'paid'. (UNKNOWN_IDENTIFIER) (version 26.9.2.1)"
            ),
            "Unknown expression or function identifier `amount_centz`. Maybe you meant: ['amount_cents']. (ClickHouse UNKNOWN_IDENTIFIER)"
        );
        assert_eq!(
            plain_message(
                "Code: 50. DB::Exception: Unknown data type family: UInt65. Maybe you meant: ['UInt64','Int64']: In scope SELECT CAST(x, 'UInt65') AS x FROM t. (UNKNOWN_TYPE)"
            ),
            "Unknown data type family: UInt65. Maybe you meant: ['UInt64','Int64'] (ClickHouse UNKNOWN_TYPE)"
        );
        // A suggestion after the quoted query is kept; code names may hold digits.
        assert_eq!(
            plain_message(
                "Code: 47. DB::Exception: Missing columns: 'amount_centz' while processing query: 'SELECT amount_centz FROM t', required columns: 'amount_centz' in scope SELECT amount_centz FROM t. Maybe you meant: ['amount_cents']. (S3_ERROR)"
            ),
            "Missing columns: 'amount_centz' while processing query: 'SELECT amount_centz FROM t', required columns: 'amount_centz' Maybe you meant: ['amount_cents']. (ClickHouse S3_ERROR)"
        );
        // Anything else is kept as it is, even what ends like a code name.
        assert_eq!(
            plain_message("  the connection was reset  "),
            "the connection was reset"
        );
        assert_eq!(plain_message("a value (in cents)"), "a value (in cents)");
        assert_eq!(plain_message("times are in (UTC)"), "times are in (UTC)");
        assert_eq!(plain_message(""), "");
    }

    #[test]
    fn codes_win_and_text_is_the_fallback() {
        let by_code = |code| WarehouseError::from_server(Some(code), "whatever", "").kind;
        assert_eq!(by_code(516), ErrorKind::Authentication);
        assert_eq!(by_code(81), ErrorKind::DatabaseNotFound);
        assert_eq!(by_code(60), ErrorKind::RelationNotFound);
        assert_eq!(by_code(159), ErrorKind::Timeout);
        assert_eq!(by_code(62), ErrorKind::Other);
        let by_text = |text| WarehouseError::from_server(None, text, "").kind;
        assert_eq!(
            by_text("Code: 516. DB::Exception: default: Authentication failed"),
            ErrorKind::Authentication
        );
        assert_eq!(by_text("(UNKNOWN_DATABASE)"), ErrorKind::DatabaseNotFound);
        assert_eq!(by_text("(UNKNOWN_TABLE)"), ErrorKind::RelationNotFound);
        assert_eq!(by_text("operation timed out"), ErrorKind::Timeout);
    }

    #[test]
    fn passwords_are_redacted_and_every_kind_has_a_code_and_hint() {
        let error = WarehouseError::from_server(None, "bad password hunter2 given", "hunter2");
        assert_eq!(error.message, "bad password *** given");
        for kind in [
            ErrorKind::Timeout,
            ErrorKind::Authentication,
            ErrorKind::DatabaseNotFound,
            ErrorKind::RelationNotFound,
            ErrorKind::Other,
        ] {
            assert!(kind.code().starts_with("STB-WAREHOUSE-"));
            assert!(!kind.hint().is_empty());
        }
    }
}
