//! The compiled project as the planner sees it: the compiler produces these values and the
//! planner reads them, so neither depends on the other.

/// What a relation is; teardown and creation are grouped by it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum RelationKind {
    Table,
    MaterializedView,
    View,
}

impl RelationKind {
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Table => "table",
            Self::MaterializedView => "materialized_view",
            Self::View => "view",
        }
    }
}

/// A compiled model as the planner sees it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PlanModel {
    pub name: String,
    pub pipeline: String,
    /// Tables are fed by a materialized view and replayed; views are recreated only.
    pub is_table: bool,
    /// Relations it owns, e.g. its table and its materialized view.
    pub relations: Vec<(RelationKind, String)>,
    /// Models and sources it reads.
    pub reads: Vec<String>,
    /// The input whose rows drive it (tables only).
    pub driving_input: Option<String>,
    /// Reads a side input with `ref_type='mutable'`.
    pub has_mutable_ref: bool,
    /// The `CREATE` statement of each of `relations`, same order, as executed.
    pub create_statements: Vec<String>,
    /// The compiled query (what fingerprints hash and diff).
    pub query: String,
    /// The text a reference to this model becomes (`db.table`).
    pub reference: String,
    /// Output columns: name and type.
    pub output_columns: Vec<(String, String)>,
    /// The storage identity of a table model (engine, keys, TTL, settings).
    pub storage: String,
    /// The pipeline's replay boundary mode (`offsets`, `timestamp`, ...).
    pub boundary_mode: Option<String>,
    /// Groups, aggregates, or merges rows.
    pub aggregate: bool,
    /// The compiled query split at each reference to the driving input.
    pub replay_query: Vec<String>,
    /// `execution_settings (replay (...))`.
    pub replay_settings: Vec<(String, String)>,
    /// What a virtual deployment creates for the model, under its own names.
    pub deployable: Deployable,
    /// How a virtual deployment rebuilds it when it changes (model, then pipeline, then
    /// project settings).
    pub replay_policy: ReplayPolicy,
    /// What places a table model's rows on a sharded cluster's shards: the model's
    /// `sharding_key`, else the target cluster's default (`None` off a sharded target).
    pub sharding_key: Option<String>,
}

/// The `_replay_*` columns a replay boundary mode (`offsets`, `timestamp`, `landed_at`,
/// `cursor`) needs in a relation; none for an unknown mode.
#[must_use]
pub fn lineage_columns(mode: &str) -> &'static [&'static str] {
    match mode {
        "offsets" => &["_replay_partition", "_replay_offset"],
        "timestamp" => &["_replay_timestamp"],
        "landed_at" => &["_replay_landed_at"],
        "cursor" => &["_replay_cursor"],
        _ => &[],
    }
}

/// `replay_on_change` and `bounded_replay_fallback` as they apply to one model.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReplayPolicy {
    /// `full` or `bounded-<duration>`, for a breaking change (a column removed or retyped,
    /// or the query changed with the same columns).
    pub breaking: Option<String>,
    /// The same for a change that only adds columns.
    pub non_breaking: Option<String>,
    /// `full` or `bounded_without_history`: what a bounded rebuild does when its active
    /// table cannot seed it.
    pub fallback: Option<String>,
}

impl ReplayPolicy {
    /// The lookback of a `bounded-<duration>` value in seconds (`30s`, `10m`, `2h`, `7d`);
    /// `None` for `full` or anything else.
    #[must_use]
    pub fn lookback_seconds(value: &str) -> Option<u64> {
        let text = value.strip_prefix("bounded-")?;
        let unit = text.chars().last()?;
        let number: u64 = text[..text.len() - unit.len_utf8()].parse().ok()?;
        let scale = match unit {
            's' => 1,
            'm' => 60,
            'h' => 3600,
            'd' => 86_400,
            _ => return None,
        };
        number.checked_mul(scale).filter(|s| *s > 0)
    }

    /// This policy, with what it leaves unset taken from `outer`.
    #[must_use]
    pub fn within(&self, outer: &Self) -> Self {
        Self {
            breaking: self.breaking.clone().or_else(|| outer.breaking.clone()),
            non_breaking: self
                .non_breaking
                .clone()
                .or_else(|| outer.non_breaking.clone()),
            fallback: self.fallback.clone().or_else(|| outer.fallback.clone()),
        }
    }
}

