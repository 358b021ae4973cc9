//! The ClickHouse objects StreamBuild creates, as typed values rendered to DDL text.
//!
//! Generated DDL never comes from re-printing a parse tree: each shape below is built from
//! these types. Model queries are the author's bytes with reference spans already spliced in
//! (the compiler's job); this crate only wraps them.

use std::fmt::Write as _;

pub mod cluster;

/// `database.name`
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct QualifiedName {
    pub database: String,
    pub name: String,
}

impl QualifiedName {
    #[must_use]
    pub fn new(database: &str, name: &str) -> Self {
        Self {
            database: database.to_owned(),
            name: name.to_owned(),
        }
    }
}

impl std::fmt::Display for QualifiedName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}.{}",
            identifier(&self.database),
            identifier(&self.name)
        )
    }
}

/// A name as ClickHouse reads it: bare when it is a plain identifier, else back-quoted
/// (a database called `shop-dev` must be written `` `shop-dev` ``).
#[must_use]
pub fn identifier(name: &str) -> String {
    let mut chars = name.chars();
    let plain = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_');
    if plain {
        name.to_owned()
    } else {
        format!("`{}`", name.replace('\\', "\\\\").replace('`', "\\`"))
    }
}

/// A ClickHouse string literal: backslashes and quotes escaped.
#[must_use]
pub fn string_literal(value: &str) -> String {
    format!("'{}'", value.replace('\\', "\\\\").replace('\'', "\\'"))
}

/// Where DDL text is going. Artifacts on disk never hold secrets; runtime DDL needs them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Audience {
    Artifact,
    Runtime,
}

const SECRET_MARKERS: &[&str] = &[
    "credential",
    "password",
    "private_key",
    "sasl",
    "secret",
    "token",
];

/// The managed Kafka engine table `kafka__<source>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KafkaTable {
    pub name: QualifiedName,
    pub broker_list: String,
    pub topic: String,
    /// The consumer group, already suffixed with `_<database>`.
    pub group: String,
    pub format: String,
    /// Extra engine settings, rendered sorted by key.
    pub settings: Vec<(String, String)>,
    /// Settings (`kafka_broker_list` included) whose values came from the environment:
    /// artifacts show `***` for them, the statement that runs has the value.
    pub hidden: Vec<String>,
}

impl KafkaTable {
    #[must_use]
    pub fn render(&self, audience: Audience) -> String {
        self.render_with(audience, "CREATE TABLE")
    }

    /// `CREATE TABLE IF NOT EXISTS`: builds create a missing landing, never replace one.
    #[must_use]
    pub fn render_if_not_exists(&self, audience: Audience) -> String {
        self.render_with(audience, "CREATE TABLE IF NOT EXISTS")
    }

    fn render_with(&self, audience: Audience, create: &str) -> String {
        self.render_named(audience, create, &self.name.to_string())
    }

    /// The statement with `name` written after `create` (a cluster adds `ON CLUSTER`).
    fn render_named(&self, audience: Audience, create: &str, name: &str) -> String {
        let redact = audience == Audience::Artifact;
        // A broker list with credentials (user:pass@host) never reaches an artifact.
        let hidden = |key: &str| self.hidden.iter().any(|h| h == key);
        let brokers = if redact && (self.broker_list.contains('@') || hidden("kafka_broker_list")) {
            "***".to_owned()
        } else {
            self.broker_list.clone()
        };
        let mut settings = vec![
            ("kafka_broker_list".to_owned(), brokers),
            ("kafka_topic_list".to_owned(), self.topic.clone()),
            ("kafka_group_name".to_owned(), self.group.clone()),
            ("kafka_format".to_owned(), self.format.clone()),
        ];
        let mut extra = self.settings.clone();
        extra.sort();
        for (key, value) in extra {
            let lowered = key.to_ascii_lowercase();
            let secret =
                redact && (SECRET_MARKERS.iter().any(|m| lowered.contains(m)) || hidden(&key));
            settings.push((key, if secret { "***".to_owned() } else { value }));
        }
        let rendered: Vec<String> = settings
            .iter()
            .map(|(k, v)| format!("{k} = {}", string_literal(v)))
            .collect();
        format!(
            "{create} {name} (\n    message String\n) ENGINE = Kafka\nSETTINGS {}",
            rendered.join(", ")
        )
    }
}

