//! What a person at a terminal gets (issue 25): coloured errors and hints there (not in
//! pipes, not under NO_COLOR, as `--color` says), and shell completion scripts.

use std::process::{Command, Output, Stdio};

/// A project whose one model misspells its source: discovery reports an error with a hint.
fn broken_project() -> tempfile::TempDir {
    stb_test_support::project_dir(&[
        (
            "streambuild_project.toml",
            "name = \"p\"\ndefault_target = \"dev\"\n[targets.dev]\ndatabase = \"p\"\n",
        ),
        (
            "sources/orders.yml",
            "sources:\n  - name: orders\n    kind: kafka\n    broker_list: \"localhost:9092\"\n    topic: orders\n    replay_boundary:\n      mode: offsets\n",
        ),
        (
            "pipelines/pl__orders/clean.sql",
            "SELECT 1::UInt8 AS x FROM __source(\"order\")\n",
        ),
    ])
}

const ESCAPE: &str = "\u{1b}[";

/// `stb discover` on `dir` under a pseudo-terminal (`script`), with `extra` arguments and
/// `env`: everything the terminal showed.
fn at_a_terminal(dir: &std::path::Path, extra: &str, env: &[(&str, &str)]) -> String {
    let line = format!(
        "'{}' discover --project-dir '{}' {extra}",
        assert_cmd::cargo::cargo_bin("stb").display(),
        dir.display()
    );
    let output = Command::new("script")
        .args(["-qec", &line, "/dev/null"])
        .env_remove("NO_COLOR")
        .env_remove("CLICOLOR_FORCE")
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .output()
        .expect("script runs");
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn piped(dir: &std::path::Path, extra: &[&str]) -> Output {
    Command::new(assert_cmd::cargo::cargo_bin("stb"))
        .args(["discover", "--project-dir"])
        .arg(dir)
        .args(extra)
        .env_remove("NO_COLOR")
        .env_remove("CLICOLOR_FORCE")
        .output()
        .expect("stb runs")
}

#[test]
fn errors_are_coloured_at_a_terminal_unless_no_color_or_color_never() {
    let dir = broken_project();
    let shown = at_a_terminal(dir.path(), "", &[]);
    assert!(
        shown.contains(&format!("{ESCAPE}1m{ESCAPE}31merror[STB-DISCOVER-021]")),
        "{shown:?}"
    );
    assert!(shown.contains("  hint:"), "{shown:?}");
    assert!(shown.contains("did you mean 'orders'?"), "{shown:?}");
    let plain = at_a_terminal(dir.path(), "", &[("NO_COLOR", "1")]);
    assert!(plain.contains("error[STB-DISCOVER-021]"), "{plain:?}");
    assert!(!plain.contains(ESCAPE), "NO_COLOR: {plain:?}");
    let never = at_a_terminal(dir.path(), "--color never", &[]);
    assert!(!never.contains(ESCAPE), "--color never: {never:?}");
}

#[test]
fn pipes_get_plain_text_unless_color_always() {
    let dir = broken_project();
    let plain = piped(dir.path(), &[]);
    assert_eq!(plain.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&plain.stderr);
    assert!(
        stderr.starts_with("error[STB-DISCOVER-021] pipelines/pl__orders/clean.sql:1:27: "),
        "{stderr:?}"
    );
    assert!(!stderr.contains(ESCAPE), "{stderr:?}");
    let forced = piped(dir.path(), &["--color", "always"]);
    let stderr = String::from_utf8_lossy(&forced.stderr);
    assert!(stderr.contains(ESCAPE), "{stderr:?}");
    // JSON is never coloured.
    let json = piped(dir.path(), &["--color", "always", "--json"]);
    let value: serde_json::Value = serde_json::from_slice(&json.stdout).expect("plain JSON");
    assert_eq!(value["errors"][0]["code"], "STB-DISCOVER-021");
}

#[test]
fn completion_scripts_cover_every_shell_and_command() {
    let expectations = [
        ("bash", "_stb()"),
        ("zsh", "#compdef stb"),
        ("fish", "complete -c stb"),
        ("powershell", "Register-ArgumentCompleter"),
        ("elvish", "edit:completion:arg-completer[stb]"),
    ];
    for (shell, marker) in expectations {
        let output = Command::new(assert_cmd::cargo::cargo_bin("stb"))
            .args(["completions", shell])
            .output()
            .expect("stb runs");
        assert!(output.status.success(), "{shell}");
        let script = String::from_utf8_lossy(&output.stdout);
        assert!(script.contains(marker), "{shell}: no {marker}");
        for command in ["init", "build", "deployment", "completions"] {
            assert!(script.contains(command), "{shell} completes {command}");
        }
    }
}

#[test]
fn the_help_names_the_pages_a_new_user_starts_with() {
    let output = Command::new(assert_cmd::cargo::cargo_bin("stb"))
        .arg("--help")
        .output()
        .expect("stb runs");
    let help = String::from_utf8_lossy(&output.stdout);
    for page in ["install", "quickstart", "concepts", "troubleshooting"] {
        let path = format!("docs/{page}.md");
        assert!(help.contains(&path), "stb --help names {path}: {help}");
        let file = stb_test_support::package_dir().join("../..").join(&path);
        assert!(file.is_file(), "{path} exists");
    }
    assert!(help.contains("init"), "{help}");
    assert!(help.contains("completions"), "{help}");
}