/// A piece of a compiled query: the author's bytes (sources already spliced in), or a
/// reference to a model, whose relation depends on where the query runs: a virtual
/// deployment reads the physical relation of the deployment that holds that model, never
/// its stable view (a materialized view reading a view is never triggered).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum QueryPart {
    Text(String),
    Model(String),
    /// A source reference: its name and the relation text spliced for it (the same in
    /// every deployment).
    Source {
        name: String,
        relation: String,
    },
}

/// A model's typed objects under their logical names, and its query cut at every model
/// reference; a deployment renames the objects and resolves the references. The objects'
/// own `query` fields are left empty: `query_parts` holds the query once.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Deployable {
    pub table: Option<stb_ddl::Table>,
    pub materialized_view: Option<stb_ddl::MaterializedView>,
    pub view: Option<stb_ddl::View>,
    pub query_parts: Vec<QueryPart>,
}

impl Deployable {
    /// The query with each model reference replaced by `resolve(model)`.
    #[must_use]
    pub fn query_with(&self, resolve: &dyn Fn(&str) -> String) -> String {
        self.query_parts
            .iter()
            .map(|part| match part {
                QueryPart::Text(text) => text.clone(),
                QueryPart::Model(model) => resolve(model),
                QueryPart::Source { relation, .. } => relation.clone(),
            })
            .collect()
    }

    /// The query with model references resolved, cut at every reference to `input` (a
    /// source or a model): what a replay puts its bounded input into.
    #[must_use]
    pub fn cut_at(&self, input: &str, resolve: &dyn Fn(&str) -> String) -> Vec<String> {
        let mut pieces = vec![String::new()];
        for part in &self.query_parts {
            let (name, text) = match part {
                QueryPart::Text(text) => (None, text.clone()),
                QueryPart::Model(model) => (Some(model.as_str()), resolve(model)),
                QueryPart::Source { name, relation } => (Some(name.as_str()), relation.clone()),
            };
            if name == Some(input) {
                pieces.push(String::new());
            } else if let Some(last) = pieces.last_mut() {
                last.push_str(&text);
            }
        }
        pieces
    }
}

impl PlanModel {
    /// The engine its storage identity names (`MergeTree` when it names none, as a view
    /// model's empty identity does).
    #[must_use]
    pub fn engine(&self) -> String {
        serde_json::from_str::<serde_json::Value>(&self.storage)
            .ok()
            .and_then(|identity| identity.get("engine")?.as_str().map(str::to_owned))
            .unwrap_or_else(|| "MergeTree".to_owned())
    }

    /// Its table's relation (table models only).
    #[must_use]
    pub fn table(&self) -> Option<&str> {
        self.relations
            .iter()
            .find(|(kind, _)| *kind == RelationKind::Table)
            .map(|(_, relation)| relation.as_str())
    }

    /// What `--changed` compares besides the query: kind, relation, output contract and
    /// storage, as the JSON recorded with each fingerprint.
    #[must_use]
    pub fn identity(&self) -> String {
        serde_json::json!({
            "identity_version": 1,
            "model_name": self.name,
            "kind": if self.is_table { "table" } else { "view" },
            "relation_name": self.relations.first().map(|(_, r)| r),
            "output_columns": self.output_columns.iter()
                .map(|(name, data_type)| serde_json::json!({"name": name, "type": data_type}))
                .collect::<Vec<_>>(),
            "storage": self.storage,
        })
        .to_string()
    }
}

/// A source as the planner sees it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PlanSource {
    pub name: String,
    /// StreamBuild creates it (Kafka landing, Postgres pull); adopted tables are not.
    pub framework_managed: bool,
    /// A Postgres pull the warehouse refreshes on a schedule: never replayed.
    pub scheduled_pull: bool,
    /// The relation models read (landing table, adopted table); `None` when they read a
    /// table function, which has nothing to look for in the catalog.
    pub relation: Option<String>,
    /// The text a reference to it becomes in model SQL.
    pub reference: Option<String>,
    /// The canonical `_replay_*` columns it exposes.
    pub replay_columns: Vec<String>,
    /// Managed Kafka sources: the landing objects a build creates, pauses and resumes.
    pub landing: Option<Landing>,
}

