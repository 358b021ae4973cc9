// What each node of the lineage graph is in the warehouse, from the state snapshot
// (`/api/state`) and the checks' latest results (`/api/checks/status`): one state per
// node, the most urgent first, with the reasons behind it.

import type { WarehouseState } from "./state";

export type NodeState = "failing" | "missing" | "stale" | "built" | "unknown";

export interface NodeCondition {
  state: NodeState;
  /** Sentences: which audits fail, which relations are missing, how far behind it is. */
  reasons: string[];
  rows: number | null;
}

export interface CheckResult {
  kind: "test" | "audit";
  name: string;
  status: string;
}

/** Every state, most urgent first, with what the legend says about it. */
export const STATES: { state: NodeState; meaning: string }[] = [
  { state: "failing", meaning: "an audit that reads it fails" },
  { state: "missing", meaning: "not built, or a relation of it is missing" },
  { state: "stale", meaning: "its newest row is older than its source's freshness allows" },
  { state: "built", meaning: "built" },
  { state: "unknown", meaning: "no warehouse state" },
];

const FAILED = new Set(["failed", "error"]);

export function conditions(
  snapshot: WarehouseState | null,
  checks: CheckResult[] | null,
  audits: { name: string; models: string[] }[],
): Map<string, NodeCondition> {
  const failingAudits = new Map<string, string[]>();
  const failed = new Set((checks ?? []).filter((c) => c.kind === "audit" && FAILED.has(c.status)).map((c) => c.name));
  for (const audit of audits) {
    if (!failed.has(audit.name)) continue;
    for (const model of audit.models) failingAudits.set(model, [...(failingAudits.get(model) ?? []), audit.name]);
  }
  const found = new Map<string, NodeCondition>();
  for (const relation of [...(snapshot?.sources ?? []), ...(snapshot?.models ?? [])]) {
    const reasons: string[] = [];
    const failing = failingAudits.get(relation.name) ?? [];
    if (failing.length) reasons.push(`audit ${failing.join(", ")} fails`);
    const missing = (relation.relations ?? []).filter((r) => !r.present).map((r) => r.name);
    if (!relation.built) reasons.push("not built");
    else if (missing.length) reasons.push(`missing ${missing.join(", ")}`);
    const stale = relation.freshness.state === "lagging" || relation.freshness.state === "stalled";
    if (stale) reasons.push(`freshness ${relation.freshness.state}`);
    const state: NodeState = failing.length
      ? "failing"
      : !relation.built || missing.length
        ? "missing"
        : stale
          ? "stale"
          : "built";
    found.set(relation.name, { state, reasons, rows: relation.rows ?? null });
  }
  return found;
}
