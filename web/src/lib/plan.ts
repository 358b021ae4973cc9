// Whether a plan (`/api/plan`, any mode) changes anything; the server refuses a build of
// one that does not (it would record no run), and the page says so first.

type Json = Record<string, unknown>;

const nonEmpty = (value: unknown) => Array.isArray(value) && value.length > 0;

export function hasWork(plan: Json): boolean {
  switch (plan.mode) {
    case "mixed":
      return hasWork((plan.virtual ?? {}) as Json) || hasWork((plan.direct ?? {}) as Json);
    case "virtual environments":
      return nonEmpty(plan.steps);
    default:
      return ["entries", "creation", "teardown", "source_recreations", "landing_repairs"].some((key) => nonEmpty(plan[key]));
  }
}