/// A managed Kafka source's landing: `kafka__S` feeds `raw__S` through `mv__S`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Landing {
    /// `kafka__S`, unqualified.
    pub kafka_table: String,
    /// `raw__S`, unqualified.
    pub raw_table: String,
    /// `mv__S`, unqualified.
    pub view: String,
    /// `CREATE TABLE IF NOT EXISTS kafka__S`, as run (it may hold broker secrets).
    pub create_kafka: String,
    /// The same with secrets redacted, as recorded.
    pub create_kafka_recorded: String,
    /// `CREATE TABLE IF NOT EXISTS raw__S`.
    pub create_raw: String,
    /// The landing table as a typed value: plans check its DDL (and the models that read
    /// it) before a build creates it.
    pub raw_definition: Option<stb_ddl::Table>,
    /// `CREATE MATERIALIZED VIEW IF NOT EXISTS mv__S`.
    pub create_view: String,
    /// The Kafka table and the landing view as typed values: what a cluster's statements
    /// are written from (the Kafka table may hold broker secrets, as `create_kafka`).
    pub kafka_definition: Option<stb_ddl::KafkaTable>,
    pub view_definition: Option<stb_ddl::MaterializedView>,
    /// The effective consumer group (suffixed with the database).
    pub consumer_group: String,
    /// The broker list, as the Kafka table gets it (it may hold credentials).
    pub brokers: String,
    /// The source's extra Kafka settings (security and SASL ones concern a client too).
    pub settings: Vec<(String, String)>,
}

/// How much a build's replays may read before it needs `--allow-large`: `[build]
/// max_replay_rows` and `max_replay_bytes`, for the project or one target.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct ReplayBudget {
    pub max_rows: Option<u64>,
    pub max_bytes: Option<u64>,
}

impl ReplayBudget {
    /// Each limit this budget sets, else `fallback`'s.
    #[must_use]
    pub fn or(self, fallback: Self) -> Self {
        Self {
            max_rows: self.max_rows.or(fallback.max_rows),
            max_bytes: self.max_bytes.or(fallback.max_bytes),
        }
    }

    /// Whether any limit is set.
    #[must_use]
    pub fn is_set(&self) -> bool {
        self.max_rows.is_some() || self.max_bytes.is_some()
    }
}

/// How a build's replays are split and held back so that live ingestion keeps headroom:
/// `[build] replay_chunk_rows`, `replay_max_threads`, `replay_max_memory_usage` and
/// `replay_max_rows_per_second`, for the project or one target. A model's own
/// `execution_settings (replay (...))` win over the last three.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct ReplayPacing {
    /// Rows per replay statement: a root's window is cut into chunks of about this many
    /// rows, each one `INSERT ... SELECT` (`None`: one statement per root).
    pub chunk_rows: Option<u64>,
    /// ClickHouse's `max_threads` for each replay statement.
    pub max_threads: Option<u64>,
    /// ClickHouse's `max_memory_usage` (bytes) for each replay statement.
    pub max_memory_usage: Option<u64>,
    /// ClickHouse's `max_execution_speed`: the rows a replay statement reads per second.
    pub max_rows_per_second: Option<u64>,
}

impl ReplayPacing {
    /// Each value this pacing sets, else `fallback`'s.
    #[must_use]
    pub fn or(self, fallback: Self) -> Self {
        Self {
            chunk_rows: self.chunk_rows.or(fallback.chunk_rows),
            max_threads: self.max_threads.or(fallback.max_threads),
            max_memory_usage: self.max_memory_usage.or(fallback.max_memory_usage),
            max_rows_per_second: self.max_rows_per_second.or(fallback.max_rows_per_second),
        }
    }

    /// The ClickHouse settings a replay statement runs with, by the names the server
    /// knows them by. A rows-per-second cap is checked from the statement's start: the
    /// server only begins to check `max_execution_speed` once
    /// `timeout_before_checking_execution_speed` (10 s by default) has passed, which would
    /// leave every chunk shorter than that unthrottled.
    #[must_use]
    pub fn settings(&self) -> Vec<(String, String)> {
        [
            ("max_threads", self.max_threads),
            ("max_memory_usage", self.max_memory_usage),
            ("max_execution_speed", self.max_rows_per_second),
            (
                "timeout_before_checking_execution_speed",
                self.max_rows_per_second.map(|_| 0),
            ),
        ]
        .into_iter()
        .filter_map(|(name, value)| value.map(|v| (name.to_owned(), v.to_string())))
        .collect()
    }
}
