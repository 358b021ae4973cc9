//! Replay boundaries: the capture query that measures what the driving input holds, the
//! predicate that bounds the replay to it, and the replay `INSERT` itself.
//!
//! The boundary filter is always applied to the driving input, inside a subquery that
//! replaces the input's reference in the author's query. That keeps aggregates honest (the
//! `GROUP BY` sees only the window), filters offsets on the landed rows before any parsing
//! (reference fix 0.40.1), and cannot hide a column the author did not project (the
//! reference's outer-`WHERE` variant had to parenthesise authored `OR`s and needed the
//! boundary columns in the output). For row-wise queries both placements select the same
//! rows.

use crate::options::StartTime;

pub mod chunks;

/// How a pipeline's rows are positioned in their retained history.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum BoundaryMode {
    /// Per-partition offsets (Kafka landing, adopted tables with partition and offset).
    Offsets,
    /// The event timestamp.
    Timestamp,
    /// When the row landed (managed Kafka sources).
    LandedAt,
    /// A monotonically increasing cursor column (adopted tables).
    Cursor,
}

pub const PARTITION: &str = "_replay_partition";
pub const OFFSET: &str = "_replay_offset";
pub const TIMESTAMP: &str = "_replay_timestamp";
pub const LANDED_AT: &str = "_replay_landed_at";
pub const CURSOR: &str = "_replay_cursor";

impl BoundaryMode {
    #[must_use]
    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "offsets" => Some(Self::Offsets),
            "timestamp" => Some(Self::Timestamp),
            "landed_at" => Some(Self::LandedAt),
            "cursor" => Some(Self::Cursor),
            _ => None,
        }
    }

    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Offsets => "offsets",
            Self::Timestamp => "timestamp",
            Self::LandedAt => "landed_at",
            Self::Cursor => "cursor",
        }
    }

    /// The column whose value bounds a scalar replay.
    pub fn scalar_column(self) -> &'static str {
        match self {
            Self::Timestamp => TIMESTAMP,
            Self::LandedAt => LANDED_AT,
            Self::Cursor => CURSOR,
            Self::Offsets => OFFSET,
        }
    }
}

/// The columns a mode needs on the driving input; `time_column` is the one a start time
/// is compared with, when one is given.
///
/// # Errors
/// The first missing column, by name.
pub fn required_columns(
    mode: BoundaryMode,
    available: &[String],
    with_start_time: bool,
) -> Result<Option<&'static str>, String> {
    let has = |c: &str| available.iter().any(|a| a == c);
    let needed = stb_model::planning::lineage_columns(mode.as_str());
    if let Some(missing) = needed.iter().find(|c| !has(c)) {
        return Err((*missing).to_owned());
    }
    if !with_start_time {
        return Ok(None);
    }
    let time = match mode {
        // The landing time is what "landed at or before T" means; the event time is the
        // fallback for adopted tables, which have no landing stamp.
        BoundaryMode::Offsets if has(LANDED_AT) => LANDED_AT,
        BoundaryMode::Offsets | BoundaryMode::Cursor | BoundaryMode::Timestamp => TIMESTAMP,
        BoundaryMode::LandedAt => LANDED_AT,
    };
    if has(time) {
        Ok(Some(time))
    } else {
        Err(time.to_owned())
    }
}

/// What a replay reads: the driving input as the model's query references it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Anchor {
    /// The relation text (`db.raw__orders`, or an aliasing subquery for adopted tables).
    pub relation: String,
    pub mode: BoundaryMode,
    /// The column a `--start-time` is compared with, when one is given.
    #[serde(deserialize_with = "lineage_names::column")]
    pub time_column: lineage_names::Column,
    /// On a sharded cluster, the shard's own part of the relation (`<name>_local`): a
    /// replay on a shard reads and bounds only the rows that shard holds, under the
    /// relation's name.
    pub local: Option<String>,
}

impl Anchor {
    /// What the statements read the rows from: the shard's part when there is one.
    #[must_use]
    pub fn read_from(&self) -> &str {
        self.local.as_deref().unwrap_or(&self.relation)
    }
}

pub(crate) fn time_literal(value: &str) -> String {
    format!("toDateTime64({}, 3, 'UTC')", stb_ddl::string_literal(value))
}

