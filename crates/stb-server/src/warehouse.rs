//! The warehouse, reached lazily. A background worker connects (1 s, doubling to 30 s
//! between failures) and then probes the warehouse clock every 10 s; its last answer is
//! the status `/api/status` shows. Routes that read open a connection of their own per
//! request, on a blocking thread, so the server never waits behind one shared connection.

use std::sync::{Arc, RwLock};
use std::time::Duration;

use serde::Serialize;
use stb_warehouse::Client;

/// Opens a connection to the target (the CLI builds it from the frozen connection
/// settings).
pub type Connect = Arc<dyn Fn() -> Result<Client, String> + Send + Sync>;

/// The warehouse as last seen.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct WarehouseStatus {
    pub connected: bool,
    /// `connected` or `retrying`.
    pub state: &'static str,
    pub database: String,
    pub error: Option<String>,
    pub last_attempt_at_ms: Option<u128>,
    pub next_attempt_at_ms: Option<u128>,
}

/// The connection factory and the worker's view.
pub struct Warehouse {
    pub connect: Connect,
    pub status: RwLock<WarehouseStatus>,
}

fn now_ms() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis())
}

impl Warehouse {
    #[must_use]
    pub fn new(connect: Connect, database: &str) -> Self {
        Self {
            connect,
            status: RwLock::new(WarehouseStatus {
                connected: false,
                state: "retrying",
                database: database.to_owned(),
                error: None,
                last_attempt_at_ms: None,
                next_attempt_at_ms: None,
            }),
        }
    }

    #[must_use]
    pub fn snapshot(&self) -> WarehouseStatus {
        self.status
            .read()
            .map(|s| s.clone())
            .unwrap_or_else(|poisoned| poisoned.into_inner().clone())
    }

    /// One connection and probe; the new status.
    async fn probe(&self) -> WarehouseStatus {
        let connect = Arc::clone(&self.connect);
        let outcome = tokio::task::spawn_blocking(move || {
            let client = connect()?;
            client
                .query("SELECT now64(3, 'UTC') AS now")
                .map(|_| ())
                .map_err(|e| e.to_string())
        })
        .await
        .unwrap_or_else(|e| Err(e.to_string()));
        let mut status = self.snapshot();
        status.last_attempt_at_ms = Some(now_ms());
        status.connected = outcome.is_ok();
        status.state = if outcome.is_ok() {
            "connected"
        } else {
            "retrying"
        };
        status.error = outcome.err();
        status
    }

    /// Probes now (`POST /api/warehouse/refresh`) and keeps what it saw; the background
    /// worker's schedule is unchanged.
    pub async fn refresh(&self) -> WarehouseStatus {
        let mut status = self.probe().await;
        status.next_attempt_at_ms = self.snapshot().next_attempt_at_ms;
        if let Ok(mut held) = self.status.write() {
            *held = status.clone();
        }
        status
    }

    /// Keeps the status current until the server stops.
    pub async fn watch(self: Arc<Self>) {
        let mut delay = Duration::from_secs(1);
        loop {
            let mut status = self.probe().await;
            let wait = if status.connected {
                delay = Duration::from_secs(1);
                Duration::from_secs(10)
            } else {
                let wait = delay;
                delay = (delay * 2).min(Duration::from_secs(30));
                wait
            };
            status.next_attempt_at_ms = Some(now_ms() + wait.as_millis());
            if let Ok(mut held) = self.status.write() {
                *held = status;
            }
            tokio::time::sleep(wait).await;
        }
    }

    /// A fresh connection, for work already on a blocking thread.
    ///
    /// # Errors
    /// The connection could not be opened.
    pub fn connect_blocking(&self) -> Result<Client, String> {
        (self.connect)()
    }

    /// Runs `read` with a fresh connection on a blocking thread.
    ///
    /// # Errors
    /// The connection could not be opened (503) or the read failed.
    pub async fn read<T: Send + 'static>(
        &self,
        read: impl FnOnce(&Client) -> Result<T, crate::error::ApiError> + Send + 'static,
    ) -> Result<T, crate::error::ApiError> {
        let connect = Arc::clone(&self.connect);
        tokio::task::spawn_blocking(move || {
            let client = connect().map_err(|e| {
                crate::error::ApiError::service_unavailable(format!("no warehouse connection: {e}"))
            })?;
            read(&client)
        })
        .await
        .unwrap_or_else(|e| Err(crate::error::ApiError::service_unavailable(e.to_string())))
    }
}
