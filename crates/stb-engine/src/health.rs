//! The warehouse's health as the dev server's state snapshot shows it: disks, memory,
//! what is running, the Kafka consumers of the target and the project's footprint. Each
//! part is read on its own; one that cannot be read (an older server without
//! `system.kafka_consumers`, a permission) is reported as an error beside the others, so
//! health never fails as a whole.

use serde::Serialize;
use stb_warehouse::{Client, Rows, WarehouseError};

/// One disk of the server.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Disk {
    pub name: String,
    pub path: String,
    pub free_bytes: u64,
    pub total_bytes: u64,
}

/// The server's memory against the machine's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Memory {
    pub resident_bytes: Option<u64>,
    pub total_bytes: Option<u64>,
    /// `resident` (the process's resident set, `system.asynchronous_metrics`) or `tracked`
    /// (what the server's allocator tracks, `system.metrics`: servers without the
    /// asynchronous metrics, the local engine among them, have no machine total).
    pub measure: &'static str,
}

/// What the server is doing now.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Activity {
    pub running_queries: u64,
    pub running_merges: u64,
}

/// The Kafka consumers of one table of the target.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct KafkaConsumers {
    pub table: String,
    pub consumers: u64,
    pub messages_read: u64,
    pub last_poll_time: Option<String>,
    /// The newest exception any of its consumers recorded.
    pub last_exception: Option<String>,
}

/// The target's active parts, summed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Footprint {
    pub tables: u64,
    pub parts: u64,
    pub rows: u64,
    pub bytes_on_disk: u64,
}

/// A part of health that could not be read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Unreadable {
    pub part: &'static str,
    /// Why, in a sentence (what the UI shows).
    pub message: String,
    /// The server's own words, for whoever needs them.
    pub detail: String,
}

/// ClickHouse's code for a read the user has no grant for.
const ACCESS_DENIED: u32 = 497;

impl Unreadable {
    fn new(part: &'static str, error: WarehouseError) -> Self {
        use stb_warehouse::ErrorKind;
        let message = match error.kind {
            ErrorKind::RelationNotFound => "this server does not offer it".to_owned(),
            _ if error.server_code == Some(ACCESS_DENIED) => "this user may not read it".to_owned(),
            ErrorKind::Authentication => "the server did not accept the credentials".to_owned(),
            ErrorKind::Timeout => "the server did not answer in time".to_owned(),
            ErrorKind::DatabaseNotFound => "the target database does not exist yet".to_owned(),
            ErrorKind::Other => match error.server_code {
                Some(code) => format!("the server refused the read (ClickHouse code {code})"),
                None => "the server refused the read".to_owned(),
            },
        };
        Self {
            part,
            message,
            detail: error.message,
        }
    }
}

/// Everything read; a part that could not be read is `None` and named in `errors`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Health {
    pub disks: Option<Vec<Disk>>,
    pub memory: Option<Memory>,
    pub activity: Option<Activity>,
    pub kafka_consumers: Option<Vec<KafkaConsumers>>,
    pub footprint: Option<Footprint>,
    pub errors: Vec<Unreadable>,
}

fn number(rows: &Rows, row: usize, column: &str) -> u64 {
    rows.text(row, column)
        .and_then(|t| t.parse::<f64>().ok())
        .map_or(0, |v| {
            if v.is_finite() && v > 0.0 {
                v as u64
            } else {
                0
            }
        })
}

fn text(rows: &Rows, row: usize, column: &str) -> Option<String> {
    rows.text(row, column).filter(|t| !t.is_empty())
}

fn disks(client: &Client) -> Result<Vec<Disk>, WarehouseError> {
    let rows = client.query(
        "SELECT name, path, toString(free_space) AS free, toString(total_space) AS total \
         FROM system.disks ORDER BY name",
    )?;
    Ok((0..rows.data.len())
        .map(|r| Disk {
            name: text(&rows, r, "name").unwrap_or_default(),
            path: text(&rows, r, "path").unwrap_or_default(),
            free_bytes: number(&rows, r, "free"),
            total_bytes: number(&rows, r, "total"),
        })
        .collect())
}

fn memory(client: &Client) -> Result<Memory, WarehouseError> {
    let resident = client.query(
        "SELECT metric, toString(value) AS value FROM system.asynchronous_metrics \
         WHERE metric IN ('MemoryResident', 'OSMemoryTotal')",
    );
    let (rows, measure) = match resident {
        Ok(rows) => (rows, "resident"),
        // A server without the asynchronous metrics still tracks its allocations.
        Err(error) if error.kind == stb_warehouse::ErrorKind::RelationNotFound => (
            client.query(
                "SELECT metric, toString(value) AS value FROM system.metrics \
                 WHERE metric = 'MemoryTracking'",
            )?,
            "tracked",
        ),
        Err(error) => return Err(error),
    };
    let find = |metric: &str| {
        (0..rows.data.len())
            .find(|r| rows.text(*r, "metric").as_deref() == Some(metric))
            .map(|r| number(&rows, r, "value"))
    };
    Ok(Memory {
        resident_bytes: find("MemoryResident").or_else(|| find("MemoryTracking")),
        total_bytes: find("OSMemoryTotal"),
        measure,
    })
}

