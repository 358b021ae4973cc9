// The warehouse connection as the dev server last reported it (`/api/status`): while it
// is lost, the shell shows one banner and the pages' own "could not load" errors that
// only repeat it are folded into a quiet line (components/ErrorBanner.svelte).

import type { ApiError } from "./api";

export const outage = $state<{ message: string | null }>({ message: null });

// The messages of answers that failed because the warehouse could not be reached: the
// pages keep errors as text, so the text is what is recognised. Bounded: the same few
// messages repeat while an outage lasts.
const unreachable = new Set<string>();
const REMEMBERED = 32;

/** Notes `error` when it says the warehouse cannot be reached (502 `STB-WAREHOUSE-001`, 503). */
export function noteUnreachable(error: ApiError): void {
  const detail = error.detail;
  const code = typeof detail === "object" ? detail.code : undefined;
  if (error.status === 503 || (error.status === 502 && code === "STB-WAREHOUSE-001")) {
    if (unreachable.size >= REMEMBERED) unreachable.clear();
    unreachable.add(error.message);
  }
}

/** Whether `message` only repeats the outage the shell already shows. */
export function repeatsOutage(message: string): boolean {
  return outage.message !== null && unreachable.has(message);
}
