// `/api/state`: the warehouse's view of the project (a snapshot the server holds).

export interface Activity {
  state: string;
  source: string;
  approximate: boolean;
  lastWriteAt: string | null;
  rowsWritten: number;
  detail: string;
}

export interface Freshness {
  state: string;
  column: string | null;
  newestAt: string | null;
  lagSeconds: number | null;
  warnAfterSeconds: number | null;
  errorAfterSeconds: number | null;
}

export interface RelationStatus {
  name: string;
  kind: string;
  pipeline: string | null;
  relation: string | null;
  built: boolean;
  /** Every relation the model owns, and whether the target holds it. */
  relations: { name: string; kind: string; present: boolean }[];
  /** The rows it holds now (null: not built, or not countable). */
  rows: number | null;
  /** The bytes its table takes (null for views, or when not known). */
  bytes: number | null;
  activity: Activity | null;
  freshness: Freshness;
}

/** Whether the target is whole, and what mends it. */
export interface TargetCondition {
  state: "healthy" | "suspended" | "half_built" | "incomplete";
  message: string | null;
  mend: string | null;
  set_aside: string[];
  incomplete_models: string[];
}

export interface WarehouseState {
  database: string;
  captured_at: string;
  window_seconds: number;
  lock_holder: string | null;
  live_runs: { invocation_id: string; status: string; display_command: string | null }[];
  sources: RelationStatus[];
  models: RelationStatus[];
  target: TargetCondition;
  warehouse_health: {
    disks: { name: string; path: string; free_bytes: number; total_bytes: number }[] | null;
    memory: { resident_bytes: number | null; total_bytes: number | null; measure: "resident" | "tracked" } | null;
    activity: { running_queries: number; running_merges: number } | null;
    kafka_consumers: { table: string; consumers: number; messages_read: number; last_exception: string | null }[] | null;
    footprint: { tables: number; parts: number; rows: number; bytes_on_disk: number } | null;
    errors: { part: string; message: string; detail: string }[];
  };
  stale: boolean;
  error: unknown;
  taken_at_ms: number;
}

/** Oldest arrival first: the sources that need a look come first. */
export function byStaleness(a: RelationStatus, b: RelationStatus): number {
  const lag = (r: RelationStatus) => r.freshness.lagSeconds ?? Number.MAX_SAFE_INTEGER;
  return lag(b) - lag(a);
}

export function lagText(seconds: number | null): string {
  if (seconds === null) return "–";
  if (seconds < 120) return `${seconds} s`;
  if (seconds < 7200) return `${Math.round(seconds / 60)} min`;
  if (seconds < 172800) return `${Math.round(seconds / 3600)} h`;
  return `${Math.round(seconds / 86400)} d`;
}