/// The capture query: run after the new views have been live for the stabilisation
/// period, with the warehouse's clock. Offsets: one row per contiguous run of present
/// offsets per partition (`partition, run_lower, run_upper, captured_at`). Scalar modes:
/// one row (`cutoff, lower, rows, captured_at`).
#[must_use]
pub fn capture_sql(anchor: &Anchor, start: Option<&StartTime>) -> String {
    let relation = anchor.read_from();
    let captured_at = "toString(now64(3, 'UTC')) AS captured_at";
    match anchor.mode {
        BoundaryMode::Offsets => {
            let positions = match (start, anchor.time_column) {
                (Some(start), Some(time)) => start_positions(relation, time, start),
                _ => format!("SELECT {PARTITION} AS p, {OFFSET} AS o FROM {relation}"),
            };
            // A partition whose distinct offsets fill [min, max] is one run: counted with a
            // bitmap (runs of integers compress), it costs a fraction of numbering every
            // offset, which took twice the replay itself at 20 million rows. Only partitions
            // with gaps are split into runs (gaps and islands). The offsets go through
            // toUInt64, a bijection on every integer type, so the count stays exact.
            let distinct = "groupBitmap(toUInt64(o))";
            let span = "toInt128(max(o)) - toInt128(min(o)) + 1";
            format!(
                "SELECT toString(p) AS partition, toString(lo) AS run_lower, \
                 toString(hi) AS run_upper, {captured_at} FROM (\
                 SELECT p, min(o) AS lo, max(o) AS hi FROM ({positions}) \
                 GROUP BY p HAVING toInt128({distinct}) = {span} \
                 UNION ALL \
                 SELECT p, min(o) AS lo, max(o) AS hi \
                 FROM (SELECT p, o, toInt64(o) - toInt64(row_number() OVER (PARTITION BY p ORDER BY o)) AS island \
                 FROM (SELECT DISTINCT p, o FROM ({positions}) WHERE p IN \
                 (SELECT p FROM ({positions}) GROUP BY p HAVING toInt128({distinct}) != {span}))) \
                 GROUP BY p, island) ORDER BY p, lo \
                 SETTINGS join_use_nulls = 0"
            )
        }
        BoundaryMode::Cursor => {
            let (lower, rows) = match (start, anchor.time_column) {
                (Some(start), Some(time)) => {
                    let since = format!("{time} >= {}", time_literal(start.as_str()));
                    (
                        format!("toString(minIf({CURSOR}, {since}))"),
                        format!("countIf({since})"),
                    )
                }
                _ => (format!("toString(min({CURSOR}))"), "count()".to_owned()),
            };
            format!(
                "SELECT toString(max({CURSOR})) AS cutoff, {lower} AS lower, {rows} AS rows, \
                 {captured_at} FROM {relation}"
            )
        }
        BoundaryMode::Timestamp | BoundaryMode::LandedAt => {
            let column = anchor.mode.scalar_column();
            let window = start.map_or_else(String::new, |s| {
                format!(" WHERE {column} >= {}", time_literal(s.as_str()))
            });
            // `upper`: the last position present at or below the cutoff, for the coverage.
            format!(
                "SELECT toString(now64(3, 'UTC')) AS cutoff, toString(min({column})) AS lower, \
                 toString(maxIf({column}, {column} <= now64(3, 'UTC'))) AS upper, \
                 count() AS rows, {captured_at} FROM {relation}{window}"
            )
        }
    }
}

/// The positions (`p`, `o`) an offsets replay bounded by `start` covers: the inclusive
/// frontier, per partition the last offset landed at or before T and everything after it;
/// partitions with nothing that old replay whole (the LEFT JOIN's default frontier is 0).
fn start_positions(relation: &str, time: &str, start: &StartTime) -> String {
    format!(
        "SELECT DISTINCT r.{PARTITION} AS p, r.{OFFSET} AS o FROM {relation} AS r \
         LEFT JOIN (SELECT {PARTITION} AS fp, max({OFFSET}) AS fo FROM {relation} \
         WHERE {time} <= {} GROUP BY fp) AS f ON r.{PARTITION} = f.fp \
         WHERE r.{OFFSET} >= f.fo",
        time_literal(start.as_str())
    )
}

