// The demo's direct project, built: the Status page's numbers are the warehouse's, its
// views are built, nothing shows a raw exception, the Overview's cards come with the
// first status (not the next poll), and Deployments explains that a project without
// virtual pipelines has none.
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { expect, test } from "@playwright/test";
import { build, createUser, demoProject, dropProject, query, startDev, stbOn, type Project, type Server } from "./support/stack";
import { checkLayout, keep, signIn } from "./support/pages";

const EVENTS = 30;
let project: Project;
let server: Server;

test.beforeAll(async () => {
  project = await demoProject("orders", "ui_status", EVENTS);
  createUser(project, "ana", "viewer");
  // Reloading the project after an edit is an operator's (project.reload).
  createUser(project, "ops", "admin");
  build(project);
  // Every produced event landed and reached the models.
  await expect
    .poll(() => query(`SELECT count() FROM ${project.database}.tbl__order_events`), { timeout: 60_000 })
    .toBe(String(EVENTS));
  // Every part merged now: a background merge of customer_revenue (SummingMergeTree) later
  // would change its count between the page's snapshot and the test's own count.
  for (const table of ["tbl__order_events", "tbl__paid_orders", "tbl__customer_revenue"]) {
    await query(`OPTIMIZE TABLE ${project.database}.${table} FINAL`);
  }
  server = await startDev(project);
});

test.afterAll(async () => {
  await server?.stop();
  await dropProject(project);
});

test("status numbers are the warehouse's, views are built, no raw exception", async ({ page }) => {
  // Timers stand still from here: a page that waited for its next 5 s poll would never
  // show the Overview's cards.
  await page.clock.install();
  await page.clock.pauseAt(Date.now() + 1000);
  await signIn(page, server.url, "ana");
  await expect(page.getByLabel("Health")).toContainText("Compile");
  await expect(page.getByLabel("Health")).toContainText(project.database);
  await checkLayout(page, "overview");

  await page.getByRole("link", { name: "Status" }).click();
  await expect(page.getByRole("heading", { name: "Models" })).toBeVisible();
  const relations = (await query(`SELECT name, engine FROM system.tables WHERE database = '${project.database}' FORMAT TSV`))
    .split("\n")
    .map((line) => line.split("\t"));
  for (const [model, relation] of [
    ["order_events", "tbl__order_events"],
    ["paid_orders", "tbl__paid_orders"],
    ["customer_revenue", "tbl__customer_revenue"],
    ["order_status", "view__order_status"],
    ["top_customers", "view__top_customers"],
  ]) {
    expect(relations.some(([name]) => name === relation), `${relation} exists`).toBe(true);
    const rows = await query(`SELECT count() FROM ${project.database}.${relation}`);
    expect(Number(rows)).toBeGreaterThan(0);
    const row = page.getByRole("row", { name: new RegExp(`^${model} `) });
    await expect(row.getByRole("cell").nth(3), `${model} built`).toHaveText("yes");
    await expect(row.getByRole("cell").nth(4), `${model} rows`).toHaveText(Number(rows).toLocaleString("en-US"));
  }
  await expect(page.getByTestId("memory")).toBeVisible();
  await checkLayout(page, "status");
  await keep(page, "status");

  await page.getByRole("link", { name: "Deployments" }).click();
  await expect(page.getByTestId("no-virtual-pipelines")).toContainText("no virtual pipelines");
  await expect(page.getByRole("alert")).toHaveCount(0);
  await checkLayout(page, "deployments without virtual pipelines");
});

test("a model's page: live numbers, its last build, its checks and its SQL", async ({ page }) => {
  await signIn(page, server.url, "ana");
  await page.getByRole("link", { name: "Catalog" }).click();
  await page.getByRole("link", { name: "paid_orders", exact: true }).click();
  await expect(page.getByRole("heading", { name: "paid_orders", exact: true })).toBeVisible();
  const live = page.getByTestId("model-live");
  const rows = Number(await query(`SELECT count() FROM ${project.database}.tbl__paid_orders`));
  expect(rows).toBeGreaterThan(0);
  await expect(live).toContainText(`Rows${rows.toLocaleString("en-US")}`);
  await expect(live).toContainText(/Bytes\d/);
  await expect(live).toContainText("tbl__paid_orders");
  // The demo's build in beforeAll built it.
  await expect(page.getByTestId("model-last-build")).toContainText("succeeded");
  const checks = page.getByTestId("model-checks");
  await expect(checks.getByRole("row", { name: /only_paid_events_become_paid_orders.*test/ })).toBeVisible();
  await expect(checks.getByRole("row", { name: /revenue_matches_paid_orders.*audit/ })).toBeVisible();
  // The compiled query, highlighted: keywords are marked, the text is the query's.
  const sql = page.getByLabel("Compiled query of paid_orders");
  await expect(sql).toContainText(`FROM ${project.database}.tbl__order_events`);
  await expect(sql.locator(".tok-keyword").first()).toHaveText(/^(SELECT|WITH)$/i);
  await page.getByText("materialized view mv__paid_orders").click();
  await expect(page.getByLabel("Statement creating mv__paid_orders")).toContainText("CREATE MATERIALIZED VIEW");
  await checkLayout(page, "catalog model page");
  await keep(page, "catalog-model");
});

