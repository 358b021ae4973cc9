//! What a model's header says for people: its `description` and its columns'.
//!
//! Read leniently: a header that does not parse, or a description that is not a string,
//! gives no documentation here (the compile reports the header's problems, with where).

use std::collections::BTreeMap;

use serde::Serialize;

use crate::header::HeaderValue;

/// A model's documentation, as the manifest, `stb discover --json`, `/api/definitions`
/// and the UI show it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ModelDocs {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Column name to its description, for the columns that have one.
    #[serde(
        rename = "column_descriptions",
        skip_serializing_if = "BTreeMap::is_empty"
    )]
    pub columns: BTreeMap<String, String>,
}

impl ModelDocs {
    /// The documentation in `text`'s MODEL header, if any.
    #[must_use]
    pub fn of(text: &str) -> Self {
        let Ok(file) = crate::file::split(text) else {
            return Self::default();
        };
        let header = &file.header.value;
        let described = |value: &HeaderValue| {
            value
                .get("description")
                .and_then(|d| d.value.as_str())
                .map(str::trim)
                .filter(|d| !d.is_empty())
                .map(str::to_owned)
        };
        let mut columns = BTreeMap::new();
        if let Some(HeaderValue::Map(entries)) = header.get("columns").map(|c| &c.value) {
            for (name, doc) in entries {
                if let Some(description) = described(&doc.value) {
                    columns.insert(name.value.clone(), description);
                }
            }
        }
        Self {
            description: described(header),
            columns,
        }
    }

    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.description.is_none() && self.columns.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::ModelDocs;

    #[test]
    fn descriptions_of_the_model_and_its_columns() {
        let docs = ModelDocs::of(
            "MODEL (\n  description \"Revenue per customer ); in cents\",\n  columns (\n    revenue_cents (description \"Sum of paid orders\", audits [not_null]),\n    customer_id (audits [not_null]),\n  ),\n);\nSELECT 1",
        );
        assert_eq!(
            docs.description.as_deref(),
            Some("Revenue per customer ); in cents")
        );
        assert_eq!(
            docs.columns.into_iter().collect::<Vec<_>>(),
            [("revenue_cents".to_owned(), "Sum of paid orders".to_owned())]
        );
    }

    #[test]
    fn nothing_is_read_from_a_header_that_does_not_parse_or_says_nothing() {
        assert!(ModelDocs::of("SELECT 1").is_empty());
        assert!(ModelDocs::of("MODEL (description").is_empty());
        assert!(ModelDocs::of("MODEL (description \"  \");\nSELECT 1").is_empty());
        assert!(ModelDocs::of("MODEL (description [1, 2]);\nSELECT 1").is_empty());
    }
}