/// The window a replay would read if its boundary were taken now, as a predicate on the
/// driving input: everything retained (up to the warehouse's clock in the time modes),
/// from `start` on when one is given. The build captures the same window at its boundary;
/// the plan uses this to measure it before anything is dropped.
#[must_use]
pub fn window_now(anchor: &Anchor, start: Option<&StartTime>) -> String {
    let relation = anchor.read_from();
    match (anchor.mode, start, anchor.time_column) {
        (BoundaryMode::Offsets, Some(start), Some(time)) => format!(
            "({PARTITION}, {OFFSET}) IN (SELECT p, o FROM ({}))",
            start_positions(relation, time, start)
        ),
        (BoundaryMode::Cursor, Some(start), Some(time)) => {
            let since = format!("{time} >= {}", time_literal(start.as_str()));
            format!(
                "{CURSOR} >= (SELECT minIf({CURSOR}, {since}) FROM {relation}) \
                 AND (SELECT countIf({since}) FROM {relation}) > 0"
            )
        }
        (BoundaryMode::Timestamp | BoundaryMode::LandedAt, start, _) => {
            let column = anchor.mode.scalar_column();
            let mut window = format!("{column} <= now64(3, 'UTC')");
            if let Some(start) = start {
                window.push_str(&format!(
                    " AND {column} >= {}",
                    time_literal(start.as_str())
                ));
            }
            window
        }
        (BoundaryMode::Offsets | BoundaryMode::Cursor, _, _) => "1".to_owned(),
    }
}

/// One run of present offsets in one partition.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct OffsetRun {
    pub partition: i128,
    pub lower: i128,
    pub upper: i128,
}

/// What a capture found.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Capture {
    Offsets {
        runs: Vec<OffsetRun>,
        captured_at: Option<String>,
    },
    Scalar {
        /// `None`: nothing to replay.
        cutoff: Option<String>,
        /// The predicate's lower bound (`None`: unbounded below).
        lower: Option<String>,
        /// The first and last positions present in the window, for the coverage.
        first: Option<String>,
        last: Option<String>,
        /// The rows in the window at the capture (what a chunked replay is cut by).
        rows: u128,
        captured_at: Option<String>,
    },
}

impl Capture {
    #[must_use]
    pub fn captured_at(&self) -> Option<&str> {
        match self {
            Self::Offsets { captured_at, .. } | Self::Scalar { captured_at, .. } => {
                captured_at.as_deref()
            }
        }
    }
}

fn integer(text: &str, what: &str) -> Result<i128, String> {
    text.parse()
        .map_err(|_| format!("capture returned a {what} that is not an integer: '{text}'"))
}

/// Reads a capture's rows (by column name through `cell`), checking every value: they are
/// spliced into the replay statement, so only integers and timestamps pass.
///
/// # Errors
/// A row that does not have the shape the capture query produces.
pub fn parse_capture(
    anchor: &Anchor,
    start: Option<&StartTime>,
    rows: usize,
    cell: &dyn Fn(usize, &str) -> Option<String>,
) -> Result<Capture, String> {
    let captured_at = (rows > 0)
        .then(|| cell(0, "captured_at"))
        .flatten()
        .map(|t| check_time(&t))
        .transpose()?;
    match anchor.mode {
        BoundaryMode::Offsets => {
            let mut runs = Vec::with_capacity(rows);
            for row in 0..rows {
                let get = |c: &str| cell(row, c).ok_or_else(|| format!("capture row lacks {c}"));
                runs.push(OffsetRun {
                    partition: integer(&get("partition")?, "partition")?,
                    lower: integer(&get("run_lower")?, "offset")?,
                    upper: integer(&get("run_upper")?, "offset")?,
                });
            }
            Ok(Capture::Offsets { runs, captured_at })
        }
        mode => {
            if rows != 1 {
                return Err(format!("capture returned {rows} rows instead of one"));
            }
            let count = integer(&cell(0, "rows").unwrap_or_default(), "row count")?;
            if count == 0 {
                return Ok(Capture::Scalar {
                    cutoff: None,
                    lower: None,
                    first: None,
                    last: None,
                    rows: 0,
                    captured_at,
                });
            }
            let check = |value: String| {
                if mode == BoundaryMode::Cursor {
                    integer(&value, "cursor").map(|v| v.to_string())
                } else {
                    check_time(&value)
                }
            };
            let cutoff = cell(0, "cutoff").map(check).transpose()?;
            // A scalar window starts at T itself; without one the replay is unbounded below.
            let lower = match (mode, start) {
                (BoundaryMode::Cursor, Some(_)) => cell(0, "lower").map(check).transpose()?,
                (_, Some(start)) => Some(start.as_str().to_owned()),
                (_, None) => None,
            };
            let first = cell(0, "lower").map(check).transpose()?;
            let last = match mode {
                BoundaryMode::Cursor => cutoff.clone(),
                _ => cell(0, "upper").map(check).transpose()?,
            };
            Ok(Capture::Scalar {
                cutoff,
                lower,
                first,
                last,
                rows: count.unsigned_abs(),
                captured_at,
            })
        }
    }
}

