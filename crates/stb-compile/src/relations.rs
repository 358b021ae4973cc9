//! Physical relation names: model relations, managed landing tables, adopted tables.

use stb_ddl::QualifiedName;
use stb_project::sources::{Source, SourceKind};

use crate::codes;

const RESERVED_PREFIXES: &[&str] = &["kafka__", "raw__", "mv__"];

/// Checks a model's relation name; returns the message when it is not usable.
pub(crate) fn check_relation_name(
    model: &str,
    relation: &str,
) -> Result<(), (&'static str, String, &'static str)> {
    if !stb_project::is_identifier(relation) {
        return Err((
            codes::RELATION,
            format!(
                "Model '{model}' resolves to invalid relation name '{relation}'; expected a non-empty unqualified identifier"
            ),
            "rename the model file or set relation_name in its MODEL header",
        ));
    }
    if RESERVED_PREFIXES.iter().any(|p| relation.starts_with(p)) {
        return Err((
            codes::RELATION,
            format!(
                "Model '{model}' relation '{relation}' uses reserved prefix; kafka__, raw__, and mv__ are framework-owned"
            ),
            "choose another relation_name or table/view prefix",
        ));
    }
    if looks_deployment_suffixed(relation) {
        return Err((
            codes::RELATION,
            format!(
                "Model '{model}' relation '{relation}' looks like a fixed deployment-suffixed physical name"
            ),
            "deployment suffixes are added by StreamBuild; drop the suffix",
        ));
    }
    Ok(())
}

/// `__YYYYMMDDTHHMMSSZ_<6 hex>` or `__reconcile_YYYYMMDDTHHMMSSZ` at the end.
fn looks_deployment_suffixed(name: &str) -> bool {
    let stamp = |s: &str| {
        s.len() == 16
            && s.as_bytes()[8] == b'T'
            && s.ends_with('Z')
            && s[..8].chars().all(|c| c.is_ascii_digit())
            && s[9..15].chars().all(|c| c.is_ascii_digit())
    };
    if let Some((_, rest)) = name.rsplit_once("__reconcile_")
        && stamp(rest)
    {
        return true;
    }
    let Some((_, tail)) = name.rsplit_once("__") else {
        return false;
    };
    let Some((time, hex)) = tail.split_once('_') else {
        return false;
    };
    stamp(time) && hex.len() == 6 && hex.chars().all(|c| c.is_ascii_hexdigit())
}

/// The relation text a reference to `source` becomes in model SQL.
pub(crate) fn source_relation(database: &str, source: &Source) -> Option<String> {
    match source.kind {
        SourceKind::Kafka => {
            Some(QualifiedName::new(database, &format!("raw__{}", source.name)).to_string())
        }
        SourceKind::StreamTable => {
            let table = QualifiedName::new(database, source.table_name.as_deref()?).to_string();
            let aliases: Vec<String> = source
                .columns
                .iter()
                .filter(|(role, column)| role != column)
                .map(|(role, column)| format!("{} AS {role}", stb_ddl::identifier(column)))
                .collect();
            if aliases.is_empty() {
                Some(table)
            } else {
                Some(format!("(SELECT *, {} FROM {table})", aliases.join(", ")))
            }
        }
        SourceKind::Postgres => {
            let pg = source.postgres.as_ref()?;
            // The password is a placeholder the runtime fills from the environment when the
            // DDL runs: compile never needs it and artifacts never hold it.
            let password = pg
                .password_env
                .as_ref()
                .map_or_else(String::new, |env| format!("__streambuild_secret__{env}__"));
            Some(format!(
                "postgresql({}, {}, {}, {}, {})",
                stb_ddl::string_literal(&format!("{}:{}", pg.host, pg.port)),
                stb_ddl::string_literal(&pg.database),
                stb_ddl::string_literal(&pg.table),
                stb_ddl::string_literal(&pg.user),
                stb_ddl::string_literal(&password)
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relation_names() {
        assert!(check_relation_name("m", "tbl__orders").is_ok());
        assert!(check_relation_name("m", "orders-2").is_err());
        assert!(check_relation_name("m", "raw__orders").is_err());
        assert!(check_relation_name("m", "orders__20260101T000000Z_abc123").is_err());
        assert!(check_relation_name("m", "orders__reconcile_20260101T000000Z").is_err());
        assert!(check_relation_name("m", "orders__20260101").is_ok());
    }
}
