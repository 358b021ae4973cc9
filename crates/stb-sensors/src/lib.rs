//! Sensors: the project's Python automation (`sensors/`, `providers/`), evaluated on events
//! derived from what the warehouse records, with every tick in the control store's ledger.
//! `stb sensors` and the dev server's dispatcher call the same functions.

pub mod dispatch;
pub mod events;
mod operate;

pub use dispatch::{Dispatcher, LEASE, LEASE_TTL_MS, PassSummary};
pub use operate::{SensorRow, SensorsView};

/// A sensor operation that could not be done, with its stable code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SensorError {
    pub code: &'static str,
    pub message: String,
    pub hint: &'static str,
    /// What HTTP status the API answers it with.
    pub status: u16,
}

/// The ledger or the warehouse failed during a sensor operation.
pub const UNAVAILABLE_CODE: &str = "STB-SENSOR-001";
/// No sensor of that name in the project.
pub const UNKNOWN_CODE: &str = "STB-SENSOR-002";
/// A request a sensor cannot take: not an event sensor, no such dead letter, a skip
/// without a reason, an unknown status.
pub const REFUSED_CODE: &str = "STB-SENSOR-003";

impl SensorError {
    pub(crate) fn store(error: stb_control::StoreError) -> Self {
        Self {
            code: UNAVAILABLE_CODE,
            message: format!(
                "the sensors' ledger in the control store failed: {}",
                error.message
            ),
            hint: "check the control store (--control-store-url) and run again; ticks recorded so far stay",
            status: 502,
        }
    }

    pub(crate) fn warehouse(error: &stb_warehouse::WarehouseError) -> Self {
        Self {
            code: UNAVAILABLE_CODE,
            message: format!("reading the sensors' events from the warehouse failed: {error}"),
            hint: "check the warehouse connection and run again; ticks recorded so far stay",
            status: 502,
        }
    }

    pub(crate) fn unknown(name: &str) -> Self {
        Self {
            code: UNKNOWN_CODE,
            message: format!("Unknown sensor '{name}'"),
            hint: "stb sensors list shows the project's sensors",
            status: 404,
        }
    }

    pub(crate) fn refused(message: String) -> Self {
        Self {
            code: REFUSED_CODE,
            message,
            hint: "stb sensors list and the sensor's dead letters show what it can take",
            status: 400,
        }
    }
}

impl std::fmt::Display for SensorError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

/// Milliseconds since the Unix epoch, now.
pub(crate) fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// Epoch milliseconds as the warehouse writes a `DateTime64(3, 'UTC')`:
/// `YYYY-MM-DD HH:MM:SS.mmm`.
#[must_use]
pub fn timestamp(ms: i64) -> String {
    let days = ms.div_euclid(86_400_000);
    let in_day = ms.rem_euclid(86_400_000);
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02} {:02}:{:02}:{:02}.{:03}",
        in_day / 3_600_000,
        in_day / 60_000 % 60,
        in_day / 1000 % 60,
        in_day % 1000
    )
}

#[cfg(test)]
mod tests {
    #[test]
    fn timestamps_read_as_the_warehouse_writes_them() {
        assert_eq!(super::timestamp(0), "1970-01-01 00:00:00.000");
        assert_eq!(super::timestamp(951_782_400_123), "2000-02-29 00:00:00.123");
        assert_eq!(
            super::timestamp(1_767_225_599_999),
            "2025-12-31 23:59:59.999"
        );
    }
}