/// Per partition, in first-seen order: (partition, lowest offset, highest offset) of its
/// runs.
pub(crate) fn partition_bounds(runs: &[OffsetRun]) -> Vec<(i128, i128, i128)> {
    let mut partitions: Vec<(i128, i128, i128)> = Vec::new();
    for run in runs {
        match partitions.iter_mut().find(|p| p.0 == run.partition) {
            Some(p) => {
                p.1 = p.1.min(run.lower);
                p.2 = p.2.max(run.upper);
            }
            None => partitions.push((run.partition, run.lower, run.upper)),
        }
    }
    partitions
}

/// What a replay covered, one row per partition (offsets) or one row (scalar modes): the
/// spec's capture-row fields, recorded with the run for every mode.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Coverage {
    pub driving_input_relation_name: String,
    pub replay_boundary_mode: &'static str,
    /// `_replay_partition=<p>`, or `_replay_<mode>`.
    pub boundary_key: String,
    pub partition_value: Option<String>,
    pub source_partition_column_name: Option<&'static str>,
    pub source_position_column_name: &'static str,
    /// The column a `--start-time` is compared with, when one bounds the window.
    pub source_timestamp_column_name: Option<&'static str>,
    /// The first position replayed (`None`: nothing was).
    pub lower_value: Option<String>,
    /// The last position present at the capture.
    pub upper_value: Option<String>,
    pub replay_cutoff_value: Option<String>,
    pub cutoff_inclusive: bool,
}

/// The coverage of `capture` on `anchor`'s input, bounded below by `start` when given.
#[must_use]
pub fn coverage(anchor: &Anchor, capture: &Capture, start: Option<&StartTime>) -> Vec<Coverage> {
    let row = |key: String, partition: Option<String>, lower, upper, cutoff| Coverage {
        driving_input_relation_name: anchor.relation.clone(),
        replay_boundary_mode: anchor.mode.as_str(),
        boundary_key: key,
        source_partition_column_name: partition.as_ref().map(|_| PARTITION),
        partition_value: partition,
        source_position_column_name: anchor.mode.scalar_column(),
        source_timestamp_column_name: start.and(anchor.time_column),
        lower_value: lower,
        upper_value: upper,
        replay_cutoff_value: cutoff,
        cutoff_inclusive: true,
    };
    match capture {
        Capture::Offsets { runs, .. } => {
            let partitions = partition_bounds(runs);
            partitions
                .into_iter()
                .map(|(partition, lower, upper)| {
                    row(
                        format!("{PARTITION}={partition}"),
                        Some(partition.to_string()),
                        Some(lower.to_string()),
                        Some(upper.to_string()),
                        Some(upper.to_string()),
                    )
                })
                .collect()
        }
        Capture::Scalar {
            cutoff,
            lower,
            first,
            last,
            ..
        } => vec![row(
            anchor.mode.scalar_column().to_owned(),
            None,
            if cutoff.is_some() {
                lower.clone().or_else(|| first.clone())
            } else {
                None
            },
            last.clone(),
            cutoff.clone(),
        )],
    }
}

/// `YYYY-MM-DD HH:MM:SS[.fff...]` only.
fn check_time(text: &str) -> Result<String, String> {
    let ok = text.len() >= 19
        && text.bytes().enumerate().all(|(i, b)| match i {
            4 | 7 => b == b'-',
            10 => b == b' ',
            13 | 16 => b == b':',
            19 => b == b'.',
            _ => b.is_ascii_digit(),
        });
    if ok {
        Ok(text.to_owned())
    } else {
        Err(format!("capture returned an unreadable time '{text}'"))
    }
}

