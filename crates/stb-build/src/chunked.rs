//! A root's replay cut into chunks (`[build] replay_chunk_rows`): the pieces are planned
//! from its capture (`stb_plan::replay::chunks`; a time or cursor window first asks the
//! warehouse where to cut it), then replayed one `INSERT ... SELECT` at a time, each
//! reported by a `replay_chunk_completed` event that is made durable once the warehouse
//! answered the chunk's statement.

use stb_plan::replay::Capture;
use stb_plan::replay::chunks::{
    Chunk, chunk_count, offset_chunks, scalar_chunks, starts_sql, window_rows,
};
use stb_plan::workflow::RootReplay;
use stb_warehouse::Client;

/// Which chunk of how many (the first is 1).
pub(crate) type Place = (usize, usize);

/// Says in an event's payload which chunk of how many it is about.
pub(crate) fn mark(payload: &mut serde_json::Value, (number, of): Place) {
    payload["chunk"] = number.into();
    payload["chunks"] = of.into();
}

/// The event a chunk's completion is reported by.
pub const CHUNK_COMPLETED_EVENT: &str = "replay_chunk_completed";

/// The chunks of `replay`'s window, or `None` when it runs as one statement: it is not
/// chunked, or its window fits one chunk.
///
/// # Errors
/// The cut positions of a time or cursor window could not be read or spliced.
pub(crate) fn plan(
    client: &Client,
    replay: &RootReplay,
    capture: &Capture,
) -> Result<Option<Vec<Chunk>>, String> {
    let Some(chunk_rows) = replay.chunk_rows.filter(|_| replay.bounded) else {
        return Ok(None);
    };
    let count = chunk_count(window_rows(capture), chunk_rows);
    if count <= 1 {
        return Ok(None);
    }
    let anchor = &replay.template.anchor;
    let start = replay.start_time.as_ref();
    let chunks = match capture {
        Capture::Offsets { .. } => offset_chunks(capture, start.is_some(), chunk_rows),
        Capture::Scalar { .. } => {
            let sql = starts_sql(anchor.read_from(), anchor.mode, capture, start, count);
            let rows = client.query(&sql).map_err(|error| {
                format!(
                    "where to cut the replay of '{}' into chunks could not be read: {error}",
                    replay.model
                )
            })?;
            let starts: Vec<String> = (0..rows.data.len())
                .filter_map(|row| rows.text(row, "start"))
                .collect();
            scalar_chunks(anchor.mode, capture, start, &starts)
                .map_err(|error| format!("the replay of '{}': {error}", replay.model))?
        }
    };
    Ok((chunks.len() > 1).then_some(chunks))
}

/// What the statement records hold for a chunked replay: every chunk's statement, in
/// the order they run.
#[must_use]
pub(crate) fn recorded(replay: &RootReplay, chunks: &[Chunk]) -> String {
    let mut text = format!(
        "-- replay_{}: {} chunks of at most {} rows each, one statement per chunk\n",
        replay.model,
        chunks.len(),
        replay.chunk_rows.unwrap_or_default()
    );
    let statements: Vec<String> = chunks
        .iter()
        .map(|chunk| replay.template.render_chunk(chunk))
        .collect();
    text.push_str(&statements.join(";\n"));
    text
}

/// A chunk's completion as its event holds it.
#[must_use]
pub(crate) fn completed_payload(
    replay: &RootReplay,
    chunk: &Chunk,
    number: usize,
    of: usize,
    written_rows: Option<u64>,
    elapsed_ms: u64,
    query_id: &str,
) -> serde_json::Value {
    serde_json::json!({
        "model": replay.model,
        "chunk": number,
        "chunks": of,
        "span": chunk.span.to_json(),
        "writtenRows": written_rows,
        "elapsedMs": elapsed_ms,
        "queryId": query_id,
    })
}

/// How a chunked replay reports as it goes.
pub(crate) struct Reporting<'a> {
    /// The step's query id: chunk `k` runs under
    /// [`stb_plan::resume::chunk_query_id`]`(query_base, k)`, the first one the step's
    /// `statement_started` announced.
    pub(crate) query_base: &'a str,
    /// Set to each chunk's number as it starts: where a stop happened.
    pub(crate) at: &'a std::cell::Cell<usize>,
    /// Each later chunk's start, with its own query id: a `statement_started` again, so
    /// whatever finds a step's statement by its last announced id (a cancellation, the
    /// throughput of earlier replays) finds the chunk in flight.
    pub(crate) started: &'a dyn Fn(&str, Place),
    /// A statement's progress (its query id, and which chunk of how many).
    pub(crate) progress: &'a dyn Fn(&str, crate::execute::Progress, Place),
    /// A chunk's completion, made durable before the next chunk runs (an error stops the
    /// replay).
    pub(crate) completed: &'a dyn Fn(serde_json::Value) -> Result<(), String>,
}

/// Replays `chunks` from chunk `first` (the first is 1; a resumed replay starts later) one
/// statement at a time, stopping at the first failure or interrupt. The rows written are
/// the chunks' sum, unknown when any chunk's is.
pub(crate) fn run(
    client: &std::sync::Arc<Client>,
    replay: &RootReplay,
    (chunks, first): (&[Chunk], usize),
    interrupt: &std::sync::atomic::AtomicBool,
    reporting: &Reporting<'_>,
) -> Result<crate::execute::Answer, crate::execute::Interrupted> {
    use crate::execute::{Answer, Interrupted, run_one};
    let mut written = Some(0_u64);
    let first = first.max(1);
    for (index, chunk) in chunks.iter().enumerate().skip(first - 1) {
        let place: Place = (index + 1, chunks.len());
        if interrupt.load(std::sync::atomic::Ordering::SeqCst) {
            return Err(Interrupted::Cancelled);
        }
        let query_id = stb_plan::resume::chunk_query_id(reporting.query_base, place.0);
        if place.0 != first {
            (reporting.started)(&query_id, place);
        }
        reporting.at.set(place.0);
        let started = std::time::Instant::now();
        let answer = run_one(
            client,
            replay.template.render_chunk(chunk),
            &query_id,
            false,
            interrupt,
            &|now| (reporting.progress)(&query_id, now, place),
        )?;
        let rows = match answer {
            Answer::Written(rows) => rows,
            Answer::Rows(_) => None,
        };
        written = written
            .zip(rows)
            .map(|(sum, rows)| sum.saturating_add(rows));
        let elapsed_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
        (reporting.completed)(completed_payload(
            replay, chunk, place.0, place.1, rows, elapsed_ms, &query_id,
        ))
        .map_err(|error| {
            Interrupted::Failed(format!(
                "chunk {} of {} of the replay of '{}' was written, but its completion could not be recorded: {error}",
                place.0, place.1, replay.model
            ))
        })?;
    }
    Ok(Answer::Written(written))
}
