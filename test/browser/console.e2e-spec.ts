import { createHmac } from 'node:crypto';
import { Server, createServer } from 'node:http';
import { TestApp, enrollPatient, freePort } from '@svc/testing';
import { parse } from 'yaml';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Browser, buildPages, describeInBrowser, launch, poll, screenshot, watch } from './browser';
import { fits, noSeriousViolations } from './console-helpers';

/**
 * The staff console (`{origin}/console/`, docs/decisions.md, "Pages for people") in a real browser over real HTTP: the set-up
 * a new customer does, from signing in to retrying a failed webhook delivery from its log, at laptop
 * and tablet widths, by keyboard where it matters, with axe-core on every screen.
 */
jest.setTimeout(150_000);

/** The customer's webhook receiver: answers `status`, keeps what arrived. */
class Receiver {
  server!: Server;
  url = '';
  status = 200;
  arrivals: { headers: Record<string, string | string[] | undefined>; body: Buffer; answered: number }[] = [];
  async start(): Promise<void> {
    this.server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        this.arrivals.push({ headers: req.headers, body: Buffer.concat(chunks), answered: this.status });
        res.writeHead(this.status).end();
      });
    });
    const port = await freePort();
    await new Promise<void>((r) => this.server.listen(port, '127.0.0.1', () => r()));
    this.url = `http://127.0.0.1:${port}/hooks`;
  }
  stop(): Promise<void> {
    return new Promise((r) => this.server.close(() => r()));
  }
}