/// The boundary predicate on the driving input's canonical columns; `0` when the capture
/// found nothing (an empty capture replays nothing, never everything).
#[must_use]
pub fn predicate(mode: BoundaryMode, capture: &Capture, start: Option<&StartTime>) -> String {
    match capture {
        Capture::Offsets { runs, .. } => {
            let partitions = partition_bounds(runs);
            if partitions.is_empty() {
                return "0".to_owned();
            }
            partitions
                .iter()
                .map(|&(partition, lower, cutoff)| {
                    offset_range(partition, start.is_some().then_some(lower), cutoff)
                })
                .collect::<Vec<_>>()
                .join(" OR ")
        }
        Capture::Scalar { cutoff: None, .. } => "0".to_owned(),
        Capture::Scalar {
            cutoff: Some(cutoff),
            lower,
            ..
        } => {
            let column = mode.scalar_column();
            let mut text = format!("{column} <= {}", position_literal(mode, cutoff));
            if let Some(lower) = lower {
                text.push_str(&format!(
                    " AND {column} >= {}",
                    position_literal(mode, lower)
                ));
            }
            text
        }
    }
}

/// One partition's offsets from `lower` (`None`: open below) to `upper`, inclusive, as a
/// predicate on the driving input.
pub(crate) fn offset_range(partition: i128, lower: Option<i128>, upper: i128) -> String {
    let floor = lower.map_or_else(String::new, |lower| format!(" AND {OFFSET} >= {lower}"));
    format!("({PARTITION} = {partition} AND {OFFSET} <= {upper}{floor})")
}

/// A checked scalar position (a cursor's integer, a time) as the predicates compare it.
pub(crate) fn position_literal(mode: BoundaryMode, value: &str) -> String {
    if mode == BoundaryMode::Cursor {
        value.to_owned()
    } else {
        time_literal(value)
    }
}

/// Lineage names as a recorded workflow (a suspended build's resume point) holds them,
/// read back as the constants they were written from: a name no build writes is refused.
pub(crate) mod lineage_names {
    use super::{CURSOR, LANDED_AT, OFFSET, PARTITION, TIMESTAMP};
    use serde::Deserialize as _;

    /// A lineage column's name. Named so the derive reads the field through
    /// [`column`] without taking the reference for a borrow from the input (which would
    /// tie every deserializer to `'static` input).
    pub(crate) type Column = Option<&'static str>;

    const COLUMNS: [&str; 5] = [PARTITION, OFFSET, TIMESTAMP, LANDED_AT, CURSOR];
    const KEYS: [&[&str]; 2] = [&[PARTITION, OFFSET], &[CURSOR]];

    pub(crate) fn column<'de, D: serde::Deserializer<'de>>(
        deserializer: D,
    ) -> Result<Option<&'static str>, D::Error> {
        Option::<String>::deserialize(deserializer)?
            .map(|name| {
                COLUMNS
                    .into_iter()
                    .find(|known| *known == name)
                    .ok_or_else(|| serde::de::Error::custom(format!("no lineage column '{name}'")))
            })
            .transpose()
    }

    pub(crate) fn keys<'de, D: serde::Deserializer<'de>>(
        deserializer: D,
    ) -> Result<Option<&'static [&'static str]>, D::Error> {
        Option::<Vec<String>>::deserialize(deserializer)?
            .map(|names| {
                KEYS.into_iter()
                    .find(|known| known.iter().eq(names.iter()))
                    .ok_or_else(|| serde::de::Error::custom(format!("no lineage key {names:?}")))
            })
            .transpose()
    }
}

/// A replay statement before its boundary is known.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ReplayTemplate {
    /// The root's table, qualified.
    pub target: String,
    /// The model's compiled query split at each reference to the driving input.
    pub query_parts: Vec<String>,
    pub anchor: Anchor,
    /// Appended as `SETTINGS k = v`.
    pub settings: Vec<(String, String)>,
    /// Lineage key columns the root keeps one-to-one from its input: rows whose key the
    /// new view already wrote are left out of the replay (see [`existing_keys`]).
    #[serde(deserialize_with = "lineage_names::keys")]
    pub skip_existing: Option<&'static [&'static str]>,
}

/// The lineage key a lineage-preserving, non-aggregating root carries unchanged from its
/// input, when the mode has one: (partition, offset) or the cursor. Timestamps are not
/// unique, so timestamp and landed-at replays keep the overlap window.
#[must_use]
pub fn existing_keys(
    mode: BoundaryMode,
    aggregate: bool,
    output_columns: &[String],
) -> Option<&'static [&'static str]> {
    let keys: &'static [&'static str] = match mode {
        BoundaryMode::Offsets => &[PARTITION, OFFSET],
        BoundaryMode::Cursor => &[CURSOR],
        BoundaryMode::Timestamp | BoundaryMode::LandedAt => return None,
    };
    (!aggregate && keys.iter().all(|k| output_columns.iter().any(|c| c == k))).then_some(keys)
}

