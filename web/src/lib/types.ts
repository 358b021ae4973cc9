// The API's shapes this UI reads (docs/dev-server.md has them all).

export interface AuthConfig {
  mode: "disabled" | "password" | "trusted_proxy";
  loginRequired: boolean;
  proxyLogoutUrl: string | null;
}

export interface SessionUser {
  id: string;
  username: string;
  displayName: string | null;
  email: string | null;
}

export interface Session {
  mode: AuthConfig["mode"];
  user: SessionUser;
  roles: string[];
  csrfToken: string | null;
}

export interface Capabilities {
  systemAdmin: boolean;
  project: string;
  target: string;
  permissions: string[];
  pipelinePermissions: Record<string, string[]>;
  staleRoles: string[];
}

export interface WarehouseStatus {
  connected: boolean;
  state: string;
  database: string;
  error: string | null;
  lastAttemptAtMs: number | null;
  nextAttemptAtMs: number | null;
}

export interface Status {
  toolVersion: string;
  project: { name: string; target: string; database: string };
  compile: {
    state: "ok" | "failing";
    compiledAtMs: number;
    models: number;
    sources: number;
    /** A failing compile's diagnostics, as `stb compile --json` lists them. */
    error: CompileDiagnostic[] | null;
  };
  warehouse: WarehouseStatus;
}

export interface CompileDiagnostic {
  code: string;
  message: string;
  hint: string;
  location?: { file: string; line?: number; column?: number } | null;
  related?: { message: string; location: { file: string; line?: number; column?: number } }[];
}

export interface RunSummary {
  invocation_id: string;
  status: string;
  command: string | null;
  mode: string | null;
  display_command: string | null;
  owner: string | null;
  started_at: string | null;
  last_event_at: string | null;
  silent_seconds: number | null;
  duration_ms: number | null;
  deployment_id?: string | null;
  [key: string]: unknown;
}
