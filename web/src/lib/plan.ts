// A plan as `/api/plan` answers it (and `stb plan --json` prints it): the TypeScript mirror
// of stb-engine's `plan::Document`. `plan-examples.ts` holds every example project's plan as
// the engine writes it today, checked against these types by `npm run check`, so a member
// added or dropped on either side fails the build.

export interface RelationChange {
  kind: string;
  relation: string;
}

export interface SqlChange {
  current_hash: string;
  previous_hash: string | null;
  status: string;
  unified_diff: string;
}

export interface DirectEntry {
  is_replay_root: boolean;
  model: string;
  reason: string;
  relation_names: string[];
  sql_change: SqlChange;
}

export interface ReplayWindow {
  model: string;
  driving_input: string;
  basis: string;
  group_key?: string;
  live_table_exists: boolean;
  live_rows: number;
  input_rows: number;
  history_rows: number;
  retained_rows: number;
  replayable_rows: number;
  lost_rows: number;
  query_changed: boolean;
  [measure: string]: unknown;
}

export interface ReplayRoot {
  bounded: boolean;
  driving_input: string;
  driving_input_relation: string;
  model: string;
  model_key: { name: string };
  propagated_models: string[];
  reason: "driving_input_not_rebuilt" | "side_input_rebuilt";
  replay_boundary_mode: string;
  replay_window: ReplayWindow | null;
  settings: { name: string; value: string }[];
  skips_keys_already_written: string[] | null;
  stage: number;
  start_time_column: string | null;
  waits_for: string[];
}

export interface ReplayCost {
  model: string;
  driving_input: string;
  rows: number;
  bytes: number | null;
  partitions?: { partition: string; messages: number; first_offset: string; last_offset: string }[];
  estimated_seconds: number | null;
  error?: string;
}

export interface ReplayCostSummary {
  rows: number;
  bytes: number;
  roots_without_bytes: number;
  estimated_seconds: number | null;
  throughput: { rows_per_second: number; replays: number } | null;
  budget: { max_rows: number | null; max_bytes: number | null };
  over_budget: string[];
}

export interface Validation {
  checked: number;
  unchecked: { model: string; reason: string }[];
  elapsed_ms: number;
}

/** An `on_cluster` or `sharded` target's shards and where each root's replay reads and writes. */
export interface ClusterPlan {
  name: string;
  replays: { model: string; reads: string; writes: string }[];
  shards: { replicas: string[]; shard: number }[];
  topology: "on_cluster" | "sharded";
}

export interface DirectPlan {
  adapter: string;
  /** Absent on one server. */
  cluster?: ClusterPlan;
  creation: RelationChange[];
  database: string;
  entries: DirectEntry[];
  execution_scope: string[];
  landing_repairs: { missing: string[]; source: string }[];
  mode: "direct";
  plan_hash: string;
  prerequisite_scope: { framework_managed: boolean; name: string; present: boolean }[];
  replay_cost: ReplayCostSummary;
  replay_costs: ReplayCost[];
  replay_roots: ReplayRoot[];
  selection_mode: string;
  shrink: { needs_allow_shrink: boolean; lost_rows: number; models: string[]; discarded_by_start_time: number };
  source_recreations: { changes: string[]; source: string }[];
  start_time: string | null;
  teardown: RelationChange[];
  validation: Validation | null;
  warnings: string[];
}

export interface ObjectKey {
  database: string;
  name: string;
  object_type: string;
}

export interface ObjectChange {
  active_deployment_id: string | null;
  change_type: "create" | "rebuild" | "no_op";
  force_full_refresh: boolean;
  forced_start_time: string | null;
  key: ObjectKey;
  model: string;
  root_state: string;
  schema_change_kind: "non_breaking" | "breaking" | null;
  seed_compatibility: "seedable" | "non_seedable" | null;
}

export interface RebuildSubtree {
  affected_keys: string[];
  configured_backfill_mode: string | null;
  execution_lookback_seconds: number | null;
  execution_mode: "full_rebuild" | "seeded_bounded_rebuild" | "unseeded_bounded_rebuild" | "deploy";
  execution_start_time: string | null;
  forced_full_refresh: boolean;
  forced_start_time: string | null;
  history_preserving_bounded_supported: boolean;
  replay_required: boolean;
  resolved_bounded_replay_fallback: string | null;
  root_key: string;
  strategy: string;
  upstream_boundary_key: string | null;
}

export interface VirtualPlan {
  adapter: string;
  database: string;
  deployment_created_at: string;
  deployment_id: string;
  mode: "virtual environments";
  object_changes: ObjectChange[];
  plan_hash?: string;
  prepared_shadow_objects: { logical_key: string; logical_model_name: string; object_type: string; physical_name: string }[];
  rebuild_subtrees: RebuildSubtree[];
  replay_cost?: ReplayCostSummary;
  replay_costs?: ReplayCost[];
  sql_diffs: { diff_lines: string[]; key: ObjectKey; name: string; object_type: string }[];
  steps: string[];
  warnings: string[];
}

export interface MixedPlan {
  direct: DirectPlan;
  execution_order: ["virtual", "direct"];
  mode: "mixed";
  plan_hash: string;
  replay_cost: ReplayCostSummary;
  virtual: VirtualPlan | null;
}

/** A statement of the plan, as `plan.json` lists its workflow's steps (`GET /api/plan?statements=true`). */
export interface PlanStatement {
  intent: string;
  phase: string;
  sequence: number;
  /** On a cluster: the shard whose replica runs the step. */
  shard?: number;
  sql: string;
  step_id: string;
  template: boolean;
}

/** What `statements=true` adds to a preview: the first 2,000 statements and how many there are. */
export interface WithStatements {
  statements?: PlanStatement[];
  statementsTotal?: number;
}

export type Plan = (DirectPlan | VirtualPlan | MixedPlan) & WithStatements;

const nonEmpty = (value: readonly unknown[]) => value.length > 0;

// Whether a plan changes anything; the server refuses a build of one that does not (it
// would record no run), and the page says so first.
export function hasWork(plan: Plan): boolean {
  switch (plan.mode) {
    case "mixed":
      return (plan.virtual !== null && hasWork(plan.virtual)) || hasWork(plan.direct);
    case "virtual environments":
      return nonEmpty(plan.steps);
    default:
      return [plan.entries, plan.creation, plan.teardown, plan.source_recreations, plan.landing_repairs].some(nonEmpty);
  }
}
