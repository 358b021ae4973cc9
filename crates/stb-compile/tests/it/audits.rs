//! Audits: standalone blocks and generic instances compile to `compiled/audits/`, with the
//! severity, cadence and warm-up their pipelines give them, and every mistake is refused.

use serde_json::Value;

use crate::support::{SHOP, compile_files, single_error};

const PROJECT_WITH_AUDIT_DEFAULTS: &str = "name = \"shop\"\ndefault_target = \"dev\"\n\n[defaults.sources.kafka]\nretention = { duration = \"7d\" }\n\n[defaults.audits]\nevery = \"10m\"\nwarmup = \"1m\"\n\n[targets.dev]\ndatabase = \"shop_dev\"\n";

const NOT_NULL: &str = "AUDIT ();\nSELECT * FROM __ref(\"@model\") WHERE @column IS NULL\n";

const ORDERS_WITH_AUDITS: &str = "MODEL (\n  order_by [\"order_id\", \"_replay_partition\", \"_replay_offset\"],\n  columns (order_id (audits [not_null, not_null (name order_id_present, severity error)])),\n  audits [accepted_values (column customer_id, values [\"7\", \"8\"])],\n);\nSELECT\n  JSONExtractString(kafka_value, 'order_id')::String AS order_id,\n  JSONExtractUInt(kafka_value, 'customer_id')::UInt64 AS customer_id,\n  _replay_partition::Int32 AS _replay_partition,\n  _replay_offset::Int64 AS _replay_offset,\n  coalesce(_replay_timestamp, _replay_landed_at)::DateTime64(3) AS _replay_timestamp\nFROM __source(\"orders\")\n";

fn manifest_audits(
    overrides: &[(&str, &str)],
) -> (Value, std::collections::BTreeMap<String, String>) {
    let compiled = compile_files(SHOP, overrides).unwrap_or_else(|d| panic!("{d:#?}"));
    let manifest: Value = serde_json::from_str(&compiled.files["manifest.json"]).expect("json");
    (manifest["audits"].clone(), compiled.files)
}

#[test]
fn audits_compile_with_inherited_policies_to_mirrored_paths() {
    let (audits, files) = manifest_audits(&[
        ("streambuild_project.toml", PROJECT_WITH_AUDIT_DEFAULTS),
        (
            "pipelines/pl__orders/pipeline.toml",
            "[audit_defaults]\nseverity = \"warning\"\nwarmup = \"5m\"\n",
        ),
        (
            "pipelines/pl__orders/staging/orders_clean.sql",
            ORDERS_WITH_AUDITS,
        ),
        ("audits/generic/not_null.sql", NOT_NULL),
        (
            "audits/generic/accepted_values.sql",
            "AUDIT ();\nSELECT @column, count() FROM __ref(\"@model\") WHERE toString(@column) NOT IN (@'values') GROUP BY @column\n",
        ),
        (
            "audits/x/multi.sql",
            "AUDIT (name first_check);\nSELECT o.order_id FROM __ref(\"orders_clean\") AS o\nLEFT ANTI JOIN __ref(\"customer_names\") AS c ON o.customer_id = c.customer_id;\n\nAUDIT (name adhoc, scheduled false, severity warning);\nSELECT 1 FROM __ref(\"customer_names\") WHERE name = ''\n",
        ),
    ]);
    // Reads a warning pipeline and an unset (error) one: error; the longest warm-up wins.
    let first = &audits["first_check"];
    assert_eq!(first["severity"], "error");
    assert_eq!(first["warmup_seconds"], 300);
    assert_eq!(first["every_seconds"], 600);
    assert_eq!(first["attachment"], "standalone");
    assert_eq!(
        first["models"],
        serde_json::json!(["customer_names", "orders_clean"])
    );
    assert_eq!(first["path"], "compiled/audits/x/multi__first_check.sql");
    assert!(
        files["compiled/audits/x/multi__first_check.sql"]
            .contains("ON o.customer_id = c.customer_id;"),
        "the body is kept verbatim, references and trailing ';' included"
    );
    let adhoc = &audits["adhoc"];
    assert_eq!(adhoc["scheduled"], false);
    assert_eq!(adhoc["every_seconds"], Value::Null);
    assert_eq!(adhoc["severity"], "warning");
    assert_eq!(adhoc["warmup_seconds"], 60);

    let not_null = &audits["orders_clean.order_id.not_null.1"];
    assert_eq!(not_null["attachment"], "column");
    assert_eq!(not_null["column"], "order_id");
    assert_eq!(not_null["generic"], "not_null");
    assert_eq!(not_null["severity"], "warning", "pl__orders says warning");
    let path = "compiled/audits/pipelines/pl__orders/staging/orders_clean__orders_clean.order_id.not_null.1.sql";
    assert_eq!(not_null["path"], path);
    assert_eq!(
        files[path],
        "SELECT * FROM __ref(\"orders_clean\") WHERE order_id IS NULL\n"
    );
    assert_eq!(audits["order_id_present"]["severity"], "error");
    let accepted = &audits["orders_clean.accepted_values.1"];
    assert_eq!(accepted["attachment"], "model");
    let rendered = &files[accepted["path"].as_str().expect("path")];
    assert!(
        rendered.contains("toString(customer_id) NOT IN ('7', '8')"),
        "{rendered}"
    );
}

