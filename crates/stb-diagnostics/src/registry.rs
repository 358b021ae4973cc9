//! Every error code StreamBuild reports, with what it means: one registry for the
//! whole workspace. `docs/errors.md` is this table; a workspace test keeps the two equal
//! and checks that every `STB-` code in the sources is here.

/// (code, what it means), ordered by family then number.
pub const CODES: &[(&str, &str)] = &[
    (
        "STB-ACCESS-001",
        "access.yml is invalid: unknown keys, permissions or pipelines, a permission at the wrong scope, a system role, duplicates",
    ),
    (
        "STB-ADMIN-001",
        "stb admin could not read a password: empty input, or the two typed at the prompt differ",
    ),
    (
        "STB-AUDIT-001",
        "an error-severity audit failed, or an audit the warehouse refuses to run",
    ),
    (
        "STB-BUILD-001",
        "`--json` or `--events` without `--auto-approve`",
    ),
    (
        "STB-BUILD-002",
        "a protected pipeline's confirmation token is missing",
    ),
    (
        "STB-BUILD-003",
        "a workflow statement failed (the step and the warehouse's message are given)",
    ),
    (
        "STB-BUILD-004",
        "an error-severity build audit failed (the build is applied)",
    ),
    (
        "STB-BUILD-005",
        "the rebuild would lose rows retained history cannot restore; nothing was changed",
    ),
    (
        "STB-BUILD-006",
        "the deployment id names a complete deployment; a build needs a new id",
    ),
    (
        "STB-BUILD-007",
        "the plan changed since it was reviewed (--plan-hash); nothing was changed",
    ),
    (
        "STB-BUILD-008",
        "the replays read more than the target's [build] max_replay_rows / max_replay_bytes; nothing was changed (--allow-large accepts it)",
    ),
    (
        "STB-CLUSTER-001",
        "the target's cluster topology (on_cluster, sharded) can be planned (`stb plan`, direct pipelines) but not built or changed yet; or its plan needs what a cluster cannot do yet (a virtual deployment, a sharded replay over an adopted table)",
    ),
    (
        "STB-CLUSTER-002",
        "a replicated target whose database is not a Replicated database",
    ),
    (
        "STB-CLUSTER-003",
        "an on_cluster or sharded target's cluster is not among the server's clusters (`system.clusters`)",
    ),
    ("STB-COMPILE-001", "a MODEL header is invalid"),
    (
        "STB-COMPILE-002",
        "a model's output contract, storage expressions or retention are invalid",
    ),
    ("STB-COMPILE-003", "a relation name is invalid or taken"),
    (
        "STB-COMPILE-004",
        "the model graph is invalid (cycles, forbidden references)",
    ),
    ("STB-COMPILE-005", "a source cannot be compiled"),
    (
        "STB-COMPILE-007",
        "the artifacts could not be written or read back",
    ),
    (
        "STB-COMPILE-008",
        "a SQL test file is invalid (also a warning: a mock nothing reads)",
    ),
    (
        "STB-COMPILE-009",
        "an audit file or a generic audit instance is invalid",
    ),
    (
        "STB-COMPILE-010",
        "a table model the target's cluster cannot hold (an engine without a replicated form, no sharding key)",
    ),
    (
        "STB-CONFIG-001",
        "no streambuild_project.toml where one was expected",
    ),
    (
        "STB-CONFIG-002",
        "a legacy YAML project or local config file",
    ),
    ("STB-CONFIG-003", "the TOML file does not parse"),
    ("STB-CONFIG-004", "a key the file does not allow"),
    ("STB-CONFIG-005", "a value of the wrong type"),
    ("STB-CONFIG-006", "a value outside what the key accepts"),
    (
        "STB-CONFIG-007",
        "a ${...} reference that cannot be resolved",
    ),
    (
        "STB-CONFIG-008",
        "a max_pipelines setting in the wrong place",
    ),
    ("STB-CONFIG-009", "the selected target is defined nowhere"),
    ("STB-CONFIG-010", "an invalid [dependencies] allowlist"),
    ("STB-CONFIG-011", "a key that must be a literal uses ${...}"),
    ("STB-CONFIG-012", "a required key is missing"),
    (
        "STB-CONTROL-001",
        "the control store cannot be reached or failed",
    ),
    (
        "STB-CONTROL-002",
        "the control store's schema is newer than this stb",
    ),
    ("STB-CONTROL-003", "no such user, role or assignment"),
    (
        "STB-CONTROL-004",
        "the account or assignment exists already",
    ),
    (
        "STB-CONTROL-005",
        "an invalid username, password, role or store URL",
    ),
    (
        "STB-CONTROL-006",
        "the last active admin cannot be disabled or lose the admin role",
    ),
    (
        "STB-DEPLOY-001",
        "the deployment is unknown or incomplete (its build did not finish)",
    ),
    (
        "STB-DEPLOY-002",
        "a relation a promotion or rollback needs is gone",
    ),
    (
        "STB-DEPLOY-003",
        "a rollback has nothing sound to return to (nothing published, live bindings match no publication, the target is active or never published)",
    ),
    (
        "STB-DEPLOY-004",
        "a deployment command in a project without virtual pipelines",
    ),
    (
        "STB-DEPLOY-005",
        "stb deployment diff --data --key names columns no compared relation has in both copies",
    ),
    (
        "STB-DESTROY-001",
        "a destruction that cannot be planned or run: an unknown or non-pipeline selection, a pipeline left out that reads a selected one, a view elsewhere that reads what it would drop, a plan that drifted before the drops, or a drop that failed",
    ),
    (
        "STB-DESTROY-002",
        "stb destroy or stb reset-target without a terminal on standard input",
    ),
    (
        "STB-DESTROY-003",
        "stb destroy or stb reset-target run by a local user who is not an active admin in the control store",
    ),
    (
        "STB-DEV-001",
        "stb dev refuses a setting: disabled authentication beyond loopback, insecure cookies beyond loopback, a session lifetime of 0, or a default proxy role other than viewer",
    ),
    ("STB-DEV-002", "stb dev cannot listen on its address"),
    (
        "STB-DISCOVER-001",
        "the project has no pipelines/ directory",
    ),
    (
        "STB-DISCOVER-002",
        "a pipeline directory holds no SQL model",
    ),
    (
        "STB-DISCOVER-003",
        "a pipeline directory lacks the configured prefix",
    ),
    ("STB-DISCOVER-004", "invalid [protection] in pipeline.toml"),
    (
        "STB-DISCOVER-005",
        "a virtual-only setting on a direct pipeline",
    ),
    ("STB-DISCOVER-006", "two model files with the same name"),
    (
        "STB-DISCOVER-007",
        "a pipeline, source or model name used twice",
    ),
    ("STB-DISCOVER-008", "a sources/*.yml file does not parse"),
    (
        "STB-DISCOVER-009",
        "a sources/*.yml file is not a `sources:` list of mappings",
    ),
    ("STB-DISCOVER-010", "an invalid source definition"),
    ("STB-DISCOVER-011", "two sources with the same name"),
    (
        "STB-DISCOVER-012",
        "a source name that is not an identifier",
    ),
    (
        "STB-DISCOVER-013",
        "two adopted sources map one table differently",
    ),
    (
        "STB-DISCOVER-014",
        "a naming macro that is not defined or has the wrong signature",
    ),
    (
        "STB-DISCOVER-015",
        "a pipeline directory the naming macro does not accept",
    ),
    (
        "STB-DISCOVER-016",
        "a macro raised, timed out or returned a non-string",
    ),
    (
        "STB-DISCOVER-017",
        "a macro file that cannot be loaded, or two macros with one name",
    ),
    (
        "STB-DISCOVER-018",
        "a file that cannot be read as UTF-8 text",
    ),
    (
        "STB-DISCOVER-019",
        "Python is needed for macros or sensors but cannot be started",
    ),
    (
        "STB-DISCOVER-020",
        "a malformed __source/__ref call, or no single driving input",
    ),
    (
        "STB-DISCOVER-021",
        "a pipeline whose table models do not reach exactly one source",
    ),
    (
        "STB-DISCOVER-022",
        "a sensor or provider file that cannot be loaded, a declaration against the rules, or a name used twice",
    ),
    (
        "STB-DISCOVER-023",
        "a sensor named like a pipeline, model or source",
    ),
    (
        "STB-INIT-001",
        "stb init refuses: a project or one of its files already exists there",
    ),
    ("STB-INIT-002", "stb init --name is not an identifier"),
    (
        "STB-INIT-003",
        "stb init could not write the project's files",
    ),
    (
        "STB-LINEAGE-001",
        "stb lineage: no such model or column, or a query on the way cannot be read for lineage",
    ),
    (
        "STB-LOCAL-001",
        "no usable Python 3.9+ with venv for the local stack",
    ),
    (
        "STB-LOCAL-002",
        "pip could not install the local stack's packages",
    ),
    ("STB-LOCAL-003", "a local stack port is taken"),
    ("STB-LOCAL-004", "a local service did not become ready"),
    (
        "STB-LOCAL-005",
        "a file in the local stack's state directory could not be written",
    ),
    (
        "STB-LOCAL-006",
        "a local service survived SIGTERM and SIGKILL",
    ),
    (
        "STB-LOCAL-007",
        "the local stack's stack.json is unreadable",
    ),
    (
        "STB-LOCAL-008",
        "stb local env or produce: nothing is running",
    ),
    (
        "STB-LOCAL-009",
        "the embedded engine stb compile --validate runs on is not installed",
    ),
    (
        "STB-LOCAL-010",
        "stb local produce could not read its messages from stdin",
    ),
    (
        "STB-LOCAL-011",
        "stb local produce could not create the topic or deliver a message",
    ),
    (
        "STB-LOCK-001",
        "another run holds the target's mutation lock",
    ),
    (
        "STB-LOCK-002",
        "the mutation lock changed hands while this run held it",
    ),
    (
        "STB-LOCK-003",
        "stb unlock refuses: the lock's run still heartbeats",
    ),
    (
        "STB-LOCK-004",
        "stb unlock could not give back the target a killed build left (rerun it once the cause is fixed)",
    ),
    (
        "STB-LOCK-005",
        "the target lock is held by a build suspended inside a chunked replay: resume it or give the target back",
    ),
    (
        "STB-MESSAGES-001",
        "a message console request off its document (filter, path, time, mode)",
    ),
    (
        "STB-MODEL-001",
        "no such model in the project (the dev server's model page)",
    ),
    (
        "STB-PLAN-001",
        "flags that cannot be combined, a malformed --start-time or stabilisation setting",
    ),
    (
        "STB-PLAN-002",
        "virtual pipelines reached a step for direct ones (the scope could not be split by mode)",
    ),
    ("STB-PLAN-003", "a prerequisite model does not exist"),
    (
        "STB-PLAN-004",
        "a replay root cannot be bounded (lineage columns missing, driving input not referenced)",
    ),
    ("STB-PLAN-005", "--changed cannot read the build records"),
    (
        "STB-PLAN-006",
        "a model's query or table fails the warehouse's check before anything changes",
    ),
    (
        "STB-RESUME-001",
        "stb build --resume refuses: no such run, or it cannot go on (still running, given back, resumed already, no resume point, a chunk that cannot run again exactly); nothing was changed",
    ),
    (
        "STB-RESUME-002",
        "stb build --resume refuses: the project's models, the build's relations or the retained history the rest of the replay reads changed; nothing was changed",
    ),
    ("STB-RUN-001", "target/run/ could not be written"),
    (
        "STB-RUNS-001",
        "stb runs show or cancel names no run of the target: no such id, too short a prefix, or a prefix several runs share",
    ),
    (
        "STB-RUNS-002",
        "stb runs cancel names a run that is not running (it ended, or it is presumed failed)",
    ),
    (
        "STB-RUNS-003",
        "a build overlaps a live run (running or unresponsive) and was not started",
    ),
    (
        "STB-RUNS-004",
        "the target lock is held by a run that stopped signalling; nothing ran",
    ),
    (
        "STB-RUNS-005",
        "a build was interrupted while it waited for the target lock; nothing ran",
    ),
    (
        "STB-RUNS-006",
        "a build started by the dev server touches pipelines beyond those it was authorised for; nothing started",
    ),
    ("STB-SELECT-001", "a selector's syntax is invalid"),
    ("STB-SELECT-002", "a selector names nothing that exists"),
    ("STB-SELECT-003", "a selector's namespace is unknown"),
    ("STB-SELECT-004", "a selected pipeline has no models"),
    ("STB-SELECT-005", "a test or audit selector matches nothing"),
    (
        "STB-SELECT-006",
        "the selection spans more pipelines than [build] max_pipelines allows",
    ),
    (
        "STB-SENSOR-001",
        "the sensors' ledger (control store) or the warehouse failed during a sensor operation; the ticks recorded so far stay",
    ),
    ("STB-SENSOR-002", "no sensor of that name in the project"),
    (
        "STB-SENSOR-003",
        "a sensor request refused: not an event sensor, not a dead letter, a skip without a reason, an unknown status or tick limit",
    ),
    (
        "STB-SOURCE-001",
        "an adopted table is missing or its replay columns do not fit",
    ),
    (
        "STB-SOURCE-002",
        "a managed landing drifted in a way a build cannot repair",
    ),
    ("STB-STATUS-001", "stb status --window is not a duration"),
    ("STB-TEST-001", "a SQL test failed or could not run"),
    (
        "STB-WAREHOUSE-001",
        "the warehouse is unreachable or timed out",
    ),
    (
        "STB-WAREHOUSE-002",
        "the warehouse refused the user or password",
    ),
    ("STB-WAREHOUSE-003", "the database does not exist"),
    ("STB-WAREHOUSE-004", "a table or view does not exist"),
    (
        "STB-WAREHOUSE-005",
        "the warehouse refused a statement for another reason",
    ),
];

/// The table docs/errors.md holds: one `| code | meaning |` row per code.
#[must_use]
pub fn markdown_table() -> String {
    let mut table = String::from("| Code | Meaning |\n|---|---|\n");
    for (code, meaning) in CODES {
        table.push_str(&format!("| `{code}` | {meaning} |\n"));
    }
    table
}

#[cfg(test)]
mod tests {
    use super::CODES;

    #[test]
    fn every_code_is_unique_and_well_formed() {
        let mut seen = std::collections::BTreeSet::new();
        for (code, meaning) in CODES {
            assert!(seen.insert(*code), "{code} is listed twice");
            let parts: Vec<&str> = code.split('-').collect();
            assert!(
                parts.len() == 3
                    && parts[0] == "STB"
                    && parts[1].chars().all(|c| c.is_ascii_uppercase())
                    && parts[2].len() == 3
                    && parts[2].chars().all(|c| c.is_ascii_digit()),
                "{code} is not STB-FAMILY-NNN"
            );
            assert!(!meaning.is_empty(), "{code} says what it means");
        }
    }
}
