// Every call to the dev server's API: same origin, the session cookie, the CSRF proof on
// unsafe methods, and errors as ApiError with the server's `detail` (a string, or the
// structured denial `{message, permission, reason, ...}`).

import { noteUnreachable } from "./outage.svelte";

export type Detail = string | { message?: string; reason?: string; permission?: string; [key: string]: unknown };

export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly detail: Detail,
  ) {
    super(typeof detail === "string" ? detail : (detail.message ?? JSON.stringify(detail)));
  }
}

let csrfProof: string | null = null;
let onUnauthenticated: (() => void) | null = null;

/** The proof unsafe methods carry: the session's token, or the proxy mode's constant. */
export function setCsrfProof(proof: string | null): void {
  csrfProof = proof;
}

/** Called when the server answers 401 (the session ended). */
export function whenUnauthenticated(callback: () => void): void {
  onUnauthenticated = callback;
}

export async function api<T>(
  path: string,
  options: { method?: string; body?: unknown; signal?: AbortSignal } = {},
): Promise<T> {
  const method = options.method ?? "GET";
  const headers: Record<string, string> = { Accept: "application/json" };
  if (options.body !== undefined) headers["Content-Type"] = "application/json";
  if (method !== "GET" && csrfProof) headers["X-StreamBuild-CSRF"] = csrfProof;
  let response: Response;
  try {
    response = await fetch(`/api${path}`, {
      method,
      headers,
      credentials: "same-origin",
      body: options.body === undefined ? undefined : JSON.stringify(options.body),
      signal: options.signal,
    });
  } catch (error) {
    if (error instanceof DOMException && error.name === "AbortError") throw error;
    throw new ApiError(0, "The dev server cannot be reached");
  }
  const text = await response.text();
  let parsed: unknown = null;
  try {
    parsed = text ? JSON.parse(text) : null;
  } catch {
    parsed = text;
  }
  if (!response.ok) {
    if (response.status === 401 && path !== "/auth/login") onUnauthenticated?.();
    const detail =
      parsed && typeof parsed === "object" && "detail" in parsed
        ? (parsed as { detail: Detail }).detail
        : `HTTP ${response.status}`;
    const error = new ApiError(response.status, detail);
    noteUnreachable(error);
    throw error;
  }
  return parsed as T;
}

/** A readable message for any error. */
export function describe(error: unknown): string {
  if (error instanceof ApiError) return error.message;
  if (error instanceof Error) return error.message;
  return String(error);
}
