// A model the warehouse refuses: the plan preview names it where the author wrote it and
// the Build button stays disabled (nothing can start that the checks refused).
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { expect, test } from "@playwright/test";
import { build, createUser, demoProject, dropProject, query, type Project, type Server, startDev } from "./support/stack";
import { checkLayout, keep, signIn } from "./support/pages";

let project: Project;
let server: Server;

test.beforeAll(async () => {
  project = await demoProject("orders", "ui_invalid", 30);
  build(project);
  // A typo in one model: a column that does not exist.
  const model = join(project.dir, "pipelines/pl__orders/paid_orders.sql");
  writeFileSync(model, readFileSync(model, "utf8").replace("  amount_cents::UInt64", "  amount_centz::UInt64"));
  createUser(project, "ana", "admin");
  server = await startDev(project);
});

test.afterAll(async () => {
  await server?.stop();
  await dropProject(project);
});

test("a plan the warehouse refuses shows where and disables Build", async ({ page }) => {
  await signIn(page, server.url, "ana");
  await page.getByRole("link", { name: "Plan" }).click();
  await page.getByLabel("pl__orders").check();
  await page.getByRole("button", { name: "Preview" }).click();
  const problems = page.getByTestId("plan-problems");
  await expect(problems).toBeVisible();
  await expect(problems).toContainText("pipelines/pl__orders/paid_orders.sql:9:3");
  await expect(problems).toContainText("STB-PLAN-006");
  await expect(problems).toContainText("amount_centz");
  const button = page.getByRole("button", { name: "Build", exact: true });
  await expect(button).toBeDisabled();
  await expect(button).toHaveAttribute("title", /failed its checks/);
  await keep(page, "plan-refused");
  await checkLayout(page, "plan-refused");
});

test("the status page shows a relation missing in red with what mends it, and true row counts", async ({ page }) => {
  await signIn(page, server.url, "ana");
  // A view dropped by hand.
  await query(`DROP TABLE ${project.database}.view__top_customers`);
  await page.getByRole("link", { name: "Status" }).click();
  await page.getByRole("button", { name: "Reconnect and refresh" }).click();
  const condition = page.getByTestId("target-condition");
  await expect(condition).toContainText("Incomplete target");
  await expect(condition).toContainText("stb build --changed");
  await expect(page.getByRole("row", { name: /top_customers/ })).toContainText("missing view__top_customers");
  // A view that exists is built, with its rows counted.
  await expect(page.getByRole("row", { name: /order_status/ })).toContainText("yes");
  await keep(page, "status-incomplete");
  await checkLayout(page, "status-incomplete");
});
