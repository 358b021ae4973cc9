//! `stb-bench-generate --models N --pipelines P --out DIR [--mixed] [--distinct]`: a project shaped like real ones.
//!
//! Each pipeline reads its own Kafka source. Its models form a chain of table models with
//! a mix of shapes: JSON parsing from the landing table, CTEs, window functions,
//! aggregates, and joins to a model of the previous pipeline through typed side
//! references; every pipeline ends in a terminal view (fan-out from the chain).
//!
//! Each source flushes its Kafka table every 7.5 s, ClickHouse's own default: the local
//! stack's server flushes every 0.5 s (so a demo's rows show at once), and the hundred idle
//! consumers of a 10,000-model project flushing that often kept the local engine at 1.24
//! cores (0.47 at 7.5 s, 0.3-0.4 with no consumer): on a two-core machine every benchmark
//! against it measured that polling, which no real server of such a project does.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use clap::Parser;

#[derive(Debug, Parser)]
struct Args {
    /// Total number of models.
    #[arg(long)]
    models: usize,
    /// Number of pipelines (each gets its own source).
    #[arg(long, default_value_t = 20)]
    pipelines: usize,
    /// Directory to write the project into (replaced).
    #[arg(long)]
    out: PathBuf,
    /// Every other pipeline virtual; each pipeline joins the one two before it (same
    /// mode: direct and virtual pipelines may not read each other).
    #[arg(long)]
    mixed: bool,
    /// Every model's query distinct (a comment naming it): a validation then checks
    /// each one, as in a project whose models differ.
    #[arg(long)]
    distinct: bool,
}

fn main() -> std::io::Result<()> {
    let args = Args::parse();
    let pipelines = args.pipelines.clamp(1, args.models.max(1));
    if args.out.exists() {
        std::fs::remove_dir_all(&args.out)?;
    }
    write(
        &args.out,
        "streambuild_project.toml",
        "name = \"bench\"\ndefault_target = \"dev\"\n\n[defaults]\nkafka_broker_list = \"localhost:9092\"\n\n[targets.dev]\ndatabase = \"bench\"\n",
    )?;
    let mut sources = String::from("sources:\n");
    for p in 0..pipelines {
        let _ = write!(
            sources,
            "  - name: events_{p}\n    kind: kafka\n    topic: bench.events.{p}\n    replay_boundary:\n      mode: offsets\n    settings:\n      kafka_flush_interval_ms: \"7500\"\n"
        );
    }
    write(&args.out, "sources/events.yml", &sources)?;
    for p in 0..pipelines {
        let count = args.models / pipelines + usize::from(p < args.models % pipelines);
        let side = if args.mixed {
            p.checked_sub(2)
        } else {
            p.checked_sub(1)
        };
        if args.mixed && p % 2 == 1 {
            write(
                &args.out,
                &format!("pipelines/pl__events_{p}/pipeline.toml"),
                "mode = \"virtual\"\n",
            )?;
        }
        for m in 0..count {
            let name = format!("p{p}_m{m}");
            let mut sql = if m == 0 {
                source_model(p)
            } else if m == count - 1 && count > 2 {
                terminal_view(p, m - 1)
            } else {
                chain_model(p, m, side)
            };
            if args.distinct {
                sql.push_str(&format!("-- {name}\n"));
            }
            write(
                &args.out,
                &format!("pipelines/pl__events_{p}/{}/{name}.sql", m / 50),
                &sql,
            )?;
        }
    }
    Ok(())
}

fn write(root: &Path, relative: &str, text: &str) -> std::io::Result<()> {
    let path = root.join(relative);
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)?;
    }
    std::fs::write(path, text)
}

const LINEAGE: &str = "  _replay_partition::Int32 AS _replay_partition,\n  _replay_offset::Int64 AS _replay_offset,\n  _replay_timestamp::DateTime64(3) AS _replay_timestamp";
const HEADER: &str = "MODEL (\n  engine \"MergeTree()\",\n  order_by [\"id\", \"_replay_partition\", \"_replay_offset\"],\n  partition_by \"toYYYYMM(_replay_timestamp)\",\n  retention (duration \"30d\", timestamp_column _replay_timestamp),\n);\n";

fn source_model(p: usize) -> String {
    format!(
        "{HEADER}\nSELECT\n  JSONExtractString(kafka_value, 'id')::String AS id,\n  JSONExtractFloat(kafka_value, 'amount')::Float64 AS amount,\n  JSONExtractString(kafka_value, 'customer')::String AS customer,\n  _replay_partition::Int32 AS _replay_partition,\n  _replay_offset::Int64 AS _replay_offset,\n  coalesce(_replay_timestamp, _replay_landed_at)::DateTime64(3) AS _replay_timestamp\nFROM __source(\"events_{p}\")\n"
    )
}

/// Model `m` of pipeline `p`; `side` is the pipeline its joins read, if any.
fn chain_model(p: usize, m: usize, side: Option<usize>) -> String {
    let upstream = format!("p{p}_m{}", m - 1);
    match (m % 4, side) {
        (0, Some(side)) => format!(
            "{HEADER}\nSELECT\n  e.id::String AS id,\n  (e.amount * 1.1)::Float64 AS amount,\n  d.customer::String AS customer,\n{}\nFROM __ref(\"{upstream}\") AS e\nLEFT JOIN __ref(\"p{}_m0\", ref_type='reference') AS d ON e.id = d.id\n",
            LINEAGE.replace("  _replay", "  e._replay"),
            side
        ),
        (1, _) => format!(
            "{HEADER}\nWITH cleaned AS (\n  SELECT *, lower(customer) AS customer_key FROM __ref(\"{upstream}\") WHERE amount >= 0\n)\nSELECT\n  id::String AS id,\n  amount::Float64 AS amount,\n  customer_key::String AS customer,\n{LINEAGE}\nFROM cleaned\n"
        ),
        (2, _) => format!(
            "{HEADER}\nSELECT\n  id::String AS id,\n  sum(amount) OVER (PARTITION BY customer ORDER BY _replay_timestamp ROWS BETWEEN 10 PRECEDING AND CURRENT ROW)::Float64 AS amount,\n  customer::String AS customer,\n{LINEAGE}\nFROM __ref(\"{upstream}\")\n"
        ),
        _ => format!(
            "{HEADER}\nSELECT\n  id::String AS id,\n  sum(amount)::Float64 AS amount,\n  any(customer)::String AS customer,\n  max(_replay_partition)::Int32 AS _replay_partition,\n  max(_replay_offset)::Int64 AS _replay_offset,\n  max(_replay_timestamp)::DateTime64(3) AS _replay_timestamp\nFROM __ref(\"{upstream}\")\nGROUP BY id\n"
        ),
    }
}

fn terminal_view(p: usize, last: usize) -> String {
    format!(
        "MODEL (kind view);\n\nSELECT customer::String AS customer, count()::UInt64 AS events, sum(amount)::Float64 AS amount\nFROM __ref(\"p{p}_m{last}\")\nGROUP BY customer\n"
    )
}