test("the lineage graph: a legend, arrows, each node's state and its details", async ({ page }) => {
  // An audit that fails (customer revenue no longer matches the paid orders) and a view
  // dropped by hand: the graph shows both.
  await query(`INSERT INTO ${project.database}.tbl__customer_revenue (customer_id, revenue_cents) VALUES ('c-extra', 12345)`);
  expect(() => stbOn(project, ["audit", "--database", project.database, "--vars", project.vars])).toThrow();
  await query(`DROP VIEW ${project.database}.view__top_customers`);

  await signIn(page, server.url, "ana");
  // The snapshot the server holds is taken again.
  await page.getByRole("link", { name: "Status" }).click();
  await page.getByRole("button", { name: "Reconnect and refresh" }).click();
  await expect(page.getByRole("row", { name: /^top_customers / })).toContainText("incomplete");

  await page.getByRole("link", { name: "Lineage" }).click();
  const legend = page.getByLabel("Legend");
  for (const entry of ["source", "table model", "view model", "failing", "missing", "stale", "built"]) {
    await expect(legend).toContainText(entry);
  }
  const node = (label: string) => page.getByRole("button", { name: label, exact: true });
  await expect(node("table order_events")).toHaveAttribute("data-state", "built");
  await expect(node("table paid_orders")).toHaveAttribute("data-state", "failing");
  await expect(node("table customer_revenue")).toHaveAttribute("data-state", "failing");
  await expect(node("view top_customers")).toHaveAttribute("data-state", "missing");
  // Every edge ends in an arrow head.
  const edges = page.locator(".graph path.edge");
  expect(await edges.count()).toBeGreaterThan(3);
  for (const edge of await edges.all()) await expect(edge).toHaveAttribute("marker-end", "url(#lineage-arrow)");

  await node("table paid_orders").click();
  const details = page.getByTestId("lineage-details");
  await expect(details).toContainText("audit revenue_matches_paid_orders fails");
  await expect(details).toContainText("Reads: order_events");
  await expect(details).toContainText("Read by: customer_revenue");
  const rows = Number(await query(`SELECT count() FROM ${project.database}.tbl__paid_orders`));
  await expect(details).toContainText(`Rows: ${rows.toLocaleString("en-US")}`);
  await expect(page).toHaveURL(/node=paid_orders/);
  await checkLayout(page, "lineage with details");
  await keep(page, "lineage");
  await details.getByRole("link", { name: "Open in the catalog" }).click();
  await expect(page.getByRole("heading", { name: "paid_orders", exact: true })).toBeVisible();
});

test("the plan in sentences, model by model, with the SQL diff of an edited model", async ({ page }) => {
  const file = join(project.dir, "pipelines/pl__orders/paid_orders.sql");
  writeFileSync(file, readFileSync(file, "utf8").replace("WHERE kind = 'paid'", "WHERE kind = 'paid' AND amount_cents > 0"));
  await signIn(page, server.url, "ops");
  await Promise.all([page.waitForResponse((r) => r.url().endsWith("/api/reload") && r.ok()), page.getByTestId("reload").click()]);
  await page.getByRole("link", { name: "Plan" }).click();
  await page.getByLabel("pl__orders").check();
  await page.getByRole("button", { name: "Preview" }).click();
  const models = page.getByTestId("plan-models");
  const paid = models.locator('li[data-model="paid_orders"]');
  await expect(paid).toContainText("paid_orders is rebuilt because it was selected; its query differs from the last build's.");
  await expect(paid).toContainText("are dropped, then table tbl__paid_orders and materialized view mv__paid_orders created.");
  await expect(paid).toContainText("It is filled by the replay into order_events.");
  await expect(page.getByLabel("SQL diff of paid_orders")).toContainText("+WHERE kind = 'paid' AND amount_cents > 0");
  await expect(page.getByLabel("SQL diff of paid_orders").locator(".diff-del")).toContainText("WHERE kind = 'paid'");
  const root = models.locator('li[data-model="order_events"]');
  await expect(root).toContainText("exactly once");
  // No internal word is left in a sentence.
  for (const sentence of await models.locator("li > p").allTextContents()) {
    expect(sentence).not.toMatch(/first_baseline|query_changed|all_models|downstream_of_selected|driving_input/);
  }
  // The statements, grouped by the model they build.
  const statements = page.getByTestId("plan-statements");
  const group = statements.locator('details[data-model="paid_orders"]');
  await expect(group.locator("summary")).toContainText("paid_orders");
  await expect(group.locator("summary")).toContainText("drop, set aside (restored if the build fails), create");
  await group.locator("summary").click();
  await expect(group.getByLabel("Statement set_aside_tbl__paid_orders")).toContainText("RENAME TABLE");
  await expect(group.getByLabel("Statement realize_tbl__paid_orders")).toContainText("CREATE TABLE");
  await expect(group.getByLabel("Statement realize_mv__paid_orders")).toContainText("amount_cents > 0");
  await expect(statements.locator('details[data-model="order_events"] summary')).toContainText("replay");
  await expect(statements.locator('details[data-model=""] summary')).toContainText("The target and its sources");
  await checkLayout(page, "plan in sentences");
  await models.scrollIntoViewIfNeeded();
  await keep(page, "plan-sentences");
});
