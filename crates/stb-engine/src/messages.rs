//! The landed Kafka messages of a managed source (`raw__S`), as the dev server's message
//! console browses them. A request is a closed document: a mode (newest, a time range, an
//! offset range of one partition), filters from a fixed list, a limit and a keyset cursor.
//! It is checked here and compiled to SQL whose every value is a literal this module
//! escaped, so no text from a request ever reaches the warehouse as SQL.

use serde::{Deserialize, Serialize};
use stb_ddl::{QualifiedName, string_literal};
use stb_warehouse::Client;

use crate::EngineError;

/// A request that cannot be compiled.
pub const MESSAGES_CODE: &str = "STB-MESSAGES-001";

/// Bytes of a value shown in a listing.
const PREVIEW_BYTES: usize = 512;
/// Bytes of a value shown in one record.
const RECORD_BYTES: usize = 16 * 1024 * 1024;
const MAX_LIMIT: u32 = 500;
const DEFAULT_LIMIT: u32 = 50;
const MAX_PATH_DEPTH: usize = 8;
const MAX_SEGMENT_CHARS: usize = 64;
const MAX_PREVIEW_PATHS: usize = 4;
/// Newest mode looks back this far first, then this far, then without bound.
const NEWEST_WINDOWS: [Option<u64>; 3] = [Some(3600), Some(86_400), None];
/// Facets in newest mode count the last day.
const FACET_WINDOW: u64 = 86_400;
const FACET_VALUES: usize = 20;

fn invalid(message: impl Into<String>) -> EngineError {
    EngineError::new(
        MESSAGES_CODE,
        message,
        "see docs/dev-server.md#messages for the request document",
    )
}

/// Which messages.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(tag = "kind", rename_all = "camelCase", deny_unknown_fields)]
pub enum Mode {
    /// The newest first.
    Newest,
    #[serde(rename_all = "camelCase")]
    TimeRange {
        from_time: Option<String>,
        to_time: Option<String>,
    },
    #[serde(rename_all = "camelCase")]
    OffsetRange {
        partition: Option<u32>,
        from_offset: Option<u64>,
        to_offset: Option<u64>,
    },
}

/// One filter.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Predicate {
    /// `partition`, `key`, `value`, `json` or `header`.
    pub field: String,
    pub op: String,
    pub value: Option<serde_json::Value>,
    pub values: Option<Vec<serde_json::Value>>,
    /// For `json`: a dotted path (`order.customer.id`).
    pub path: Option<String>,
}

/// Where the previous page ended.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Cursor {
    pub landed_at: String,
    pub partition: i32,
    pub offset: i64,
}

/// A listing request.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Request {
    #[serde(default = "newest")]
    pub mode: Mode,
    #[serde(default)]
    pub predicates: Vec<Predicate>,
    pub limit: Option<u32>,
    pub cursor: Option<Cursor>,
    /// `landed` (default) or `kafka`: which time a time range is over.
    pub time_column: Option<String>,
    #[serde(default)]
    pub preview_paths: Vec<String>,
}

fn newest() -> Mode {
    Mode::Newest
}

/// A dotted JSON path as ClickHouse `JSONExtract*` arguments (escaped literals).
///
/// # Errors
/// Empty, deeper than 8, a segment over 64 characters or holding a quote, backtick,
/// backslash or control character.
pub fn json_path(path: &str) -> Result<String, EngineError> {
    let segments: Vec<&str> = path.split('.').collect();
    if path.is_empty() || segments.len() > MAX_PATH_DEPTH {
        return Err(invalid(format!(
            "JSON path '{path}' must have 1 to {MAX_PATH_DEPTH} segments"
        )));
    }
    for segment in &segments {
        let bad = segment.is_empty()
            || segment.chars().count() > MAX_SEGMENT_CHARS
            || segment
                .chars()
                .any(|c| matches!(c, '\'' | '"' | '`' | '\\') || c.is_control());
        if bad {
            return Err(invalid(format!(
                "JSON path segment '{}' must be 1 to {MAX_SEGMENT_CHARS} characters without quotes, backticks, backslashes or control characters",
                segment.escape_debug()
            )));
        }
    }
    Ok(segments
        .iter()
        .map(|s| string_literal(s))
        .collect::<Vec<_>>()
        .join(", "))
}