/// Words that can follow a relation in `FROM`/`JOIN` without being its alias.
const NOT_AN_ALIAS: &[&str] = &[
    "WHERE",
    "GROUP",
    "ORDER",
    "LIMIT",
    "JOIN",
    "INNER",
    "LEFT",
    "RIGHT",
    "FULL",
    "CROSS",
    "ANY",
    "ALL",
    "ASOF",
    "SEMI",
    "ANTI",
    "ARRAY",
    "GLOBAL",
    "PREWHERE",
    "HAVING",
    "UNION",
    "SETTINGS",
    "FINAL",
    "SAMPLE",
    "ON",
    "USING",
    "WINDOW",
    "QUALIFY",
    "FORMAT",
    "INTERSECT",
    "EXCEPT",
    "PASTE",
    "OFFSET",
    "INTO",
];

/// True when the text after a relation starts with its alias (`AS x` or a bare name).
pub(crate) fn alias_follows(rest: &str) -> bool {
    let word: String = rest
        .trim_start()
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == '`' || *c == '"')
        .collect();
    !word.is_empty() && !NOT_AN_ALIAS.contains(&word.to_ascii_uppercase().as_str())
}

/// Numbers and booleans bare, anything else as a string literal.
fn setting_value(value: &str) -> String {
    if value.parse::<f64>().is_ok() || value == "true" || value == "false" {
        value.to_owned()
    } else {
        stb_ddl::string_literal(value)
    }
}

impl ReplayTemplate {
    /// The `INSERT` that replays the window `predicate` selects.
    #[must_use]
    pub fn render(&self, predicate: &str) -> String {
        self.render_within(predicate, None)
    }

    /// The `INSERT` that replays one chunk of a window: its already-written check looks
    /// only among the chunk's keys (its predicate compares nothing else in the modes that
    /// have such a check), so a chunk does not read every key the chunks before it wrote.
    #[must_use]
    pub fn render_chunk(&self, chunk: &chunks::Chunk) -> String {
        let keys_only = chunks::reads_only_keys(self.anchor.mode);
        self.render_within(&chunk.predicate, keys_only.then_some(&chunk.predicate))
    }

    fn render_within(&self, predicate: &str, written_within: Option<&String>) -> String {
        // The target was created empty by this build, so every key in it was written by
        // the new view since it went live: replaying those rows again would double them.
        let predicate = match self.skip_existing {
            Some(keys) => {
                let keys = keys.join(", ");
                let within =
                    written_within.map_or_else(String::new, |filter| format!(" WHERE {filter}"));
                format!(
                    "({predicate}) AND ({keys}) NOT IN (SELECT {keys} FROM {}{within})",
                    self.target
                )
            }
            None => predicate.to_owned(),
        };
        let mut statement = format!("INSERT INTO {} {}", self.target, self.select(&predicate));
        if !self.settings.is_empty() {
            let settings: Vec<String> = self
                .settings
                .iter()
                .map(|(k, v)| format!("{k} = {}", setting_value(v)))
                .collect();
            statement.push_str(&format!(" SETTINGS {}", settings.join(", ")));
        }
        statement
    }

    /// The model's query with its driving input narrowed to `predicate`: the rows a replay
    /// of that window writes (before the build's own already-written-key check).
    #[must_use]
    pub fn select(&self, predicate: &str) -> String {
        let named = &self.anchor.relation;
        let relation = self.anchor.read_from();
        // A plain table keeps its name visible to qualified column references (a shard's
        // part is read under the name of the relation it is part of).
        let bare = (!named.starts_with('(')).then(|| named.rsplit('.').next().unwrap_or(named));
        let mut query = String::new();
        for (index, part) in self.query_parts.iter().enumerate() {
            if index > 0 {
                query.push_str(&format!("(SELECT * FROM {relation} WHERE {predicate})"));
                if let Some(name) = bare
                    && !alias_follows(part)
                {
                    query.push_str(&format!(" AS {name}"));
                }
            }
            query.push_str(part);
        }
        let mut query = query.trim_end().to_owned();
        while query.ends_with(';') {
            query.pop();
            query.truncate(query.trim_end().len());
        }
        query
    }
}

#[cfg(test)]
mod tests;
