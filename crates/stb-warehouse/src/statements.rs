//! The workflow's statements, persisted before any runs: each with its SHA-256, the whole
//! list with one more, then read back and compared, so what the records say ran is exactly
//! what was about to run.

use sha2::{Digest, Sha256};

use crate::client::Client;
use crate::error::{ErrorKind, WarehouseError};

/// One statement of a workflow, its secrets already redacted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlannedStatement {
    pub step_id: String,
    pub phase: String,
    pub intent: String,
    pub sql: String,
}

/// SHA-256 of the text, lower-case hex.
pub fn sha256_hex(text: &str) -> String {
    hex(&Sha256::digest(text.as_bytes()))
}

/// Lower-case hex of `bytes`, in one allocation (a plan hashes every statement: at
/// 10,000 models, a string per byte was a tenth of the plan's time).
fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut text = String::with_capacity(bytes.len() * 2);
    for byte in bytes {
        text.push(char::from(DIGITS[usize::from(byte >> 4)]));
        text.push(char::from(DIGITS[usize::from(byte & 0x0f)]));
    }
    text
}

/// The workflow's fingerprint: SHA-256 over the statements' own, in order.
#[must_use]
pub fn workflow_sha256(statements: &[PlannedStatement]) -> String {
    workflow_sha256_of(statements.iter().map(|s| s.sql.as_str()))
}

/// [`workflow_sha256`] of the statements' SQL as they come, without holding them: the
/// SHA-256 of their own SHA-256s (hex), one per line.
#[must_use]
pub fn workflow_sha256_of<S: AsRef<str>>(statements: impl IntoIterator<Item = S>) -> String {
    let mut outer = Sha256::new();
    for (index, sql) in statements.into_iter().enumerate() {
        if index > 0 {
            outer.update(b"\n");
        }
        outer.update(sha256_hex(sql.as_ref()).as_bytes());
    }
    hex(&outer.finalize())
}

/// Writes `statements` as revision `revision` of the run's workflow and verifies them.
/// Returns the workflow's SHA-256.
///
/// # Errors
/// The write failed, or what reads back differs ("warehouse execution was not started").
pub fn persist_statements(
    client: &Client,
    database: &str,
    invocation_id: &str,
    statements: &[PlannedStatement],
    revision: u64,
) -> Result<String, WarehouseError> {
    let table = format!(
        "{}._streambuild_run_statements",
        stb_ddl::identifier(database)
    );
    let workflow = workflow_sha256(statements);
    let literal = |text: &str| stb_ddl::string_literal(text);
    let rows: Vec<String> = statements
        .iter()
        .enumerate()
        .map(|(index, statement)| {
            format!(
                "({}, {}, {}, {}, {}, {}, {}, {}, {revision}, now64(3, 'UTC'))",
                literal(invocation_id),
                index + 1,
                literal(&statement.step_id),
                literal(&statement.phase),
                literal(&statement.intent),
                literal(&statement.sql),
                literal(&sha256_hex(&statement.sql)),
                literal(&workflow),
            )
        })
        .collect();
    if !rows.is_empty() {
        client.execute(
            &format!(
                "INSERT INTO {table} (invocation_id, statement_sequence, step_id, phase, intent, sql, sql_sha256, workflow_sha256, workflow_revision, recorded_at) VALUES {}",
                rows.join(", ")
            ),
            None,
        )?;
    }
    let stored = client.query(&format!(
        "SELECT statement_sequence, sql_sha256, workflow_sha256, workflow_revision FROM {table} FINAL WHERE invocation_id = {} ORDER BY statement_sequence",
        literal(invocation_id)
    ))?;
    let expected: Vec<(String, String)> = statements
        .iter()
        .enumerate()
        .map(|(i, s)| ((i + 1).to_string(), sha256_hex(&s.sql)))
        .collect();
    let found: Vec<(String, String)> = (0..stored.data.len())
        .filter(|&row| stored.text(row, "workflow_revision") == Some(revision.to_string()))
        .map(|row| {
            (
                stored.text(row, "statement_sequence").unwrap_or_default(),
                stored.text(row, "sql_sha256").unwrap_or_default(),
            )
        })
        .collect();
    if found != expected {
        return Err(WarehouseError {
            kind: ErrorKind::Other,
            server_code: None,
            message: format!(
                "the statements recorded for run '{invocation_id}' do not match the workflow ({} stored, {} planned); warehouse execution was not started",
                found.len(),
                expected.len()
            ),
        });
    }
    Ok(workflow)
}

/// One statement of a run as it was recorded: the exact SQL that ran (its latest revision,
/// once a replay placeholder was realised).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct RecordedStatement {
    pub invocation_id: String,
    pub statement_sequence: u64,
    pub step_id: String,
    pub phase: String,
    pub intent: String,
    pub sql: String,
}

/// Statement `sequence` of run `invocation_id`, if the run recorded it.
///
/// # Errors
/// The read failed.
pub fn recorded(
    client: &Client,
    database: &str,
    invocation_id: &str,
    sequence: u64,
) -> Result<Option<RecordedStatement>, WarehouseError> {
    let table = "_streambuild_run_statements";
    if !client.table_exists(database, table)? {
        return Ok(None);
    }
    let rows = client.query(&format!(
        "SELECT step_id, phase, intent, sql FROM {}.{table} FINAL \
         WHERE invocation_id = {} AND statement_sequence = {sequence} \
         ORDER BY workflow_revision DESC LIMIT 1",
        stb_ddl::identifier(database),
        stb_ddl::string_literal(invocation_id),
    ))?;
    if rows.data.is_empty() {
        return Ok(None);
    }
    let text = |column: &str| rows.text(0, column).unwrap_or_default();
    Ok(Some(RecordedStatement {
        invocation_id: invocation_id.to_owned(),
        statement_sequence: sequence,
        step_id: text("step_id"),
        phase: text("phase"),
        intent: text("intent"),
        sql: text("sql"),
    }))
}

#[cfg(test)]
mod tests {
    use super::{PlannedStatement, sha256_hex, workflow_sha256, workflow_sha256_of};
    use sha2::{Digest, Sha256};

    #[test]
    fn hashes_are_the_lower_case_hex_of_sha256_and_a_workflow_hashes_its_statement_hashes() {
        let digest = Sha256::digest(b"SELECT 1");
        let expected: String = digest.iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(sha256_hex("SELECT 1"), expected);
        assert_eq!(
            sha256_hex(""),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
        let sqls = [
            "CREATE TABLE a (x UInt8) ENGINE = Memory",
            "DROP TABLE a",
            "",
        ];
        let statements: Vec<PlannedStatement> = sqls
            .iter()
            .map(|sql| PlannedStatement {
                step_id: String::new(),
                phase: String::new(),
                intent: String::new(),
                sql: (*sql).to_owned(),
            })
            .collect();
        // What builds recorded as `workflow_id` before: the hash of the joined hashes.
        let joined: Vec<String> = sqls.iter().map(|sql| sha256_hex(sql)).collect();
        let recorded = sha256_hex(&joined.join("\n"));
        assert_eq!(workflow_sha256(&statements), recorded);
        assert_eq!(workflow_sha256_of(sqls), recorded);
        assert_eq!(workflow_sha256_of(Vec::<String>::new()), sha256_hex(""));
    }
}
