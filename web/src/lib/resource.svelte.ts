// A value loaded from the API: its data, the error of the last attempt, whether it is
// loading. `refresh` loads again; the last good data stays shown while it does.

import { describe } from "./api";

export class Resource<T> {
  data = $state<T | null>(null);
  error = $state<string | null>(null);
  loading = $state(false);
  #fetch: () => Promise<T>;
  #generation = 0;

  constructor(fetcher: () => Promise<T>) {
    this.#fetch = fetcher;
  }

  async refresh(): Promise<void> {
    const generation = ++this.#generation;
    this.loading = true;
    try {
      const data = await this.#fetch();
      // A slower, older answer never replaces a newer one.
      if (generation === this.#generation) {
        this.data = data;
        this.error = null;
      }
    } catch (error) {
      if (generation === this.#generation) this.error = describe(error);
    } finally {
      if (generation === this.#generation) this.loading = false;
    }
  }
}

/** Calls `tick` now and every `ms` while the page is visible; the returned function stops it. */
export function every(ms: number, tick: () => void): () => void {
  tick();
  const timer = window.setInterval(() => {
    if (document.visibilityState === "visible") tick();
  }, ms);
  const onVisible = () => {
    if (document.visibilityState === "visible") tick();
  };
  document.addEventListener("visibilitychange", onVisible);
  return () => {
    window.clearInterval(timer);
    document.removeEventListener("visibilitychange", onVisible);
  };
}

export function formatBytes(bytes: number | null | undefined): string {
  if (bytes === null || bytes === undefined) return "–";
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let value = bytes;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit += 1;
  }
  return `${value.toFixed(unit === 0 ? 0 : 1)} ${units[unit]}`;
}

export function formatNumber(value: number | null | undefined): string {
  return value === null || value === undefined ? "–" : value.toLocaleString("en-US");
}

export function statusTone(status: string | null | undefined): "ok" | "warn" | "bad" | "info" {
  switch (status) {
    case "succeeded":
    case "passed":
    case "active":
    case "moving":
    case "fresh":
    case "connected":
    case "idle":
      return "ok";
    case "running":
    case "staged":
    case "due":
    case "starting":
      return "info";
    case "failed":
    case "error":
    case "presumed_failed":
    case "cancellation_failed":
    case "stale":
    case "stalled":
    case "backing_off":
      return "bad";
    default:
      return "warn";
  }
}
