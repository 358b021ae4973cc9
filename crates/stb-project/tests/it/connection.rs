//! The connection is merged by discovery and resolved only when a command connects.

use crate::support::{discover_in, write};

const PROJECT: &str = r#"name = "shop"
default_target = "dev"

[vars]
ch_host = "ch.internal"

[connection]
host = "${ch_host}"
port = 8123
username = "team"
password = "${ENV:SHOP_CH_PASSWORD}"

[connection.settings]
async_insert = true
max_threads = 4

[targets.dev]
database = "shop_dev"

[targets.dev.connection]
port = 9000
"#;

fn project(local: Option<&str>) -> stb_project::Project {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut files = vec![("streambuild_project.toml", PROJECT)];
    if let Some(local) = local {
        files.push(("streambuild_local.toml", local));
    }
    write(dir.path(), &files);
    discover_in(dir.path(), None).unwrap_or_else(|d| panic!("{d:#?}"))
}

#[test]
fn layers_merge_by_whole_key_and_resolve_at_connect_time() {
    // Discovery succeeded without SHOP_CH_PASSWORD: nothing was resolved yet.
    let project = project(Some(
        "[targets.dev.connection]\nusername = \"me\"\nport = 9440\n\n[connection]\nport = 8124\n",
    ));
    let env = |name: &str| (name == "SHOP_CH_PASSWORD").then(|| "pw".to_owned());
    let resolved = project.connection.resolve(&env).expect("resolves");
    assert_eq!(resolved.host.as_deref(), Some("ch.internal"));
    assert_eq!(
        resolved.port,
        Some(8124),
        "the local top-level table beats the local target"
    );
    assert_eq!(resolved.username.as_deref(), Some("me"));
    assert_eq!(resolved.password.as_deref(), Some("pw"));
    assert_eq!(
        resolved.settings.into_iter().collect::<Vec<_>>(),
        [
            ("async_insert".to_owned(), "1".to_owned()),
            ("max_threads".to_owned(), "4".to_owned())
        ]
    );
}

#[test]
fn a_missing_environment_variable_fails_only_when_connecting() {
    let project = project(None);
    let error = project
        .connection
        .resolve(&|_| None)
        .expect_err("no password");
    assert_eq!(error.code, "STB-CONFIG-007");
    assert!(
        error.message.contains("SHOP_CH_PASSWORD"),
        "{}",
        error.message
    );
    assert_eq!(
        error.location.as_ref().map(ToString::to_string).as_deref(),
        Some("streambuild_project.toml:11:12")
    );
}

#[test]
fn the_audit_scheduler_is_enabled_by_the_nearest_setting() {
    let discover = |project: &str, local: Option<&str>| {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut files = vec![("streambuild_project.toml", project)];
        if let Some(local) = local {
            files.push(("streambuild_local.toml", local));
        }
        write(dir.path(), &files);
        discover_in(dir.path(), None)
            .unwrap_or_else(|d| panic!("{d:#?}"))
            .audit_scheduler_enabled
    };
    let base = "name = \"shop\"\ndefault_target = \"dev\"\n[targets.dev]\ndatabase = \"d\"\n";
    assert!(!discover(base, None), "off by default");
    let on = format!("{base}[audit_scheduler]\nenabled = true\n");
    assert!(discover(&on, None));
    let target_off = format!("{on}[targets.dev.audit_scheduler]\nenabled = false\n");
    assert!(!discover(&target_off, None), "the target beats the project");
    assert!(
        discover(
            &target_off,
            Some("[targets.dev.audit_scheduler]\nenabled = true\n")
        ),
        "the local target beats both"
    );
}
