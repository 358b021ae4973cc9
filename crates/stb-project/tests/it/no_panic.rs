//! Arbitrary input never panics the loaders: it parses or it is reported.

use proptest::prelude::*;

use crate::support::{discover_in, write};

fn toml_like() -> impl Strategy<Value = String> {
    let fragments = prop::sample::select(vec![
        "name = \"shop\"\n",
        "default_target = \"dev\"\n",
        "[targets.dev]\n",
        "[build]\n",
        "max_pipelines = ",
        "[defaults]\n",
        "pipeline_mode = ",
        "\"virtual\"",
        "[naming]\n",
        "pipeline_prefix = \"${x}\"\n",
        "[[dependencies.allowed_cross_pipeline_references]]\n",
        "upstream_pipeline = 1\n",
        "= =",
        "[",
        "]",
        "\"",
        "'",
        "\n",
        "{",
        "}",
        "0",
        "-1",
        "true",
        "1e999",
        "é",
        "\u{0}",
    ]);
    prop::collection::vec(fragments, 0..24).prop_map(|parts| parts.concat())
}

fn yaml_like() -> impl Strategy<Value = String> {
    let fragments = prop::sample::select(vec![
        "sources:\n",
        "  - ",
        "name: orders\n",
        "kind: kafka\n",
        "kind: stream_table\n",
        "    replay_boundary:\n",
        "      mode: offsets\n",
        "      columns: {_replay_offset: o}\n",
        "settings: {a: 1}\n",
        "[",
        "]",
        "{",
        "}",
        ": ",
        "- ",
        "&a ",
        "*a ",
        "!!binary ",
        "\t",
        "\n",
        "'",
        "\"",
        "~",
    ]);
    prop::collection::vec(fragments, 0..24).prop_map(|parts| parts.concat())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn toml_trees_never_panic(text in any::<String>()) {
        let _ = stb_project::tree::parse_toml(&text);
    }

    #[test]
    fn yaml_trees_never_panic(text in any::<String>()) {
        let _ = stb_project::tree::parse_yaml(&text);
    }

    #[test]
    fn reference_scanning_never_panics(text in any::<String>()) {
        let _ = stb_project::refs::extract(&text);
        let _ = stb_project::pipelines::model_kind(&text);
    }

    #[test]
    fn discovery_reports_instead_of_panicking(project in toml_like(), sources in yaml_like(), local in toml_like()) {
        let dir = tempfile::tempdir().expect("tempdir");
        write(dir.path(), &[("streambuild_project.toml", &project), ("sources/orders.yml", &sources), ("streambuild_local.toml", &local)]);
        if let Err(diagnostics) = discover_in(dir.path(), None) {
            prop_assert!(diagnostics.iter().all(|d| !d.code.is_empty() && !d.hint.is_empty()));
        }
    }
}
