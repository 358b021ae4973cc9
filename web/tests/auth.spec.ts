// Signing in and out, what each persona may do, and a spoofed proxy identity refused.
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { expect, test } from "@playwright/test";
import { createUser, demoProject, dropProject, startDev, type Project, type Server } from "./support/stack";
import { checkLayout, keep, signIn } from "./support/pages";

let project: Project;
let server: Server;

test.beforeAll(async () => {
  project = await demoProject("deployments", "ui_auth", 60);
  // A project role that may stage deployments of pl__staged; vic gets it from the Users page.
  writeFileSync(
    join(project.dir, "access.yml"),
    "roles:\n  stager:\n    grants:\n      - pipelines: [pl__staged]\n        permissions: [deployment.create]\n",
  );
  createUser(project, "ana", "admin");
  createUser(project, "vic", "viewer");
  server = await startDev(project);
});

test.afterAll(async () => {
  await server?.stop();
  await dropProject(project);
});

test("the login lifecycle in password mode", async ({ page }) => {
  await page.goto(server.url);
  await expect(page.getByRole("heading", { name: "Sign in to StreamBuild" })).toBeVisible();
  await keep(page, "login");
  await checkLayout(page, "login");
  await page.getByLabel("Username").fill("ana");
  await page.getByLabel("Password").fill("not the password at all");
  await page.getByRole("button", { name: "Sign in" }).click();
  await expect(page.getByRole("alert")).toContainText("Invalid username or password");

  await signIn(page, server.url, "ana");
  const cookies = await page.context().cookies();
  const session = cookies.find((c) => c.name === "streambuild_session");
  expect(session?.httpOnly).toBe(true);
  expect(session?.sameSite).toBe("Lax");
  // The session outlives a reload.
  await page.reload();
  await expect(page.getByText("Signed in as ana")).toBeVisible();

  await page.getByRole("button", { name: "Sign out" }).click();
  await expect(page.getByRole("heading", { name: "Sign in to StreamBuild" })).toBeVisible();
  // The old session cookie opens nothing any more.
  const replay = await page.request.get(`${server.url}/api/auth/me`, {
    headers: { cookie: `streambuild_session=${session?.value}` },
  });
  expect(replay.status()).toBe(401);
});

test("a viewer may look but not build; an admin may build", async ({ browser }) => {
  const viewer = await browser.newPage();
  await signIn(viewer, server.url, "vic");
  await viewer.getByRole("link", { name: "Plan" }).click();
  await viewer.getByRole("button", { name: "Preview" }).click();
  await expect(viewer.getByRole("heading", { name: "What it will do" })).toBeVisible();
  const build = viewer.getByRole("button", { name: "Build", exact: true });
  await expect(build).toBeDisabled();
  await expect(build).toHaveAttribute("title", /Requires the build.direct.run or deployment.create permission/);
  await expect(viewer.getByRole("link", { name: "Users" })).toHaveCount(0);
  await viewer.close();

  const admin = await browser.newPage();
  await signIn(admin, server.url, "ana");
  await admin.getByRole("link", { name: "Plan" }).click();
  await admin.getByRole("button", { name: "Preview" }).click();
  await expect(admin.getByTestId("plan-deployment")).toBeVisible();
  await expect(admin.getByRole("button", { name: "Build", exact: true })).toBeEnabled();
  await expect(admin.getByRole("link", { name: "Users" })).toBeVisible();
  await admin.close();
});

test("a spoofed proxy identity is refused", async ({ page }) => {
  const proxied = await startDev(project, { auth: "trusted_proxy" });
  try {
    // No identity from a proxy: nothing but the way to sign in through it.
    await page.goto(proxied.url);
    await expect(page.getByText("did not identify you")).toBeVisible();
    // A header a client wrote itself does not pass unsafe methods without the proxy's proof.
    const forged = await page.request.post(`${proxied.url}/api/reload`, {
      headers: { "X-StreamBuild-User": "eve" },
    });
    expect(forged.status()).toBe(403);
    expect(await forged.text()).toContain("trusted-proxy request proof");
    // A name the store does not know becomes a viewer, never more.
    const provisioned = await page.request.post(`${proxied.url}/api/reload`, {
      headers: { "X-StreamBuild-User": "mallory", "X-StreamBuild-CSRF": "trusted-proxy" },
    });
    expect(provisioned.status()).toBe(403);
    // A password account's name is never linked to a proxy identity.
    const linked = await page.request.get(`${proxied.url}/api/auth/me`, {
      headers: { "X-StreamBuild-User": "ana" },
    });
    expect(linked.status()).toBe(403);
  } finally {
    await proxied.stop();
  }
});

test("an admin assigns a project role on the Users page and the viewer may then build", async ({ browser }) => {
  const admin = await browser.newPage();
  await signIn(admin, server.url, "ana");
  await admin.getByRole("link", { name: "Users" }).click();
  const vicRow = admin.getByRole("row", { name: /^vic/ });
  await vicRow.getByLabel("Project role for vic").selectOption("stager");
  await vicRow.getByRole("button", { name: "Assign" }).click();
  await expect(vicRow).toContainText("stager");

  const viewer = await browser.newPage();
  await signIn(viewer, server.url, "vic");
  await viewer.getByRole("link", { name: "Plan" }).click();
  await viewer.getByRole("button", { name: "Preview" }).click();
  await expect(viewer.getByTestId("plan-deployment")).toBeVisible();
  await expect(viewer.getByRole("button", { name: "Build", exact: true })).toBeEnabled();

  await vicRow.getByRole("button", { name: "Revoke stager from vic" }).click();
  await expect(vicRow).toContainText("no project role");
  await viewer.reload();
  await viewer.getByRole("button", { name: "Preview" }).click();
  await expect(viewer.getByRole("button", { name: "Build", exact: true })).toBeDisabled();
  await admin.close();
  await viewer.close();
});
