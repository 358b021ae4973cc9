// Edits reach the UI: under `stb dev --watch` a saved file recompiles the project and the
// page shows the new compile; without it, the Reload button does. A failing compile shows
// its diagnostics (code, file:line:col, hint), not JSON.
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { expect, test } from "@playwright/test";
import { createUser, demoProject, dropProject, type Project, type Server, startDev } from "./support/stack";
import { checkLayout, keep, signIn } from "./support/pages";

let project: Project;
const servers: Server[] = [];

test.beforeAll(async () => {
  project = await demoProject("orders", "ui_reload", 10);
  createUser(project, "ana", "admin");
});

test.afterAll(async () => {
  for (const server of servers) await server.stop();
  await dropProject(project);
});

const modelFile = () => join(project.dir, "pipelines/pl__orders/customer_revenue.sql");

/** Misspells the model's driving input; returns a function that puts it back. */
function breakModel(): () => void {
  const original = readFileSync(modelFile(), "utf8");
  writeFileSync(modelFile(), original.replace('__ref("paid_orders")', '__ref("paid_order")'));
  return () => writeFileSync(modelFile(), original);
}

test("under --watch a saved edit recompiles and the page shows its diagnostics", async ({ page }) => {
  const server = await startDev(project, { args: ["--watch"] });
  servers.push(server);
  await signIn(page, server.url, "ana");
  const errors = page.getByTestId("compile-errors");
  await expect(errors).toHaveCount(0);
  const restore = breakModel();
  try {
    await expect(errors).toBeVisible({ timeout: 30_000 });
    await expect(errors).toContainText("STB-DISCOVER-021");
    await expect(errors).toContainText(/pipelines\/pl__orders\/customer_revenue\.sql:\d+:\d+/);
    await expect(errors).toContainText("hint: did you mean 'paid_orders'?");
    await expect(errors).not.toContainText('"code"');
    await keep(page, "compile-errors");
    await checkLayout(page, "compile-errors");
  } finally {
    restore();
  }
  await expect(errors).toHaveCount(0, { timeout: 30_000 });
});

test("without --watch the Reload button recompiles", async ({ page }) => {
  const server = await startDev(project);
  servers.push(server);
  await signIn(page, server.url, "ana");
  const errors = page.getByTestId("compile-errors");
  const restore = breakModel();
  try {
    await page.getByTestId("reload").click();
    await expect(errors).toBeVisible();
    await expect(errors).toContainText("STB-DISCOVER-021");
  } finally {
    restore();
  }
  await page.getByTestId("reload").click();
  await expect(errors).toHaveCount(0);
});
