//! The project's static definitions as `GET /api/definitions` serves them: sources,
//! pipelines, models, tests and audits of the compile the server holds, with a version
//! key (for the ETag) and every credential redacted: a broker list with `user:pass@` in it,
//! any setting whose name says it is a secret, and anything read from the environment.

use serde_json::{Value, json};
use sha2::{Digest as _, Sha256};
use stb_compile::Compiled;
use stb_project::Project;
use stb_project::sources::{Resolved, SourceKind};

/// What a redacted value reads as.
pub const REDACTED: &str = "<redacted>";

/// Setting names that hold secrets.
const SECRET_WORDS: [&str; 6] = [
    "credential",
    "password",
    "private_key",
    "sasl",
    "secret",
    "token",
];

fn secret_name(name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    SECRET_WORDS.iter().any(|word| lower.contains(word))
}

/// A broker list with credentials in it (`user:pass@host`) or from the environment.
fn broker_list(value: &Resolved) -> String {
    shown_broker_list(&value.value, value.from_environment)
}

/// `list` as responses show it: redacted when it holds credentials (`user:pass@host`) or
/// came from the environment.
pub(crate) fn shown_broker_list(list: &str, from_environment: bool) -> String {
    if from_environment || list.contains('@') {
        REDACTED.to_owned()
    } else {
        list.to_owned()
    }
}

fn setting(name: &str, value: &Resolved) -> String {
    if value.from_environment || secret_name(name) {
        REDACTED.to_owned()
    } else {
        value.value.clone()
    }
}

