//! The ClickHouse adapter: everything StreamBuild says to the warehouse goes through here.
//!
//! Requests are session-less HTTP (concurrent queries on one session would fail with
//! `SESSION_IS_LOCKED`), every workflow statement can carry a query id, long statements ask
//! the server for progress headers so the socket never idles into a read timeout, and only
//! read-only requests are retried. Errors are classified into the few kinds an operator can
//! act on.

pub mod adopted;
mod catalog;
mod client;
mod config;
pub mod deployments;
mod error;
pub mod events;
pub mod fingerprints;
mod lock;
pub mod metadata;
#[cfg(test)]
mod ownership_tests;
pub mod records;
pub mod results;
pub mod runs;
pub mod sensor_events;
pub mod statements;

pub use catalog::{
    Catalog, CatalogCache, CatalogColumn, CatalogRelation, Columns, Definitions, Depth, Stored,
    catalog_stamp_sql,
};
pub use client::{Client, Rows, Summary};
pub use config::{
    ConnectionConfig, ConnectionOverrides, ENV_HOST, ENV_PASSWORD, ENV_PORT, ENV_USERNAME, Secret,
};
pub use error::{ErrorKind, WarehouseError, plain_message};
pub use lock::{LOCK_TABLE, LockError, TargetLock, lock_holder};
