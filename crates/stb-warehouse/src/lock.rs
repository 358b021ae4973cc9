//! The target mutation lock: one table whose creation is the mutex.
//!
//! `CREATE TABLE` either creates the lock table or fails because it exists, atomically, so
//! two commands cannot both hold it. The table's comment names the owner. Release checks
//! ownership first by swapping the lock with a table of its own (`EXCHANGE TABLES` is
//! atomic) and reading which comment it took away. There is no age-based takeover: a killed
//! owner's lock stays until an operator breaks it on purpose. A CREATE refused while the
//! holder releases (the table exists, and is gone when the holder is read) tries again:
//! the lock is free, and a raw "already exists" would fail a build that was only waiting.

use crate::client::Client;
use crate::error::WarehouseError;
use crate::metadata::TABLE_ALREADY_EXISTS;

pub const LOCK_TABLE: &str = "_streambuild_target_mutation_lock";
/// How often `acquire` tries again when the lock it found was released before it could
/// read the holder (each retry means another release won that moment: a few suffice).
const RELEASED_RACE_ATTEMPTS: u32 = 5;
const COMMENT_PREFIX: &str = "streambuild-target-lock-v2:";

/// Why the lock could not be taken or given back.
#[derive(Debug, thiserror::Error)]
pub enum LockError {
    #[error("Target database '{database}' is already mutation-locked by '{owner}'")]
    Held { database: String, owner: String },
    #[error("The mutation lock of '{database}' changed ownership while '{owner}' held it")]
    OwnershipChanged { database: String, owner: String },
    #[error(transparent)]
    Warehouse(#[from] WarehouseError),
}

impl LockError {
    #[must_use]
    pub fn code(&self) -> &'static str {
        match self {
            Self::Held { .. } => "STB-LOCK-001",
            Self::OwnershipChanged { .. } => "STB-LOCK-002",
            Self::Warehouse(error) => error.kind.code(),
        }
    }

    #[must_use]
    pub fn hint(&self) -> &'static str {
        match self {
            Self::Held { .. } => {
                "wait for the other command to finish; if its process was killed, stb unlock breaks the lock"
            }
            Self::OwnershipChanged { .. } => {
                "someone broke this lock while the command ran; check the target before retrying"
            }
            Self::Warehouse(error) => error.kind.hint(),
        }
    }
}

/// A held lock. Give it back with [`TargetLock::release`]; dropping it keeps the lock
/// (fail-closed: a crashed command must not look finished).
#[derive(Debug)]
#[must_use = "a lock is released explicitly"]
pub struct TargetLock<'c> {
    client: &'c Client,
    database: String,
    owner: String,
}

fn table(database: &str, name: &str) -> String {
    stb_ddl::QualifiedName::new(database, name).to_string()
}

/// The owner named in the comment of `database.name`, if that table exists.
fn comment_owner(
    client: &Client,
    database: &str,
    name: &str,
) -> Result<Option<String>, WarehouseError> {
    let rows = client.query(&format!(
        "SELECT comment FROM system.tables WHERE database = {} AND name = {}",
        stb_ddl::string_literal(database),
        stb_ddl::string_literal(name)
    ))?;
    Ok(rows.text(0, "comment").map(|comment| {
        comment
            .strip_prefix(COMMENT_PREFIX)
            .unwrap_or(&comment)
            .to_owned()
    }))
}

/// Who holds `database`'s lock, if anyone.
///
/// # Errors
/// The catalog could not be read.
pub fn lock_holder(client: &Client, database: &str) -> Result<Option<String>, WarehouseError> {
    comment_owner(client, database, LOCK_TABLE)
}

impl<'c> TargetLock<'c> {
    /// Takes the lock of `database` for `owner` (a run's id), creating the database first
    /// when `ensure_database` is set.
    ///
    /// # Errors
    /// [`LockError::Held`] when someone holds it; warehouse failures.
    pub fn acquire(
        client: &'c Client,
        database: &str,
        owner: &str,
        ensure_database: bool,
    ) -> Result<Self, LockError> {
        if ensure_database {
            client.execute(
                &format!(
                    "CREATE DATABASE IF NOT EXISTS {}",
                    stb_ddl::identifier(database)
                ),
                None,
            )?;
        }
        let create = format!(
            "CREATE TABLE {} (guard UInt8) ENGINE = TinyLog COMMENT {}",
            table(database, LOCK_TABLE),
            stb_ddl::string_literal(&format!("{COMMENT_PREFIX}{owner}"))
        );
        let mut attempts = 0;
        loop {
            attempts += 1;
            let error = match client.execute(&create, None) {
                Ok(_) => {
                    return Ok(Self {
                        client,
                        database: database.to_owned(),
                        owner: owner.to_owned(),
                    });
                }
                Err(error) => error,
            };
            match lock_holder(client, database)? {
                Some(holder) => {
                    return Err(LockError::Held {
                        database: database.to_owned(),
                        owner: holder,
                    });
                }
                // The table existed and is gone: its holder released it between our CREATE
                // and our look (a release swaps the lock aside and drops it). Free now, so
                // try again rather than fail the build on a raw "already exists".
                None if error.server_code == Some(TABLE_ALREADY_EXISTS)
                    && attempts < RELEASED_RACE_ATTEMPTS => {}
                None => return Err(error.into()),
            }
        }
    }