/// The definitions of `project` as `compiled`, and their version key.
#[must_use]
pub fn of(project: &Project, compiled: &Compiled) -> (String, Value) {
    let version_key: String = Sha256::digest(
        compiled
            .files
            .get("manifest.json")
            .map_or("", String::as_str)
            .as_bytes(),
    )
    .iter()
    .take(16)
    .map(|b| format!("{b:02x}"))
    .collect();
    let sources: Vec<Value> = project
        .sources
        .iter()
        .map(|source| {
            let kind = match source.kind {
                SourceKind::Kafka => "kafka",
                SourceKind::StreamTable => "stream_table",
                SourceKind::Postgres => "postgres",
            };
            let kafka = source.kafka.as_ref().map(|k| {
                json!({
                    "brokerList": k.broker_list.as_ref().map(broker_list),
                    "consumerGroup": k.consumer_group,
                    "settings": k.settings.iter().map(|(name, value)| (name.clone(), Value::String(setting(name, value)))).collect::<serde_json::Map<_, _>>(),
                })
            });
            json!({
                "name": source.name,
                "kind": kind,
                "file": source.file,
                "topic": source.topic,
                "tableName": source.table_name,
                "replayBoundary": source.replay_boundary,
                "columns": source.columns.iter().map(|(role, column)| json!({"role": role, "column": column})).collect::<Vec<_>>(),
                "freshness": source.freshness,
                "kafka": kafka,
            })
        })
        .collect();
    let pipelines: Vec<Value> = project
        .pipelines
        .iter()
        .map(|pipeline| {
            json!({
                "name": pipeline.name,
                "mode": pipeline.mode,
                "source": pipeline.source,
                "protection": pipeline.protection.as_ref().map(|p| json!({"warning": p.warning, "confirmation": p.confirmation})),
                "models": pipeline.models.iter().map(|m| m.name.clone()).collect::<Vec<_>>(),
            })
        })
        .collect();
    let docs: std::collections::HashMap<&str, &stb_model::docs::ModelDocs> = project
        .pipelines
        .iter()
        .flat_map(|p| &p.models)
        .map(|m| (m.name.as_str(), &m.docs))
        .collect();
    let models: Vec<Value> = compiled
        .plan_models
        .iter()
        .map(|model| {
            let docs = docs.get(model.name.as_str());
            json!({
                "description": docs.and_then(|d| d.description.as_deref()),
                "columnDescriptions": docs.map(|d| &d.columns),
                "name": model.name,
                "pipeline": model.pipeline,
                "kind": if model.is_table { "table" } else { "view" },
                "reads": model.reads,
                "drivingInput": model.driving_input,
                "reference": model.reference,
                "outputColumns": model.output_columns.iter().map(|(name, ty)| json!({"name": name, "type": ty})).collect::<Vec<_>>(),
            })
        })
        .collect();
    let definitions = json!({
        "versionKey": version_key,
        "project": {
            "name": project.name,
            "target": project.target,
            "database": project.database,
            "production": project.production,
            "defaults": {"freshness": project.defaults.freshness},
        },
        "sources": sources,
        "pipelines": pipelines,
        "models": models,
        "tests": compiled.tests.iter().map(|t| json!({"name": t.name, "file": t.file})).collect::<Vec<_>>(),
        "audits": compiled.audits.iter().map(|a| json!({"name": a.name, "models": a.models})).collect::<Vec<_>>(),
    });
    (version_key, definitions)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resolved(value: &str, from_environment: bool) -> Resolved {
        Resolved {
            value: value.to_owned(),
            from_environment,
        }
    }

    #[test]
    fn models_carry_their_header_s_descriptions() {
        let dir = tempfile::tempdir().expect("tempdir");
        for (path, text) in [
            (
                "streambuild_project.toml",
                "name = \"shop\"\ndefault_target = \"dev\"\n[targets.dev]\ndatabase = \"shop\"\n",
            ),
            (
                "sources/orders.yml",
                "sources:\n  - name: orders\n    kind: stream_table\n    table_name: orders\n    replay_boundary:\n      mode: timestamp\n      columns:\n        _replay_timestamp: ts\n",
            ),
            (
                "pipelines/pl__shop/revenue.sql",
                "MODEL (\n  description \"Revenue per customer\",\n  order_by [\"customer_id\"],\n  columns (revenue_cents (description \"Sum of paid orders\")),\n);\nSELECT customer_id::UInt64 AS customer_id, sum(amount)::UInt64 AS revenue_cents FROM __source(\"orders\") GROUP BY customer_id\n",
            ),
            (
                "pipelines/pl__shop/plain.sql",
                "MODEL (kind view);\nSELECT count()::UInt64 AS n FROM __ref(\"revenue\")\n",
            ),
        ] {
            let file = dir.path().join(path);
            std::fs::create_dir_all(file.parent().expect("parent")).expect("mkdir");
            std::fs::write(file, text).expect("write");
        }
        let project = stb_project::discover(&stb_project::DiscoverOptions {
            project_dir: Some(dir.path().to_path_buf()),
            cwd: dir.path().to_path_buf(),
            ..Default::default()
        })
        .expect("discovers");
        let compiled = stb_compile::compile(&project).expect("compiles");
        let (_, definitions) = of(&project, &compiled);
        let model = |name: &str| {
            definitions["models"]
                .as_array()
                .and_then(|models| models.iter().find(|m| m["name"] == name))
                .cloned()
                .unwrap_or_else(|| panic!("{name} in {definitions}"))
        };
        let revenue = model("revenue");
        assert_eq!(revenue["description"], "Revenue per customer");
        assert_eq!(
            revenue["columnDescriptions"],
            json!({"revenue_cents": "Sum of paid orders"})
        );
        let plain = model("plain");
        assert_eq!(plain["description"], Value::Null);
        assert_eq!(plain["columnDescriptions"], json!({}));
    }

    #[test]
    fn credentials_never_leave_in_definitions() {
        assert_eq!(broker_list(&resolved("kafka:9092", false)), "kafka:9092");
        assert_eq!(
            broker_list(&resolved("app:s3cret@kafka:9092", false)),
            REDACTED
        );
        assert_eq!(broker_list(&resolved("kafka:9092", true)), REDACTED);
        assert_eq!(setting("kafka_num_consumers", &resolved("1", false)), "1");
        for name in [
            "kafka_sasl_password",
            "SASL_MECHANISM",
            "ssl_private_key",
            "api_token",
            "client_secret",
        ] {
            assert_eq!(setting(name, &resolved("x", false)), REDACTED, "{name}");
        }
        assert_eq!(setting("harmless", &resolved("from env", true)), REDACTED);
    }
}
