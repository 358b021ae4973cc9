//! Every diagnostic code discovery can report, in one place. `docs/project.md` lists them.

/// (code, what it means)
pub const ALL: &[(&str, &str)] = &[
    (
        ACCESS_POLICY,
        "access.yml is invalid: unknown keys, permissions or pipelines, a permission at the wrong scope, a system role, duplicates",
    ),
    (
        CONFIG_NOT_FOUND,
        "no streambuild_project.toml where one was expected",
    ),
    (
        CONFIG_LEGACY_YAML,
        "a legacy YAML project or local config file",
    ),
    (CONFIG_SYNTAX, "the TOML file does not parse"),
    (CONFIG_UNKNOWN_KEY, "a key the file does not allow"),
    (CONFIG_TYPE, "a value of the wrong type"),
    (CONFIG_VALUE, "a value outside what the key accepts"),
    (
        CONFIG_INTERPOLATION,
        "a ${...} reference that cannot be resolved",
    ),
    (
        CONFIG_BUILD_LIMIT,
        "a max_pipelines setting in the wrong place",
    ),
    (
        CONFIG_UNKNOWN_TARGET,
        "the selected target is defined nowhere",
    ),
    (CONFIG_DEPENDENCIES, "an invalid [dependencies] allowlist"),
    (CONFIG_LITERAL, "a key that must be a literal uses ${...}"),
    (CONFIG_MISSING, "a required key is missing"),
    (
        DISCOVER_NO_PIPELINES_DIR,
        "the project has no pipelines/ directory",
    ),
    (
        DISCOVER_EMPTY_PIPELINE,
        "a pipeline directory holds no SQL model",
    ),
    (
        DISCOVER_PIPELINE_PREFIX,
        "a pipeline directory lacks the configured prefix",
    ),
    (DISCOVER_PROTECTION, "invalid [protection] in pipeline.toml"),
    (
        DISCOVER_DIRECT_ONLY,
        "a virtual-only setting on a direct pipeline",
    ),
    (
        DISCOVER_DUPLICATE_MODEL,
        "two model files with the same name",
    ),
    (
        DISCOVER_NAME_COLLISION,
        "a pipeline, source or model name used twice",
    ),
    (DISCOVER_SOURCE_YAML, "a sources/*.yml file does not parse"),
    (
        DISCOVER_SOURCE_SHAPE,
        "a sources/*.yml file is not a `sources:` list of mappings",
    ),
    (DISCOVER_SOURCE, "an invalid source definition"),
    (DISCOVER_DUPLICATE_SOURCE, "two sources with the same name"),
    (
        DISCOVER_SOURCE_NAME,
        "a source name that is not an identifier",
    ),
    (
        DISCOVER_ADOPTED_CONFLICT,
        "two adopted sources map one table differently",
    ),
    (
        DISCOVER_MACRO_MISSING,
        "a naming macro that is not defined or has the wrong signature",
    ),
    (
        DISCOVER_NAMING_MISMATCH,
        "a pipeline directory the naming macro does not accept",
    ),
    (
        DISCOVER_MACRO_FAILED,
        "a macro raised, timed out or returned a non-string",
    ),
    (
        DISCOVER_MACRO_LOAD,
        "a macro file that cannot be loaded, or two macros with one name",
    ),
    (
        DISCOVER_UNREADABLE,
        "a file that cannot be read as UTF-8 text",
    ),
    (
        DISCOVER_PYTHON,
        "Python is needed for macros or sensors but cannot be started",
    ),
    (
        DISCOVER_REFS,
        "a malformed __source/__ref call, or no single driving input",
    ),
    (
        DISCOVER_PIPELINE_SOURCE,
        "a pipeline whose table models do not reach exactly one source",
    ),
    (
        DISCOVER_SENSOR_LOAD,
        "a sensor or provider file that cannot be loaded, a declaration against the rules, or a name used twice",
    ),
    (
        DISCOVER_SENSOR_NAME,
        "a sensor named like a pipeline, model or source",
    ),
];

pub const ACCESS_POLICY: &str = "STB-ACCESS-001";
pub const CONFIG_NOT_FOUND: &str = "STB-CONFIG-001";
pub const CONFIG_LEGACY_YAML: &str = "STB-CONFIG-002";
pub const CONFIG_SYNTAX: &str = "STB-CONFIG-003";
pub const CONFIG_UNKNOWN_KEY: &str = "STB-CONFIG-004";
pub const CONFIG_TYPE: &str = "STB-CONFIG-005";
pub const CONFIG_VALUE: &str = "STB-CONFIG-006";
pub const CONFIG_INTERPOLATION: &str = "STB-CONFIG-007";
pub const CONFIG_BUILD_LIMIT: &str = "STB-CONFIG-008";
pub const CONFIG_UNKNOWN_TARGET: &str = "STB-CONFIG-009";
pub const CONFIG_DEPENDENCIES: &str = "STB-CONFIG-010";
pub const CONFIG_LITERAL: &str = "STB-CONFIG-011";
pub const CONFIG_MISSING: &str = "STB-CONFIG-012";

pub const DISCOVER_NO_PIPELINES_DIR: &str = "STB-DISCOVER-001";
pub const DISCOVER_EMPTY_PIPELINE: &str = "STB-DISCOVER-002";
pub const DISCOVER_PIPELINE_PREFIX: &str = "STB-DISCOVER-003";
pub const DISCOVER_PROTECTION: &str = "STB-DISCOVER-004";
pub const DISCOVER_DIRECT_ONLY: &str = "STB-DISCOVER-005";
pub const DISCOVER_DUPLICATE_MODEL: &str = "STB-DISCOVER-006";
pub const DISCOVER_NAME_COLLISION: &str = "STB-DISCOVER-007";
pub const DISCOVER_SOURCE_YAML: &str = "STB-DISCOVER-008";
pub const DISCOVER_SOURCE_SHAPE: &str = "STB-DISCOVER-009";
pub const DISCOVER_SOURCE: &str = "STB-DISCOVER-010";
pub const DISCOVER_DUPLICATE_SOURCE: &str = "STB-DISCOVER-011";
pub const DISCOVER_SOURCE_NAME: &str = "STB-DISCOVER-012";
pub const DISCOVER_ADOPTED_CONFLICT: &str = "STB-DISCOVER-013";
pub const DISCOVER_MACRO_MISSING: &str = "STB-DISCOVER-014";
pub const DISCOVER_NAMING_MISMATCH: &str = "STB-DISCOVER-015";
pub const DISCOVER_MACRO_FAILED: &str = "STB-DISCOVER-016";
pub const DISCOVER_MACRO_LOAD: &str = "STB-DISCOVER-017";
pub const DISCOVER_UNREADABLE: &str = "STB-DISCOVER-018";
pub const DISCOVER_PYTHON: &str = "STB-DISCOVER-019";
pub const DISCOVER_REFS: &str = "STB-DISCOVER-020";
pub const DISCOVER_PIPELINE_SOURCE: &str = "STB-DISCOVER-021";
pub const DISCOVER_SENSOR_LOAD: &str = "STB-DISCOVER-022";
pub const DISCOVER_SENSOR_NAME: &str = "STB-DISCOVER-023";

#[cfg(test)]
mod tests {
    #[test]
    fn codes_are_unique() {
        let mut codes: Vec<&str> = super::ALL.iter().map(|(code, _)| *code).collect();
        let total = codes.len();
        codes.sort_unstable();
        codes.dedup();
        assert_eq!(codes.len(), total);
    }
}
