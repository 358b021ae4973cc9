//! A plan as Markdown, for a pull request's comment (`stb plan --format markdown`): one
//! summary line (models rebuilt, rows at risk, breaking or not), what it destroys first,
//! then model by model, with SQL diffs folded. Kept under a size (GitHub refuses comments
//! over 65,536 characters): what does not fit is left out, largest first, and a note
//! says what and where the whole plan is.
//!
//! Rendered from the plan's JSON document (what `stb plan --json` prints), so a plan read
//! back from `target/run/plan/plan.json` renders the same.

use std::fmt::Write as _;

use serde_json::Value;

use super::Document;

/// GitHub's limit on a comment's body, in characters.
pub const GITHUB_COMMENT_LIMIT: usize = 65_536;

/// What the note at the end takes at most, kept free under the limit.
const NOTE_ROOM: usize = 400;

/// `document` as Markdown of at most `limit` characters.
#[must_use]
pub fn markdown(document: &Document<'_>, limit: usize) -> String {
    let value = serde_json::to_value(document).unwrap_or_default();
    let mut parts = Parts::default();
    match value["mode"].as_str() {
        Some("mixed") => {
            let staged = &value["virtual"];
            let direct = &value["direct"];
            parts.title = format!(
                "## StreamBuild plan: `{}` (mixed: virtual, then direct)",
                text(&direct["database"])
            );
            let (virtual_summary, direct_summary) = (summary_of(staged), summary_of(direct));
            parts.summary = combined(&virtual_summary, &direct_summary, &value["plan_hash"]);
            if !staged.is_null() {
                virtual_parts(staged, &mut parts, "Virtual phase: ");
            }
            direct_parts(direct, &mut parts, "Direct phase: ");
        }
        Some("virtual environments") => {
            parts.title = format!(
                "## StreamBuild plan: `{}` (virtual deployment `{}`)",
                text(&value["database"]),
                text(&value["deployment_id"])
            );
            parts.summary = summary_line(&summary_of(&value), &value["plan_hash"]);
            virtual_parts(&value, &mut parts, "");
        }
        _ => {
            parts.title = format!(
                "## StreamBuild plan: `{}` (direct)",
                text(&value["database"])
            );
            parts.summary = summary_line(&summary_of(&value), &value["plan_hash"]);
            direct_parts(&value, &mut parts, "");
        }
    }
    parts.assemble(limit)
}

/// What the summary line counts.
#[derive(Debug, Default, Clone, Copy)]
struct Summary {
    models: usize,
    rows_at_risk: u64,
    breaking: bool,
    destructive: usize,
}

fn summary_of(plan: &Value) -> Summary {
    if plan.is_null() {
        return Summary::default();
    }
    if plan["mode"] == "virtual environments" {
        let changes = array(&plan["object_changes"]);
        let mut models: Vec<&str> = changes
            .iter()
            .filter(|c| c["change_type"] != "no_op")
            .filter_map(|c| c["model"].as_str())
            .collect();
        models.sort_unstable();
        models.dedup();
        return Summary {
            models: models.len(),
            rows_at_risk: 0,
            breaking: changes
                .iter()
                .any(|c| c["schema_change_kind"] == "breaking"),
            destructive: 0,
        };
    }
    Summary {
        models: array(&plan["entries"]).len(),
        rows_at_risk: plan["shrink"]["lost_rows"].as_u64().unwrap_or(0),
        // A direct rebuild replaces its tables in place: readers see the new columns at once.
        breaking: array(&plan["entries"])
            .iter()
            .any(|e| e["sql_change"]["status"] == "query_changed"),
        destructive: array(&plan["teardown"]).len(),
    }
}

fn summary_line(summary: &Summary, hash: &Value) -> String {
    let breaking = if summary.breaking {
        "**breaking**"
    } else {
        "not breaking"
    };
    let mut line = format!(
        "**{} {} rebuilt** · **{} rows at risk** · {} dropped and rebuilt · {breaking}",
        summary.models,
        if summary.models == 1 {
            "model"
        } else {
            "models"
        },
        thousands(summary.rows_at_risk),
        match summary.destructive {
            1 => "1 relation".to_owned(),
            n => format!("{n} relations"),
        },
    );
    if let Some(hash) = hash.as_str() {
        let _ = write!(line, " · plan `{}`", short(hash));
    }
    line
}

