// The central workflow on the demo's virtual project: plan, build, follow the run live,
// promote, stage a second deployment, roll back; every page of the UI is visited (and
// kept as a screenshot for docs/ui.md when asked).
import { expect, test } from "@playwright/test";
import { createUser, demoProject, dropProject, query, startDev, type Project, type Server } from "./support/stack";
import { checkLayout, keep, signIn } from "./support/pages";

let project: Project;
let server: Server;

test.beforeAll(async () => {
  project = await demoProject("deployments", "ui_flow", 300);
  createUser(project, "ana", "admin");
  server = await startDev(project);
});

test.afterAll(async () => {
  await server?.stop();
  await dropProject(project);
});

async function buildFromPlan(page: import("@playwright/test").Page, fullRefresh = false): Promise<string> {
  await page.getByRole("link", { name: "Plan" }).click();
  await page.getByLabel("pl__staged").check();
  if (fullRefresh) await page.getByLabel("Full refresh (virtual)").check();
  await page.getByRole("button", { name: "Preview" }).click();
  const deployment = (await page.getByTestId("plan-deployment").textContent())?.trim() ?? "";
  expect(deployment).toMatch(/^\d{8}T\d{6}Z_[0-9a-f]+$/);
  await expect(page.getByTestId("cli-command")).toContainText(`--deployment-id ${deployment}`);
  // The plan in sentences: what the deployment does to each model, and its steps.
  const models = page.getByTestId("plan-models");
  await expect(models.locator('li[data-model="order_events"]')).toContainText(
    fullRefresh ? "order_events is built anew beside the active deployment" : "order_events is deployed for the first time.",
  );
  await expect(models.locator('li[data-model="order_events"]')).toContainText("Its copies are filled by replaying all retained history.");
  await expect(page.getByRole("list").filter({ hasText: "Replay retained history into the staged copies from order_events down" })).toBeVisible();
  await keep(page, "plan");
  await checkLayout(page, "plan");
  await page.getByRole("button", { name: "Build", exact: true }).click();
  // The run page, live: its events arrive over server-sent events until it completes.
  await expect(page).toHaveURL(/\/runs\/[0-9a-f-]+/);
  await expect(page.getByTestId("live-events")).toContainText("run_started");
  await expect(page.getByTestId("live-events")).toContainText("run_completed", { timeout: 90_000 });
  await expect(page.getByTestId("run-status")).toContainText("succeeded");
  return deployment;
}

