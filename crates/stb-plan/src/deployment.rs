//! Deployment ids and the physical names of a virtual deployment's relations.
//!
//! An id is `YYYYMMDDTHHMMSSZ_<suffix>`: the deployment's creation instant in UTC and an
//! alphanumeric suffix (six hex characters when generated). A relation `tbl__orders` of
//! deployment `D` is physically `tbl__orders__D`; readers query the stable view
//! `tbl__orders`, which selects from the active deployment's relation.

use std::fmt;

/// A valid deployment id.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct DeploymentId(String);

/// Why a text is not a deployment id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InvalidId {
    pub text: String,
    pub reason: &'static str,
}

impl fmt::Display for InvalidId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "'{}' is not a deployment id ({}); ids look like 20261201T093000Z_a1b2c3",
            self.text, self.reason
        )
    }
}

const STAMP_LEN: usize = "YYYYMMDDTHHMMSSZ".len();

impl DeploymentId {
    /// Parses a user-supplied id, checking that its timestamp is a real UTC instant.
    ///
    /// # Errors
    /// The text does not match `\d{8}T\d{6}Z_[A-Za-z0-9]+` or names no real instant.
    pub fn parse(text: &str) -> Result<Self, InvalidId> {
        let invalid = |reason| InvalidId {
            text: text.to_owned(),
            reason,
        };
        if !matches_shape(text) {
            return Err(invalid("expected YYYYMMDDTHHMMSSZ_<letters or digits>"));
        }
        let number =
            |range: std::ops::Range<usize>| -> u32 { text[range].parse().unwrap_or(u32::MAX) };
        let (year, month, day) = (number(0..4), number(4..6), number(6..8));
        let (hour, minute, second) = (number(9..11), number(11..13), number(13..15));
        if !(1..=12).contains(&month)
            || day == 0
            || day > crate::options::days_in_month(year, month)
        {
            return Err(invalid("its date does not exist"));
        }
        if hour > 23 || minute > 59 || second > 59 {
            return Err(invalid("its time does not exist"));
        }
        Ok(Self(text.to_owned()))
    }

    /// A fresh id for a deployment created at `unix_ms` (UTC), with `suffix` (the first six
    /// hex characters of a random UUID, chosen by the caller).
    #[must_use]
    pub fn generate(unix_ms: i64, suffix: &str) -> Self {
        let seconds = unix_ms.div_euclid(1000);
        let (year, month, day) = civil_from_days(seconds.div_euclid(86_400));
        let of_day = seconds.rem_euclid(86_400);
        Self(format!(
            "{year:04}{month:02}{day:02}T{:02}{:02}{:02}Z_{suffix}",
            of_day / 3600,
            of_day % 3600 / 60,
            of_day % 60
        ))
    }

    #[must_use]
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The creation instant the id carries, as ClickHouse reads a `DateTime64(3)` text:
    /// `YYYY-MM-DD HH:MM:SS.000` (UTC; milliseconds are always zero).
    #[must_use]
    pub fn created_at(&self) -> String {
        let t = &self.0;
        format!(
            "{}-{}-{} {}:{}:{}.000",
            &t[0..4],
            &t[4..6],
            &t[6..8],
            &t[9..11],
            &t[11..13],
            &t[13..15]
        )
    }

    /// `<relation>__<id>`: the deployment's copy of a logical relation.
    #[must_use]
    pub fn physical(&self, relation: &str) -> String {
        format!("{relation}__{}", self.0)
    }
}

impl fmt::Display for DeploymentId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Splits a physical relation name into its logical name and deployment id: everything
/// after the last `__`, when that is an id. `None` for names that carry no deployment.
#[must_use]
pub fn split_physical(name: &str) -> Option<(&str, DeploymentId)> {
    let at = name.rfind("__")?;
    let (logical, tail) = (&name[..at], &name[at + 2..]);
    if logical.is_empty() {
        return None;
    }
    DeploymentId::parse(tail).ok().map(|id| (logical, id))
}

/// `YYYY-MM-DD HH:MM:SS.fff` (UTC) for `unix_ms`, as ClickHouse prints a `DateTime64(3)`.
#[must_use]
pub fn utc_text(unix_ms: i64) -> String {
    let seconds = unix_ms.div_euclid(1000);
    let (year, month, day) = civil_from_days(seconds.div_euclid(86_400));
    let of_day = seconds.rem_euclid(86_400);
    format!(
        "{year:04}-{month:02}-{day:02} {:02}:{:02}:{:02}.{:03}",
        of_day / 3600,
        of_day % 3600 / 60,
        of_day % 60,
        unix_ms.rem_euclid(1000)
    )
}