fn combined(staged: &Summary, direct: &Summary, hash: &Value) -> String {
    summary_line(
        &Summary {
            models: staged.models + direct.models,
            rows_at_risk: staged.rows_at_risk + direct.rows_at_risk,
            breaking: staged.breaking || direct.breaking,
            destructive: staged.destructive + direct.destructive,
        },
        hash,
    )
}

/// The sections of a comment: kept always (title, summary, what it destroys), then
/// model tables, then the folded diffs; the last ones give way first.
#[derive(Default)]
struct Parts {
    title: String,
    summary: String,
    destructive: Vec<String>,
    sections: Vec<String>,
    /// (model, folded diff block)
    diffs: Vec<(String, String)>,
    warnings: Vec<String>,
}

impl Parts {
    fn assemble(self, limit: usize) -> String {
        let mut head = format!("{}\n\n{}\n", self.title, self.summary);
        if self.destructive.is_empty() {
            head.push_str("\nNothing is dropped or replaced.\n");
        } else {
            head.push_str("\n### Destructive steps first\n\n");
            for line in &self.destructive {
                let _ = writeln!(head, "- {line}");
            }
        }
        if !self.warnings.is_empty() {
            head.push_str("\n### Warnings\n\n");
            for warning in &self.warnings {
                let _ = writeln!(head, "- {warning}");
            }
        }
        let budget = limit.saturating_sub(NOTE_ROOM);
        let mut out = head;
        let mut left_out_sections = 0;
        for section in &self.sections {
            if chars(&out) + chars(section) < budget {
                out.push('\n');
                out.push_str(section);
            } else {
                left_out_sections += 1;
            }
        }
        let mut left_out_diffs: Vec<&str> = Vec::new();
        let mut first_diff = true;
        for (model, diff) in &self.diffs {
            let heading = if first_diff {
                "\n### SQL diffs\n\n"
            } else {
                ""
            };
            if chars(&out) + chars(heading) + chars(diff) <= budget {
                out.push_str(heading);
                out.push_str(diff);
                first_diff = false;
            } else {
                left_out_diffs.push(model);
            }
        }
        if left_out_sections > 0 || !left_out_diffs.is_empty() {
            let mut note = String::from("\n> Truncated to fit a comment: ");
            let mut said = Vec::new();
            if left_out_sections > 0 {
                said.push(format!("{left_out_sections} section(s) left out"));
            }
            if !left_out_diffs.is_empty() {
                said.push(format!(
                    "the SQL diffs of {} model(s) left out",
                    left_out_diffs.len()
                ));
            }
            note.push_str(&said.join(", "));
            note.push_str(". `stb plan -v` or `stb plan --json` shows the whole plan.\n");
            out.push_str(&note);
        }
        // A limit smaller than the kept parts themselves: cut at a character boundary.
        if chars(&out) > limit {
            out = out.chars().take(limit.saturating_sub(1)).collect();
            out.push('…');
        }
        out
    }
}

