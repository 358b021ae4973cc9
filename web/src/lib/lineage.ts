// A column traced to its sources: `GET /api/lineage/columns/{model}/{column}`, the
// document `stb lineage <model>.<column> --json` prints (docs/models.md#column-lineage).

export interface Traced {
  kind: "model" | "source" | "relation";
  name: string;
  column: string;
  /** JSON keys the column is read at, when read through a JSON function. */
  json_path?: string[];
  /** How the column is made from its inputs; absent for a source's column. */
  derivation?: "constant" | "copied" | "computed" | "windowed" | "aggregated";
  opaque?: string[];
  unresolved?: string[];
  /** The tree stops here (it shows at most 2,000 columns). */
  truncated?: boolean;
  inputs: Traced[];
}