    /// The lock as `owner` holds it, for breaking a lock left by a killed process: releasing
    /// it verifies that `owner` still holds it, so a newer owner's lock is never broken.
    pub fn of_owner(client: &'c Client, database: &str, owner: &str) -> Self {
        Self {
            client,
            database: database.to_owned(),
            owner: owner.to_owned(),
        }
    }

    #[must_use]
    pub fn owner(&self) -> &str {
        &self.owner
    }

    /// Hands the lock `from` holds to `to` (a resumed build takes over the lock its
    /// suspended run kept), atomically: the lock is swapped with a table named for `to`
    /// (`EXCHANGE TABLES`), and swapped back when what it took away was not `from`'s, so
    /// of two resumes of one run only one gets the lock, and a newer owner's lock is never
    /// taken.
    ///
    /// # Errors
    /// [`LockError::Held`] when `from` does not hold it (naming who does); warehouse
    /// failures.
    pub fn take_over(
        client: &'c Client,
        database: &str,
        from: &str,
        to: &str,
    ) -> Result<Self, LockError> {
        let hex = crate::statements::sha256_hex(to);
        let incoming_name = format!("{LOCK_TABLE}_takeover_{}", &hex[..16]);
        let lock = table(database, LOCK_TABLE);
        let incoming = table(database, &incoming_name);
        client.execute(&format!("DROP TABLE IF EXISTS {incoming} SYNC"), None)?;
        client.execute(
            &format!(
                "CREATE TABLE {incoming} (guard UInt8) ENGINE = TinyLog COMMENT {}",
                stb_ddl::string_literal(&format!("{COMMENT_PREFIX}{to}"))
            ),
            None,
        )?;
        let held = |owner: Option<String>| LockError::Held {
            database: database.to_owned(),
            owner: owner.unwrap_or_else(|| "nobody".to_owned()),
        };
        if client
            .execute(&format!("EXCHANGE TABLES {lock} AND {incoming}"), None)
            .is_err()
        {
            // No lock to take: nobody holds it.
            client.execute(&format!("DROP TABLE IF EXISTS {incoming} SYNC"), None)?;
            return Err(held(None));
        }
        let taken = comment_owner(client, database, &incoming_name)?;
        if taken.as_deref() != Some(from) {
            client.execute(&format!("EXCHANGE TABLES {lock} AND {incoming}"), None)?;
            client.execute(&format!("DROP TABLE IF EXISTS {incoming} SYNC"), None)?;
            return Err(held(taken));
        }
        client.execute(&format!("DROP TABLE IF EXISTS {incoming} SYNC"), None)?;
        Ok(Self {
            client,
            database: database.to_owned(),
            owner: to.to_owned(),
        })
    }

    /// Gives the lock back after checking it is still ours.
    ///
    /// # Errors
    /// [`LockError::OwnershipChanged`] when another owner holds it now (their lock is left in
    /// place); warehouse failures.
    pub fn release(self) -> Result<(), LockError> {
        let hex = crate::statements::sha256_hex(&self.owner);
        let release_name = format!("{LOCK_TABLE}_release_{}", &hex[..16]);
        let lock = table(&self.database, LOCK_TABLE);
        let release = table(&self.database, &release_name);
        let client = self.client;
        let create = format!(
            "CREATE TABLE {release} (guard UInt8) ENGINE = TinyLog COMMENT {}",
            stb_ddl::string_literal(&format!("{COMMENT_PREFIX}{}", self.owner))
        );
        // The release table is named after the owner, so it exists only when an earlier
        // release of the same lock stopped half way (`stb unlock` after a kill): dropped
        // then, not asked for on every release.
        if let Err(error) = client.execute(&create, None) {
            if error.server_code != Some(TABLE_ALREADY_EXISTS) {
                return Err(error.into());
            }
            client.execute(&format!("DROP TABLE IF EXISTS {release} SYNC"), None)?;
            client.execute(&create, None)?;
        }
        if let Err(error) = client.execute(&format!("EXCHANGE TABLES {lock} AND {release}"), None) {
            // No lock table to swap with: nobody holds it any more.
            client.execute(&format!("DROP TABLE IF EXISTS {release} SYNC"), None)?;
            return Err(error.into());
        }
        // The release-named table now holds whatever the lock was.
        let taken = comment_owner(client, &self.database, &release_name)?;
        if taken.as_deref() != Some(self.owner.as_str()) {
            client.execute(&format!("EXCHANGE TABLES {lock} AND {release}"), None)?;
            client.execute(&format!("DROP TABLE IF EXISTS {release} SYNC"), None)?;
            return Err(LockError::OwnershipChanged {
                database: self.database,
                owner: self.owner,
            });
        }
        // Both are ours now: one statement drops them.
        client.execute(
            &format!("DROP TABLE IF EXISTS {release}, {lock} SYNC"),
            None,
        )?;
        Ok(())
    }
}