/// A column of a table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Column {
    pub name: String,
    /// The type, optionally followed by a `DEFAULT` clause.
    pub data_type: String,
}

impl Column {
    #[must_use]
    pub fn new(name: &str, data_type: &str) -> Self {
        Self {
            name: name.to_owned(),
            data_type: data_type.to_owned(),
        }
    }
}

/// A MergeTree-family table: a landing table or a table model's storage.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Table {
    pub name: QualifiedName,
    pub columns: Vec<Column>,
    /// Verbatim engine expression, e.g. `ReplacingMergeTree(updated_at)`.
    pub engine: String,
    pub order_by: Vec<String>,
    pub partition_by: Option<String>,
    pub ttl: Option<String>,
    /// Rendered sorted by key, values unquoted.
    pub settings: Vec<(String, String)>,
}

impl Table {
    #[must_use]
    pub fn render(&self) -> String {
        self.render_with("CREATE TABLE")
    }

    /// `CREATE TABLE IF NOT EXISTS`, for tables created by idempotent migrations.
    #[must_use]
    pub fn render_if_not_exists(&self) -> String {
        self.render_with("CREATE TABLE IF NOT EXISTS")
    }

    /// `CREATE TEMPORARY TABLE <name>` with the same columns, engine, keys, TTL and
    /// settings: a session-scoped copy nobody else sees, which the warehouse checks exactly
    /// as it would check the table itself (plans validate DDL with it).
    #[must_use]
    pub fn render_temporary(&self, name: &str) -> String {
        self.render_named("CREATE TEMPORARY TABLE", &identifier(name))
    }

    fn render_with(&self, create: &str) -> String {
        self.render_named(create, &self.name.to_string())
    }

    fn render_named(&self, create: &str, name: &str) -> String {
        let mut text = format!("{create} {name} (\n");
        text.push_str(&column_lines(&self.columns));
        let _ = write!(
            text,
            "\n) ENGINE = {}\nORDER BY ({})",
            self.engine,
            self.order_by.join(", ")
        );
        if let Some(partition) = &self.partition_by {
            let _ = write!(text, "\nPARTITION BY {partition}");
        }
        if let Some(ttl) = &self.ttl {
            let _ = write!(text, "\nTTL {ttl}");
        }
        if !self.settings.is_empty() {
            let mut settings = self.settings.clone();
            settings.sort();
            let rendered: Vec<String> =
                settings.iter().map(|(k, v)| format!("{k} = {v}")).collect();
            let _ = write!(text, "\nSETTINGS {}", rendered.join(", "));
        }
        text
    }
}

/// A column list's lines, one column each, without the parentheses.
fn column_lines(columns: &[Column]) -> String {
    columns
        .iter()
        .map(|c| format!("    {} {}", c.name, c.data_type))
        .collect::<Vec<_>>()
        .join(",\n")
}

/// `REFRESH EVERY <interval> [APPEND]` for models fed by scheduled pulls.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refresh {
    pub every: String,
    pub append: bool,
}

/// A materialized view writing into a table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MaterializedView {
    pub name: QualifiedName,
    pub target: QualifiedName,
    /// The SELECT, exactly as it will run.
    pub query: String,
    pub refresh: Option<Refresh>,
}

impl MaterializedView {
    #[must_use]
    pub fn render(&self) -> String {
        self.render_with("CREATE MATERIALIZED VIEW")
    }

    /// `CREATE MATERIALIZED VIEW IF NOT EXISTS`, for resuming a paused landing.
    #[must_use]
    pub fn render_if_not_exists(&self) -> String {
        self.render_with("CREATE MATERIALIZED VIEW IF NOT EXISTS")
    }

    fn render_with(&self, create: &str) -> String {
        self.render_named(create, &self.name.to_string())
    }

