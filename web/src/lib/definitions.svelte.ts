// `/api/definitions`, kept for the session (sessionStorage) and revalidated with its ETag:
// a 304 costs nothing.


export interface Source {
  name: string;
  kind: "kafka" | "stream_table" | "postgres";
  file: string;
  topic: string | null;
  tableName: string | null;
  replayBoundary: string | null;
  kafka: { brokerList: string | null; consumerGroup: string | null; settings: Record<string, string> } | null;
}

export interface Pipeline {
  name: string;
  mode: "direct" | "virtual";
  source: string | null;
  protection: { warning: string; confirmation: string } | null;
  models: string[];
}

export interface Model {
  name: string;
  pipeline: string;
  kind: "table" | "view";
  reads: string[];
  drivingInput: string | null;
  reference: string;
  outputColumns: { name: string; type: string }[];
  /** The MODEL header's `description`, when it has one. */
  description: string | null;
  /** Column descriptions from the header's `columns (...)`, by column name. */
  columnDescriptions: Record<string, string> | null;
}

export interface Definitions {
  versionKey: string;
  project: { name: string; target: string; database: string | null; production: boolean };
  sources: Source[];
  pipelines: Pipeline[];
  models: Model[];
  tests: { name: string; file: string }[];
  audits: { name: string; models: string[] }[];
}

const KEY = "sb-definitions";

class DefinitionsStore {
  data = $state<Definitions | null>(null);
  error = $state<string | null>(null);

  constructor() {
    try {
      const saved = window.sessionStorage.getItem(KEY);
      if (saved) this.data = JSON.parse(saved) as Definitions;
    } catch {
      // A private window without storage: load from the server.
    }
  }

  async refresh(): Promise<void> {
    const headers: Record<string, string> = {};
    if (this.data) headers["If-None-Match"] = `"${this.data.versionKey}"`;
    try {
      const response = await fetch("/api/definitions", { headers, credentials: "same-origin" });
      if (response.status === 304) return;
      if (!response.ok) {
        const body = await response.json().catch(() => ({ detail: `HTTP ${response.status}` }));
        this.error = typeof body.detail === "string" ? body.detail : JSON.stringify(body.detail);
        return;
      }
      this.data = (await response.json()) as Definitions;
      this.error = null;
      try {
        window.sessionStorage.setItem(KEY, JSON.stringify(this.data));
      } catch {
        // Too large for storage: kept in memory only.
      }
    } catch (error) {
      this.error = error instanceof Error ? error.message : String(error);
    }
  }
}

export const definitions = new DefinitionsStore();
