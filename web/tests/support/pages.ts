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

/** What a page must never show: a server's raw exception text. */
const RAW_EXCEPTION = /DB::Exception|Code: \d+\. |Traceback \(most recent call last\)/;

/** The page as it stands shows no raw exception and, at 1280 and 1440 px wide, nothing
 * wider than the window (the viewport is put back afterwards). */
export async function checkLayout(page: Page, name: string): Promise<void> {
  await expect(page.locator("body"), `${name}: a raw exception is shown`).not.toContainText(RAW_EXCEPTION);
  const before = page.viewportSize();
  for (const width of [1280, 1440]) {
    await page.setViewportSize({ width, height: 900 });
    // Reading the widths lays the page out at the new size (no frame is waited for: a
    // test may have stopped the page's timers).
    const overflow = await page.evaluate(
      () => document.documentElement.scrollWidth - document.documentElement.clientWidth,
    );
    expect(overflow, `${name} overflows at ${width} px by ${overflow} px`).toBeLessThanOrEqual(0);
  }
  if (before) await page.setViewportSize(before);
}
