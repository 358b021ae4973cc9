// A plan in sentences: what the build will do to each model and why, for people reading
// the Plan page (the JSON's words — `all_models`, `first_baseline`, `full_rebuild` — are
// for scripts). Pure functions over the plan as `/api/plan` answers it.

import type { DirectEntry, DirectPlan, ObjectChange, Plan, PlanStatement, VirtualPlan } from "./plan";

export interface ModelChange {
  model: string;
  /** One or two sentences: what happens to it and why. */
  sentence: string;
  /** What its relations undergo, in the order the build runs it. */
  relations: { action: "drop" | "create"; kind: string; relation: string }[];
  /** Its query against the last build's, as unified diff lines (none: nothing to show). */
  diff: string[];
}

const REASONS: Record<string, string> = {
  all_models: "the whole project is built",
  selected: "it was selected",
  changed: "it changed since its last successful build",
  missing_upstream: "it is missing and the selection reads it",
  source_drift: "its source's Kafka settings changed",
  downstream_of_selected: "it reads a model that is rebuilt",
};

const SQL: Record<string, string> = {
  first_baseline: "StreamBuild has not built it here before",
  query_changed: "its query differs from the last build's",
  no_query_change: "its query is the one last built",
  baseline_unavailable: "the record of its last build could not be read",
};

const KINDS: Record<string, string> = {
  table: "table",
  materialized_view: "materialized view",
  view: "view",
};

/** `words` as English: `a`, `a and b`, `a, b and c`. */
export function listed(words: string[]): string {
  if (words.length <= 1) return words.join("");
  return `${words.slice(0, -1).join(", ")} and ${words[words.length - 1]}`;
}

function kindOf(kind: string): string {
  return KINDS[kind] ?? kind.replaceAll("_", " ");
}

function replayOf(plan: DirectPlan, entry: DirectEntry): string {
  const root = plan.replay_roots.find((r) => r.model === entry.model);
  if (root) {
    const from = plan.start_time ? ` from ${plan.start_time} on` : "";
    const after = root.waits_for.length ? `, once ${listed(root.waits_for)} is rebuilt,` : "";
    const lost = root.replay_window?.lost_rows ?? 0;
    const loses = lost > 0 ? ` ${lost.toLocaleString("en-US")} rows it holds now are no longer in that history.` : "";
    return ` It then replays${after} the retained history of ${root.driving_input}${from} (${root.replay_boundary_mode} boundary), exactly once.${loses}`;
  }
  const feeding = plan.replay_roots.find((r) => r.propagated_models.includes(entry.model));
  if (feeding) return ` It is filled by the replay into ${feeding.model}.`;
  return "";
}

/** Each model of a direct plan, in the order the plan lists them. */
export function directChanges(plan: DirectPlan): ModelChange[] {
  return plan.entries.map((entry) => {
    const owned = new Set(entry.relation_names);
    const relations = [
      ...plan.teardown.filter((r) => owned.has(r.relation)).map((r) => ({ action: "drop" as const, ...r })),
      ...plan.creation.filter((r) => owned.has(r.relation)).map((r) => ({ action: "create" as const, ...r })),
    ];
    const dropped = relations.filter((r) => r.action === "drop").map((r) => `${kindOf(r.kind)} ${r.relation}`);
    const created = relations.filter((r) => r.action === "create").map((r) => `${kindOf(r.kind)} ${r.relation}`);
    const why = REASONS[entry.reason] ?? entry.reason.replaceAll("_", " ");
    const sql = SQL[entry.sql_change.status] ?? entry.sql_change.status.replaceAll("_", " ");
    const does = dropped.length
      ? ` Its ${listed(dropped)} ${dropped.length > 1 ? "are" : "is"} dropped, then ${listed(created)} created.`
      : created.length
        ? ` It creates ${listed(created)}.`
        : "";
    const diff = entry.sql_change.unified_diff ? entry.sql_change.unified_diff.split("\n") : [];
    return {
      model: entry.model,
      sentence: `${entry.model} is rebuilt because ${why}; ${sql}.${does}${replayOf(plan, entry)}`,
      relations,
      diff: diff.length && diff[diff.length - 1] === "" ? diff.slice(0, -1) : diff,
    };
  });
}

const MODES: Record<string, string> = {
  full_rebuild: "filled by replaying all retained history",
  seeded_bounded_rebuild: "seeded from the active copy, then replayed from where that copy ends",
  unseeded_bounded_rebuild: "replayed from a bounded window of history",
  deploy: "created with nothing to replay",
};

function changeOf(change: ObjectChange): string {
  switch (change.change_type) {
    case "create":
      return change.root_state === "greenfield" ? "is deployed for the first time" : "is new in this deployment";
    case "rebuild":
      return change.active_deployment_id
        ? `is built anew beside the active deployment ${change.active_deployment_id}, which readers use until this one is promoted`
        : "is built anew";
    default:
      return "is unchanged: the deployment reads the active copy";
  }
}