    /// The statement with `name` written after `create` (a cluster adds `ON CLUSTER`).
    fn render_named(&self, create: &str, name: &str) -> String {
        let mut text = format!("{create} {name}\n");
        if let Some(refresh) = &self.refresh {
            let _ = writeln!(
                text,
                "REFRESH EVERY {}{}",
                refresh.every,
                if refresh.append { " APPEND" } else { "" }
            );
        }
        if self.refresh.is_some() {
            // The SETTINGS clause follows the query, so a trailing `;` of the query must go.
            let query = self.query.trim_end();
            let query = query.strip_suffix(';').unwrap_or(query).trim_end();
            let _ = write!(
                text,
                "TO {} AS\n{query}\nSETTINGS allow_experimental_refreshable_materialized_view = 1",
                self.target
            );
        } else {
            let _ = write!(text, "TO {} AS\n{}", self.target, self.query);
        }
        text
    }
}

/// A terminal view model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct View {
    pub name: QualifiedName,
    pub query: String,
}

impl View {
    #[must_use]
    pub fn render(&self) -> String {
        format!("CREATE VIEW {} AS\n{}", self.name, self.query)
    }
}

/// The fixed column set of `raw__<source>`, in order.
pub const RAW_COLUMNS: &[(&str, &str)] = &[
    ("kafka_key", "String"),
    ("kafka_value", "String"),
    ("kafka_topic", "String"),
    ("kafka_partition", "Int32"),
    ("kafka_offset", "Int64"),
    ("kafka_timestamp", "Nullable(DateTime64(3))"),
    ("_replay_partition", "Int32"),
    ("_replay_offset", "Int64"),
    ("_replay_timestamp", "Nullable(DateTime64(3))"),
    ("kafka_header_keys", "Array(String)"),
    ("kafka_header_values", "Array(String)"),
    ("kafka_landed_at", "DateTime64(3)"),
    ("_replay_landed_at", "DateTime64(3)"),
];

/// What each raw column is filled with by the landing view, in [`RAW_COLUMNS`] order.
const LANDING_PROJECTION: &[&str] = &[
    "_key",
    "message",
    "_topic",
    "_partition",
    "_offset",
    "_timestamp_ms",
    "_partition",
    "_offset",
    "_timestamp_ms",
    "_headers.name",
    "_headers.value",
    "now64(3)",
    "now64(3)",
];

/// The three objects of a managed Kafka source.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ManagedSource {
    pub kafka: KafkaTable,
    pub raw: Table,
    pub landing: MaterializedView,
}

/// Builds `kafka__S`, `raw__S` and `mv__S` for source `source` in `database`.
#[must_use]
pub fn managed_source(
    database: &str,
    source: &str,
    kafka: KafkaSettings,
    ttl: Option<String>,
) -> ManagedSource {
    let kafka_name = QualifiedName::new(database, &format!("kafka__{source}"));
    let raw_name = QualifiedName::new(database, &format!("raw__{source}"));
    let raw = Table {
        name: raw_name.clone(),
        columns: RAW_COLUMNS.iter().map(|(n, t)| Column::new(n, t)).collect(),
        engine: "MergeTree()".to_owned(),
        order_by: vec!["_replay_partition".to_owned(), "_replay_offset".to_owned()],
        partition_by: None,
        ttl,
        settings: Vec::new(),
    };
    let projection: Vec<String> = LANDING_PROJECTION
        .iter()
        .zip(RAW_COLUMNS)
        .map(|(expression, (column, _))| format!("  {expression} AS {column}"))
        .collect();
    let landing = MaterializedView {
        name: QualifiedName::new(database, &format!("mv__{source}")),
        target: raw_name,
        query: format!("SELECT\n{}\nFROM {kafka_name}", projection.join(",\n")),
        refresh: None,
    };
    ManagedSource {
        kafka: KafkaTable {
            name: kafka_name,
            broker_list: kafka.broker_list,
            topic: kafka.topic,
            group: format!("{}_{}", kafka.group, database.replace('-', "_")),
            format: kafka.format,
            settings: kafka.settings,
            hidden: kafka.hidden,
        },
        raw,
        landing,
    }
}

