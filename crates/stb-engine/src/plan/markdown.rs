//! A plan as Markdown, for a pull request's comment (`stb plan --format markdown`): one
//! summary line (models rebuilt, rows at risk, breaking or not), what it destroys first,
//! then model by model, with SQL diffs folded. Kept under a size (GitHub refuses comments
//! over 65,536 characters): the diffs give way first, then the rows of the longest lists,
//! and a note at the end says how much was left out and where the whole plan is.
//!
//! Rendered from the plan's JSON document (what `stb plan --json` prints), so a plan read
//! back from `target/run/plan/plan.json` renders the same.

use stb_plan::cost::thousands;
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
                cost_parts(staged, &mut parts, "Virtual phase: ");
            }
            direct_parts(direct, &mut parts, "Direct phase: ");
            cost_parts(direct, &mut parts, "Direct phase: ");
            // Both phases together can pass a budget neither passes alone.
            let together = array(&value["replay_cost"]["over_budget"]);
            if !together.is_empty()
                && !parts
                    .destructive
                    .iter()
                    .any(|d| d.contains("over the replay budget"))
            {
                parts.destructive.push(format!(
                    "**over the replay budget** (both phases together): {}; `stb build` refuses without `--allow-large`",
                    together
                        .iter()
                        .map(|reason| plain(text(reason)))
                        .collect::<Vec<_>>()
                        .join("; ")
                ));
            }
        }
        Some("virtual environments") => {
            parts.title = format!(
                "## StreamBuild plan: `{}` (virtual deployment `{}`)",
                text(&value["database"]),
                text(&value["deployment_id"])
            );
            parts.summary = summary_line(&summary_of(&value), &value["plan_hash"]);
            virtual_parts(&value, &mut parts, "");
            cost_parts(&value, &mut parts, "");
        }
        _ => {
            parts.title = format!(
                "## StreamBuild plan: `{}` (direct)",
                text(&value["database"])
            );
            parts.summary = summary_line(&summary_of(&value), &value["plan_hash"]);
            direct_parts(&value, &mut parts, "");
            cost_parts(&value, &mut parts, "");
            cluster_parts(&value, &mut parts);
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
        "**{} {} rebuilt** · **{} rows at risk** · {} dropped where they exist · {breaking}",
        thousands(summary.models as u64),
        if summary.models == 1 {
            "model"
        } else {
            "models"
        },
        thousands(summary.rows_at_risk),
        match summary.destructive {
            1 => "1 relation".to_owned(),
            n => format!("{} relations", thousands(n as u64)),
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

/// The sections of a comment, in the order they are kept: title and summary always,
/// then what it destroys, the warnings, the model sections row by row, and the folded
/// diffs last; what does not fit is counted, and said at the end.
#[derive(Default)]
struct Parts {
    title: String,
    summary: String,
    destructive: Vec<String>,
    sections: Vec<Section>,
    /// (model, folded diff block)
    diffs: Vec<(String, String)>,
    warnings: Vec<String>,
}

/// A heading and what precedes its rows (a table's header), then its rows.
struct Section {
    head: String,
    rows: Vec<String>,
}

/// The text so far, its length in characters, and what it may reach.
struct Budget {
    out: String,
    used: usize,
    limit: usize,
}

impl Budget {
    fn fits(&self, text: &str) -> bool {
        self.used + chars(text) <= self.limit
    }

    fn push(&mut self, text: &str) -> bool {
        if !self.fits(text) {
            return false;
        }
        self.used += chars(text);
        self.out.push_str(text);
        true
    }

    /// `lines` after `head` as far as they fit; the number left out.
    fn lines(&mut self, head: &str, lines: &[String]) -> usize {
        if !self.push(head) {
            return lines.len();
        }
        for (at, line) in lines.iter().enumerate() {
            if !self.push(line) {
                let rest = lines.len() - at;
                // Room for this line is kept: the budget stops short of the note's.
                self.used += chars(&format!("…and {rest} more\n"));
                let _ = writeln!(self.out, "…and {rest} more");
                return rest;
            }
        }
        0
    }
}

impl Parts {
    fn assemble(self, limit: usize) -> String {
        let mut text = Budget {
            out: String::new(),
            used: 0,
            limit: limit.saturating_sub(NOTE_ROOM),
        };
        text.push(&format!("{}\n\n{}\n", self.title, self.summary));
        let mut left_out = 0;
        if self.destructive.is_empty() {
            text.push("\nNothing is dropped or replaced.\n");
        } else {
            let lines: Vec<String> = self
                .destructive
                .iter()
                .map(|l| format!("- {l}\n"))
                .collect();
            left_out += text.lines("\n### Destructive steps first\n\n", &lines);
        }
        if !self.warnings.is_empty() {
            let lines: Vec<String> = self.warnings.iter().map(|w| format!("- {w}\n")).collect();
            left_out += text.lines("\n### Warnings\n\n", &lines);
        }
        for section in &self.sections {
            left_out += if left_out == 0 {
                text.lines(&format!("\n{}", section.head), &section.rows)
            } else {
                section.rows.len()
            };
        }
        // Diffs only when everything above is whole: they give way first.
        let mut diffs_left_out = 0;
        let mut heading = "\n### SQL diffs\n\n";
        for (_, diff) in &self.diffs {
            if left_out == 0 && text.fits(&format!("{heading}{diff}")) {
                text.push(heading);
                text.push(diff);
                heading = "";
            } else {
                diffs_left_out += 1;
            }
        }
        let mut out = text.out;
        if left_out > 0 || diffs_left_out > 0 {
            let mut said = Vec::new();
            if left_out > 0 {
                said.push(format!("{} lines left out", thousands(left_out as u64)));
            }
            if diffs_left_out > 0 {
                said.push(format!(
                    "the SQL diffs of {} model(s) left out",
                    thousands(diffs_left_out as u64)
                ));
            }
            let _ = write!(
                out,
                "\n> Truncated to fit a comment: {}. `stb plan -v` or `stb plan --json` shows the whole plan.\n",
                said.join(", ")
            );
        }
        // A limit smaller than the title and summary themselves: cut at a character.
        if chars(&out) > limit {
            out = out.chars().take(limit.saturating_sub(1)).collect();
            out.push('…');
        }
        out
    }
}

/// What the replays read: over the target's budget among the destructive steps (a build
/// refuses it), and a row per replay root.
fn cost_parts(plan: &Value, parts: &mut Parts, phase: &str) {
    let summary = &plan["replay_cost"];
    let over = array(&summary["over_budget"]);
    if !over.is_empty() {
        parts.destructive.push(format!(
            "{phase}**over the replay budget**: {}; `stb build` refuses without `--allow-large`",
            over.iter()
                .map(|reason| plain(text(reason)))
                .collect::<Vec<_>>()
                .join("; ")
        ));
    }
    let costs = array(&plan["replay_costs"]);
    if costs.is_empty() {
        return;
    }
    let rows = costs
        .iter()
        .map(|cost| {
            let rows = cost["rows"].as_u64().unwrap_or(0);
            let bytes = cost["bytes"]
                .as_u64()
                .map_or_else(|| "unknown".to_owned(), stb_plan::cost::byte_size);
            let partitions = array(&cost["partitions"]).len();
            let from = if partitions > 0 {
                format!(
                    "{} ({partitions} partition(s))",
                    code(text(&cost["driving_input"]))
                )
            } else {
                code(text(&cost["driving_input"]))
            };
            match cost["error"].as_str() {
                Some(error) => format!(
                    "| {} | {from} | not counted: {} | |\n",
                    code(text(&cost["model"])),
                    plain(error)
                ),
                None => format!(
                    "| {} | {from} | {} | {bytes} |\n",
                    code(text(&cost["model"])),
                    thousands(rows)
                ),
            }
        })
        .collect();
    let total = summary["rows"].as_u64().unwrap_or(0);
    let estimate = summary["estimated_seconds"]
        .as_f64()
        .map_or_else(String::new, |seconds| {
            format!(", {}", stb_plan::cost::estimate(seconds))
        });
    parts.sections.push(Section {
        head: format!(
            "### {phase}Replay cost ({} rows{estimate})\n\n| Root | Reads | Rows | Bytes |\n|---|---|---|---|\n",
            thousands(total)
        ),
        rows,
    });
}

fn direct_parts(plan: &Value, parts: &mut Parts, phase: &str) {
    let shrink = &plan["shrink"];
    // The guard refuses a loss it measured, and a window it could not measure.
    if shrink["needs_allow_shrink"] == true {
        let lost = shrink["lost_rows"].as_u64().unwrap_or(0);
        let models = array(&shrink["models"])
            .iter()
            .map(|m| code(text(m)))
            .collect::<Vec<_>>()
            .join(", ");
        parts.destructive.push(if lost > 0 {
            format!(
                "{phase}**{} rows are lost**: retained history no longer holds them ({models}); `stb build` refuses without `--allow-shrink`",
                thousands(lost)
            )
        } else {
            format!(
                "{phase}**rows may be lost**: what retained history restores could not be measured ({models}); `stb build` refuses without `--allow-shrink`"
            )
        });
    }
    for recreation in array(&plan["source_recreations"]) {
        parts.destructive.push(format!(
            "{phase}recreate the landing of source {} ({})",
            code(text(&recreation["source"])),
            array(&recreation["changes"])
                .iter()
                .map(|c| plain(text(c)))
                .collect::<Vec<_>>()
                .join("; ")
        ));
    }
    for relation in array(&plan["teardown"]) {
        parts.destructive.push(format!(
            "{phase}drop {} {} where it exists, then build it again",
            words(&relation["kind"]),
            code(text(&relation["relation"]))
        ));
    }
    let entries = array(&plan["entries"]);
    if !entries.is_empty() {
        let mut rows = Vec::with_capacity(entries.len());
        for entry in entries {
            let model = text(&entry["model"]);
            let replay = array(&plan["replay_roots"])
                .iter()
                .find(|r| r["model"] == entry["model"])
                .map_or_else(String::new, |r| {
                    format!(
                        "from {} ({})",
                        code(text(&r["driving_input"])),
                        plain(text(&r["replay_boundary_mode"]))
                    )
                });
            rows.push(format!(
                "| {} | {} | {} | {replay} |\n",
                code(model),
                reason(&entry["reason"]),
                sql_status(&entry["sql_change"]["status"]),
            ));
            let diff = text(&entry["sql_change"]["unified_diff"]);
            if !diff.trim().is_empty() {
                parts.diffs.push((model.to_owned(), folded(model, diff)));
            }
        }
        parts.sections.push(Section {
            head: format!(
                "### {phase}Models ({})\n\n| Model | Why | Its SQL | Replays |\n|---|---|---|---|\n",
                thousands(entries.len() as u64)
            ),
            rows,
        });
    }
    for warning in array(&plan["warnings"]) {
        parts
            .warnings
            .push(format!("{phase}{}", plain(text(warning))));
    }
}

fn virtual_parts(plan: &Value, parts: &mut Parts, phase: &str) {
    let changes = array(&plan["object_changes"]);
    if !changes.is_empty() {
        let rows = changes
            .iter()
            .map(|change| {
                let schema = change["schema_change_kind"]
                    .as_str()
                    .map_or_else(String::new, |k| k.replace('_', "-"));
                format!(
                    "| {} | {} | {} | {schema} |\n",
                    code(text(&change["key"]["name"])),
                    code(text(&change["model"])),
                    words(&change["change_type"]),
                )
            })
            .collect();
        parts.sections.push(Section {
            head: format!(
                "### {phase}Deployment {} ({} objects)\n\nStaged beside production; readers switch when it is promoted.\n\n| Object | Model | Change | Schema |\n|---|---|---|---|\n",
                code(text(&plan["deployment_id"])),
                thousands(changes.len() as u64)
            ),
            rows,
        });
    }
    let subtrees = array(&plan["rebuild_subtrees"]);
    if !subtrees.is_empty() {
        let rows = subtrees
            .iter()
            .map(|subtree| {
                format!(
                    "- {} and what reads it ({} models): {}\n",
                    code(text(&subtree["root_key"])),
                    array(&subtree["affected_keys"]).len(),
                    words(&subtree["execution_mode"])
                )
            })
            .collect();
        parts.sections.push(Section {
            head: format!("### {phase}Rebuilds\n\n"),
            rows,
        });
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
        parts
            .warnings
            .push(format!("{phase}{}", plain(text(warning))));
    }
}

/// A name as inline code that no character of it can break out of, in a table cell too:
/// HTML `<code>` with the name escaped (`|` as its entity).
fn code(name: &str) -> String {
    format!("<code>{}</code>", escape_html(name).replace('|', "&#124;"))
}

/// Text from the plan as it is (names with underscores kept), with what Markdown or HTML
/// would read as markup escaped.
fn plain(text: &str) -> String {
    escape_html(text)
        .replace('|', "&#124;")
        .replace('`', "&#96;")
        .replace('*', "\\*")
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

fn short(hash: &str) -> &str {
    hash.get(..12).unwrap_or(hash)
}

fn chars(text: &str) -> usize {
    text.chars().count()
}

#[cfg(test)]
mod tests;

/// An `on_cluster` or `sharded` target's shards, and each root's replay on every shard.
fn cluster_parts(plan: &Value, parts: &mut Parts) {
    let cluster = &plan["cluster"];
    if !cluster.is_object() {
        return;
    }
    let shards = array(&cluster["shards"]);
    let mut rows: Vec<String> = shards
        .iter()
        .map(|shard| {
            format!(
                "| shard {} | {} |\n",
                shard["shard"],
                array(&shard["replicas"])
                    .iter()
                    .map(|r| code(text(r)))
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        })
        .collect();
    rows.extend(array(&cluster["replays"]).iter().map(|replay| {
        format!(
            "| replay {} | on each shard from {} into {} |\n",
            code(text(&replay["model"])),
            code(text(&replay["reads"])),
            code(text(&replay["writes"]))
        )
    }));
    parts.sections.push(Section {
        head: format!(
            "### Cluster {} ({}, {} shard{})\n\n`stb build` cannot run this plan yet; every DDL statement runs `ON CLUSTER`, captures and replays on a replica of each shard.\n\n| Where | What |\n|---|---|\n",
            code(text(&cluster["name"])),
            plain(text(&cluster["topology"])),
            shards.len(),
            if shards.len() == 1 { "" } else { "s" }
        ),
        rows,
    });
}