/// An ISO-8601 time (`2026-12-01`, `2026-12-01T10:00:00`, with fractions, `Z` or an
/// offset; a space for the `T`) as a `DateTime64(3, 'UTC')` expression.
///
/// # Errors
/// Anything else.
pub fn time(text: &str) -> Result<String, EngineError> {
    let bad = || {
        invalid(format!(
            "'{}' is not an ISO-8601 time (2026-12-01T10:00:00Z)",
            text.escape_debug()
        ))
    };
    if !text.is_ascii() || text.len() > 40 {
        return Err(bad());
    }
    let bytes = text.as_bytes();
    let digits = |range: std::ops::Range<usize>| {
        bytes
            .get(range)
            .is_some_and(|b| b.iter().all(u8::is_ascii_digit))
    };
    let date = text.len() >= 10
        && digits(0..4)
        && bytes[4] == b'-'
        && digits(5..7)
        && bytes[7] == b'-'
        && digits(8..10);
    let rest = text.get(10..).unwrap_or("");
    let clock_ok = rest.is_empty()
        || (rest.len() >= 9
            && matches!(rest.as_bytes()[0], b'T' | b' ')
            && digits(11..13)
            && bytes[13] == b':'
            && digits(14..16)
            && bytes[16] == b':'
            && digits(17..19)
            && rest[9..]
                .chars()
                .all(|c| c.is_ascii_digit() || matches!(c, '.' | 'Z' | '+' | '-' | ':')));
    if !date || !clock_ok {
        return Err(bad());
    }
    Ok(format!(
        "parseDateTime64BestEffort({}, 3, 'UTC')",
        string_literal(text)
    ))
}

fn text_value(predicate: &Predicate) -> Result<String, EngineError> {
    match &predicate.value {
        Some(serde_json::Value::String(s)) => Ok(s.clone()),
        Some(serde_json::Value::Number(n)) => Ok(n.to_string()),
        Some(serde_json::Value::Bool(b)) => Ok(b.to_string()),
        _ => Err(invalid(format!(
            "the {} filter '{}' needs a value",
            predicate.field, predicate.op
        ))),
    }
}

fn number_value(predicate: &Predicate) -> Result<f64, EngineError> {
    let number = match &predicate.value {
        Some(serde_json::Value::Number(n)) => n.as_f64(),
        Some(serde_json::Value::String(s)) => s.trim().parse::<f64>().ok(),
        _ => None,
    };
    number.filter(|n| n.is_finite()).ok_or_else(|| {
        invalid(format!(
            "the json filter '{}' compares numbers: its value must be one",
            predicate.op
        ))
    })
}

/// One filter as a condition.
///
/// # Errors
/// A field or operator off the list, or a value it cannot take.
pub fn condition(predicate: &Predicate) -> Result<String, EngineError> {
    let contains =
        |column: &str, value: &str| format!("position({column}, {}) > 0", string_literal(value));
    let op = predicate.op.as_str();
    match (predicate.field.as_str(), op) {
        ("partition", "in") => {
            let values = predicate.values.as_deref().unwrap_or_default();
            let partitions: Option<Vec<u64>> =
                values.iter().map(serde_json::Value::as_u64).collect();
            match partitions {
                Some(list) if !list.is_empty() && list.iter().all(|p| *p <= i32::MAX as u64) => {
                    let list: Vec<String> = list.iter().map(u64::to_string).collect();
                    Ok(format!("kafka_partition IN ({})", list.join(", ")))
                }
                _ => Err(invalid(
                    "the partition filter takes values: a list of partition numbers (0 or more)",
                )),
            }
        }
        ("key", "eq") => Ok(format!(
            "kafka_key = {}",
            string_literal(&text_value(predicate)?)
        )),
        ("key", "contains") => Ok(contains("kafka_key", &text_value(predicate)?)),
        ("key", "prefix") => Ok(format!(
            "startsWith(kafka_key, {})",
            string_literal(&text_value(predicate)?)
        )),
        ("value", "contains") => Ok(contains("kafka_value", &text_value(predicate)?)),
        ("json", _) => {
            let path = json_path(predicate.path.as_deref().unwrap_or_default())?;
            match op {
                "exists" => Ok(format!("JSONHas(kafka_value, {path})")),
                "eq" | "ne" => {
                    let value = string_literal(&text_value(predicate)?);
                    // A string compares by its text, anything else by its JSON.
                    let found = format!(
                        "if(JSONType(kafka_value, {path}) = 'String', JSONExtractString(kafka_value, {path}), JSONExtractRaw(kafka_value, {path}))"
                    );
                    let compare = if op == "eq" { "=" } else { "!=" };
                    Ok(format!(
                        "(JSONHas(kafka_value, {path}) AND {found} {compare} {value})"
                    ))
                }
                "contains" => Ok(contains(
                    &format!("JSONExtractRaw(kafka_value, {path})"),
                    &text_value(predicate)?,
                )),
                "gt" | "lt" => {
                    let number = number_value(predicate)?;
                    let compare = if op == "gt" { ">" } else { "<" };
                    Ok(format!(
                        "(JSONHas(kafka_value, {path}) AND JSONExtractFloat(kafka_value, {path}) {compare} {number:?})"
                    ))
                }
                other => Err(invalid(format!(
                    "the json filter has no operator '{other}' (eq, ne, contains, exists, gt, lt)"
                ))),
            }
        }
        ("header", "eq") => Ok(format!(
            "has(kafka_header_keys, {})",
            string_literal(&text_value(predicate)?)
        )),
        ("header", "contains") => Ok(format!(
            "arrayExists(v -> position(v, {}) > 0, kafka_header_values)",
            string_literal(&text_value(predicate)?)
        )),
        (field, op) => Err(invalid(format!(
            "no filter '{field} {op}' (partition in; key eq, contains, prefix; value contains; json eq, ne, contains, exists, gt, lt; header eq, contains)"
        ))),
    }
}