test("plan, build, follow live, promote, stage again and roll back", async ({ page }) => {
  await signIn(page, server.url, "ana");
  const first = await buildFromPlan(page);
  await keep(page, "run");
  await checkLayout(page, "run");
  // The exact SQL of a statement.
  await page.getByRole("button", { name: "Show" }).first().click();
  await expect(page.getByTestId("statement-sql")).not.toBeEmpty();

  await page.getByRole("link", { name: "Deployments" }).click();
  const row = page.getByRole("row", { name: new RegExp(first) });
  await expect(row).toContainText("staged");
  page.once("dialog", (dialog) => dialog.accept());
  await row.getByRole("button", { name: "Promote" }).click();
  await expect(page.getByRole("status")).toContainText(`Promoted ${first}`);
  await expect(row).toContainText("active");
  const bound = await query(
    `SELECT as_select FROM system.tables WHERE database = '${project.database}' AND name = 'tbl__order_events'`,
  );
  expect(bound).toContain(first);

  // Nothing changed: the plan says so and the build is not offered.
  await page.getByRole("link", { name: "Plan" }).click();
  await page.getByLabel("pl__staged").check();
  await page.getByRole("button", { name: "Preview" }).click();
  await expect(page.getByTestId("plan-no-changes")).toBeVisible();
  await expect(page.getByRole("button", { name: "Build", exact: true })).toBeDisabled();
  // A second deployment (a full refresh), promoted, then a roll back to the first.
  const second = await buildFromPlan(page, true);
  await page.getByRole("link", { name: "Deployments" }).click();
  page.once("dialog", (dialog) => dialog.accept());
  await page.getByRole("row", { name: new RegExp(second) }).getByRole("button", { name: "Promote" }).click();
  await expect(page.getByRole("row", { name: new RegExp(first) })).toContainText("superseded");
  await page.getByRole("link", { name: second }).click();
  await expect(page.getByRole("heading", { name: `Deployment ${second}` })).toBeVisible();
  await keep(page, "deployments");
  await checkLayout(page, "deployments");
  page.once("dialog", (dialog) => dialog.accept());
  await page.getByRole("row", { name: new RegExp(first) }).getByRole("button", { name: "Roll back to" }).click();
  await expect(page.getByRole("status")).toContainText(`Rolled back to ${first}`);
  // Clean-up: nothing may go yet (the active one, the newest); the preview says why.
  await page.getByRole("button", { name: "Preview clean-up" }).click();
  await expect(page.getByRole("row", { name: new RegExp(`${first}.*keep.*currently active`) })).toBeVisible();
  await expect(page.getByRole("row", { name: new RegExp(`${second}.*keep`) })).toBeVisible();
  await expect(page.getByRole("button", { name: "Drop the deletable ones" })).toHaveCount(0);
  const rolled = await query(
    `SELECT as_select FROM system.tables WHERE database = '${project.database}' AND name = 'tbl__order_events'`,
  );
  expect(rolled).toContain(first);

  // Every other page renders its data from this project.
  await page.getByRole("link", { name: "Runs" }).click();
  await expect(page.getByRole("cell", { name: "ana" }).first()).toBeVisible();
  await keep(page, "runs");
  await checkLayout(page, "runs");
  await page.getByRole("link", { name: "Overview" }).click();
  await expect(page.getByRole("heading", { name: "Freshness" })).toBeVisible();
  await expect(page.getByRole("cell", { name: "orders", exact: true })).toBeVisible();
  await keep(page, "overview");
  await checkLayout(page, "overview");
  await page.getByRole("link", { name: "Pipelines" }).click();
  await page.getByRole("link", { name: "pl__staged" }).click();
  await expect(page.getByRole("link", { name: "order_events", exact: true })).toBeVisible();
  await keep(page, "pipelines");
  await checkLayout(page, "pipelines");
  await page.getByRole("link", { name: "Catalog" }).click();
  await page.getByRole("link", { name: "order_events", exact: true }).click();
  await expect(page.getByRole("heading", { name: "order_events", exact: true })).toBeVisible();
  // The MODEL header's description, as the author wrote it.
  await expect(page.getByText("Every order event, parsed once from the landing table")).toBeVisible();
  await keep(page, "catalog");
  await checkLayout(page, "catalog");
  await page.getByRole("link", { name: "Sources" }).click();
  await expect(page.getByRole("cell", { name: project.topic })).toBeVisible();
  await keep(page, "sources");
  await checkLayout(page, "sources");
  await page.getByRole("link", { name: "Topics" }).click();
  await expect(page.getByRole("cell", { name: project.topic })).toBeVisible();
  await keep(page, "topics");
  await checkLayout(page, "topics");
  await page.getByRole("link", { name: "Status" }).click();
  await expect(page.getByRole("heading", { name: "Models" })).toBeVisible();
  await keep(page, "status");
  await checkLayout(page, "status");
  await page.getByRole("link", { name: "Quality" }).click();
  await expect(page.getByRole("cell", { name: "large_events" }).first()).toBeVisible();
  await keep(page, "quality");
  await checkLayout(page, "quality");
  await page.getByRole("link", { name: "Settings" }).click();
  await expect(page.getByText("Everything: you are a system admin.")).toBeVisible();
  await keep(page, "settings");
  await checkLayout(page, "settings");
  await page.getByRole("link", { name: "Users" }).click();
  await expect(page.getByRole("cell", { name: "ana", exact: true })).toBeVisible();
  await keep(page, "users");
  await checkLayout(page, "users");
});