#[test]
fn differing_inherited_cadences_need_an_explicit_one() {
    let audit = "AUDIT (name both);\nSELECT 1 FROM __ref(\"orders_clean\") AS o, __ref(\"customer_names\") AS c\n";
    let overrides = [
        (
            "pipelines/pl__orders/pipeline.toml",
            "[audit_defaults]\nevery = \"5m\"\n",
        ),
        (
            "pipelines/pl__customers/pipeline.toml",
            "[audit_defaults]\nevery = \"10m\"\n",
        ),
        ("audits/both.sql", audit),
    ];
    let (code, location, message) = single_error(&overrides);
    assert_eq!(code, "STB-COMPILE-009");
    assert_eq!(location, "audits/both.sql:1:1");
    assert!(
        message.contains("inherits conflicting pipeline cadences"),
        "{message}"
    );
    let explicit = audit.replace("(name both)", "(name both, every \"1h\")");
    let mut fixed = overrides.to_vec();
    fixed[2] = ("audits/both.sql", &explicit);
    let (audits, _) = manifest_audits(&fixed);
    assert_eq!(audits["both"]["every_seconds"], 3600);
}

#[test]
fn audit_mistakes_are_refused_with_a_location() {
    let generic = || ("audits/generic/not_null.sql", NOT_NULL.to_owned());
    let orders_with = |audits: &str| {
        ORDERS_WITH_AUDITS.replace(
            "columns (order_id (audits [not_null, not_null (name order_id_present, severity error)])),\n  audits [accepted_values (column customer_id, values [\"7\", \"8\"])],",
            audits,
        )
    };
    // (files to write, expected location, expected message)
    type Case<'a> = (Vec<(&'a str, String)>, &'a str, &'a str);
    let cases: Vec<Case<'_>> = vec![
        (
            vec![(
                "audits/a.sql",
                "AUDIT ();\nSELECT * FROM __source(\"orders\")".into(),
            )],
            "audits/a.sql:1:1",
            "may only use __ref(...); __source(...) is not allowed",
        ),
        (
            vec![(
                "audits/a.sql",
                "AUDIT ();\nSELECT * FROM __ref(\"nope\")".into(),
            )],
            "audits/a.sql:1:1",
            "references unknown models: nope",
        ),
        (
            vec![("audits/a.sql", "AUDIT ();\nSELECT 1".into())],
            "audits/a.sql:1:1",
            "must reference at least one model",
        ),
        (
            vec![
                (
                    "streambuild_project.toml",
                    PROJECT_WITH_AUDIT_DEFAULTS.into(),
                ),
                (
                    "audits/a.sql",
                    "AUDIT ();\nSELECT * FROM __ref(\"orders_clean\")".into(),
                ),
            ],
            "audits/a.sql:1:1",
            "Scheduled SQL audit 'a' must have an explicit name",
        ),
        (
            vec![
                (
                    "audits/one/x.sql",
                    "AUDIT ();\nSELECT * FROM __ref(\"orders_clean\")".into(),
                ),
                (
                    "audits/two/x.sql",
                    "AUDIT ();\nSELECT * FROM __ref(\"orders_clean\")".into(),
                ),
            ],
            "audits/two/x.sql:1:1",
            "Duplicate SQL audit name 'x'",
        ),
        (
            vec![(
                "audits/a.sql",
                "AUDIT (name \"a/b\");\nSELECT * FROM __ref(\"orders_clean\")".into(),
            )],
            "audits/a.sql:1:1",
            "Unsafe audit artifact path segment 'a/b'",
        ),
        (
            vec![(
                "audits/a.sql",
                "AUDIT (name a, warmup \"soon\");\nSELECT * FROM __ref(\"orders_clean\")".into(),
            )],
            "audits/a.sql:1:16",
            "warmup must be a duration",
        ),
        (
            vec![
                generic(),
                (
                    "pipelines/pl__orders/staging/orders_clean.sql",
                    orders_with("audits [not_null (column order_id, extra 1)],"),
                ),
            ],
            "pipelines/pl__orders/staging/orders_clean.sql:3:11",
            "unsupported arguments for generic audit 'not_null': extra",
        ),
        (
            vec![
                generic(),
                (
                    "pipelines/pl__orders/staging/orders_clean.sql",
                    orders_with("audits [not_null],"),
                ),
            ],
            "pipelines/pl__orders/staging/orders_clean.sql:3:11",
            "missing arguments for generic audit 'not_null': column",
        ),
        (
            vec![
                generic(),
                (
                    "pipelines/pl__orders/staging/orders_clean.sql",
                    orders_with("columns (order_id (audits [not_null (column customer_id)])),"),
                ),
            ],
            "pipelines/pl__orders/staging/orders_clean.sql:3:40",
            "must not override implicit column from its header context",
        ),
        (
            vec![(
                "pipelines/pl__orders/staging/orders_clean.sql",
                orders_with("audits [unique],"),
            )],
            "pipelines/pl__orders/staging/orders_clean.sql:3:11",
            "unknown generic audit 'unique'. Available: accepted_values, expression_is_true, not_null",
        ),
        (
            vec![(
                "audits/generic/not_null.sql",
                "AUDIT (severity error);\nSELECT * FROM __ref(\"@model\")".into(),
            )],
            "audits/generic/not_null.sql:1:8",
            "must not define AUDIT() header fields",
        ),
    ];
    for (files, expected_location, expected_message) in cases {
        let overrides: Vec<(&str, &str)> = files.iter().map(|(p, t)| (*p, t.as_str())).collect();
        let (code, location, message) = single_error(&overrides);
        assert_eq!(code, "STB-COMPILE-009", "{message}");
        assert!(message.contains(expected_message), "{message}");
        assert_eq!(location, expected_location, "{message}");
    }
}

