// Sensors (docs/sensors.md) on the demo's direct project: the running and the stopped
// sensor are listed as declared; starting the stopped one shows it running "(override)";
// an audit run makes the failing sensor tick and dead-letter (its page shows the ticks);
// skipping the dead letter with a reason removes it. A viewer sees it all, changes nothing.
import { appendFileSync, mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { expect, test } from "@playwright/test";
import { build, createUser, demoProject, dropProject, startDev, stbOn, type Project, type Server } from "./support/stack";
import { signIn } from "./support/pages";

const SENSORS = `from streambuild.events import AuditCompleted
from streambuild.sensors import DefaultSensorStatus, SensorRetryPolicy, event_sensor


@event_sensor(
    on=AuditCompleted,
    default_status=DefaultSensorStatus.RUNNING,
    retry_policy=SensorRetryPolicy(max_attempts=1, backoff_seconds=0),
)
def flaky_alerts(ctx):
    """Alert on audit completions; the demo webhook always fails."""

    raise RuntimeError("simulated alert delivery failure")


@event_sensor(on=AuditCompleted)
def paused_watch(ctx):
    """Stopped by default until an operator starts it."""
`;

let project: Project;
let server: Server;

test.beforeAll(async () => {
  project = await demoProject("orders", "ui_sensors", 30);
  mkdirSync(join(project.dir, "sensors"));
  writeFileSync(join(project.dir, "sensors/alerts.py"), SENSORS);
  appendFileSync(join(project.dir, "streambuild_project.toml"), "\n[sensors]\nenabled = true\n");
  createUser(project, "ops", "admin");
  createUser(project, "ana", "viewer");
  build(project);
  server = await startDev(project);
});

test.afterAll(async () => {
  await server?.stop();
  await dropProject(project);
});

test("sensors are listed, started by an operator, and a dead letter is skipped with a reason", async ({ page }) => {
  test.setTimeout(120_000);
  await signIn(page, server.url, "ops");
  await page.getByRole("link", { name: "Sensors" }).click();
  const rows = page.getByTestId("sensors");
  await expect(rows.getByRole("row", { name: /flaky_alerts/ })).toContainText("running");
  await expect(rows.getByRole("row", { name: /paused_watch/ })).toContainText("stopped");
  // The dispatcher has passed once: the sensors now start at the head of their stream.
  await expect.poll(async () => (await page.getByTestId("sensor-health").textContent()) ?? "", { timeout: 60_000 }).toMatch(/Last good pass\d{4}-/);

  await rows.getByRole("row", { name: /paused_watch/ }).getByRole("button", { name: "Start" }).click();
  await expect(rows.getByRole("row", { name: /paused_watch/ })).toContainText("running (override)");

  // An audit run is an event; the failing sensor has one attempt: dead-lettered.
  stbOn(project, ["audit", "--database", project.database, "--vars", project.vars]);
  await page.getByRole("link", { name: "flaky_alerts" }).click();
  await expect(page.getByRole("heading", { name: "Sensor flaky_alerts" })).toBeVisible();
  const ticks = page.getByTestId("sensor-ticks");
  await expect(ticks).toContainText("dead_lettered", { timeout: 60_000 });
  await expect(ticks).toContainText("failed");
  await expect(ticks).toContainText("RuntimeError: simulated alert delivery failure");
  // Each of the audit run's results is an event, each dead-lettered: skip one of them.
  const letters = page.getByTestId("dead-letters");
  const letter = letters.getByRole("row").filter({ hasText: "flaky_alerts" }).first();
  const event = ((await letter.getByRole("cell").nth(1).textContent()) ?? "").trim();
  expect(event).toMatch(/^[0-9a-f-]{36}$/);
  const row = letters.getByRole("row").filter({ hasText: event });
  await expect(row.getByRole("button", { name: "Skip" })).toBeDisabled();
  await row.getByLabel("Reason").fill("webhook retired");
  await row.getByRole("button", { name: "Skip" }).click();
  await expect(row).toHaveCount(0);
  await expect(ticks).toContainText("webhook retired");
});

test("a viewer sees the sensors and cannot change them", async ({ page }) => {
  await signIn(page, server.url, "ana");
  await page.getByRole("link", { name: "Sensors" }).click();
  const row = page.getByTestId("sensors").getByRole("row", { name: /flaky_alerts/ });
  await expect(row).toContainText("running");
  await expect(row.getByRole("button", { name: "Stop" })).toBeDisabled();
  await expect(row.getByRole("button", { name: "Stop" })).toHaveAttribute("title", "Requires the automation.manage permission");
});