fn direct_parts(plan: &Value, parts: &mut Parts, phase: &str) {
    for relation in array(&plan["teardown"]) {
        parts.destructive.push(format!(
            "{phase}drop {} `{}` where it exists, then build it again",
            kind(&relation["kind"]),
            text(&relation["relation"])
        ));
    }
    let shrink = &plan["shrink"];
    if shrink["lost_rows"].as_u64().unwrap_or(0) > 0 {
        parts.destructive.insert(
            0,
            format!(
                "{phase}**{} rows are lost**: retained history no longer holds them ({}); `stb build` refuses without `--allow-shrink`",
                thousands(shrink["lost_rows"].as_u64().unwrap_or(0)),
                array(&shrink["models"])
                    .iter()
                    .map(|m| format!("`{}`", text(m)))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        );
    }
    let entries = array(&plan["entries"]);
    if !entries.is_empty() {
        let mut table = format!(
            "### {phase}Models ({})\n\n| Model | Why | Its SQL | Replays |\n|---|---|---|---|\n",
            entries.len()
        );
        for entry in entries {
            let model = text(&entry["model"]);
            let replay = array(&plan["replay_roots"])
                .iter()
                .find(|r| r["model"] == entry["model"])
                .map_or_else(String::new, |r| {
                    format!(
                        "from `{}` ({})",
                        text(&r["driving_input"]),
                        text(&r["replay_boundary_mode"])
                    )
                });
            let _ = writeln!(
                table,
                "| `{model}` | {} | {} | {replay} |",
                reason(&entry["reason"]),
                sql_status(&entry["sql_change"]["status"]),
            );
            let diff = text(&entry["sql_change"]["unified_diff"]);
            if !diff.trim().is_empty() {
                parts.diffs.push((model.to_owned(), folded(model, diff)));
            }
        }
        parts.sections.push(table);
    }
    for warning in array(&plan["warnings"]) {
        parts.warnings.push(format!("{phase}{}", words(warning)));
    }
}

fn virtual_parts(plan: &Value, parts: &mut Parts, phase: &str) {
    let changes = array(&plan["object_changes"]);
    if !changes.is_empty() {
        let mut table = format!(
            "### {phase}Deployment `{}` ({} objects)\n\nStaged beside production; readers switch when it is promoted.\n\n| Object | Model | Change | Schema |\n|---|---|---|---|\n",
            text(&plan["deployment_id"]),
            changes.len()
        );
        for change in changes {
            let schema = change["schema_change_kind"]
                .as_str()
                .map_or_else(String::new, |k| k.replace('_', "-"));
            let _ = writeln!(
                table,
                "| `{}` | `{}` | {} | {schema} |",
                text(&change["key"]["name"]),
                text(&change["model"]),
                words(&change["change_type"]),
            );
        }
        parts.sections.push(table);
    }
    let subtrees = array(&plan["rebuild_subtrees"]);
    if !subtrees.is_empty() {
        let mut list = format!("### {phase}Rebuilds\n\n");
        for subtree in subtrees {
            let _ = writeln!(
                list,
                "- `{}` and what reads it ({} models): {}",
                text(&subtree["root_key"]),
                array(&subtree["affected_keys"]).len(),
                words(&subtree["execution_mode"])
            );
        }
        parts.sections.push(list);
    }
    for diff in array(&plan["sql_diffs"]) {
        let name = text(&diff["name"]);
        let lines: Vec<&str> = array(&diff["diff_lines"]).iter().map(text).collect();
        if !lines.is_empty() {
            parts
                .diffs
                .push((name.to_owned(), folded(name, &lines.join("\n"))));
        }
    }
    for warning in array(&plan["warnings"]) {
        parts.warnings.push(format!("{phase}{}", words(warning)));
    }
}

/// A diff in a `<details>` block, fenced so that no line of it is read as Markdown.
fn folded(name: &str, diff: &str) -> String {
    let longest_run = diff.split(|c| c != '`').map(str::len).max().unwrap_or(0);
    let fence = "`".repeat(longest_run.max(2) + 1);
    format!(
        "<details><summary><code>{}</code></summary>\n\n{fence}diff\n{}\n{fence}\n\n</details>\n",
        escape_html(name),
        diff.trim_end_matches('\n')
    )
}

fn escape_html(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

fn array(value: &Value) -> &[Value] {
    value.as_array().map_or(&[], Vec::as_slice)
}

fn text(value: &Value) -> &str {
    value.as_str().unwrap_or("")
}

/// An identifier-like value in words (`first_baseline` → `first baseline`), `|` escaped
/// for a table cell.
fn words(value: &Value) -> String {
    value
        .as_str()
        .map_or_else(|| value.to_string(), |s| s.replace('_', " "))
        .replace('|', "\\|")
}

/// Why a direct plan rebuilds a model, as a reviewer reads it.
fn reason(value: &Value) -> String {
    match text(value) {
        "all_models" => "the whole project is built".to_owned(),
        "selected" => "selected".to_owned(),
        "changed" => "changed since its last build".to_owned(),
        "missing_upstream" => "missing, and the selection reads it".to_owned(),
        "source_drift" => "its source's Kafka settings changed".to_owned(),
        "downstream_of_selected" => "reads a rebuilt model".to_owned(),
        _ => words(value),
    }
}

/// A model's SQL against its last build, as a reviewer reads it.
fn sql_status(value: &Value) -> String {
    match text(value) {
        "first_baseline" => "not built here before".to_owned(),
        "query_changed" => "**changed** (diff below)".to_owned(),
        "no_query_change" => "unchanged".to_owned(),
        "baseline_unavailable" => "unknown: the last build's record is unreadable".to_owned(),
        _ => words(value),
    }
}

fn kind(value: &Value) -> String {
    text(value).replace('_', " ")
}

fn short(hash: &str) -> &str {
    hash.get(..12).unwrap_or(hash)
}

fn chars(text: &str) -> usize {
    text.chars().count()
}

fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (index, c) in digits.chars().enumerate() {
        if index > 0 && (digits.len() - index).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests;
