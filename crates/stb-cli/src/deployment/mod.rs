//! `stb deployment list | show | diff | audit | promote | rollback`: virtual deployments
//! after their build (see `stb_engine::deployments` and `stb_engine::readiness`).

mod audit;

use std::io::Write;
use std::process::ExitCode;

use clap::{Args, Subcommand};
use stb_engine::deployments::reports::{self, Published};
use stb_engine::deployments::{Record, RollbackTo, parse_range};

use crate::output::{Failure, fail, print_json};
use crate::virtual_target::{
    Common, confirmed, connect_virtual, lock_owner, refuse_unapproved_json,
};

#[derive(Debug, Subcommand)]
pub(crate) enum DeploymentCommand {
    /// List the target's deployments, newest first, with their state.
    List(Common),
    /// Show one deployment.
    Show(WithId),
    /// Compare two deployments, or what promoting one would change (`ID` is
    /// `active:ID`): each relation's columns and row counts; with --data, the rows
    /// themselves.
    Diff(DiffArgs),
    /// Judge whether a staged deployment is ready to promote: its copies against the
    /// active ones and their sources, and the project's audits run on its copies. With no
    /// id, the only staged deployment. Exits 0 whatever the verdict.
    Audit(audit::AuditArgs),
    /// Switch the stable views to a deployment's copies (tables, then views; one at a
    /// time) and record the publication.
    Promote(WithId),
    /// Switch the stable views back to an earlier publication (asks first).
    Rollback(RollbackArgs),
}

#[derive(Debug, Args)]
pub(crate) struct WithId {
    /// The deployment id (`stb deployment list` shows them).
    deployment_id: String,
    #[command(flatten)]
    common: Common,
}

#[derive(Debug, Args)]
pub(crate) struct DiffArgs {
    /// `ID`, `FROM:TO`; each side a deployment id or `active`.
    range: String,
    /// Compare the rows too: for each relation bound to two different copies, the rows only
    /// in one and the rows both hold differently, matched by the model's ORDER BY (or
    /// --key), over the replay history both copies hold.
    #[arg(long)]
    data: bool,
    /// With --data: the columns rows are matched by (comma-separated), instead of each
    /// model's ORDER BY.
    #[arg(long, value_name = "COLUMNS", value_delimiter = ',', requires = "data")]
    key: Vec<String>,
    /// With --data: differing keys shown per kind of difference.
    #[arg(long, value_name = "N", default_value_t = 5, requires = "data")]
    samples: usize,
    #[command(flatten)]
    common: Common,
}

#[derive(Debug, Args)]
pub(crate) struct RollbackArgs {
    /// The deployment to return to; or --previous.
    #[arg(required_unless_present = "previous", conflicts_with = "previous")]
    deployment_id: Option<String>,
    /// Return to the publication before the current one.
    #[arg(long)]
    previous: bool,
    /// Switch without asking (needed with --json).
    #[arg(long)]
    auto_approve: bool,
    #[command(flatten)]
    common: Common,
}

pub(crate) fn run(command: &DeploymentCommand) -> ExitCode {
    match command {
        DeploymentCommand::List(args) => list(args, None),
        DeploymentCommand::Show(args) => list(&args.common, Some(&args.deployment_id)),
        DeploymentCommand::Diff(args) => diff(args),
        DeploymentCommand::Audit(args) => audit::run(args),
        DeploymentCommand::Promote(args) => promote(args),
        DeploymentCommand::Rollback(args) => rollback(args),
    }
}

fn list(common: &Common, only: Option<&str>) -> ExitCode {
    let (client, database) = match connect_virtual(common) {
        Ok(connected) => connected,
        Err(code) => return code,
    };
    let (records, detailed) = match only {
        Some(id) => match reports::show(&client, &database, id) {
            Ok(shown) if common.json => {
                print_json(&shown);
                return ExitCode::SUCCESS;
            }
            Ok(shown) => (vec![shown.deployment], true),
            Err(error) => return fail(&Failure::from(error), common.json),
        },
        None => match reports::list(&client, &database) {
            Ok(listing) if common.json => {
                print_json(&listing);
                return ExitCode::SUCCESS;
            }
            Ok(listing) => (listing.deployments, false),
            Err(error) => return fail(&Failure::from(error), common.json),
        },
    };
    print_records(&database, &records, detailed);
    ExitCode::SUCCESS
}

