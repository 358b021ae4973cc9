//! SQL macros in model bodies: expansion, context, nesting, and the errors.

use crate::support::{SHOP, compile_files};

const CLEAN: &str = "pipelines/pl__orders/staging/orders_clean.sql";
const MACROS: &str = r#"from streambuild.compiler.macros.models import MacroContext


def region_name(code: str) -> str:
    return {"eu": "'Europe'"}.get(code, "'Other'")


def cents(column: str, scale: int = 100) -> str:
    return f"toInt64(round({column} * {scale}))"


def database_of(ctx: MacroContext) -> str:
    return f"'{ctx.database}/{ctx.target_name}/{ctx.variables['team']}/{ctx.virtual_environments}'"


def columns(names) -> str:
    return ", ".join(f"'{n}'" for n in names)


def shout(text: str) -> str:
    return text.upper()


def wrong(x):
    return 42


def loops_back() -> str:
    return "@region_name('eu')"


def boom() -> str:
    raise ValueError("no region today")
"#;

fn project_with_team() -> String {
    SHOP[0].1.replace(
        "[targets.dev]",
        "[vars]\nteam = \"growth\"\n\n[targets.dev]",
    )
}

fn body(query: &str) -> String {
    format!("MODEL (order_by [\"x\"]);\nSELECT {query} AS x FROM __source(\"orders\")")
}

fn compiled_query(query: &str) -> String {
    let project = project_with_team();
    let model = body(query);
    let compiled = compile_files(
        SHOP,
        &[
            ("streambuild_project.toml", &project),
            ("macros/sql.py", MACROS),
            (CLEAN, &model),
        ],
    )
    .unwrap_or_else(|d| panic!("{d:#?}"));
    compiled.files["compiled/models/pl__orders/orders_clean.sql"].clone()
}

#[test]
fn calls_expand_in_place() {
    assert!(compiled_query("@region_name('eu')::String").contains("SELECT 'Europe'::String AS x"));
    assert!(
        compiled_query("@cents(\"amount\", scale=1000)::Int64")
            .contains("SELECT toInt64(round(amount * 1000))::Int64 AS x")
    );
    assert!(
        compiled_query("@shout(@region_name('xx'))::String")
            .contains("SELECT 'OTHER'::String AS x"),
        "nested calls run first"
    );
    assert!(
        compiled_query("has(array(@columns(['a', 'b'])), 'a')::UInt8").contains("array('a', 'b')")
    );
}

#[test]
fn macros_see_the_invocation_context() {
    assert!(compiled_query("@database_of()::String").contains("'shop_dev/dev/growth/False'"));
}

fn error(query: &str) -> (String, String, String) {
    let project = project_with_team();
    let model = body(query);
    crate::support::single_error(&[
        ("streambuild_project.toml", &project),
        ("macros/sql.py", MACROS),
        (CLEAN, &model),
    ])
}

#[test]
fn errors_name_the_call_and_the_macro() {
    let (code, at, message) = error("@nope(1)::String");
    assert_eq!(
        (code.as_str(), at.as_str()),
        (
            "STB-DISCOVER-014",
            "pipelines/pl__orders/staging/orders_clean.sql:2:8"
        )
    );
    assert!(message.starts_with("Unknown macro '@nope'. Available macros: boom, cents, columns, database_of, loops_back, region_name, shout, wrong"), "{message}");
    let (code, _, message) = error("@region_name(code)::String");
    assert_eq!(code, "STB-DISCOVER-016");
    assert!(
        message.contains("must use only Python literals and nested macro calls"),
        "{message}"
    );
    let (_, _, message) = error("@wrong(1)::String");
    assert!(
        message.contains("must return a SQL string when used directly in SQL, not int"),
        "{message}"
    );
    let (_, _, message) = error("@loops_back()::String");
    assert!(
        message.contains("produced output containing unexpanded macro call '@region_name('"),
        "{message}"
    );
    let (_, _, message) = error("@boom()::String");
    assert!(message.contains("ValueError: no region today"), "{message}");
    let (_, _, message) = error("@region_name()::String");
    assert!(message.contains("could not be called"), "{message}");
    let (_, _, message) = error("@database_of(ctx=1)::String");
    assert!(message.contains("reserves keyword 'ctx'"), "{message}");
}

#[test]
fn audits_and_generic_definitions_expand_macros_but_keep_placeholders() {
    let project = project_with_team();
    let compiled = compile_files(
        SHOP,
        &[
            ("streambuild_project.toml", project.as_str()),
            ("macros/m.py", MACROS),
            (
                "audits/regions.sql",
                "AUDIT (name regions);\nSELECT * FROM __ref(\"orders_clean\") WHERE order_id = @region_name('eu') OR @database_of() = ''\n",
            ),
            (
                "audits/generic/matches.sql",
                "AUDIT ();\nSELECT * FROM __ref(\"@model\") WHERE @column IN (@columns(['a', 'b']))\n",
            ),
            (
                CLEAN,
                "MODEL (order_by [\"order_id\"], columns (order_id (audits [matches])));\nSELECT JSONExtractString(kafka_value, 'order_id')::String AS order_id FROM __source(\"orders\")",
            ),
        ],
    )
    .unwrap_or_else(|d| panic!("{d:#?}"));
    assert_eq!(
        compiled.files["compiled/audits/regions__regions.sql"],
        "SELECT * FROM __ref(\"orders_clean\") WHERE order_id = 'Europe' OR 'shop_dev/dev/growth/False' = ''\n"
    );
    assert_eq!(
        compiled.files["compiled/audits/pipelines/pl__orders/staging/orders_clean__orders_clean.order_id.matches.1.sql"],
        "SELECT * FROM __ref(\"orders_clean\") WHERE order_id IN ('a', 'b')\n"
    );
}

#[test]
fn an_audit_macro_without_a_macros_folder_is_reported_where_it_is_called() {
    let diagnostics = compile_files(
        SHOP,
        &[(
            "audits/a.sql",
            "AUDIT (name a);\nSELECT * FROM __ref(\"orders_clean\") WHERE @nothing()\n",
        )],
    )
    .expect_err("unknown macro");
    assert_eq!(diagnostics.len(), 1, "{diagnostics:#?}");
    assert!(
        diagnostics[0]
            .message
            .contains("Unknown macro '@nothing' in 'audits/a.sql'"),
        "{}",
        diagnostics[0].message
    );
    assert_eq!(
        diagnostics[0].location.as_ref().map(ToString::to_string),
        Some("audits/a.sql:2:43".to_owned())
    );
}