/// A checked listing: its conditions (without the newest window), limit and previews.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Compiled {
    pub conditions: Vec<String>,
    pub limit: u32,
    pub preview_paths: Vec<String>,
    pub newest: bool,
    pub time_column: &'static str,
}

/// Checks a listing request and compiles its conditions.
///
/// # Errors
/// Anything off the document: see [`condition`], [`json_path`], [`time`].
pub fn compile(request: &Request) -> Result<Compiled, EngineError> {
    let time_column = match request.time_column.as_deref() {
        None | Some("landed") => "kafka_landed_at",
        Some("kafka") => "kafka_timestamp",
        Some(other) => {
            return Err(invalid(format!(
                "timeColumn is landed or kafka, not '{other}'"
            )));
        }
    };
    let mut conditions = Vec::new();
    match &request.mode {
        Mode::Newest => {}
        Mode::TimeRange { from_time, to_time } => {
            if let Some(from) = from_time {
                conditions.push(format!("{time_column} >= {}", time(from)?));
            }
            if let Some(to) = to_time {
                conditions.push(format!("{time_column} < {}", time(to)?));
            }
        }
        Mode::OffsetRange {
            partition,
            from_offset,
            to_offset,
        } => {
            let Some(partition) = partition else {
                return Err(invalid("an offset range needs exactly one partition"));
            };
            conditions.push(format!("kafka_partition = {partition}"));
            if let Some(from) = from_offset {
                conditions.push(format!("kafka_offset >= {from}"));
            }
            if let Some(to) = to_offset {
                conditions.push(format!("kafka_offset <= {to}"));
            }
        }
    }
    for predicate in &request.predicates {
        conditions.push(condition(predicate)?);
    }
    if let Some(cursor) = &request.cursor {
        conditions.push(format!(
            "(kafka_landed_at, kafka_partition, kafka_offset) < ({}, {}, {})",
            time(&cursor.landed_at)?,
            cursor.partition,
            cursor.offset
        ));
    }
    if request.preview_paths.len() > MAX_PREVIEW_PATHS {
        return Err(invalid(format!(
            "at most {MAX_PREVIEW_PATHS} preview paths"
        )));
    }
    let preview_paths = request
        .preview_paths
        .iter()
        .map(|p| json_path(p))
        .collect::<Result<_, _>>()?;
    Ok(Compiled {
        conditions,
        limit: request.limit.unwrap_or(DEFAULT_LIMIT).clamp(1, MAX_LIMIT),
        preview_paths,
        newest: request.mode == Mode::Newest,
        time_column,
    })
}

fn where_clause(conditions: &[String], window: Option<u64>) -> String {
    let mut all = conditions.to_vec();
    if let Some(seconds) = window {
        all.push(format!(
            "kafka_landed_at >= now64(3, 'UTC') - INTERVAL {seconds} SECOND"
        ));
    }
    if all.is_empty() {
        String::new()
    } else {
        format!(" WHERE {}", all.join(" AND "))
    }
}

