//! Direct fingerprints: what each model looked like at its last successful direct build.

use std::collections::BTreeMap;

use crate::client::Client;
use crate::error::WarehouseError;

/// A model's recorded definition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fingerprint {
    pub definition_sql: String,
    pub definition_hash: String,
    pub identity_metadata: String,
}

/// What the fingerprint table said.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fingerprints {
    /// No table yet: nothing was ever built here.
    Absent,
    /// The table exists but could not be read; the message says why.
    Unavailable(String),
    /// The latest fingerprint per `<database>.<model>` identity found.
    Found(BTreeMap<String, Fingerprint>),
}

const TABLE: &str = "_streambuild_direct_fingerprints";

/// The latest fingerprint of each identity, by `(applied_at, fingerprint_id)`; one query.
/// The identities are not listed in it: at 10,000 models the list alone passed the
/// server's `max_query_size` (256 KiB). Every identity of `database` is read and the
/// others are left out here.
///
/// # Errors
/// Only when the server could not be asked at all (a refused read is `Unavailable`).
pub fn latest_fingerprints(
    client: &Client,
    database: &str,
    identities: &[String],
) -> Result<Fingerprints, WarehouseError> {
    if identities.is_empty() {
        return Ok(if client.table_exists(database, TABLE)? {
            Fingerprints::Found(BTreeMap::new())
        } else {
            Fingerprints::Absent
        });
    }
    let wanted: std::collections::HashSet<&str> = identities.iter().map(String::as_str).collect();
    // Read at once: a missing table (no build yet) answers as such.
    let read = client.query_if_exists(&format!(
        "SELECT logical_model_identity AS identity, \
         argMax(definition_sql, (applied_at, fingerprint_id)) AS definition_sql, \
         argMax(definition_hash, (applied_at, fingerprint_id)) AS definition_hash, \
         argMax(identity_metadata, (applied_at, fingerprint_id)) AS identity_metadata \
         FROM {}.{TABLE} WHERE startsWith(logical_model_identity, {}) GROUP BY identity",
        stb_ddl::identifier(database),
        stb_ddl::string_literal(&format!("{database}."))
    ));
    let rows = match read {
        Ok(Some(rows)) => rows,
        Ok(None) => return Ok(Fingerprints::Absent),
        // No answer at all: the table's existence is not known either.
        Err(error) if error.server_code.is_none() => return Err(error),
        Err(error) => return Ok(Fingerprints::Unavailable(error.message)),
    };
    let text = |row: usize, column: &str| rows.text(row, column).unwrap_or_default();
    Ok(Fingerprints::Found(
        (0..rows.data.len())
            .filter(|&row| wanted.contains(text(row, "identity").as_str()))
            .map(|row| {
                (
                    text(row, "identity"),
                    Fingerprint {
                        definition_sql: text(row, "definition_sql"),
                        definition_hash: text(row, "definition_hash"),
                        identity_metadata: text(row, "identity_metadata"),
                    },
                )
            })
            .collect(),
    ))
}
