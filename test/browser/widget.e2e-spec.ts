import { randomUUID } from 'node:crypto';
import { Server, createServer } from 'node:http';
import type { Page } from 'playwright-core';
import { TestApp, freePort, inProcess, onTopology } from '@svc/testing';
import { identityToken, openCase } from '../e2e/case-helpers';
import { OrderDestination } from '../e2e/order-destination';
import { Browser, axe, buildPages, describeInBrowser, launch, poll, screenshot, watch } from './browser';

/**
 * The patient widget (`{origin}/widget.js`, docs/decisions.md, "Pages for people") mounted on a page of another origin, in a
 * real browser over real HTTP: a signed-in patient looks up an order through a live workflow that
 * calls a test Destination, meets the emergency guidance, and replies to a case thread that the
 * provider then reads through the API. The host page's own styles try to break it. CORS as the
 * widget API defines it: the allowed origin works, another one is refused by the browser.
 *
 * It runs against the six-process topology too (test/distributed/suites.js): the script, its
 * assets and the demo page from the gateway, the widget API through the gateway's proxy. That
 * topology allows any origin (the default), so the refusal is tested on standalone only.
 */
jest.setTimeout(120_000);

/** A caller's site on its own origin: a page that includes the widget as the README says. */
class HostSite {
  server!: Server;
  origin!: string;
  page = '';
  async start(port: number): Promise<void> {
    this.server = createServer((req, res) => {
      if (req.url === '/' || req.url?.startsWith('/?')) return void res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' }).end(this.page);
      res.writeHead(404).end();
    });
    await new Promise<void>((r) => this.server.listen(port, '127.0.0.1', () => r()));
    this.origin = `http://127.0.0.1:${port}`;
  }
  stop(): Promise<void> {
    return new Promise((r) => this.server.close(() => r()));
  }
}