fn print_records(database: &str, records: &[Record], detailed: bool) {
    let mut out = std::io::stdout().lock();
    if records.is_empty() {
        let _ = writeln!(out, "No deployments in '{database}'.");
        return;
    }
    let _ = writeln!(out, "Deployments in '{database}' (newest first)");
    for record in records {
        let _ = writeln!(
            out,
            "  {}  {:<16} created {}  roots: {}",
            record.deployment_id,
            record.state,
            record.created_at.as_deref().unwrap_or("unknown"),
            if record.root_names.is_empty() {
                "-".to_owned()
            } else {
                record.root_names.join(", ")
            }
        );
        if detailed {
            let _ = writeln!(out, "    persisted status  {}", record.persisted_status);
            if let Some(boundary) = &record.boundary_time {
                let _ = writeln!(out, "    boundary time     {boundary} UTC");
            }
            if let Some(published) = &record.latest_published_at {
                let _ = writeln!(out, "    last published    {published} UTC");
            }
            let _ = writeln!(
                out,
                "    relations         {}",
                record.physical_relation_names.join(", ")
            );
            if !record.missing_physical_relation_names.is_empty() {
                let _ = writeln!(
                    out,
                    "    missing           {}",
                    record.missing_physical_relation_names.join(", ")
                );
            }
            if !record.active_binding_names.is_empty() {
                let _ = writeln!(
                    out,
                    "    active bindings   {}",
                    record.active_binding_names.join(", ")
                );
            }
        }
    }
}

fn print_publication(published: &Published, json: bool) {
    if json {
        print_json(published);
        return;
    }
    let publication = &published.publication;
    let mut out = std::io::stdout().lock();
    let verb = if publication.operation == "rollback" {
        "Rolled back to"
    } else {
        "Promoted"
    };
    let _ = writeln!(out, "{verb} deployment {}", publication.deployment_id);
    for (logical, physical) in &publication.bindings {
        let _ = writeln!(out, "  {logical} -> {physical}");
    }
    let _ = writeln!(
        out,
        "\nAtomicity\n  Bindings are replaced one relation at a time; readers may have seen a mix of old and new relations while it ran."
    );
}

fn promote(args: &WithId) -> ExitCode {
    let json = args.common.json;
    let (client, database) = match connect_virtual(&args.common) {
        Ok(connected) => connected,
        Err(code) => return code,
    };
    let result = reports::promote(&client, &database, &lock_owner(), &args.deployment_id);
    match result {
        Ok(publication) => {
            print_publication(&publication, json);
            ExitCode::SUCCESS
        }
        Err(error) => fail(&Failure::from(error), json),
    }
}

fn rollback(args: &RollbackArgs) -> ExitCode {
    let json = args.common.json;
    if json && !args.auto_approve {
        return refuse_unapproved_json();
    }
    let (client, database) = match connect_virtual(&args.common) {
        Ok(connected) => connected,
        Err(code) => return code,
    };
    let to = match &args.deployment_id {
        Some(id) if !args.previous => RollbackTo::Deployment(id.clone()),
        _ => RollbackTo::Previous,
    };
    let plan = match reports::plan_rollback(&client, &database, &to) {
        Ok(plan) => plan,
        Err(error) => return fail(&Failure::from(error), json),
    };
    if !json {
        let mut out = std::io::stdout().lock();
        let _ = writeln!(
            out,
            "Rollback from {} to {}",
            plan.current_deployment_id, plan.target_deployment_id
        );
        for binding in &plan.bindings {
            let _ = writeln!(
                out,
                "  {} -> {}",
                binding.logical_name, binding.physical_name
            );
        }
        let _ = writeln!(
            out,
            "This restores bindings only, not the data those relations held then."
        );
    }
    if !args.auto_approve && !confirmed("Proceed with rollback?") {
        let _ = writeln!(std::io::stdout().lock(), "Rollback cancelled.");
        return ExitCode::from(1);
    }
    match reports::rollback(&client, &database, &lock_owner(), &plan) {
        Ok(publication) => {
            print_publication(&publication, json);
            ExitCode::SUCCESS
        }
        Err(error) => fail(&Failure::from(error), json),
    }
}

