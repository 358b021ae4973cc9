//! A mistyped name is reported where it was typed, with the name it probably meant.

use stb_diagnostics::Diagnostic;

use crate::support::{DELETE, discover_files};

fn only_error(files: &[(&str, &str)]) -> Diagnostic {
    let diagnostics = discover_files(files).expect_err("discovery fails");
    assert_eq!(diagnostics.len(), 1, "{diagnostics:#?}");
    diagnostics.into_iter().next().expect("one")
}

#[test]
fn a_mistyped_ref_deep_in_a_chain_is_reported_at_its_call_with_a_suggestion() {
    // a_first reads b_second, which misspells orders_clean: the error is b_second's, at
    // its call, whichever model discovery walked from.
    let error = only_error(&[
        (
            "pipelines/pl__orders/a_first.sql",
            "SELECT id FROM __ref(\"b_second\")\n",
        ),
        (
            "pipelines/pl__orders/b_second.sql",
            "SELECT id\nFROM __ref(\"orders_clen\")\n",
        ),
    ]);
    assert_eq!(error.code, "STB-DISCOVER-021");
    assert_eq!(
        error.location.as_ref().map(ToString::to_string).as_deref(),
        Some("pipelines/pl__orders/b_second.sql:2:6")
    );
    assert!(error.message.contains("(from model 'b_second')"), "{error}");
    assert!(!error.message.contains("a_first"), "{error}");
    assert!(
        error.hint.starts_with("did you mean 'orders_clean'? "),
        "{error}"
    );
}

#[test]
fn a_mistyped_source_gets_the_source_it_meant() {
    let error = only_error(&[(
        "pipelines/pl__orders/orders_clean.sql",
        "SELECT id::UInt64 AS id FROM __source(\"order\")\n",
    )]);
    assert_eq!(
        error.location.as_ref().map(ToString::to_string).as_deref(),
        Some("pipelines/pl__orders/orders_clean.sql:1:30")
    );
    assert!(error.hint.starts_with("did you mean 'orders'? "), "{error}");
}

#[test]
fn a_mistyped_config_key_gets_the_key_it_meant() {
    let error = only_error(&[(
        "streambuild_project.toml",
        "name = \"shop\"\ndefault_target = \"dev\"\n\n[defaults]\npipeline_mod = \"direct\"\n\n[targets.dev]\ndatabase = \"shop_dev\"\n",
    )]);
    assert_eq!(error.code, "STB-CONFIG-004");
    assert!(
        error.hint.starts_with("did you mean 'pipeline_mode'? "),
        "{error}"
    );
}

#[test]
fn sources_in_yaml_files_are_read_like_yml_ones() {
    let project = discover_files(&[
        ("sources/orders.yml", DELETE),
        (
            "sources/orders.yaml",
            "sources:\n  - name: orders\n    kind: kafka\n    broker_list: \"localhost:9092\"\n    topic: orders\n    replay_boundary:\n      mode: offsets\n",
        ),
    ])
    .expect("discovers");
    assert_eq!(project.pipelines[0].source.as_deref(), Some("orders"));
}
