// Who is signed in and what they may do, from /api/auth/*. Controls mirror the
// capabilities (disabled with a "Requires the X permission" title); the server decides.

import { api, setCsrfProof, whenUnauthenticated } from "./api";
import type { AuthConfig, Capabilities, Session } from "./types";

class SessionState {
  config = $state<AuthConfig | null>(null);
  session = $state<Session | null>(null);
  capabilities = $state<Capabilities | null>(null);
  loaded = $state(false);
  error = $state<string | null>(null);

  async load(): Promise<void> {
    try {
      this.config = await api<AuthConfig>("/auth/config");
      try {
        this.adopt(await api<Session>("/auth/me"));
        this.capabilities = await api<Capabilities>("/auth/capabilities");
      } catch {
        this.adopt(null);
      }
      this.error = null;
    } catch (error) {
      this.error = error instanceof Error ? error.message : String(error);
    } finally {
      this.loaded = true;
    }
  }

  adopt(session: Session | null): void {
    this.session = session;
    if (!session) {
      this.capabilities = null;
      setCsrfProof(null);
    } else if (session.mode === "password") {
      setCsrfProof(session.csrfToken);
    } else if (session.mode === "trusted_proxy") {
      setCsrfProof("trusted-proxy");
    } else {
      setCsrfProof(null);
    }
  }

  async login(username: string, password: string): Promise<void> {
    const session = await api<Session>("/auth/login", { method: "POST", body: { username, password } });
    this.adopt(session);
    this.capabilities = await api<Capabilities>("/auth/capabilities");
  }

  async logout(): Promise<void> {
    try {
      await api("/auth/logout", { method: "POST" });
    } finally {
      this.adopt(null);
      const proxyLogout = this.config?.proxyLogoutUrl;
      if (proxyLogout) window.location.assign(proxyLogout);
    }
  }

  get isAdmin(): boolean {
    return this.capabilities?.systemAdmin ?? false;
  }

  /** Whether the caller holds `permission` here (at project/target scope, or on `pipeline`). */
  can(permission: string, pipeline?: string): boolean {
    const caps = this.capabilities;
    if (!caps) return false;
    if (caps.systemAdmin || caps.permissions.includes(permission)) return true;
    const pipelines = caps.pipelinePermissions[permission] ?? [];
    return pipeline === undefined ? pipelines.length > 0 : pipelines.includes(pipeline);
  }
}

export const auth = new SessionState();
whenUnauthenticated(() => auth.adopt(null));
