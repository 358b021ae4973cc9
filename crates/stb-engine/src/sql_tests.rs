//! SQL tests against the warehouse: each compiled test is one statement that rebuilds the
//! model chain from mocks as CTEs (nothing is created) and returns the rows that differ
//! from the expectation, as a multiset; no rows means the test passed. `stb test` and the
//! dev server run the same function.

use stb_compile::SqlTest;

use crate::audits::Executed;

/// One differing row: `missing` (expected, not produced) or `unexpected` (produced, not
/// expected), with how many times more.
#[derive(Debug, Clone, serde::Serialize)]
pub struct DiffRow {
    pub kind: String,
    pub values: Vec<Option<String>>,
    pub multiplicity: i64,
}

/// One test's outcome.
#[derive(Debug, serde::Serialize)]
pub struct TestResult {
    pub name: String,
    pub file: String,
    pub mode: String,
    /// `passed`, `failed` or `error`.
    pub status: &'static str,
    pub differences: Vec<DiffRow>,
    pub error: Option<String>,
    /// The models whose expected rows it compares.
    pub targets: Vec<String>,
    #[serde(skip)]
    sql: String,
}

impl TestResult {
    /// The row `_streambuild_node_results` keeps.
    #[must_use]
    pub fn node_result(&self) -> stb_warehouse::records::NodeResult<'_> {
        stb_warehouse::records::NodeResult {
            kind: "test",
            name: &self.name,
            status: self.status,
            severity: None,
            failure_count: self
                .differences
                .iter()
                .map(|d| d.multiplicity.unsigned_abs())
                .sum(),
            warmup_seconds: 0,
            definition: &self.sql,
            payload_json: serde_json::json!({
                "file": self.file,
                "mode": self.mode,
                "differences": self.differences,
            })
            .to_string(),
            error_message: self.error.as_deref(),
            schedule: None,
        }
    }
}

fn differences(rows: &stb_warehouse::Rows) -> Vec<DiffRow> {
    let values_column = rows.names.iter().position(|n| n == "_row_values");
    let mut found: Vec<DiffRow> = (0..rows.data.len())
        .map(|row| DiffRow {
            kind: rows.text(row, "_diff_type").unwrap_or_default(),
            values: values_column
                .and_then(|column| rows.data[row].get(column))
                .and_then(serde_json::Value::as_array)
                .map(|values| {
                    values
                        .iter()
                        .map(|v| v.as_str().map(str::to_owned))
                        .collect()
                })
                .unwrap_or_default(),
            multiplicity: rows
                .text(row, "_multiplicity")
                .and_then(|m| m.parse().ok())
                .unwrap_or(1),
        })
        .collect();
    // Missing rows first, then unexpected ones, each in value order: the same report
    // every time.
    found.sort_by(|a, b| (&a.kind, &a.values).cmp(&(&b.kind, &b.values)));
    found
}

/// Runs `tests`; their results and the statements that ran. A test whose statement fails
/// is an `error` result, not an error of the whole run.
#[must_use]
pub fn run_set(client: &stb_warehouse::Client, tests: &[&SqlTest]) -> (Vec<TestResult>, Executed) {
    let mut results = Vec::new();
    let mut executed = Vec::new();
    for test in tests {
        let sql = test.statement.clone();
        executed.push((format!("{}.sql", test.name), sql.clone()));
        let (status, differences, error) = match client.query(&sql) {
            Ok(rows) => {
                let differences = differences(&rows);
                let status = if differences.is_empty() {
                    "passed"
                } else {
                    "failed"
                };
                (status, differences, None)
            }
            Err(error) => ("error", Vec::new(), Some(error.to_string())),
        };
        results.push(TestResult {
            name: test.name.clone(),
            file: test.file.clone(),
            mode: test.mode.to_owned(),
            status,
            differences,
            error,
            targets: test.targets.clone(),
            sql,
        });
    }
    (results, executed)
}