/// A Kafka source's settings before naming and database suffixes are applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KafkaSettings {
    pub broker_list: String,
    pub topic: String,
    pub group: String,
    pub format: String,
    pub settings: Vec<(String, String)>,
    /// Settings whose values came from the environment (see [`KafkaTable::hidden`]).
    pub hidden: Vec<String>,
}

/// `+ INTERVAL n UNIT` with the largest of DAY/HOUR/MINUTE that divides `seconds`, else SECOND.
#[must_use]
pub fn interval(seconds: u64) -> String {
    for (unit, size) in [("DAY", 86_400), ("HOUR", 3_600), ("MINUTE", 60)] {
        if seconds.is_multiple_of(size) {
            return format!("INTERVAL {} {unit}", seconds / size);
        }
    }
    format!("INTERVAL {seconds} SECOND")
}

/// TTL of a Kafka landing table from a retention policy: broker timestamp, falling back to
/// the landing time, optionally capped at the landing time.
#[must_use]
pub fn kafka_retention_ttl(duration_seconds: u64, cap_at_landed: bool) -> String {
    let base = "ifNull(_replay_timestamp, _replay_landed_at)";
    let anchor = if cap_at_landed {
        format!("least({base}, _replay_landed_at)")
    } else {
        base.to_owned()
    };
    format!("{anchor} + {}", interval(duration_seconds))
}

