// The warehouse goes away and comes back: the UI says so, keeps serving what it can, and
// recovers in place.
import { expect, test } from "@playwright/test";
import { createUser, demoProject, dropProject, stack, startDev } from "./support/stack";
import { checkLayout, keep, signIn } from "./support/pages";
import { CuttableProxy } from "./support/proxy";

test("a warehouse outage is shown, definitions stay, and recovery is in place", async ({ page }) => {
  const project = await demoProject("deployments", "ui_outage", 30);
  createUser(project, "ana", "admin");
  const proxy = new CuttableProxy(stack.STB_LOCAL_CLICKHOUSE_HOST, Number(stack.STB_LOCAL_CLICKHOUSE_PORT));
  const port = await proxy.open();
  const server = await startDev(project, { env: { STREAMBUILD_CLICKHOUSE_PORT: String(port) } });
  try {
    await signIn(page, server.url, "ana");
    await page.getByRole("link", { name: "Status" }).click();
    await expect(page.getByRole("heading", { name: "Models" })).toBeVisible();
    await expect(page.getByTestId("warehouse-outage")).toHaveCount(0);

    await proxy.cut();
    // The server's probe notices within its 10 s cycle; the page polls status every 5 s.
    await expect(page.getByTestId("warehouse-outage")).toBeVisible({ timeout: 40_000 });
    await keep(page, "outage");
    // Said once, by the banner: the pages' own reads that fail for the same reason wait
    // quietly instead of repeating it.
    await page.getByRole("link", { name: "Overview" }).click();
    await expect(page.getByRole("heading", { name: "Recent runs" })).toBeVisible();
    await expect(page.getByTestId("warehouse-outage")).toHaveCount(1);
    await expect(page.getByTestId("waiting-for-warehouse").first()).toBeVisible();
    await expect(page.getByRole("alert")).toHaveCount(0);
    await checkLayout(page, "overview during an outage");
    // Definitions need no warehouse: the pipelines page still works.
    await page.getByRole("link", { name: "Pipelines" }).click();
    await expect(page.getByRole("link", { name: "pl__staged" })).toBeVisible();

    await proxy.open(port);
    await page.getByRole("link", { name: "Status" }).click();
    await page.getByRole("button", { name: "Reconnect and refresh" }).click();
    await expect(page.getByTestId("warehouse-outage")).toHaveCount(0, { timeout: 20_000 });
    await expect(page.getByRole("heading", { name: "Models" })).toBeVisible();
  } finally {
    await server.stop();
    await proxy.cut();
    await dropProject(project);
  }
});