describeInBrowser('staff console (browser)', () => {
  let app: TestApp;
  let browser: Browser;
  const receiver = new Receiver();
  let origin: string;

  beforeAll(async () => {
    buildPages();
    await receiver.start();
    app = await new TestApp().start();
    origin = new URL(app.baseUrl).origin;
    browser = await launch();
  });
  afterAll(async () => {
    await browser?.close();
    await app?.stop();
    await receiver.stop();
  });

  it('walks a new customer through sign-in, organization, BAA, API key, webhook endpoint, and a failed delivery retried from its log', async () => {
    const context = await browser.context({ viewport: { width: 1280, height: 800 }, locale: 'en-US' });
    const page = await context.newPage();
    page.on('dialog', (d) => void d.accept());
    const seen = watch(page);
    const retries: string[] = [];
    page.on('request', (r) => {
      if (r.method() === 'POST' && /\/deliveries\/[^/]+\/retry$/.test(r.url())) retries.push(r.url());
    });

    // Sign in with the dev issuer, by keyboard alone.
    const res = await page.goto(`${origin}/console/`);
    expect(res?.status()).toBe(200);
    expect(res?.headers()['content-security-policy']).toContain("script-src 'self'");
    await page.getByRole('heading', { name: 'Sign in with the dev issuer' }).waitFor();
    await noSeriousViolations(page, 'sign-in');
    await page.keyboard.press('Tab');
    expect(await page.evaluate('document.activeElement.id')).toBe('dev-sub');
    await page.keyboard.type('owner-console-1');
    await page.keyboard.press('Tab');
    await page.keyboard.type('owner-console-1@example.test');
    await page.keyboard.press('Enter');

    // No organization yet: create one.
    await page.getByRole('heading', { name: 'Create your organization' }).waitFor();
    await noSeriousViolations(page, 'create organization');
    await page.getByLabel('Organization name').fill('Riverside Clinic');
    await page.getByRole('button', { name: 'Create organization' }).click();
    await page.getByRole('heading', { name: 'Riverside Clinic' }).waitFor();
    const banner = page.getByRole('region', { name: 'BAA not signed' });
    await expect(banner.isVisible()).resolves.toBe(true);
    expect(await page.locator('.env-card').allInnerTexts()).toEqual([expect.stringMatching(/SANDBOX/i), expect.stringMatching(/PRODUCTION/i)]);
    await noSeriousViolations(page, 'organization, BAA unsigned');
    const orgId = new URL(page.url()).searchParams.get('org')!;
    const org = (await app.api.get(`/organizations/${orgId}`, (await page.evaluate('sessionStorage.getItem("svc-console.idToken")')) as string)).body;
    const sandbox = org.environments.find((e: { kind: string }) => e.kind === 'sandbox').id as string;
    expect(org.baaSignedAt).toBeNull();

    // The banner stays on every screen until the BAA is signed.
    await page.getByRole('link', { name: 'Webhooks' }).click();
    await page.getByRole('heading', { name: /Webhook endpoints/ }).waitFor();
    await expect(banner.isVisible()).resolves.toBe(true);
    await page.getByRole('link', { name: 'Organization', exact: true }).click();
    await page.getByLabel("Signer's full name").fill('Dana Reyes');
    await page.getByLabel("Signer's title").fill('Medical Director');
    await page.getByRole('button', { name: 'Sign the BAA' }).click();
    await page.getByText(/^Signed /).waitFor();
    await expect(banner.count()).resolves.toBe(0);

    // An API key: its secret shown once, with a copy button; then only its prefix.
    await page.getByRole('link', { name: 'API keys and secrets' }).click();
    await page.getByLabel('New sandbox key name').fill('EHR backend');
    await page.getByRole('button', { name: 'Create sandbox API key' }).click();
    const secretBox = page.locator('[data-secret]');
    await secretBox.waitFor();
    const apiKey = await secretBox.inputValue();
    expect(apiKey).toMatch(/^svc_sb_/);
    await expect(page.getByRole('button', { name: 'Copy' }).isVisible()).resolves.toBe(true);
    await noSeriousViolations(page, 'API key shown once');
    await page.getByRole('button', { name: 'I saved it' }).click();
    await expect(secretBox.count()).resolves.toBe(0);
    await page.getByRole('button', { name: 'Revoke EHR backend' }).waitFor();
    expect(await page.content()).not.toContain(apiKey);

    // A webhook endpoint for the case events; its signing secret shown once.
    await page.getByRole('link', { name: 'Webhooks' }).click();
    await page.getByLabel('URL').fill(receiver.url);
    const catalog = (
      parse(readFileSync(join(__dirname, '..', '..', 'contracts', 'openapi.yaml'), 'utf8')) as {
        components: { schemas: { WebhookEventType: { enum: string[] } } };
      }
    ).components.schemas.WebhookEventType.enum;
    expect(
      (await page.locator('fieldset.events input[type=checkbox]').evaluateAll((els) => els.map((e) => (e as unknown as { value: string }).value))).sort(),
    ).toEqual([...catalog].sort());
    await page.getByRole('button', { name: 'Add endpoint' }).click();
    await secretBox.waitFor();
    const signingSecret = await secretBox.inputValue();
    expect(signingSecret).toMatch(/^whsec_/);
    await noSeriousViolations(page, 'webhook endpoint created');
    await page.getByRole('button', { name: 'I saved it' }).click();

    // A case opened through the API with the console's key, while the receiver fails.
    receiver.status = 500;
    const staff = (await page.evaluate('sessionStorage.getItem("svc-console.idToken")')) as string;
    const env = `/organizations/${orgId}/environments/${sandbox}`;
    const patient = await enrollPatient(app.api, { staff, env, apiKey });
    const opened = await app.api.post(`${env}/clinical-cases`, { patientId: patient.patientId, request: 'Please call the patient about the dressing' }, staff);
    expect(opened.status).toBe(201);
    await poll(
      async () => receiver.arrivals.length,
      (n) => n >= 1,
      15_000,
    );
    expect(receiver.arrivals[0].answered).toBe(500);

    // The delivery log shows the failed attempt (time, status code, latency), never the body.
    await page.getByRole('link', { name: /Delivery log/ }).click();
    await page.getByRole('heading', { name: /Delivery log/ }).waitFor();
    const row = page.locator('tr[data-delivery]').first();
    await poll(
      async () => {
        await page.getByRole('button', { name: 'Refresh' }).click();
        return (await row.count()) ? row.innerText() : '';
      },
      (t) => /500/.test(t),
      10_000,
    );
    const failedRow = await row.innerText();
    expect(failedRow).toContain('clinical_case.opened');
    expect(failedRow).toMatch(/500 · \d+ ms/);
    expect(await page.content()).not.toContain('Please call the patient');
    await noSeriousViolations(page, 'delivery log, failed attempt');
    await fits(page, 'delivery log at laptop width');

    // Filter by status.
    await page.getByLabel('Status').selectOption('delivered');
    await page.getByText('No deliveries with status delivered.').waitFor();
    await page.getByLabel('Status').selectOption('');
    await row.waitFor();

    // The receiver is fixed; "Retry now" sends it again at once.
    receiver.status = 200;
    const before = receiver.arrivals.length;
    const clickedAt = Date.now();
    await row.getByRole('button', { name: /Retry now/ }).click();
    await poll(
      async () => receiver.arrivals.length,
      (n) => n > before,
      10_000,
    );
    expect(retries).toHaveLength(1);
    expect(Date.now() - clickedAt).toBeLessThan(4_000);
    const delivered = await poll(
      async () => {
        await page.getByRole('button', { name: 'Refresh' }).click();
        return row.innerText();
      },
      (t) => /delivered/.test(t),
      10_000,
    );
    expect(delivered).toMatch(/delivered/);
    // The retry is signed with the secret the console showed once.
    const last = receiver.arrivals[receiver.arrivals.length - 1];
    const ts = String(last.headers['x-svc-timestamp']);
    expect(last.headers['x-svc-signature']).toBe(`v1=${createHmac('sha256', signingSecret).update(`${ts}.`).update(last.body).digest('hex')}`);
    await page.getByText('Receiver snippet (Node.js, no dependencies)').click();
    expect(await page.locator('.receiver pre').last().textContent()).toBe(readFileSync(join(__dirname, '..', '..', 'scripts', 'webhook-receiver.js'), 'utf8'));
    await noSeriousViolations(page, 'delivery log, delivered, receiver snippet open');
    await screenshot(page, 'console-delivery-log');

    // Tablet width, and a deep link served as the same page.
    await page.setViewportSize({ width: 768, height: 1024 });
    await page.reload();
    await row.waitFor();
    await fits(page, 'delivery log at tablet width');
    await noSeriousViolations(page, 'delivery log at tablet width');

    // Clinical cases: the case opened above, its timeline, acknowledge.
    await page.getByRole('link', { name: 'Clinical cases' }).click();
    const caseLink = page.getByRole('link', { name: opened.body.reference });
    await caseLink.waitFor();
    await noSeriousViolations(page, 'case list');
    await caseLink.click();
    await page.getByRole('heading', { name: new RegExp(`Case ${opened.body.reference}`) }).waitFor();
    await page.getByText('Please call the patient about the dressing').waitFor();
    await page.getByRole('button', { name: 'Acknowledge' }).click();
    await page.getByText(/^Acknowledged /).waitFor();
    await noSeriousViolations(page, 'case detail, acknowledged');
    expect((await app.api.get(`${env}/clinical-cases/${opened.body.caseId}`, staff)).body.acknowledgedAt).not.toBeNull();
    await fits(page, 'case detail at tablet width');

    // Nothing but this origin; no policy violation, no script error.
    const sent = await seen.sent();
    expect(sent.filter((r) => !r.url.startsWith(origin))).toEqual([]);
    expect(seen.problems).toEqual([]);
    await context.close();
  });

  it('explains refusals: a sign-in without MFA cannot create an organization, a member cannot set up integrations', async () => {
    const owner = await app.tenant();
    const context = await browser.context({ viewport: { width: 1024, height: 768 }, locale: 'en-US' });
    const page = await context.newPage();
    await page.goto(`${origin}/console/`);
    await page.getByLabel('Subject (user id)').fill('no-mfa-1');
    await page.getByLabel('Email').fill('no-mfa-1@example.test');
    await page.getByLabel('Signed in with multi-factor authentication').uncheck();
    await page.getByRole('button', { name: 'Sign in as this user' }).click();
    await page.getByLabel('Organization name').fill('No MFA Clinic');
    await page.getByRole('button', { name: 'Create organization' }).click();
    await expect(page.getByRole('alert').innerText()).resolves.toMatch(/recent multi-factor sign-in[\s\S]*MFA_REQUIRED/);
    await noSeriousViolations(page, 'MFA refusal');
    await page.getByRole('button', { name: 'Sign out' }).click();

    // A member (with MFA) of the owner's organization: set-up is refused with the role named.
    expect(
      (await app.api.post(`/organizations/${owner.orgId}/members`, { sub: 'member-1', email: 'member-1@example.test', role: 'member' }, owner.staff)).status,
    ).toBe(201);
    await page.getByLabel('Subject (user id)').fill('member-1');
    await page.getByLabel('Email').fill('member-1@example.test');
    await page.getByRole('button', { name: 'Sign in as this user' }).click();
    await page.getByRole('link', { name: 'API keys and secrets' }).click();
    await expect(page.getByRole('alert').first().innerText()).resolves.toMatch(/role owner or admin[\s\S]*ROLE_REQUIRED/);
    await noSeriousViolations(page, 'role refusal');
    await context.close();
  });
});