/** Each model a virtual plan stages, in the order of its object changes. */
export function virtualChanges(plan: VirtualPlan): ModelChange[] {
  const models: string[] = [];
  for (const change of plan.object_changes) if (!models.includes(change.model)) models.push(change.model);
  return models.map((model) => {
    const changes = plan.object_changes.filter((c) => c.model === model);
    const subtree = plan.rebuild_subtrees.find((s) => s.affected_keys.includes(model));
    const copies = plan.prepared_shadow_objects.filter((o) => o.logical_model_name === model);
    const names = new Set(changes.map((c) => c.key.name));
    const diff = plan.sql_diffs.filter((d) => names.has(d.key.name)).flatMap((d) => d.diff_lines);
    const how = subtree && changes.some((c) => c.change_type !== "no_op") ? ` Its copies are ${MODES[subtree.execution_mode] ?? subtree.execution_mode}.` : "";
    const breaking = changes.some((c) => c.schema_change_kind === "breaking") ? " Its columns change in a way readers notice (breaking)." : "";
    return {
      model,
      sentence: `${model} ${changeOf(changes[0])}.${how}${breaking}`,
      relations: copies.map((o) => ({ action: "create" as const, kind: o.object_type, relation: o.physical_name })),
      diff,
    };
  });
}

/** One step of a virtual plan's workflow (`plan-1-table-tbl__clean`, `backfill-1-clean`, …). */
export function stepSentence(step: string): string {
  const match = /^(plan|backfill|audit|publish)-(\d+)-(.+)$/.exec(step);
  if (!match) return step;
  const [, what, , rest] = match;
  switch (what) {
    case "plan": {
      const kind = Object.keys(KINDS).find((k) => rest.startsWith(`${k}-`));
      return kind ? `Create the staged ${KINDS[kind]} for ${rest.slice(kind.length + 1)}` : `Create the staged copy of ${rest}`;
    }
    case "backfill":
      return `Replay retained history into the staged copies from ${rest} down`;
    case "audit":
      return `Run the audits of ${rest} and what reads it against the staged copies`;
    default:
      return `Record the copies from ${rest} down as staged (readers switch when it is promoted)`;
  }
}

/** The statements of one model, or (`model` null) those of the target and its sources. */
export interface StatementGroup {
  model: string | null;
  statements: PlanStatement[];
}

/** Which model each relation a plan names belongs to (its tables, views and copies). */
function owners(plan: Plan): Map<string, string> {
  const owned = new Map<string, string>();
  const add = (part: Plan | null) => {
    if (!part) return;
    if (part.mode === "mixed") {
      add(part.virtual);
      add(part.direct);
    } else if (part.mode === "direct") {
      for (const entry of part.entries) {
        owned.set(entry.model, entry.model);
        for (const relation of entry.relation_names) owned.set(relation, entry.model);
      }
    } else {
      for (const change of part.object_changes) {
        owned.set(change.model, change.model);
        owned.set(change.key.name, change.model);
      }
      for (const copy of part.prepared_shadow_objects) {
        owned.set(copy.logical_key, copy.logical_model_name);
        owned.set(copy.physical_name, copy.logical_model_name);
      }
    }
  };
  add(plan);
  return owned;
}

// How the steps that build one relation or model begin; the rest of the id names it.
const MODEL_STEPS = ["set_aside_", "drop_previous_", "drop_", "realize_", "capture_replay_", "replay_", "seed_"];

/** A step's model: after a known start, the rest of its id names one of the plan's
 * relations or models exactly (`drop_tbl__paid_orders`, `replay_order_events`); anything
 * else (the target's, the sources' steps) has none. */
function modelOf(stepId: string, owned: Map<string, string>): string | null {
  for (const start of MODEL_STEPS) {
    if (!stepId.startsWith(start)) continue;
    const model = owned.get(stepId.slice(start.length));
    if (model) return model;
  }
  return null;
}

/** The plan's statements grouped by the model they build, models in the order their first
 * statement runs, the target's and sources' own statements first. */
export function groupStatements(plan: Plan): StatementGroup[] {
  const owned = owners(plan);
  const groups = new Map<string | null, PlanStatement[]>([[null, []]]);
  for (const statement of plan.statements ?? []) {
    const model = modelOf(statement.step_id, owned);
    const group = groups.get(model) ?? [];
    group.push(statement);
    groups.set(model, group);
  }
  return [...groups.entries()].filter(([, statements]) => statements.length).map(([model, statements]) => ({ model, statements }));
}

const PHASES: Record<string, string> = {
  preparation: "prepare",
  teardown: "drop",
  realization: "create",
  stabilization: "wait for what is in flight",
  boundary: "capture the replay's boundary",
  replay: "replay",
  activation: "resume",
  cleanup: "clean up",
  finalization: "record the deployment",
};

// What a step does, by the start of its id, before its phase says it more roughly (a
// table set aside is renamed, not dropped: it comes back if the build fails).
const STEPS: [string, string][] = [
  ["set_aside_", "set aside (restored if the build fails)"],
  ["drop_previous_", "drop what was set aside"],
  ["drop_", "drop"],
  ["realize_", "create"],
  ["capture_", "capture the replay's boundary"],
  ["replay_", "replay"],
  ["pause_source_", "pause the landing"],
  ["activate_source_", "resume the landing"],
  ["reset_consumer_group", "reset the consumer group"],
  ["wait_for_inflight_inserts", "wait for inserts in flight"],
  ["prepare_", "prepare"],
];

/** What a statement does, in a word or two. */
export function statementVerb(statement: PlanStatement): string {
  const known = STEPS.find(([start]) => statement.step_id.startsWith(start));
  return known ? known[1] : (PHASES[statement.phase] ?? statement.phase.replaceAll("_", " "));
}