#[test]
fn built_in_generic_audits_need_no_definition_and_a_project_file_replaces_one() {
    let model = ORDERS_WITH_AUDITS.replace(
        "audits [accepted_values (column customer_id, values [\"7\", \"8\"])],",
        "audits [expression_is_true (expression \"customer_id > 0\"), accepted_values (column order_id, values [\"new\", \"it's done\"])],",
    );
    let (_, files) = manifest_audits(&[("pipelines/pl__orders/staging/orders_clean.sql", &model)]);
    let audit = |needle: &str| {
        files
            .iter()
            .filter(|(path, _)| path.starts_with("compiled/audits/") && path.contains(needle))
            .map(|(_, sql)| sql.clone())
            .collect::<Vec<_>>()
            .join("\n")
    };
    assert!(
        audit("not_null").contains("WHERE order_id IS NULL"),
        "{files:?}"
    );
    assert!(
        audit("expression_is_true").contains("WHERE NOT (customer_id > 0)"),
        "{files:?}"
    );
    assert!(
        audit("accepted_values").contains("NOT IN ('new', 'it\\'s done')"),
        "{files:?}"
    );
    // A project's own definition replaces the built-in one.
    let (_, files) = manifest_audits(&[
        ("pipelines/pl__orders/staging/orders_clean.sql", &model),
        (
            "audits/generic/not_null.sql",
            "AUDIT ();\nSELECT * FROM __ref(\"@model\") WHERE isNull(@column) -- ours\n",
        ),
    ]);
    let not_null: Vec<&String> = files
        .iter()
        .filter(|(path, _)| path.starts_with("compiled/audits/") && path.contains("not_null"))
        .map(|(_, sql)| sql)
        .collect();
    assert!(!not_null.is_empty() && not_null.iter().all(|sql| sql.contains("-- ours")));
}
