// What the browser tests stand on: the local stack (`stb local env`), a copy of the demo
// project in its own database with commerce events produced to Kafka, accounts made with
// `stb admin`, and `stb dev` processes on free ports. Paths come from scripts/test-ui.sh.

import { execFileSync, spawn, type ChildProcess } from "node:child_process";
import { cpSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { createInterface } from "node:readline";

export const PASSWORD = "a long enough password";
const repo = resolve(import.meta.dirname, "../../..");
const stb = process.env.STB_BIN ?? join(repo, "target/debug/stb");
const producer = process.env.STB_PRODUCER ?? join(repo, "target/debug/orders-producer");
const stateDir = process.env.STB_TEST_STACK_DIR;

function localEnv(): Record<string, string> {
  const args = ["local", "env", ...(stateDir ? ["--state-dir", stateDir] : [])];
  const text = execFileSync(stb, args, { encoding: "utf8" });
  const env: Record<string, string> = {};
  for (const line of text.split("\n")) {
    const match = /^export (\w+)=(.*)$/.exec(line.trim());
    if (match) env[match[1]] = match[2];
  }
  if (!env.STB_LOCAL_CLICKHOUSE_URL) throw new Error(`the local stack is not running: ${text}`);
  return env;
}

export const stack = localEnv();

/** The environment every `stb` child gets: the warehouse of the local stack. */
export function warehouseEnv(): NodeJS.ProcessEnv {
  return {
    ...process.env,
    STREAMBUILD_CLICKHOUSE_HOST: stack.STB_LOCAL_CLICKHOUSE_HOST,
    STREAMBUILD_CLICKHOUSE_PORT: stack.STB_LOCAL_CLICKHOUSE_PORT,
    STB_LOCAL_KAFKA_BROKERS: stack.STB_LOCAL_KAFKA_BROKERS,
  };
}

export async function query(sql: string): Promise<string> {
  const response = await fetch(`${stack.STB_LOCAL_CLICKHOUSE_URL}/`, { method: "POST", body: sql });
  const text = await response.text();
  if (!response.ok) throw new Error(`${sql}: ${text}`);
  return text.trim();
}

export interface Project {
  dir: string;
  database: string;
  vars: string;
  topic: string;
}

/** A copy of `examples/<example>` in `database` (emptied first), with `events` orders
 * produced to the demo's topic. */
export async function demoProject(
  example: "orders" | "deployments",
  database: string,
  events = 300,
): Promise<Project> {
  const dir = mkdtempSync(join(tmpdir(), "stb-ui-"));
  cpSync(join(repo, "examples", example), dir, { recursive: true });
  // A topic of its own: deleting a topic under another test's landing would stop that
  // landing (and the local server with it).
  const topic = `ui.${database}.${Date.now()}`;
  const sources = join(dir, "sources/orders.yml");
  writeFileSync(sources, readFileSync(sources, "utf8").replace("topic: orders.events", `topic: ${topic}`));
  await query(`DROP DATABASE IF EXISTS ${database} SYNC`);
  execFileSync(producer, ["--topic", topic, "--reset-topic", "--from", "0", "--count", String(events)], {
    env: warehouseEnv(),
  });
  return { dir, database, vars: JSON.stringify({ kafka_brokers: stack.STB_LOCAL_KAFKA_BROKERS }), topic };
}

/** Drops the project's database: its landings stop consuming. */
export async function dropProject(project: Project | undefined): Promise<void> {
  if (project) await query(`DROP DATABASE IF EXISTS ${project.database} SYNC`);
}

export function stbOn(project: Project, args: string[], input = ""): string {
  return execFileSync(stb, [...args, "--project-dir", project.dir], {
    env: warehouseEnv(),
    input,
    encoding: "utf8",
  });
}

/** `stb build --auto-approve` of the whole project (or `select`). */
export function build(project: Project, select: string[] = []): void {
  stbOn(project, [
    "build",
    "--auto-approve",
    "--database",
    project.database,
    "--vars",
    project.vars,
    ...select.flatMap((s) => ["--select", s]),
  ]);
}

export function createUser(project: Project, username: string, role: "admin" | "viewer"): void {
  stbOn(
    project,
    ["admin", "create-user", "--username", username, "--authentication-source", "password", "--role", role],
    `${PASSWORD}\n`,
  );
}

export interface Server {
  url: string;
  process: ChildProcess;
  stop(): Promise<void>;
}

/** `stb dev` for `project` on a free port; resolves once it prints where it listens. */
export async function startDev(
  project: Project,
  options: { auth?: "password" | "trusted_proxy" | "disabled"; env?: NodeJS.ProcessEnv; args?: string[] } = {},
): Promise<Server> {
  const auth = options.auth ?? "password";
  const args = [
    "dev",
    "--project-dir",
    project.dir,
    "--database",
    project.database,
    "--vars",
    project.vars,
    "--ui-port",
    "0",
    "--auth-mode",
    auth,
    ...(auth === "password" ? ["--auth-insecure-cookie"] : []),
    ...(options.args ?? []),
  ];
  const child = spawn(stb, args, { env: { ...warehouseEnv(), ...options.env }, stdio: ["ignore", "pipe", "pipe"] });
  const lines = createInterface({ input: child.stdout! });
  const stderr: string[] = [];
  child.stderr!.on("data", (chunk) => stderr.push(String(chunk)));
  const url = await new Promise<string>((found, failed) => {
    const timer = setTimeout(() => failed(new Error(`stb dev did not start: ${stderr.join("")}`)), 30_000);
    lines.on("line", (line) => {
      const match = /^\s*api\s+(http:\/\/\S+)\/api$/.exec(line);
      if (match) {
        clearTimeout(timer);
        found(match[1]);
      }
    });
    child.on("exit", (code) => failed(new Error(`stb dev exited (${code}): ${stderr.join("")}`)));
  });
  return {
    url,
    process: child,
    stop: () =>
      new Promise<void>((done) => {
        if (child.exitCode !== null) return done();
        child.on("exit", () => done());
        child.kill("SIGTERM");
      }),
  };
}

/** Where screenshots for docs/ui.md go, when STB_UI_SCREENSHOTS is set. */
export function screenshotPath(name: string): string | null {
  return process.env.STB_UI_SCREENSHOTS ? join(repo, "docs/ui", `${name}.png`) : null;
}
