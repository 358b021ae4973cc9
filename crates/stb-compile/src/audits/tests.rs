use super::generic::{Param, params, render};
use super::*;
use std::collections::BTreeMap;

fn standalone_ok(text: &str) -> Vec<Draft> {
    match standalone("audits/x/multi.sql", text) {
        Ok(drafts) => drafts,
        Err(problem) => panic!("{}", problem.message),
    }
}

fn standalone_err(text: &str) -> String {
    match standalone("audits/x/multi.sql", text) {
        Ok(_) => panic!("accepted: {text}"),
        Err(problem) => problem.message,
    }
}

#[test]
fn standalone_blocks_read_their_headers_and_keep_bodies_verbatim() {
    let drafts = standalone_ok(
        "AUDIT (name first_check, severity warning, every \"5m\", warmup \"1m\");\nSELECT * FROM __ref(\"orders\") WHERE amount < 0;\n\nAUDIT (name second, scheduled false);\nSELECT 1 FROM __ref('orders') WHERE 0\n",
    );
    assert_eq!(drafts.len(), 2);
    assert_eq!(drafts[0].name.as_deref(), Some("first_check"));
    assert_eq!(drafts[0].options.severity.as_deref(), Some("warning"));
    assert_eq!(drafts[0].options.every_seconds, Some(300));
    assert_eq!(drafts[0].options.warmup_seconds, Some(60));
    assert_eq!(
        drafts[0].query,
        "SELECT * FROM __ref(\"orders\") WHERE amount < 0;"
    );
    assert_eq!(drafts[0].path_stem, "compiled/audits/x/multi");
    assert_eq!(drafts[1].options.scheduled, Some(false));
}

#[test]
fn standalone_headers_and_bodies_are_validated() {
    assert!(standalone_err("AUDIT (colour red);\nSELECT 1").contains("not an audit setting"));
    assert!(standalone_err("AUDIT (severity fatal);\nSELECT 1").contains("severity"));
    assert!(standalone_err("AUDIT (every \"0s\");\nSELECT 1").contains("greater than zero"));
    assert!(
        standalone_err("AUDIT (every \"5m\", scheduled false);\nSELECT 1")
            .contains("scheduled false")
    );
    assert!(
        standalone_err("AUDIT (name a);\nSELECT 1\nAUDIT ();\nSELECT 2").contains("unique name")
    );
    assert!(
        standalone_err("AUDIT (name a);\nSELECT 1\nAUDIT (name a);\nSELECT 2").contains("repeats")
    );
    assert!(standalone_err("AUDIT ();\nSELECT 1; SELECT 2").contains("exactly one query"));
    assert!(standalone_err("AUDIT ();\nINSERT INTO t VALUES (1)").contains("SELECT"));
    assert!(standalone_err("AUDIT (name a)\nSELECT 1").contains("';'"));
}

#[test]
fn single_query_accepts_set_operations_and_ctes() {
    assert!(single_query("WITH x AS (SELECT 1) SELECT * FROM x UNION ALL SELECT 2;").is_ok());
    assert!(single_query("(SELECT 1) EXCEPT (SELECT 2)").is_ok());
    assert!(single_query("SELECT ';' -- ; \n").is_ok());
    assert!(single_query("SELECT (1").is_err());
}

#[test]
fn parameters_are_found_everywhere_in_first_appearance_order() {
    let found = params(
        "SELECT * FROM __ref(\"@model\") WHERE @column NOT IN (@'values') -- @model\nAND owner@example = 1",
    );
    assert_eq!(
        found,
        vec![
            Param {
                name: "model".into(),
                quoted: false
            },
            Param {
                name: "column".into(),
                quoted: false
            },
            Param {
                name: "values".into(),
                quoted: true
            },
        ]
    );
}

#[test]
fn rendering_quotes_strings_and_leaves_longer_names_alone() {
    let definition = generic::Definition {
        file: "audits/generic/accepted_values.sql".into(),
        query: "SELECT * FROM __ref(\"@model\") WHERE @col NOT IN (@'values') AND @column > @min"
            .into(),
        params: params(
            "SELECT * FROM __ref(\"@model\") WHERE @col NOT IN (@'values') AND @column > @min",
        ),
    };
    let mut args = BTreeMap::new();
    args.insert("model".to_owned(), HeaderValue::Str("orders".into()));
    args.insert("col".to_owned(), HeaderValue::Str("status".into()));
    args.insert("column".to_owned(), HeaderValue::Str("amount".into()));
    args.insert("min".to_owned(), HeaderValue::Float(2.0));
    args.insert(
        "values".to_owned(),
        HeaderValue::List(vec![
            stb_model::header::Spanned {
                value: HeaderValue::Str("new".into()),
                offset: 0,
            },
            stb_model::header::Spanned {
                value: HeaderValue::Str("it's".into()),
                offset: 0,
            },
        ]),
    );
    let rendered = render(&definition, &args).expect("renders");
    assert_eq!(
        rendered,
        "SELECT * FROM __ref(\"orders\") WHERE status NOT IN ('new', 'it\\'s') AND amount > 2.0"
    );
    args.insert("values".to_owned(), HeaderValue::Int(3));
    assert!(
        render(&definition, &args)
            .expect_err("a number is not a string")
            .contains("@'values'")
    );
}

#[test]
fn parameters_in_other_strings_and_comments_are_left_alone() {
    let query = "SELECT '@column' AS label, @column FROM __ref(\"@model\") -- @column\nWHERE note != '@min'";
    let definition = generic::Definition {
        file: "audits/generic/labelled.sql".into(),
        query: query.into(),
        params: params(query),
    };
    assert_eq!(
        definition
            .params
            .iter()
            .map(|p| p.name.as_str())
            .collect::<Vec<_>>(),
        ["column", "model"],
        "a name that only appears in a string or a comment is no parameter"
    );
    let mut args = BTreeMap::new();
    args.insert("model".to_owned(), HeaderValue::Str("orders".into()));
    args.insert("column".to_owned(), HeaderValue::Str("amount".into()));
    args.insert("min".to_owned(), HeaderValue::Int(1));
    assert_eq!(
        render(&definition, &args).expect("renders"),
        "SELECT '@column' AS label, amount FROM __ref(\"orders\") -- @column\nWHERE note != '@min'"
    );
}
