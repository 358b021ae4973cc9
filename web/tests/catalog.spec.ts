// The catalog explains a model: its description, its columns' descriptions, and where a
// column's values come from, traced through the models to the JSON path of the Kafka
// payload it is read at (the demo's customer_revenue.revenue_cents).
import { expect, test } from "@playwright/test";
import { createUser, demoProject, dropProject, type Project, type Server, startDev } from "./support/stack";
import { checkLayout, keep, signIn } from "./support/pages";

let project: Project;
let server: Server;

test.beforeAll(async () => {
  project = await demoProject("orders", "ui_catalog", 10);
  createUser(project, "ana", "viewer");
  server = await startDev(project);
});

test.afterAll(async () => {
  await server?.stop();
  await dropProject(project);
});

test("descriptions and a column traced to its JSON path", async ({ page }) => {
  await signIn(page, server.url, "ana");
  await page.getByRole("link", { name: "Catalog" }).click();
  await page.getByRole("link", { name: "customer_revenue", exact: true }).click();
  await expect(page.getByText("Paid revenue per customer, summed as orders are paid")).toBeVisible();
  await page.getByRole("button", { name: "revenue_cents" }).click();
  const tree = page.getByTestId("column-lineage");
  await expect(tree).toContainText("customer_revenue.revenue_cents (aggregated)");
  await expect(tree).toContainText("paid_orders.amount_cents (copied)");
  await expect(tree).toContainText("order_events.amount_cents (computed)");
  await expect(tree).toContainText("source orders: kafka_value at amount_cents");
  await keep(page, "catalog-lineage");
  await checkLayout(page, "catalog-lineage");
  // A column's description, from the model's `columns (...)`.
  await page.getByRole("link", { name: "order_events", exact: true }).click();
  await expect(page.getByRole("cell", { name: "Unique per event" })).toBeVisible();
  await expect(tree).toHaveCount(0);
});