/// The listing's statement over `relation` within `window` seconds of now.
#[must_use]
pub fn list_sql(compiled: &Compiled, relation: &QualifiedName, window: Option<u64>) -> String {
    let previews: String = compiled
        .preview_paths
        .iter()
        .enumerate()
        .map(|(i, path)| format!(", JSONExtractRaw(kafka_value, {path}) AS preview_{i}"))
        .collect();
    format!(
        "SELECT toString(kafka_landed_at) AS landed_at, toString(kafka_timestamp) AS kafka_timestamp, \
         kafka_partition AS partition, kafka_offset AS offset, kafka_key AS key, length(kafka_key) AS key_bytes, \
         substring(kafka_value, 1, {PREVIEW_BYTES}) AS value_preview, length(kafka_value) AS value_bytes, \
         arrayZip(kafka_header_keys, kafka_header_values) AS headers{previews} \
         FROM {relation}{} \
         ORDER BY kafka_landed_at DESC, kafka_partition DESC, kafka_offset DESC LIMIT {}",
        where_clause(&compiled.conditions, window),
        compiled.limit
    )
}

/// One landed message in a listing.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Row {
    pub landed_at: String,
    pub kafka_timestamp: Option<String>,
    pub partition: i32,
    pub offset: i64,
    pub key: String,
    pub key_bytes: u64,
    pub value_preview: String,
    pub value_bytes: u64,
    pub value_truncated: bool,
    pub headers: Vec<(String, String)>,
    pub preview_values: Vec<Option<String>>,
}

/// A page of messages.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Page {
    pub rows: Vec<Row>,
    /// Where the next page starts; `None` when this one is not full.
    pub next_cursor: Option<Cursor>,
    /// How far back this page looked (`None`: without bound).
    pub window_seconds: Option<u64>,
    pub limit: u32,
}

fn number<T: std::str::FromStr + Default>(
    rows: &stb_warehouse::Rows,
    row: usize,
    column: &str,
) -> T {
    rows.text(row, column)
        .and_then(|t| t.parse().ok())
        .unwrap_or_default()
}

fn headers(rows: &stb_warehouse::Rows, row: usize) -> Vec<(String, String)> {
    let Some(index) = rows.names.iter().position(|n| n == "headers") else {
        return Vec::new();
    };
    rows.data[row]
        .get(index)
        .and_then(serde_json::Value::as_array)
        .map(|pairs| {
            pairs
                .iter()
                .filter_map(|pair| {
                    let pair = pair.as_array()?;
                    Some((
                        pair.first()?.as_str()?.to_owned(),
                        pair.get(1)?.as_str()?.to_owned(),
                    ))
                })
                .collect()
        })
        .unwrap_or_default()
}

fn rows_of(rows: &stb_warehouse::Rows, previews: usize) -> Vec<Row> {
    (0..rows.data.len())
        .map(|r| {
            let value_bytes: u64 = number(rows, r, "value_bytes");
            Row {
                landed_at: rows.text(r, "landed_at").unwrap_or_default(),
                kafka_timestamp: rows.text(r, "kafka_timestamp").filter(|t| !t.is_empty()),
                partition: number(rows, r, "partition"),
                offset: number(rows, r, "offset"),
                key: rows.text(r, "key").unwrap_or_default(),
                key_bytes: number(rows, r, "key_bytes"),
                value_preview: rows.text(r, "value_preview").unwrap_or_default(),
                value_bytes,
                value_truncated: value_bytes > PREVIEW_BYTES as u64,
                headers: headers(rows, r),
                preview_values: (0..previews)
                    .map(|i| {
                        rows.text(r, &format!("preview_{i}"))
                            .filter(|v| !v.is_empty())
                    })
                    .collect(),
            }
        })
        .collect()
}

/// Lists messages of `relation`: in newest mode the last hour first, widened to a day and
/// then without bound until the page is full.
///
/// # Errors
/// The request is off the document, or the read failed.
pub fn list(
    client: &Client,
    relation: &QualifiedName,
    request: &Request,
) -> Result<Page, EngineError> {
    let compiled = compile(request)?;
    let windows: &[Option<u64>] = if compiled.newest {
        &NEWEST_WINDOWS
    } else {
        &[None]
    };
    let mut page = Page {
        rows: Vec::new(),
        next_cursor: None,
        window_seconds: None,
        limit: compiled.limit,
    };
    for window in windows {
        let rows = client
            .query(&list_sql(&compiled, relation, *window))
            .map_err(|e| EngineError::from(&e))?;
        page.rows = rows_of(&rows, compiled.preview_paths.len());
        page.window_seconds = *window;
        if page.rows.len() >= compiled.limit as usize {
            break;
        }
    }
    if page.rows.len() >= compiled.limit as usize {
        page.next_cursor = page.rows.last().map(|last| Cursor {
            landed_at: last.landed_at.clone(),
            partition: last.partition,
            offset: last.offset,
        });
    }
    Ok(page)
}

