import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { chromium, type BrowserContext, type BrowserContextOptions, type Page } from 'playwright-core';
import { onTopology } from '@svc/testing';

/**
 * Browser tests: Debian's Chromium (/usr/bin/chromium) driven by playwright-core, headless, with an
 * empty profile. Nothing is ever downloaded. In CI (CI=true) a missing Chromium fails the suites
 * (`.ci/run` installs it); elsewhere they are skipped with one line saying so.
 */
export const CHROMIUM = process.env.SVC_CHROMIUM ?? '/usr/bin/chromium';
const ARGS = [
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

export const browserAvailable = existsSync(CHROMIUM);
const ci = process.env.CI === 'true' || process.env.CI === '1';

/** `describe` when Chromium is there or in CI (where its absence must fail); else a skip with one line. */
export function describeInBrowser(name: string, fn: () => void): void {
  if (browserAvailable || ci) return describe(name, fn);
  process.stdout.write(`browser suite "${name}" skipped: ${CHROMIUM} is missing (install Debian's chromium; CI fails instead)\n`);
  describe.skip(name, fn);
}

/**
 * Builds the pages (dist/web) when web/ changed since the last build: the suites test what the service serves.
 * Against the topology (SVC_E2E_TARGET=distributed) its global setup built them before the six processes
 * started: a build now would replace dist/web under processes that read it once, each on its first page.
 */
export function buildPages(): void {
  if (onTopology()) return;
  const root = resolve(__dirname, '..', '..');
  execFileSync(process.execPath, [join(root, 'scripts', 'build-web.js'), '--if-needed'], { cwd: root, stdio: 'inherit' });
}

export interface Browser {
  context(options?: BrowserContextOptions): Promise<BrowserContext>;
  close(): Promise<void>;
}

/**
 * One Chromium process for a suite, on an empty user-data dir (Playwright makes a fresh temporary
 * one for every launch and removes it on close); each `context()` is a fresh incognito-like
 * profile (no cookies, no storage), at phone width unless told otherwise.
 */
export async function launch(): Promise<Browser> {
  if (!browserAvailable) throw new Error(`${CHROMIUM} is missing: install Debian's chromium package (apt-get install chromium)`);
  const browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: ARGS, timeout: 30_000 });
  return {
    context: (options) => browser.newContext({ viewport: { width: 375, height: 740 }, ...options }),
    close: () => browser.close(),
  };
}

/**
 * Watches a page: every request it makes (address and Referer), and every Content-Security-Policy
 * violation or script error it reports.
 */
export function watch(page: Page) {
  const requests: { url: string; referer: string | null }[] = [];
  const problems: string[] = [];
  const pending: Promise<void>[] = [];
  // The Referer as sent on the wire (Playwright's provisional headers show an empty one).
  page.on('request', (r) => {
    const entry = { url: r.url(), referer: null as string | null };
    requests.push(entry);
    pending.push(
      r.headerValue('referer').then(
        (v) => void (entry.referer = v || null),
        () => undefined,
      ),
    );
  });
  page.on('console', (m) => {
    if (m.type() === 'error' && /Content Security Policy|Refused to/i.test(m.text())) problems.push(m.text());
  });
  page.on('pageerror', (e) => problems.push(`pageerror: ${e.message}`));
  /** The requests made so far, with their Referer (null when none was sent). */
  const sent = async () => {
    await Promise.all(pending);
    return requests;
  };
  return { sent, problems };
}

const AXE = readFileSync(require.resolve('axe-core/axe.min.js'), 'utf8');

/**
 * axe-core on the page as it is now: the serious and critical violations (WCAG 2.x A and AA rules
 * and best practices). Injected through the DevTools protocol, so the page's own policy (no inline
 * script) stays as it is.
 */
export async function axe(page: Page, root?: string): Promise<{ id: string; impact: string; nodes: string[] }[]> {
  const loaded = await page.evaluate('typeof window.axe === "object"');
  if (!loaded) await page.evaluate(AXE);
  const result = (await page.evaluate(`window.axe.run(${root ? JSON.stringify(root) : 'document'}, { resultTypes: ['violations'] })`)) as {
    violations: { id: string; impact: string; nodes: { target: string[] }[] }[];
  };
  return result.violations
    .filter((v) => v.impact === 'serious' || v.impact === 'critical')
    .map((v) => ({ id: v.id, impact: v.impact, nodes: v.nodes.map((n) => n.target.join(' ')) }));
}

/**
 * A screenshot into docs/ for the README, only when SVC_SCREENSHOTS=1 (a normal run writes nothing into the tree):
 * the whole page, or with `fullPage: false` what the viewport shows.
 */
export async function screenshot(page: Page, name: string, options: { fullPage?: boolean } = {}): Promise<void> {
  if (process.env.SVC_SCREENSHOTS !== '1') return;
  const dir = resolve(__dirname, '..', '..', 'docs', 'screenshots');
  mkdirSync(dir, { recursive: true });
  await page.screenshot({ path: join(dir, `${name}.png`), fullPage: options.fullPage ?? true });
}

/** Reads `read()` until `ok` holds of it (or `timeoutMs` passes); answers the last value read, for the test to assert. */
export async function poll<T>(read: () => Promise<T>, ok: (v: T) => boolean, timeoutMs = 10_000): Promise<T> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    let v: T;
    try {
      v = await read();
    } catch (err) {
      if (Date.now() > until) throw err;
      await new Promise((r) => setTimeout(r, 50));
      continue;
    }
    if (ok(v) || Date.now() > until) return v;
    await new Promise((r) => setTimeout(r, 50));
  }
}
