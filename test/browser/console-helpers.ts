import type { Page } from 'playwright-core';
import { axe } from './browser';

/** Helpers of the staff console's browser suites. */

/** axe-core finds no serious or critical violation on the page as it is now (`step` names it in a failure). */
export async function noSeriousViolations(page: Page, step: string): Promise<void> {
  expect({ step, violations: await axe(page) }).toEqual({ step, violations: [] });
}

/** The page fits its width: nothing scrolls sideways. */
export async function fits(page: Page, step: string): Promise<void> {
  const { scroll, width } = (await page.evaluate('({ scroll: document.documentElement.scrollWidth, width: window.innerWidth })')) as {
    scroll: number;
    width: number;
  };
  expect({ step, overflow: scroll > width }).toEqual({ step, overflow: false });
}

/** Signs in on the console's sign-in page with the dev issuer (with MFA) as `sub`. */
export async function signInWithDevIssuer(page: Page, origin: string, sub: string): Promise<void> {
  await page.goto(`${origin}/console/`);
  await page.getByLabel('Subject (user id)').fill(sub);
  await page.getByLabel('Email').fill(`${sub}@example.test`);
  await page.getByRole('button', { name: 'Sign in as this user' }).click();
  await page.getByRole('button', { name: 'Sign out' }).waitFor();
}

/** The ID token the console keeps for the signed-in user (its tab's sessionStorage). */
export async function consoleToken(page: Page): Promise<string> {
  return (await page.evaluate('sessionStorage.getItem("svc-console.idToken")')) as string;
}