/// TTL of a model table from its retention policy.
#[must_use]
pub fn model_retention_ttl(
    timestamp_column: &str,
    cap_at_column: Option<&str>,
    duration_seconds: u64,
) -> String {
    let anchor = cap_at_column.map_or_else(
        || timestamp_column.to_owned(),
        |cap| format!("least({timestamp_column}, {cap})"),
    );
    format!("{anchor} + {}", interval(duration_seconds))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn orders(settings: Vec<(String, String)>, brokers: &str) -> ManagedSource {
        managed_source(
            "shop_dev",
            "orders",
            KafkaSettings {
                broker_list: brokers.to_owned(),
                topic: "shop.orders".to_owned(),
                group: "streambuild_shop_dev_orders".to_owned(),
                format: "JSONAsString".to_owned(),
                settings,
                hidden: Vec::new(),
            },
            Some(kafka_retention_ttl(7 * 86_400, false)),
        )
    }

    #[test]
    fn managed_kafka_source() {
        let source = orders(
            vec![("kafka_num_consumers".to_owned(), "2".to_owned())],
            "kafka:9092",
        );
        insta::assert_snapshot!("kafka_table", source.kafka.render(Audience::Artifact));
        insta::assert_snapshot!("raw_table", source.raw.render());
        insta::assert_snapshot!("landing_view", source.landing.render());
    }

    #[test]
    fn artifacts_never_hold_secrets_but_runtime_ddl_does() {
        let source = orders(
            vec![
                ("kafka_sasl_password".to_owned(), "hunter2".to_owned()),
                ("kafka_security_protocol".to_owned(), "sasl_ssl".to_owned()),
            ],
            "user:pw@kafka:9092",
        );
        let artifact = source.kafka.render(Audience::Artifact);
        assert!(
            !artifact.contains("hunter2") && !artifact.contains("user:pw"),
            "{artifact}"
        );
        assert!(
            artifact.contains("kafka_broker_list = '***'")
                && artifact.contains("kafka_sasl_password = '***'")
        );
        assert!(
            artifact.contains("kafka_security_protocol = 'sasl_ssl'"),
            "only secret-looking keys are hidden"
        );
        let runtime = source.kafka.render(Audience::Runtime);
        assert!(runtime.contains("'hunter2'") && runtime.contains("'user:pw@kafka:9092'"));
        // Values that came from the environment are hidden whatever their key.
        let mut from_env = orders(
            vec![("kafka_client_id".to_owned(), "env-client".to_owned())],
            "broker.internal:9092",
        );
        from_env.kafka.hidden = vec!["kafka_broker_list".into(), "kafka_client_id".into()];
        let artifact = from_env.kafka.render(Audience::Artifact);
        assert!(
            !artifact.contains("env-client") && !artifact.contains("broker.internal"),
            "{artifact}"
        );
        let runtime = from_env.kafka.render(Audience::Runtime);
        assert!(runtime.contains("'env-client'") && runtime.contains("'broker.internal:9092'"));
    }

    #[test]
    fn model_objects() {
        let table = Table {
            name: QualifiedName::new("shop", "tbl__order_totals"),
            columns: vec![
                Column::new("order_id", "String"),
                Column::new("amount", "Decimal(18, 4)"),
                Column::new("updated_at", "DateTime64(3)"),
            ],
            engine: "ReplacingMergeTree(updated_at)".to_owned(),
            order_by: vec!["order_id".to_owned()],
            partition_by: Some("toYYYYMM(updated_at)".to_owned()),
            ttl: Some(model_retention_ttl("updated_at", None, 90 * 60)),
            settings: vec![
                ("index_granularity".to_owned(), "8192".to_owned()),
                ("allow_nullable_key".to_owned(), "true".to_owned()),
            ],
        };
        insta::assert_snapshot!("model_table", table.render());
        insta::assert_snapshot!(
            "model_table_temporary",
            table.render_temporary("stb_check_1")
        );
        let minimal = Table {
            partition_by: None,
            ttl: None,
            settings: Vec::new(),
            engine: "MergeTree()".to_owned(),
            ..table
        };
        insta::assert_snapshot!("model_table_minimal", minimal.render());
        let view = MaterializedView {
            name: QualifiedName::new("shop", "mv__order_totals"),
            target: QualifiedName::new("shop", "tbl__order_totals"),
            query: "SELECT order_id::String AS order_id -- kept as written\nFROM shop.tbl__orders_clean;".to_owned(),
            refresh: None,
        };
        insta::assert_snapshot!("model_materialized_view", view.render());
        let refreshable = MaterializedView {
            refresh: Some(Refresh {
                every: "5 MINUTE".to_owned(),
                append: true,
            }),
            ..view.clone()
        };
        insta::assert_snapshot!("refreshable_materialized_view", refreshable.render());
        let terminal = View {
            name: QualifiedName::new("shop", "view__daily_orders"),
            query: "SELECT count()::UInt64 AS orders FROM shop.tbl__order_totals".to_owned(),
        };
        insta::assert_snapshot!("view", terminal.render());
    }

    #[test]
    fn intervals_use_the_largest_exact_unit() {
        assert_eq!(interval(7 * 86_400), "INTERVAL 7 DAY");
        assert_eq!(interval(90 * 60), "INTERVAL 90 MINUTE");
        assert_eq!(interval(7_200), "INTERVAL 2 HOUR");
        assert_eq!(interval(45), "INTERVAL 45 SECOND");
        assert_eq!(
            kafka_retention_ttl(86_400, true),
            "least(ifNull(_replay_timestamp, _replay_landed_at), _replay_landed_at) + INTERVAL 1 DAY"
        );
        assert_eq!(
            model_retention_ttl("ts", Some("landed"), 3_600),
            "least(ts, landed) + INTERVAL 1 HOUR"
        );
    }

    #[test]
    fn names_that_are_not_identifiers_are_quoted() {
        assert_eq!(
            QualifiedName::new("shop-dev", "tbl__x").to_string(),
            "`shop-dev`.tbl__x"
        );
        assert_eq!(identifier("a`b"), "`a\\`b`");
        let source = managed_source(
            "shop-dev",
            "orders",
            KafkaSettings {
                broker_list: "k:9092".to_owned(),
                topic: "t".to_owned(),
                group: "g".to_owned(),
                format: "JSONAsString".to_owned(),
                settings: Vec::new(),
                hidden: Vec::new(),
            },
            None,
        );
        assert!(
            source
                .kafka
                .render(Audience::Runtime)
                .contains("kafka_group_name = 'g_shop_dev'")
        );
    }

    #[test]
    fn literals_escape_quotes_and_backslashes() {
        assert_eq!(string_literal("it's a \\ test"), "'it\\'s a \\\\ test'");
    }
}
