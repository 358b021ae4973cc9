// The demo's direct project: the message console over landed Kafka messages, a selection
// on the lineage graph handed to the plan page, and the quality page's checks.
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { expect, test } from "@playwright/test";
import { build, createUser, demoProject, dropProject, query, startDev, type Project, type Server } from "./support/stack";
import { checkLayout, keep, signIn } from "./support/pages";

let project: Project;
let server: Server;

test.beforeAll(async () => {
  project = await demoProject("orders", "ui_console", 90);
  build(project);
  for (let i = 0; i < 120; i += 1) {
    if ((await query(`SELECT count() FROM ${project.database}.raw__orders`)) === "90") break;
    await new Promise((wait) => setTimeout(wait, 500));
  }
  // pl__reporting becomes protected: a build of it needs its word typed.
  writeFileSync(
    join(project.dir, "pipelines/pl__reporting/pipeline.toml"),
    '[protection]\nwarning = "The reporting views feed the finance dashboards."\n',
  );
  createUser(project, "ana", "admin");
  createUser(project, "vic", "viewer");
  server = await startDev(project);
});

test.afterAll(async () => {
  await server?.stop();
  await dropProject(project);
});

test("the message console filters landed messages and opens one whole", async ({ page }) => {
  await signIn(page, server.url, "ana");
  await page.getByRole("link", { name: "Sources" }).click();
  await page.getByRole("link", { name: "Messages" }).click();
  const rows = page.getByTestId("messages").locator("tbody tr");
  await expect(rows).toHaveCount(50);
  await expect(page.getByRole("button", { name: "Older" })).toBeVisible();
  // Thirty orders, three events each: filter on a JSON field.
  await page.getByLabel("Path").fill("kind");
  await page.getByLabel("Value").fill("paid");
  await page.getByRole("button", { name: "Add filter" }).click();
  await expect(rows).toHaveCount(30);
  await expect(page).toHaveURL(/filters=/);
  await keep(page, "messages");
  await checkLayout(page, "messages");
  await rows.first().getByRole("button", { name: "Open" }).click();
  await expect(page.getByTestId("message-record")).toContainText('"kind\\":\\"paid\\"');
  // The filter lives in the URL: a reload keeps it.
  await page.reload();
  await expect(rows).toHaveCount(30);
});

test("a viewer without the permission is told so", async ({ page }) => {
  await signIn(page, server.url, "vic");
  await page.goto(`${server.url}/sources/orders/messages`);
  await expect(page.getByText("Requires the source.messages.read permission")).toBeVisible();
});

test("a lineage selection opens the plan page with it", async ({ page }) => {
  await signIn(page, server.url, "ana");
  await page.getByRole("link", { name: "Lineage" }).click();
  // A click opens the details, where the model is added; Space adds one at once.
  await page.getByRole("button", { name: "table paid_orders" }).click();
  await page.getByTestId("lineage-details").getByRole("button", { name: "Add to the plan" }).click();
  await expect(page.getByTestId("lineage-details").getByRole("button", { name: "Take out of the plan" })).toBeVisible();
  await page.getByRole("button", { name: "table customer_revenue" }).press("Space");
  await expect(page.getByRole("button", { name: "Plan 2 selected" })).toBeEnabled();
  await keep(page, "lineage");
  await checkLayout(page, "lineage");
  await page.getByRole("button", { name: "Plan 2 selected" }).click();
  await expect(page).toHaveURL(/\/plan\?select=paid_orders&select=customer_revenue|\/plan\?select=customer_revenue&select=paid_orders/);
  await page.getByRole("button", { name: "Preview" }).click();
  await expect(page.getByRole("cell", { name: "paid_orders", exact: true }).first()).toBeVisible();
  await expect(page.getByTestId("cli-command")).toContainText("--select paid_orders");
});

test("quality: the audit runs from the page and its result is recorded", async ({ page }) => {
  await signIn(page, server.url, "ana");
  await page.getByRole("link", { name: "Quality" }).click();
  const row = page.getByRole("row", { name: /revenue_matches_paid_orders/ });
  await row.getByRole("button", { name: "Run" }).click();
  await expect(row).toContainText("passed");
  await expect(row).toContainText("dev_server");
  await expect(page.getByText("Disabled for this target")).toBeVisible();
  // Its history, from a deep link.
  await row.getByRole("link", { name: "revenue_matches_paid_orders" }).click();
  await expect(page).toHaveURL(/\?audit=revenue_matches_paid_orders/);
  await expect(page.getByTestId("check-history").locator("tbody tr").first()).toContainText("dev_server");
});

test("a protected pipeline builds only with its word typed", async ({ page }) => {
  await signIn(page, server.url, "ana");
  await page.getByRole("link", { name: "Plan" }).click();
  await page.getByLabel("pl__reporting", { exact: true }).check();
  await page.getByRole("button", { name: "Preview" }).click();
  await expect(page.getByText("The reporting views feed the finance dashboards.")).toBeVisible();
  const build = page.getByRole("button", { name: "Build", exact: true });
  await expect(build).toBeDisabled();
  await page.getByLabel("Type pl__reporting to confirm").fill("pl__Reporting");
  await expect(build).toBeDisabled();
  await page.getByLabel("Type pl__reporting to confirm").fill("pl__reporting");
  await expect(page.getByTestId("cli-command")).toContainText("--confirm pl__reporting");
  await expect(build).toBeEnabled();
  await build.click();
  await expect(page.getByTestId("run-status")).toContainText("succeeded", { timeout: 60_000 });
});

test("destruction: blocked by a reader, planned with it, reviewed, typed, dropped", async ({ page }) => {
  await signIn(page, server.url, "ana");
  await page.getByRole("link", { name: "Destroy" }).click();
  await page.getByLabel("pl__orders").check();
  await page.getByRole("button", { name: "Plan the destruction" }).click();
  await expect(page.getByTestId("destruction-blocked")).toContainText("pl__reporting");
  await page.getByRole("button", { name: "Include them" }).click();
  await expect(page.getByRole("heading", { name: "Destroy pl__orders, pl__reporting" })).toBeVisible();
  await expect(page.getByRole("cell", { name: "tbl__paid_orders" })).toBeVisible();
  await expect(page).toHaveURL(/\?plan=/);
  await page.getByRole("button", { name: "I have reviewed this plan" }).click();
  const drop = page.getByRole("button", { name: "Drop them" });
  await expect(drop).toBeDisabled();
  await page.getByLabel("Type pl__orders").fill("pl__orders");
  await page.getByLabel("Type pl__reporting").fill("PL__REPORTING");
  await expect(drop).toBeDisabled();
  await page.getByLabel("Type pl__reporting").fill("pl__reporting");
  await keep(page, "destroy");
  await checkLayout(page, "destroy");
  await drop.click();
  await expect(page).toHaveURL(/\/runs\//);
  await expect(page.getByTestId("run-status")).toContainText("succeeded", { timeout: 60_000 });
  const left = await query(
    `SELECT count() FROM system.tables WHERE database = '${project.database}' AND name IN ('tbl__paid_orders', 'view__top_customers')`,
  );
  expect(left).toBe("0");
});
