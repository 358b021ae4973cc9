use super::*;

fn declared() -> Landing {
    Landing {
        kafka_table: "kafka__orders".into(),
        raw_table: "raw__orders".into(),
        view: "mv__orders".into(),
        create_kafka: "CREATE TABLE IF NOT EXISTS db.kafka__orders (\n    message String\n) ENGINE = Kafka\nSETTINGS kafka_broker_list = 'b:9092', kafka_topic_list = 'orders', kafka_group_name = 'g_db', kafka_format = 'JSONAsString', kafka_sasl_password = 'it\\'s'".into(),
        create_kafka_recorded: String::new(),
        create_raw: String::new(),
        raw_definition: None,
        create_view: "CREATE MATERIALIZED VIEW IF NOT EXISTS db.mv__orders\nTO db.raw__orders AS\nSELECT 1".into(),
        consumer_group: "g_db".into(),
        brokers: "b:9092".into(),
        settings: Vec::new(),
        ..Landing::default()
    }
}

fn live(kafka: &str) -> LiveLanding {
    LiveLanding {
        kafka_create: Some(kafka.to_owned()),
        raw_columns: Some(
            stb_ddl::RAW_COLUMNS
                .iter()
                .map(|(n, t)| ((*n).to_owned(), (*t).to_owned()))
                .collect(),
        ),
        view_create: Some("CREATE MATERIALIZED VIEW db.mv__orders TO db.raw__orders (`kafka_key` String) AS SELECT 1".into()),
    }
}

const LIVE: &str = "CREATE TABLE db.kafka__orders (`message` String) ENGINE = Kafka SETTINGS kafka_broker_list = 'b:9092', kafka_topic_list = 'orders', kafka_group_name = 'g_db', kafka_format = 'JSONAsString', kafka_sasl_password = '[HIDDEN]'";

#[test]
fn settings_are_read_from_create_text_with_escapes() {
    assert_eq!(
        create_settings("ENGINE = Kafka SETTINGS a = 'x\\'y', b = 3"),
        [
            ("a".to_owned(), "x'y".to_owned()),
            ("b".to_owned(), "3".to_owned())
        ]
    );
    assert_eq!(create_settings("ENGINE = Memory"), []);
}

#[test]
fn an_unchanged_landing_has_no_drift_and_hidden_secrets_count_as_equal() {
    assert_eq!(
        landing_drift("orders", &declared(), &live(LIVE)),
        Ok(Drift::None)
    );
    assert_eq!(
        landing_drift("orders", &declared(), &LiveLanding::default()),
        Ok(Drift::None),
        "nothing exists yet"
    );
}

#[test]
fn changed_settings_are_repaired_by_recreation() {
    let moved = LIVE.replace("'orders'", "'orders_old'").replace(
        ", kafka_sasl_password = '[HIDDEN]'",
        ", kafka_poll_timeout_ms = '100'",
    );
    let Ok(Drift::Settings(changes)) = landing_drift("orders", &declared(), &live(&moved)) else {
        panic!("settings drift expected");
    };
    assert_eq!(
        changes,
        [
            "kafka_topic_list differs",
            "kafka_sasl_password is not set",
            "kafka_poll_timeout_ms is no longer declared"
        ]
    );
    // No value (secret or not) is quoted in what the plan shows.
    assert!(!changes.join(" ").contains("orders_old"));
}

#[test]
fn group_table_and_view_drift_stop_the_build() {
    let group = landing_drift(
        "orders",
        &declared(),
        &live(&LIVE.replace("'g_db'", "'other'")),
    );
    assert!(
        group
            .as_ref()
            .is_err_and(|e| e.message.contains("consumes as group 'other'")),
        "{group:?}"
    );
    let mut columns = live(LIVE);
    if let Some(list) = columns.raw_columns.as_mut() {
        list.push(("extra".into(), "UInt8".into()));
    }
    let table = landing_drift("orders", &declared(), &columns);
    assert!(
        table
            .as_ref()
            .is_err_and(|e| e.message.contains("landing table raw__orders has columns")),
        "{table:?}"
    );
    let mut view = live(LIVE);
    view.view_create =
        Some("CREATE MATERIALIZED VIEW db.mv__orders TO db.elsewhere AS SELECT 1".into());
    let error = landing_drift("orders", &declared(), &view);
    assert!(
        error.as_ref().is_err_and(|e| e
            .message
            .starts_with("Direct build preserves managed source infrastructure")),
        "{error:?}"
    );
}

#[test]
fn an_incomplete_landing_names_its_missing_pieces_and_a_fresh_one_none() {
    let complete = LiveLanding {
        kafka_create: Some(String::new()),
        raw_columns: Some(Vec::new()),
        view_create: Some(String::new()),
    };
    assert!(missing_pieces(&complete).is_empty());
    let without_kafka = LiveLanding {
        kafka_create: None,
        ..complete.clone()
    };
    assert_eq!(missing_pieces(&without_kafka), ["kafka_table"]);
    let bare = LiveLanding {
        raw_columns: Some(Vec::new()),
        ..LiveLanding::default()
    };
    assert_eq!(missing_pieces(&bare), ["kafka_table", "landing_view"]);
    // No landing table: a fresh landing, created whole by the build.
    assert!(missing_pieces(&LiveLanding::default()).is_empty());
}
