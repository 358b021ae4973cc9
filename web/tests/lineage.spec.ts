// Lineage at 10,000 models: the page opens without drawing the whole graph, a found model
// opens its neighbourhood (±2 hops, laid out in a worker), and the page answers input
// while it does. Prints how long the neighbourhood took to appear (a figure, not a
// limit: speed goals live in the benchmarks).
import { execFileSync } from "node:child_process";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { expect, test } from "@playwright/test";
import { startDev, type Server } from "./support/stack";

const generate = process.env.STB_BENCH_GENERATE;
let server: Server;

test.beforeAll(async () => {
  if (!generate) throw new Error("STB_BENCH_GENERATE must name stb-bench-generate (scripts/test-ui.sh sets it)");
  const dir = join(mkdtempSync(join(tmpdir(), "stb-ui-lineage-")), "project");
  execFileSync(generate, ["--models", "10000", "--pipelines", "100", "--out", dir]);
  writeFileSync(join(dir, "streambuild_local.toml"), '[targets.dev]\ndatabase = "ui_lineage"\n');
  // Definitions need no warehouse: the server compiles the project and serves them.
  server = await startDev({ dir, database: "ui_lineage", vars: "{}", topic: "" }, { auth: "disabled" });
});

test.afterAll(async () => {
  await server?.stop();
});

test("10,000 models open around a focus and stay interactive", async ({ page }) => {
  const opened = Date.now();
  await page.goto(`${server.url}/lineage`);
  await expect(page.getByText(/Large graph: find a model/)).toBeVisible({ timeout: 60_000 });
  const openedMs = Date.now() - opened;
  await expect(page.locator(".graph .node")).toHaveCount(0);

  const search = page.getByLabel("Find a model or source");
  await search.fill("p10_m50");
  const started = Date.now();
  await page.getByRole("button", { name: "p10_m50", exact: true }).click();
  const nodes = page.locator(".graph .node");
  await expect(nodes.first()).toBeVisible();
  const drawnMs = Date.now() - started;
  const count = await nodes.count();
  expect(count).toBeGreaterThan(1);
  expect(count).toBeLessThan(200);
  // The page still takes input while and after it lays the graph out.
  await search.fill("p99_m99");
  await expect(page.getByRole("button", { name: "p99_m99", exact: true })).toBeVisible();
  await page.getByLabel("Hops").selectOption("4");
  await expect(page).toHaveURL(/hops=4/);
  console.log(
    `lineage: page of 10,000 models ready in ${openedMs} ms; neighbourhood of p10_m50 (${count} nodes) drawn in ${drawnMs} ms`,
  );
});