/// One whole landed message.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Record {
    pub landed_at: String,
    pub kafka_timestamp: Option<String>,
    pub partition: i32,
    pub offset: i64,
    pub topic: String,
    pub key: String,
    pub key_bytes: u64,
    /// Up to 16 MiB of it.
    pub value: String,
    pub value_bytes: u64,
    pub value_truncated: bool,
    pub headers: Vec<(String, String)>,
}

/// The message at `partition` and `offset`, if it landed (the newest landing of it).
///
/// # Errors
/// The read failed.
pub fn record(
    client: &Client,
    relation: &QualifiedName,
    partition: i32,
    offset: i64,
) -> Result<Option<Record>, EngineError> {
    let rows = client
        .query(&format!(
            "SELECT toString(kafka_landed_at) AS landed_at, toString(kafka_timestamp) AS kafka_timestamp, \
             kafka_partition AS partition, kafka_offset AS offset, kafka_topic AS topic, kafka_key AS key, \
             length(kafka_key) AS key_bytes, substring(kafka_value, 1, {RECORD_BYTES}) AS value, \
             length(kafka_value) AS value_bytes, arrayZip(kafka_header_keys, kafka_header_values) AS headers \
             FROM {relation} WHERE kafka_partition = {partition} AND kafka_offset = {offset} \
             ORDER BY kafka_landed_at DESC LIMIT 1"
        ))
        .map_err(|e| EngineError::from(&e))?;
    if rows.data.is_empty() {
        return Ok(None);
    }
    let value_bytes: u64 = number(&rows, 0, "value_bytes");
    Ok(Some(Record {
        landed_at: rows.text(0, "landed_at").unwrap_or_default(),
        kafka_timestamp: rows.text(0, "kafka_timestamp").filter(|t| !t.is_empty()),
        partition: number(&rows, 0, "partition"),
        offset: number(&rows, 0, "offset"),
        topic: rows.text(0, "topic").unwrap_or_default(),
        key: rows.text(0, "key").unwrap_or_default(),
        key_bytes: number(&rows, 0, "key_bytes"),
        value: rows.text(0, "value").unwrap_or_default(),
        value_bytes,
        value_truncated: value_bytes > RECORD_BYTES as u64,
        headers: headers(&rows, 0),
    }))
}

/// The commonest values at one JSON path.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Facets {
    /// Up to 20, commonest first: the value's JSON text and its count.
    pub values: Vec<(String, u64)>,
    /// Messages without the path.
    pub null_count: u64,
    /// Messages with a value outside the top 20.
    pub other_count: u64,
    pub total_count: u64,
    pub window_seconds: Option<u64>,
}

/// Counts the values at `path` over the messages `request` selects (newest mode: the last
/// day).
///
/// # Errors
/// The request or path is off the document, or the read failed.
pub fn facets(
    client: &Client,
    relation: &QualifiedName,
    request: &Request,
    path: &str,
) -> Result<Facets, EngineError> {
    let compiled = compile(request)?;
    let path = json_path(path)?;
    let window = compiled.newest.then_some(FACET_WINDOW);
    let filter = where_clause(&compiled.conditions, window);
    let read = |sql: String| client.query(&sql).map_err(|e| EngineError::from(&e));
    let totals = read(format!(
        "SELECT count() AS total, countIf(NOT JSONHas(kafka_value, {path})) AS nulls FROM {relation}{filter}"
    ))?;
    let top = read(format!(
        "SELECT JSONExtractRaw(kafka_value, {path}) AS value, count() AS n FROM {relation}{filter}{} \
         JSONHas(kafka_value, {path}) GROUP BY value ORDER BY n DESC, value LIMIT {FACET_VALUES}",
        if filter.is_empty() { " WHERE" } else { " AND" }
    ))?;
    let values: Vec<(String, u64)> = (0..top.data.len())
        .map(|r| {
            (
                top.text(r, "value").unwrap_or_default(),
                number(&top, r, "n"),
            )
        })
        .collect();
    let total_count: u64 = number(&totals, 0, "total");
    let null_count: u64 = number(&totals, 0, "nulls");
    let shown: u64 = values.iter().map(|(_, n)| n).sum();
    Ok(Facets {
        values,
        null_count,
        other_count: total_count.saturating_sub(null_count).saturating_sub(shown),
        total_count,
        window_seconds: window,
    })
}

#[cfg(test)]
mod tests;
