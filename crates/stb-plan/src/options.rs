//! The scope flags `stb plan` and `stb build` share, checked together before anything is
//! read: combinations that cannot mean anything are refused with the reason.

use std::fmt;

/// How the pipelines in scope are built.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Direct,
    Virtual,
}

/// The flags as given; the start time already read (where it entered: a flag, a request).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ScopeFlags {
    pub select: Vec<String>,
    pub changed: bool,
    pub include_missing_upstream: bool,
    pub full_refresh: bool,
    pub start_time: Option<StartTime>,
    pub deployment_id: Option<String>,
}

/// A UTC instant as ClickHouse reads it: `YYYY-MM-DD HH:MM:SS.mmm`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StartTime(String);

impl StartTime {
    #[must_use]
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// Written as ClickHouse reads it (`2026-11-30 08:15:00.000`).
impl serde::Serialize for StartTime {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.0)
    }
}

/// Read as `--start-time` reads it, or in the form it is written in.
impl<'de> serde::Deserialize<'de> for StartTime {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        StartTime::read(&text).map_err(serde::de::Error::custom)
    }
}

impl StartTime {
    /// `text` as `--start-time` reads it ([`parse_start_time`]), or exactly in the form a
    /// start time is written in (`YYYY-MM-DD HH:MM:SS.mmm`, what a serialised scope holds).
    ///
    /// # Errors
    /// Neither.
    pub fn read(text: &str) -> Result<Self, FlagError> {
        let written = text.len() == 23
            && text.as_bytes()[10] == b' '
            && text.as_bytes()[19] == b'.'
            && text[20..].bytes().all(|b| b.is_ascii_digit());
        if written {
            return parse_start_time(&text.replacen(' ', "T", 1));
        }
        parse_start_time(text)
    }
}

impl fmt::Display for StartTime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Why the flags were refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct FlagError {
    pub message: String,
    pub hint: &'static str,
}

/// The stable code of flag errors.
pub const FLAG_CODE: &str = "STB-PLAN-001";

fn refuse(message: impl Into<String>, hint: &'static str) -> FlagError {
    FlagError {
        message: message.into(),
        hint,
    }
}

fn digits(text: &str, range: std::ops::RangeInclusive<u32>) -> Option<u32> {
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse().ok().filter(|n| range.contains(n))
}