/// The instant `YYYY-MM-DD HH:MM:SS[.fff]` (UTC) names, in milliseconds since the epoch.
#[must_use]
pub fn parse_utc_text(text: &str) -> Option<i64> {
    let (date, clock) = text.split_once(' ')?;
    let mut fields = date.split('-').map(|p| p.parse::<i64>().ok());
    let (year, month, day) = (fields.next()??, fields.next()??, fields.next()??);
    let (clock, fraction) = clock.split_once('.').unwrap_or((clock, "0"));
    let mut parts = clock.split(':').map(|p| p.parse::<i64>().ok());
    let (hour, minute, second) = (parts.next()??, parts.next()??, parts.next()??);
    let millis: i64 = format!("{fraction:0<3}").get(..3)?.parse().ok()?;
    Some(
        (days_from_civil(year, month, day) * 86_400 + hour * 3600 + minute * 60 + second) * 1000
            + millis,
    )
}

/// Days since 1970-01-01 of a proleptic Gregorian date.
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let year_of_era = year - era * 400;
    let month_index = (month + 9) % 12;
    let day_of_year = (153 * month_index + 2) / 5 + day - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}

fn matches_shape(text: &str) -> bool {
    let bytes = text.as_bytes();
    bytes.len() > STAMP_LEN + 1
        && bytes[..8].iter().all(u8::is_ascii_digit)
        && bytes[8] == b'T'
        && bytes[9..15].iter().all(u8::is_ascii_digit)
        && bytes[15] == b'Z'
        && bytes[16] == b'_'
        && bytes[17..].iter().all(u8::is_ascii_alphanumeric)
}

/// (year, month, day) of the proleptic Gregorian calendar for days since 1970-01-01.
#[must_use]
pub fn civil_from_days(days: i64) -> (i64, i64, i64) {
    // Eras of 400 years (146,097 days) starting on March 1st, so leap days end each year.
    let shifted = days + 719_468;
    let era = shifted.div_euclid(146_097);
    let day_of_era = shifted.rem_euclid(146_097);
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let month_index = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * month_index + 2) / 5 + 1;
    let month = if month_index < 10 {
        month_index + 3
    } else {
        month_index - 9
    };
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_validated_by_shape_and_by_calendar() {
        let id = DeploymentId::parse("20261201T093000Z_a1b2c3").expect("valid");
        assert_eq!(id.created_at(), "2026-12-01 09:30:00.000");
        assert_eq!(
            id.physical("tbl__orders"),
            "tbl__orders__20261201T093000Z_a1b2c3"
        );
        assert!(
            DeploymentId::parse("20240229T000000Z_x").is_ok(),
            "leap day"
        );
        for bad in [
            "",
            "20261201T093000Z",
            "20261201T093000Z_",
            "20261201T093000_abc",
            "20261201 093000Z_abc",
            "20261201T093000Z_ab-c",
            "2026121T093000Z_abc",
            "20261301T093000Z_abc",
            "20230229T000000Z_abc",
            "20261131T000000Z_abc",
            "20261201T240000Z_abc",
            "20261201T096000Z_abc",
        ] {
            assert!(DeploymentId::parse(bad).is_err(), "{bad}");
        }
        let message = DeploymentId::parse("nope")
            .expect_err("invalid")
            .to_string();
        assert!(
            message.contains("'nope' is not a deployment id"),
            "{message}"
        );
    }

    #[test]
    fn generated_ids_carry_the_utc_instant() {
        // 2026-12-01 09:30:05.123 UTC
        let id = DeploymentId::generate(1_796_117_405_123, "a1b2c3");
        assert_eq!(id.as_str(), "20261201T093005Z_a1b2c3");
        assert_eq!(
            DeploymentId::generate(0, "000000").as_str(),
            "19700101T000000Z_000000"
        );
        // 2024-02-29 23:59:59 UTC: a leap day's last second.
        assert_eq!(
            DeploymentId::generate(1_709_251_199_000, "f").as_str(),
            "20240229T235959Z_f"
        );
        assert!(DeploymentId::parse(id.as_str()).is_ok());
    }

    #[test]
    fn utc_texts_round_trip() {
        for ms in [0_i64, 1_796_117_405_123, 1_709_251_199_000, 951_782_400_000] {
            assert_eq!(parse_utc_text(&utc_text(ms)), Some(ms), "{}", utc_text(ms));
        }
        assert_eq!(utc_text(1_796_117_405_123), "2026-12-01 09:30:05.123");
        assert_eq!(
            parse_utc_text("2026-12-01 09:30:05"),
            Some(1_796_117_405_000)
        );
        assert_eq!(parse_utc_text("yesterday"), None);
    }

    #[test]
    fn physical_names_split_at_the_last_separator_only_for_ids() {
        let (logical, id) =
            split_physical("tbl__order__totals__20261201T093000Z_a1b2c3").expect("suffixed");
        assert_eq!(logical, "tbl__order__totals");
        assert_eq!(id.as_str(), "20261201T093000Z_a1b2c3");
        assert!(split_physical("tbl__orders").is_none());
        assert!(split_physical("mv__orders").is_none());
        assert!(split_physical("__20261201T093000Z_a1b2c3").is_none());
        assert!(split_physical("tbl__orders__20261301T093000Z_a1").is_none());
    }
}