fn diff(args: &DiffArgs) -> ExitCode {
    let json = args.common.json;
    // A malformed range is refused before anything connects.
    if let Err(error) = parse_range(&args.range) {
        return fail(&Failure::from(error), json);
    }
    let (client, database) = match connect_virtual(&args.common) {
        Ok(connected) => connected,
        Err(code) => return code,
    };
    let options = args.data.then(|| stb_engine::data_diff::Options {
        key: Some(
            args.key
                .iter()
                .map(|c| c.trim().to_owned())
                .filter(|c| !c.is_empty())
                .collect::<Vec<_>>(),
        )
        .filter(|key| !key.is_empty()),
        samples: args.samples,
    });
    let compared = match reports::compare_with(&client, &database, &args.range, options.as_ref()) {
        Ok(compared) => compared,
        Err(error) => return fail(&Failure::from(error), json),
    };
    if json {
        print_json(&compared);
        return ExitCode::SUCCESS;
    }
    let data = compared.data;
    let diff = compared.diff;
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "Diff {} -> {} in '{database}'", diff.from, diff.to);
    let rows = |n: Option<u64>| n.map_or_else(|| "-".to_owned(), |n| n.to_string());
    for relation in &diff.relations {
        let _ = writeln!(
            out,
            "  {:<32} {:<16} rows {} -> {}",
            relation.name,
            relation.status,
            rows(relation.from_rows),
            rows(relation.to_rows)
        );
        for (label, columns) in [
            ("added", &relation.columns_added),
            ("removed", &relation.columns_removed),
            ("retyped", &relation.columns_retyped),
        ] {
            if !columns.is_empty() {
                let _ = writeln!(out, "    columns {label}: {}", columns.join(", "));
            }
        }
    }
    if let Some(data) = &data {
        write_data(&mut out, data);
    }
    ExitCode::SUCCESS
}

/// `--data`: each compared relation's counts, then its samples.
fn write_data(out: &mut dyn Write, data: &[stb_engine::data_diff::RelationData]) {
    let _ = writeln!(
        out,
        "\nRows ({} relation(s) bound to different copies)",
        data.len()
    );
    for relation in data {
        if let Some(error) = &relation.error {
            let _ = writeln!(out, "  {:<32} not compared: {error}", relation.name);
            continue;
        }
        let _ = writeln!(
            out,
            "  {:<32} only in {}: {}  only in {}: {}  changed: {}  (by {})",
            relation.name,
            relation.from_relation,
            relation.only_in_from,
            relation.to_relation,
            relation.only_in_to,
            relation.changed,
            relation.key.join(", ")
        );
        if relation.window.kind == "disjoint" {
            let _ = writeln!(
                out,
                "    the copies hold no common part of their replay history: nothing compared"
            );
        }
        if relation.outside_window.from > 0 || relation.outside_window.to > 0 {
            let _ = writeln!(
                out,
                "    outside the history both hold (not compared): {} and {} rows",
                relation.outside_window.from, relation.outside_window.to
            );
        }
        for sample in &relation.samples {
            let key = serde_json::Value::Object(sample.key.clone());
            let _ = writeln!(out, "    {} {key}", sample.kind);
            for (side, rows) in [("-", &sample.from_rows), ("+", &sample.to_rows)] {
                for row in rows {
                    let _ = writeln!(
                        out,
                        "      {side} {}",
                        serde_json::Value::Object(row.clone())
                    );
                }
            }
        }
    }
}