/// Days in `month` of `year` (proleptic Gregorian).
pub(crate) fn days_in_month(year: u32, month: u32) -> u32 {
    match month {
        2 if (year.is_multiple_of(4) && !year.is_multiple_of(100)) || year.is_multiple_of(400) => {
            29
        }
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// `YYYY-MM-DD` (midnight) or `YYYY-MM-DDTHH:MM:SS[.ffffff][Z]`, read as UTC; fractions
/// beyond milliseconds are cut, not rounded, so the frontier never moves later.
///
/// # Errors
/// Anything else, or a date that does not exist.
pub fn parse_start_time(text: &str) -> Result<StartTime, FlagError> {
    let invalid = || {
        refuse(
            format!("--start-time '{text}' is not a date or UTC date-time"),
            "use 2026-11-30 or 2026-11-30T08:15:00Z",
        )
    };
    let (date, time) = match text.split_once('T') {
        Some((date, time)) => (date, Some(time.strip_suffix('Z').unwrap_or(time))),
        None => (text, None),
    };
    let mut parts = date.split('-');
    let (Some(y), Some(m), Some(d), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(invalid());
    };
    if y.len() != 4 || m.len() != 2 || d.len() != 2 {
        return Err(invalid());
    }
    let year = digits(y, 1970..=2299).ok_or_else(invalid)?;
    let month = digits(m, 1..=12).ok_or_else(invalid)?;
    let day = digits(d, 1..=days_in_month(year, month)).ok_or_else(invalid)?;
    let (clock, millis) = match time {
        None => ("00:00:00".to_owned(), "000".to_owned()),
        Some(time) => {
            let (clock, fraction) = time.split_once('.').unwrap_or((time, ""));
            let mut fields = clock.split(':');
            let (Some(h), Some(mi), Some(s), None) =
                (fields.next(), fields.next(), fields.next(), fields.next())
            else {
                return Err(invalid());
            };
            if h.len() != 2 || mi.len() != 2 || s.len() != 2 {
                return Err(invalid());
            }
            digits(h, 0..=23).ok_or_else(invalid)?;
            digits(mi, 0..=59).ok_or_else(invalid)?;
            digits(s, 0..=59).ok_or_else(invalid)?;
            if !fraction.is_empty()
                && (fraction.len() > 6 || !fraction.bytes().all(|b| b.is_ascii_digit()))
            {
                return Err(invalid());
            }
            let millis: String = format!("{fraction:0<3}").chars().take(3).collect();
            (clock.to_owned(), millis)
        }
    };
    Ok(StartTime(format!(
        "{year:04}-{month:02}-{day:02} {clock}.{millis}"
    )))
}

/// Checks the flag combination for a plan in `mode`; returns the parsed start time.
///
/// # Errors
/// The first combination that cannot be honoured.
pub fn validate(flags: &ScopeFlags, mode: Mode) -> Result<Option<StartTime>, FlagError> {
    let scoped = flags.changed || !flags.select.is_empty();
    if flags.changed && !flags.select.is_empty() {
        return Err(refuse(
            "--changed and --select cannot be combined",
            "--changed picks the models itself; drop --select, or drop --changed",
        ));
    }
    if flags.include_missing_upstream && !scoped {
        return Err(refuse(
            "--include-missing-upstream needs --changed or --select",
            "without a selection every model is built already",
        ));
    }
    if flags.full_refresh && flags.start_time.is_some() {
        return Err(refuse(
            "--full-refresh and --start-time cannot be combined",
            "--full-refresh replays all retained history; --start-time replays from a point",
        ));
    }
    for (given, flag) in [
        (flags.full_refresh, "--full-refresh"),
        (flags.start_time.is_some(), "--start-time"),
    ] {
        if given && !scoped {
            return Err(refuse(
                format!("{flag} needs --changed or --select"),
                "name the models to rebuild",
            ));
        }
    }
    if mode == Mode::Direct {
        if flags.deployment_id.is_some() {
            return Err(refuse(
                "--deployment-id applies to virtual pipelines only",
                "direct pipelines rebuild in place; there is no deployment to name",
            ));
        }
        if flags.full_refresh {
            return Err(refuse(
                "--full-refresh applies to virtual pipelines only",
                "direct builds always replay all retained history unless --start-time is given",
            ));
        }
    }
    Ok(flags.start_time.clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flags() -> ScopeFlags {
        ScopeFlags::default()
    }

    #[test]
    fn start_times_are_normalised_to_milliseconds_utc() {
        let ok = |t: &str| parse_start_time(t).map(|s| s.to_string());
        assert_eq!(ok("2026-11-30").as_deref(), Ok("2026-11-30 00:00:00.000"));
        assert_eq!(
            ok("2026-11-30T08:15:07Z").as_deref(),
            Ok("2026-11-30 08:15:07.000")
        );
        assert_eq!(
            ok("2024-02-29T23:59:59.999999").as_deref(),
            Ok("2024-02-29 23:59:59.999"),
            "cut, never rounded up into the next second"
        );
        assert_eq!(
            ok("2026-01-01T00:00:00.5").as_deref(),
            Ok("2026-01-01 00:00:00.500")
        );
        // Written and read back.
        let written = parse_start_time("2026-11-30T08:15:07.25Z").expect("a time");
        let json = serde_json::to_string(&written).expect("json");
        assert_eq!(json, "\"2026-11-30 08:15:07.250\"");
        assert_eq!(
            serde_json::from_str::<StartTime>(&json).expect("read"),
            written
        );
        assert!(serde_json::from_str::<StartTime>("\"2026-11-30 08:15:07\"").is_err());
        for bad in [
            "2026-02-29",
            "2026-13-01",
            "2026-1-01",
            "2026-11-30 08:15:00",
            "2026-11-30T24:00:00",
            "2026-11-30T08:15",
            "2026-11-30T08:15:00.1234567",
            "2026-11-30T08:15:00+01:00",
            "yesterday",
            "",
        ] {
            assert!(parse_start_time(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn impossible_combinations_are_refused() {
        let refused = |f: ScopeFlags, mode| validate(&f, mode).expect_err("refused").message;
        let selected = ScopeFlags {
            select: vec!["orders".into()],
            ..flags()
        };
        assert!(
            refused(
                ScopeFlags {
                    changed: true,
                    ..selected.clone()
                },
                Mode::Direct
            )
            .contains("--changed and --select")
        );
        assert!(
            refused(
                ScopeFlags {
                    include_missing_upstream: true,
                    ..flags()
                },
                Mode::Direct
            )
            .contains("needs --changed or --select")
        );
        assert!(
            refused(
                ScopeFlags {
                    start_time: parse_start_time("2026-11-30").ok(),
                    ..flags()
                },
                Mode::Direct
            )
            .contains("--start-time needs")
        );
        assert!(
            refused(
                ScopeFlags {
                    full_refresh: true,
                    start_time: parse_start_time("2026-11-30").ok(),
                    ..selected.clone()
                },
                Mode::Virtual
            )
            .contains("cannot be combined")
        );
        assert!(
            refused(
                ScopeFlags {
                    full_refresh: true,
                    ..selected.clone()
                },
                Mode::Direct
            )
            .contains("virtual pipelines only")
        );
        assert!(
            refused(
                ScopeFlags {
                    deployment_id: Some("d1".into()),
                    ..flags()
                },
                Mode::Direct
            )
            .contains("--deployment-id")
        );
    }

    #[test]
    fn sensible_combinations_pass() {
        assert_eq!(validate(&flags(), Mode::Direct), Ok(None));
        let with_start = ScopeFlags {
            changed: true,
            include_missing_upstream: true,
            start_time: parse_start_time("2026-11-30T01:02:03Z").ok(),
            ..flags()
        };
        assert_eq!(
            validate(&with_start, Mode::Direct)
                .expect("valid")
                .map(|s| s.to_string())
                .as_deref(),
            Some("2026-11-30 01:02:03.000")
        );
        let virtual_refresh = ScopeFlags {
            select: vec!["pipeline:pl__orders".into()],
            full_refresh: true,
            deployment_id: Some("d1".into()),
            ..flags()
        };
        assert_eq!(validate(&virtual_refresh, Mode::Virtual), Ok(None));
    }
}