fn activity(client: &Client) -> Result<Activity, WarehouseError> {
    let rows = client.query(
        "SELECT toString((SELECT count() FROM system.processes)) AS queries, \
         toString((SELECT count() FROM system.merges)) AS merges",
    )?;
    Ok(Activity {
        // This read is itself one of the running queries.
        running_queries: number(&rows, 0, "queries").saturating_sub(1),
        running_merges: number(&rows, 0, "merges"),
    })
}

fn kafka_consumers(client: &Client, database: &str) -> Result<Vec<KafkaConsumers>, WarehouseError> {
    let db = stb_ddl::string_literal(database);
    let rows = client.query(&format!(
        "SELECT table, toString(count()) AS consumers, \
         toString(sum(num_messages_read)) AS messages, \
         toString(max(last_poll_time)) AS last_poll, \
         argMax(arrayElement(exceptions.text, -1), arrayElement(exceptions.time, -1)) AS last_exception \
         FROM system.kafka_consumers WHERE database = {db} GROUP BY table ORDER BY table"
    ))?;
    Ok((0..rows.data.len())
        .map(|r| KafkaConsumers {
            table: text(&rows, r, "table").unwrap_or_default(),
            consumers: number(&rows, r, "consumers"),
            messages_read: number(&rows, r, "messages"),
            last_poll_time: text(&rows, r, "last_poll").filter(|t| !t.starts_with("1970-01-01")),
            last_exception: text(&rows, r, "last_exception"),
        })
        .collect())
}

fn footprint(client: &Client, database: &str) -> Result<Footprint, WarehouseError> {
    let db = stb_ddl::string_literal(database);
    let rows = client.query(&format!(
        "SELECT toString(uniqExact(table)) AS tables, toString(count()) AS parts, \
         toString(sum(rows)) AS rows, toString(sum(bytes_on_disk)) AS bytes \
         FROM system.parts WHERE database = {db} AND active"
    ))?;
    Ok(Footprint {
        tables: number(&rows, 0, "tables"),
        parts: number(&rows, 0, "parts"),
        rows: number(&rows, 0, "rows"),
        bytes_on_disk: number(&rows, 0, "bytes"),
    })
}

/// Reads every part of the warehouse's health for `database`.
#[must_use]
pub fn read(client: &Client, database: &str) -> Health {
    let mut errors = Vec::new();
    let mut keep = |part: &'static str, error: WarehouseError| {
        errors.push(Unreadable::new(part, error));
    };
    let disks = disks(client).map_err(|e| keep("disks", e)).ok();
    let memory = memory(client).map_err(|e| keep("memory", e)).ok();
    let activity = activity(client).map_err(|e| keep("activity", e)).ok();
    let kafka_consumers = kafka_consumers(client, database)
        .map_err(|e| keep("kafka_consumers", e))
        .ok();
    let footprint = footprint(client, database)
        .map_err(|e| keep("footprint", e))
        .ok();
    Health {
        disks,
        memory,
        activity,
        kafka_consumers,
        footprint,
        errors,
    }
}

#[cfg(test)]
mod tests {
    use super::Unreadable;
    use stb_warehouse::{ErrorKind, WarehouseError};

    fn error(kind: ErrorKind, server_code: Option<u32>) -> WarehouseError {
        WarehouseError {
            kind,
            server_code,
            message: "Code: 60. DB::Exception: Unknown table expression identifier".to_owned(),
        }
    }

    #[test]
    fn an_unreadable_part_says_why_in_a_sentence_and_keeps_the_servers_words_apart() {
        let missing = Unreadable::new("memory", error(ErrorKind::RelationNotFound, Some(60)));
        assert_eq!(missing.message, "this server does not offer it");
        assert!(missing.detail.contains("DB::Exception"));
        let refused = Unreadable::new("disks", error(ErrorKind::Other, Some(497)));
        assert_eq!(refused.message, "this user may not read it");
        let other = Unreadable::new("disks", error(ErrorKind::Other, Some(241)));
        assert_eq!(
            other.message,
            "the server refused the read (ClickHouse code 241)"
        );
        for kind in [
            ErrorKind::Timeout,
            ErrorKind::Authentication,
            ErrorKind::DatabaseNotFound,
            ErrorKind::Other,
        ] {
            assert!(
                !Unreadable::new("x", error(kind, None))
                    .message
                    .contains("Exception")
            );
        }
    }
}