/** The host page: hostile inherited styles (which a shadow root alone would let in), the script, and init. */
function hostPage(serviceOrigin: string, init: Record<string, unknown>): string {
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1"><title>Acme Pharmacy</title>
<style>
  body { font-family: Georgia, serif; font-size: 30px; letter-spacing: 3px; text-transform: uppercase; line-height: 3; }
  button { display: none !important; }
  .panel, .launcher { display: none !important; }
</style></head>
<body><main><h1>Acme Pharmacy</h1><p>Your orders and your care team, in one place.</p></main>
<script src="${serviceOrigin}/widget.js"></script>
<script>PatientCareWidget.init(${JSON.stringify(init)});</script>
</body></html>`;
}

describeInBrowser('patient widget (browser)', () => {
  const OWNER = `ext-widget-${randomUUID()}`;
  const host = new HostSite();
  const stranger = new HostSite();
  const dest = new OrderDestination();
  let app: TestApp;
  let browser: Browser;

  beforeAll(async () => {
    buildPages();
    await host.start(await freePort());
    await stranger.start(await freePort());
    // Only the caller's site may call the widget API from a browser (on the shared topology: any origin).
    app = await new TestApp(undefined, onTopology() ? {} : { WIDGET_ALLOWED_ORIGINS: host.origin }).start();
    await dest.start();
    browser = await launch();
  });
  afterAll(async () => {
    await browser?.close();
    await dest.stop();
    await app?.stop();
    await host.stop();
    await stranger.stop();
  });

  /** The widget's elements (its shadow root is open: Playwright's locators go through it). */
  const widget = (page: Page) => page.locator('[data-patient-care-widget]');

  async function noSeriousViolations(page: Page, step: string) {
    expect({ step, violations: await axe(page) }).toEqual({ step, violations: [] });
  }

  it('looks up an order through a live workflow, shows emergency guidance, and replies to a case thread the provider then reads (another origin, signed in)', async () => {
    const t = await app.tenant();
    // The live order-status workflow against the test Destination.
    dest.secret = (await app.api.post(`${t.env}/secrets/rotate`, { kind: 'widget_signing' }, t.staff)).body.secret;
    expect((await app.api.post(`${t.env}/destinations`, { stableKey: 'order_system', name: 'Orders', baseUrl: dest.baseUrl }, t.staff)).status).toBe(201);
    const P = `${t.env}/conversation-workflows`;
    const wf = await app.api.post(`${P}/from-template`, { templateKey: 'order_status_tracking' }, t.staff);
    expect(wf.status).toBe(201);
    const versionId = wf.body.draftVersionId;
    const tested = await app.api.post(
      `${P}/versions/${versionId}/test`,
      { expectedRevision: 1, opening: 'where is my order', replies: [], patientId: OWNER },
      t.staff,
    );
    expect(tested.body.passed).toBe(true);
    expect((await app.api.post(`${P}/versions/${versionId}/activate`, { expectedRevision: 1 }, t.staff)).status).toBe(200);
    const callsBefore = dest.arrivals.length;

    // The patient, a case with a message from the provider, and the caller's backend's identity token.
    const patient = await app.enrolledPatient(t, { externalPatientId: OWNER });
    const kase = await openCase(app, t, 'Please check in with the patient about the dressing', patient.patientId);
    const pm = await app.api.post(
      `/v1/clinical-cases/${kase.caseId}/messages`,
      { messageId: randomUUID(), message: 'How is the wound healing today?', externalReference: 'ehr-77' },
      t.apiKey,
    );
    expect(pm.status).toBe(200);
    const secret = (await app.api.post(`${t.env}/secrets/rotate`, { kind: 'identity_token' }, t.staff)).body.secret as string;
    const serviceOrigin = new URL(app.baseUrl).origin;
    host.page = hostPage(serviceOrigin, { environmentId: t.sandbox, identityToken: await identityToken(app, secret, OWNER), language: 'en' });
    // The script, readable by pages of any origin, revalidated by its ETag.
    const script = await fetch(`${serviceOrigin}/widget.js`);
    expect(script.status).toBe(200);
    expect(script.headers.get('content-type')).toBe('application/javascript; charset=utf-8');
    expect(script.headers.get('cache-control')).toBe('public, no-cache');
    expect(script.headers.get('cross-origin-resource-policy')).toBe('cross-origin');
    expect(script.headers.get('access-control-allow-origin')).toBe('*');
    expect((await fetch(`${serviceOrigin}/widget.js`, { headers: { 'if-none-match': script.headers.get('etag')! } })).status).toBe(304);
    // The preflight from the caller's site is answered before authentication (any origin on the shared topology).
    const preflight = await fetch(`${app.baseUrl}/widget/v1/messages`, {
      method: 'OPTIONS',
      headers: {
        origin: host.origin,
        'access-control-request-method': 'POST',
        'access-control-request-headers': 'authorization, content-type, idempotency-key',
      },
    });
    expect(preflight.status).toBe(204);
    expect(preflight.headers.get('access-control-allow-origin')).toBe(onTopology() ? '*' : host.origin);
    expect(preflight.headers.get('access-control-allow-headers')).toBe('authorization, content-type, idempotency-key');

    const context = await browser.context({ locale: 'en-US' });
    const page = await context.newPage();
    const seen = watch(page);
    const keys: string[] = [];
    page.on('request', (r) => {
      if (r.url().endsWith('/api/widget/v1/messages') && r.method() === 'POST') keys.push(r.headers()['idempotency-key'] ?? '');
    });
    // The first message answer is a 503 with Retry-After: the widget waits and sends it again with the same key.
    let refused = 0;
    await page.route(`${serviceOrigin}/api/widget/v1/messages`, async (route) => {
      if (route.request().method() === 'POST' && refused === 0) {
        refused++;
        return route.fulfill({
          status: 503,
          headers: {
            'content-type': 'application/json',
            'retry-after': '1',
            'access-control-allow-origin': host.origin,
            'access-control-expose-headers': 'retry-after',
          },
          body: JSON.stringify({ code: 'UNAVAILABLE', message: 'retry shortly' }),
        });
      }
      return route.continue();
    });
    await page.goto(host.origin);

    const launcher = widget(page).getByRole('button', { name: 'Chat with us' });
    await launcher.click();
    const panel = widget(page).getByRole('dialog', { name: 'Chat with us' });
    expect(
      await poll(
        () => panel.isVisible(),
        (v) => v,
      ),
    ).toBe(true);
    // The host page's styles did not reach it.
    const title = widget(page).locator('#pcw-title');
    const style = await title.evaluate((el: unknown) => {
      const s = (globalThis as unknown as { getComputedStyle(e: unknown): Record<'fontSize' | 'textTransform' | 'letterSpacing', string> }).getComputedStyle(
        el,
      );
      return `${s.fontSize} ${s.textTransform} ${s.letterSpacing}`;
    });
    expect(style).toBe('17px none normal');
    // Signed in: the patient's messages are there beside the chat.
    expect(
      await poll(
        () => widget(page).getByRole('button', { name: 'My messages' }).count(),
        (n) => n === 1,
      ),
    ).toBe(1);
    await noSeriousViolations(page, 'widget open');

    // The order, through the live workflow and the Destination (signed, for this patient), after a 503 and a retry.
    const input = widget(page).getByLabel('Your message');
    await input.fill('Where is my order?');
    await input.press('Enter');
    const order = widget(page).locator('.order');
    expect(
      await poll(
        () => order.count(),
        (n) => n === 1,
        15_000,
      ),
    ).toBe(1);
    expect(await order.innerText()).toContain('Order A-1');
    expect(await order.innerText()).toContain('Shipped');
    expect(await order.innerText()).toContain('Carrier: UPS');
    expect(await order.getByRole('link', { name: 'Track package' }).getAttribute('href')).toBe('https://track.example/A-1');
    expect(await widget(page).locator('.log').innerText()).toContain('Here are your latest orders.');
    expect(refused).toBe(1);
    expect(keys.length).toBe(2);
    expect(keys[0]).toMatch(/^[0-9a-f-]{36}$/);
    expect(keys[1]).toBe(keys[0]);
    expect(dest.arrivals.length).toBe(callsBefore + 1);
    expect(dest.arrivals.at(-1)).toMatchObject({ signatureOk: true, externalId: OWNER });
    await noSeriousViolations(page, 'order card');
    await screenshot(page, 'widget-order');

    // Emergency words: the guidance at once, with the number to call.
    await input.fill('I have crushing chest pain');
    await input.press('Enter');
    const alert = widget(page).getByRole('alert');
    expect(
      await poll(
        () => alert.count(),
        (n) => n === 1,
      ),
    ).toBe(1);
    expect(await alert.innerText()).toContain('This may be an emergency');
    expect(await alert.getByRole('link', { name: 'Call 911' }).getAttribute('href')).toBe('tel:911');
    expect(await alert.innerText()).toContain('We have alerted your care team.');
    await noSeriousViolations(page, 'emergency');

    // Spanish, then back.
    await widget(page).getByRole('button', { name: /ES/ }).click();
    expect(
      await poll(
        () => widget(page).getByRole('button', { name: 'Mis mensajes' }).count(),
        (n) => n === 1,
      ),
    ).toBe(1);
    expect(await alert.innerText()).toContain('Esto puede ser una emergencia');
    await widget(page).getByRole('button', { name: /EN/ }).click();

    // The case thread: the provider's message, and the patient's reply.
    await widget(page).getByRole('button', { name: 'My messages' }).click();
    const item = widget(page).getByRole('button', { name: new RegExp(kase.reference) });
    expect(
      await poll(
        () => item.count(),
        (n) => n === 1,
      ),
    ).toBe(1);
    expect(await item.innerText()).toContain('Received');
    await noSeriousViolations(page, 'case list');
    await item.click();
    expect(
      await poll(
        () => widget(page).locator('.thread .log').innerText(),
        (v) => v.includes('How is the wound healing today?'),
      ),
    ).toContain('How is the wound healing today?');
    await widget(page).getByLabel('Your reply').fill('Much better, the redness is gone.');
    await widget(page).getByRole('button', { name: 'Send reply' }).click();
    expect(
      await poll(
        () => widget(page).locator('.thread .log').innerText(),
        (v) => v.includes('Much better, the redness is gone.'),
      ),
    ).toContain('Much better, the redness is gone.');
    await noSeriousViolations(page, 'case thread');
    await screenshot(page, 'widget-thread');

    // The provider reads it through the API.
    const thread = await app.api.get(`/v1/conversations/${kase.caseId}/messages`, t.apiKey);
    expect(thread.status).toBe(200);
    expect(thread.body.messages.filter((m: { sender: string }) => m.sender === 'patient').map((m: { message: string }) => m.message)).toEqual([
      'Much better, the redness is gone.',
    ]);

    // Only the two origins were asked for anything (the widget talks to its own service only), never with a Referer to the service.
    const requests = await seen.sent();
    expect(requests.filter((r) => ![host.origin, serviceOrigin].includes(new URL(r.url).origin))).toEqual([]);
    expect(requests.filter((r) => new URL(r.url).origin === serviceOrigin && r.url.includes('/api/') && r.referer !== null)).toEqual([]);
    expect(seen.problems).toEqual([]);
    await context.close();
  });

  inProcess('needs WIDGET_ALLOWED_ORIGINS of its own')(
    'is refused by the browser on an origin the widget API does not allow (CORS), and says the message was not sent',
    async () => {
      const t = await app.tenant();
      const serviceOrigin = new URL(app.baseUrl).origin;
      stranger.page = hostPage(serviceOrigin, { environmentId: t.sandbox, language: 'en', open: true });
      // The preflight from the stranger's origin is not answered as CORS (no Access-Control-Allow-Origin).
      const preflight = await fetch(`${app.baseUrl}/widget/v1/sessions`, {
        method: 'OPTIONS',
        headers: { origin: stranger.origin, 'access-control-request-method': 'POST', 'access-control-request-headers': 'content-type' },
      });
      expect(preflight.headers.get('access-control-allow-origin')).toBeNull();
      const context = await browser.context();
      const page = await context.newPage();
      await page.goto(stranger.origin);
      const input = widget(page).getByLabel('Your message');
      await input.fill('hello');
      await input.press('Enter');
      expect(
        await poll(
          () => widget(page).locator('.failed-line').count(),
          (n) => n === 1,
          20_000,
        ),
      ).toBe(1);
      expect(await widget(page).locator('.failed-line').innerText()).toContain('Your message could not be sent.');
      await context.close();
    },
  );

  it('the demo page (dev tools) makes a sandbox and opens the widget in one click', async () => {
    const serviceOrigin = new URL(app.baseUrl).origin;
    const demo = await fetch(`${serviceOrigin}/widget-demo`);
    expect(demo.status).toBe(200);
    expect(demo.headers.get('content-security-policy')).toContain("script-src 'self'");
    const context = await browser.context({ viewport: { width: 900, height: 700 } });
    const page = await context.newPage();
    const seen = watch(page);
    await page.goto(`${serviceOrigin}/widget-demo`);
    await noSeriousViolations(page, 'demo');
    await page.getByRole('button', { name: 'Create a sandbox and open the widget' }).click();
    const panel = widget(page).getByRole('dialog');
    expect(
      await poll(
        () => panel.count(),
        (n) => n === 1,
      ),
    ).toBe(1);
    const input = widget(page).getByLabel('Your message');
    await input.fill('What are your opening hours?');
    await input.press('Enter');
    expect(
      await poll(
        () => widget(page).locator('.bubble.bot').count(),
        (n) => n >= 2,
      ),
    ).toBeGreaterThanOrEqual(2);
    expect(await page.getByRole('status').first().innerText()).toContain('The widget is open');
    await noSeriousViolations(page, 'demo with the widget');
    await screenshot(page, 'widget-demo');
    const requests = await seen.sent();
    expect(requests.filter((r) => new URL(r.url).origin !== serviceOrigin)).toEqual([]);
    expect(seen.problems).toEqual([]);
    await context.close();
  });
});
