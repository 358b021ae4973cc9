//! Sensors: the project's Python automation (`sensors/`, `providers/`), evaluated on events
//! derived from what the warehouse records, with every tick in the control store's ledger.
//! `stb sensors` and the dev server's dispatcher call the same functions.

pub mod dispatch;
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

    pub(crate) fn worker(detail: String) -> Self {
        Self {
            code: UNAVAILABLE_CODE,
            message: format!(
                "the sensor worker could not start or load the project's files: {detail}"
            ),
            hint: "stb compile shows a broken sensor or provider file; STB_PYTHON names the interpreter",
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

/// An ISO 8601 timestamp (`2026-01-31`, `2026-01-31T12:00:00`, with seconds' fractions and
/// `Z` or an offset; no offset is UTC) in epoch milliseconds.
#[must_use]
pub fn parse_iso_ms(text: &str) -> Option<i64> {
    let text = text.trim();
    let (date, time) = match text.split_once(['T', ' ']) {
        Some((date, time)) => (date, Some(time)),
        None => (text, None),
    };
    let mut parts = date.splitn(3, '-');
    let year: i64 = parts.next()?.parse().ok()?;
    let month: i64 = parts.next()?.parse().ok()?;
    let day: i64 = parts.next()?.parse().ok()?;
    if !(0..=9999).contains(&year) || !(1..=12).contains(&month) || !(1..=31).contains(&day) {
        return None;
    }
    let mut ms = days_from_civil(year, month, day) * 86_400_000;
    if let Some(time) = time {
        let (clock, offset_ms) = split_offset(time)?;
        let mut fields = clock.splitn(3, ':');
        let hours: i64 = fields.next()?.parse().ok()?;
        let minutes: i64 = fields.next()?.parse().ok()?;
        let seconds_text = fields.next().unwrap_or("0");
        let (whole, fraction) = seconds_text.split_once('.').unwrap_or((seconds_text, ""));
        let seconds: i64 = whole.parse().ok()?;
        // Milliseconds: the fraction's first three digits, padded.
        let digits: String = fraction.chars().take(3).collect();
        let millis: i64 = format!("{digits:0<3}").parse().ok()?;
        if hours > 23 || minutes > 59 || seconds > 60 {
            return None;
        }
        ms += hours * 3_600_000 + minutes * 60_000 + seconds * 1000 + millis;
        ms -= offset_ms;
    }
    Some(ms)
}

/// `12:00:00+02:00` into its clock and the offset in milliseconds.
fn split_offset(time: &str) -> Option<(&str, i64)> {
    if let Some(clock) = time.strip_suffix('Z') {
        return Some((clock, 0));
    }
    match time.rfind(['+', '-']) {
        Some(at) => {
            let (clock, offset) = time.split_at(at);
            let sign = if offset.starts_with('-') { -1 } else { 1 };
            let (hours, minutes) = offset[1..].split_once(':').unwrap_or((&offset[1..], "0"));
            let hours: i64 = hours.parse().ok()?;
            let minutes: i64 = minutes.parse().ok()?;
            Some((clock, sign * (hours * 3_600_000 + minutes * 60_000)))
        }
        None => Some((time, 0)),
    }
}

/// Days since 1970-01-01 of a civil date (Howard Hinnant's algorithm).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let yoe = year.rem_euclid(400);
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod iso_tests {
    use super::{parse_iso_ms, timestamp};

    #[test]
    fn iso_timestamps_read_in_every_form_the_api_takes() {
        let at = |text| parse_iso_ms(text).map(timestamp);
        assert_eq!(at("2026-01-31").as_deref(), Some("2026-01-31 00:00:00.000"));
        assert_eq!(
            at("2026-01-31T12:30:05Z").as_deref(),
            Some("2026-01-31 12:30:05.000")
        );
        assert_eq!(
            at("2026-01-31T12:30:05.250").as_deref(),
            Some("2026-01-31 12:30:05.250")
        );
        assert_eq!(
            at("2026-01-31T12:30:05+02:00").as_deref(),
            Some("2026-01-31 10:30:05.000")
        );
        assert_eq!(
            at("2026-03-01T00:00:00-01:00").as_deref(),
            Some("2026-03-01 01:00:00.000")
        );
        assert_eq!(parse_iso_ms("yesterday"), None);
        assert_eq!(parse_iso_ms("2026-13-01"), None);
        assert_eq!(parse_iso_ms("2026-01-31T25:00"), None);
        assert_eq!(parse_iso_ms("99999999999999-01-01"), None);
    }
}
