import { expect, type Page } from "@playwright/test";
import { PASSWORD, screenshotPath } from "./stack";

/** Signs `username` in through the login form. */
export async function signIn(page: Page, url: string, username: string): Promise<void> {
  await page.goto(url);
  await page.getByLabel("Username").fill(username);
  await page.getByLabel("Password").fill(PASSWORD);
  await page.getByRole("button", { name: "Sign in" }).click();
  await expect(page.getByText(`Signed in as ${username}`)).toBeVisible();
}

/** Keeps a screenshot of the page for docs/ui.md (only when asked to). */
export async function keep(page: Page, name: string): Promise<void> {
  const path = screenshotPath(name);
  if (path) await page.screenshot({ path, fullPage: false });
}
