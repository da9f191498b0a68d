import type { Page } from 'playwright-core';
import { TestApp, enrollPatient } from '@svc/testing';
import { Browser, buildPages, describeInBrowser, launch, poll, watch } from './browser';
import { consoleToken, fits, noSeriousViolations, signInWithDevIssuer } from './console-helpers';

/**
 * The staff console's protocols, patients, Destinations and conversation workflows, in a real
 * browser over real HTTP: each screen by keyboard where it matters, with axe-core, at laptop and
 * tablet widths.
 */
jest.setTimeout(150_000);

describeInBrowser('staff console: protocols, patients, destinations, workflows (browser)', () => {
  let app: TestApp;
  let browser: Browser;
  let origin: string;

  beforeAll(async () => {
    buildPages();
    app = await new TestApp().start();
    origin = new URL(app.baseUrl).origin;
    browser = await launch();
  });
  afterAll(async () => {
    await browser?.close();
    await app?.stop();
  });

  /** The error message an input is described by (empty when it is not marked invalid). */
  async function errorOf(page: Page, label: string | RegExp): Promise<string> {
    const input = page.getByLabel(label, { exact: typeof label === 'string' });
    if ((await input.getAttribute('aria-invalid')) !== 'true') return '';
    const id = await input.getAttribute('aria-describedby');
    return id ? ((await page.locator(`[id="${id}"]`).textContent()) ?? '') : '';
  }

  it('protocols: the service’s validation errors next to their fields, create, activate and deactivate; a patient sent a check-in now', async () => {
    const t = await app.tenant();
    const context = await browser.context({ viewport: { width: 1280, height: 800 }, locale: 'en-US' });
    const page = await context.newPage();
    page.setDefaultTimeout(10_000);
    const seen = watch(page);
    await signInWithDevIssuer(page, origin, t.ownerSub);
    await page.getByRole('link', { name: 'Protocols' }).click();
    await page.getByText('No protocols in this environment yet.').waitFor();
    await noSeriousViolations(page, 'protocols, none yet');

    // Field rules broken: each message appears next to its field, as the service worded it.
    await page.getByLabel('Program key').fill('Knee Rehab');
    await page.getByLabel('Name', { exact: true }).fill('Knee rehabilitation');
    await page.getByLabel('Check-in every (days)').fill('45');
    await page.getByLabel('Key', { exact: true }).fill('pain');
    await page.getByLabel('Question text').fill('How bad is your pain today?');
    await page.getByRole('button', { name: 'Add a question' }).click();
    await page.locator('#p-q1-key').fill('swelling');
    await page.locator('#p-q1-type').selectOption('yes_no');
    const answer = page.waitForResponse((r) => r.url().endsWith('/protocols') && r.request().method() === 'POST');
    await page.getByRole('button', { name: 'Create protocol' }).click();
    const refused = (await (await answer).json()) as { code: string; details: { path: string; message: string }[] };
    expect(refused.code).toBe('VALIDATION_FAILED');
    const said = (path: string) => refused.details.find((d) => d.path === path)?.message;
    expect(said('programKey')).toBeTruthy();
    expect(said('defaultCadenceDays')).toBeTruthy();
    expect(said('questions[1].text')).toBeTruthy();
    await poll(() => errorOf(page, 'Program key'), (m) => m !== '');
    expect(await errorOf(page, 'Program key')).toBe(said('programKey'));
    expect(await errorOf(page, 'Check-in every (days)')).toBe(said('defaultCadenceDays'));
    expect(await page.locator('#p-q1-text').getAttribute('aria-invalid')).toBe('true');
    expect(await page.locator(`[id="${await page.locator('#p-q1-text').getAttribute('aria-describedby')}"]`).textContent()).toBe(said('questions[1].text'));
    expect(await errorOf(page, 'Name')).toBe('');
    // The first field named has the focus.
    expect(await page.evaluate('document.activeElement.id')).toBe('p-key');
    await noSeriousViolations(page, 'protocol form with errors');

    // A rule across fields (the service's domain check): a duplicate question key, next to the second key.
    await page.getByLabel('Program key').fill('knee-rehab');
    await page.getByLabel('Check-in every (days)').fill('7');
    await page.locator('#p-q1-text').fill('Is the knee swollen?');
    await page.locator('#p-q1-key').fill('pain');
    await page.getByRole('button', { name: 'Create protocol' }).click();
    await poll(async () => (await page.locator('#p-q1-key').getAttribute('aria-invalid')) ?? '', (v) => v === 'true');
    expect(await page.locator(`[id="${await page.locator('#p-q1-key').getAttribute('aria-describedby')}"]`).textContent()).toMatch(/duplicate question key pain/);
    expect(await errorOf(page, 'Program key')).toBe('');

    // Fixed, with red flags: a score rule and a phrase.
    await page.locator('#p-q1-key').fill('swelling');
    await page.getByRole('button', { name: 'Add a score rule' }).click();
    await page.locator('#p-s0-v').fill('8');
    await page.getByRole('button', { name: 'Add a phrase' }).click();
    await page.getByLabel('Phrase 1').fill('cannot bend');
    await page.getByRole('button', { name: 'Create protocol' }).click();
    const row = page.locator('tr[data-protocol="knee-rehab"]');
    await row.waitFor();
    await page.getByText('Knee rehabilitation was created, inactive: activate it to enrol patients.').waitFor();
    expect(await row.innerText()).toMatch(/pain >= 8: urgent[\s\S]*“cannot bend”: urgent[\s\S]*inactive/);
    const listed = async () => (await app.api.get(`${t.env}/protocols`, t.staff)).body.protocols.find((p: { programKey: string }) => p.programKey === 'knee-rehab');
    expect(await listed()).toMatchObject({ active: false, defaultCadenceDays: 7, questions: [{ key: 'pain', type: 'scale', min: 0, max: 10 }, { key: 'swelling', type: 'yes_no' }], redFlags: { scores: [{ question: 'pain', op: '>=', value: 8, tier: 'urgent' }], phrases: [{ phrase: 'cannot bend', tier: 'urgent' }], emergencyTerms: true } });
    await noSeriousViolations(page, 'protocol created');

    // Activate by keyboard, then deactivate.
    await row.getByRole('button', { name: 'Activate Knee rehabilitation' }).focus();
    await page.keyboard.press('Enter');
    await page.getByText('Knee rehabilitation is active: new enrolments may use it.').waitFor();
    expect((await listed()).active).toBe(true);
    await row.getByRole('button', { name: 'Deactivate Knee rehabilitation' }).click();
    await page.getByText(/Knee rehabilitation is inactive/).waitFor();
    expect((await listed()).active).toBe(false);
    await page.setViewportSize({ width: 768, height: 1024 });
    await fits(page, 'protocols at tablet width');
    await noSeriousViolations(page, 'protocols at tablet width');

    // Patients: a check-in sent now goes out by email at once.
    const patient = await enrollPatient(app.api, t);
    await page.getByRole('link', { name: 'Patients' }).click();
    await page.getByLabel('Patient id').fill('not-a-patient-id');
    await page.getByRole('button', { name: 'Send a check-in now' }).click();
    await poll(() => errorOf(page, 'Patient id'), (m) => m !== '');
    expect(await errorOf(page, 'Patient id')).toMatch(/patientId must be a uuid/);
    await page.getByLabel('Patient id').fill(patient.patientId);
    await page.getByRole('button', { name: 'Send a check-in now' }).click();
    await page.getByText(/A check-in was sent to the patient \(check-in [0-9a-f-]{36}\)/).waitFor();
    const outbox = await app.api.get(`/dev/outbox?to=${encodeURIComponent(patient.email)}`);
    expect(outbox.body.emails).toHaveLength(1);
    await noSeriousViolations(page, 'patients, check-in sent');
    await fits(page, 'patients at tablet width');

    expect((await seen.sent()).filter((r) => !r.url.startsWith(origin))).toEqual([]);
    expect(seen.problems).toEqual([]);
    expect(await consoleToken(page)).toBeTruthy();
    await context.close();
  });

  it('destinations: errors next to their fields, create with a secret header (never shown again), the signing details with its own path, delete', async () => {
    const t = await app.tenant();
    const context = await browser.context({ viewport: { width: 1280, height: 800 }, locale: 'en-US' });
    const page = await context.newPage();
    page.setDefaultTimeout(10_000);
    page.on('dialog', (d) => void d.accept());
    const seen = watch(page);
    await signInWithDevIssuer(page, origin, t.ownerSub);
    await page.getByRole('link', { name: 'Destinations' }).click();
    await page.getByText('No Destinations in this environment yet.').waitFor();
    await noSeriousViolations(page, 'destinations, none yet');

    await page.getByLabel('Stable key').fill('Order System');
    await page.getByLabel('Name', { exact: true }).fill('Orders');
    await page.getByLabel('Base URL').fill('ftp://orders.example/api');
    await page.getByRole('button', { name: 'Add a header' }).click();
    await page.getByLabel('Header 1 name').fill('x-svc-token');
    await page.getByLabel('Header 1 value').fill('s3cret-header-value');
    await page.getByRole('button', { name: 'Add Destination' }).click();
    // The service checks the body's fields first, then the headers: each refusal next to its field.
    await poll(() => errorOf(page, 'Stable key'), (m) => m !== '');
    expect(await errorOf(page, 'Stable key')).toMatch(/stableKey must match/);
    expect(await errorOf(page, 'Base URL')).toBe('baseUrl must be an http(s) URL');
    expect(await page.evaluate('document.activeElement.id')).toBe('d-key');
    await noSeriousViolations(page, 'destination form with errors');
    await page.getByLabel('Stable key').fill('order_system');
    await page.getByLabel('Base URL').fill('http://127.0.0.1:9/api');
    await page.getByRole('button', { name: 'Add Destination' }).click();
    await poll(() => errorOf(page, 'Header 1 name'), (m) => m !== '');
    expect(await errorOf(page, 'Header 1 name')).toMatch(/not x-svc-\*/);
    expect(await errorOf(page, 'Stable key')).toBe('');
    expect(await errorOf(page, 'Base URL')).toBe('');
    await page.getByLabel('Header 1 name').fill('authorization');
    await page.getByLabel('Timeout in milliseconds (optional)').fill('3000');
    await page.getByRole('button', { name: 'Add Destination' }).click();
    const row = page.locator('tr[data-destination="order_system"]');
    await row.waitFor();
    expect(await row.innerText()).toMatch(/Orders[\s\S]*order_system[\s\S]*http:\/\/127\.0\.0\.1:9\/api[\s\S]*3000 ms[\s\S]*authorization/);
    expect(await page.content()).not.toContain('s3cret-header-value');
    expect((await app.api.get(`${t.env}/destinations`, t.staff)).body.destinations).toEqual([expect.objectContaining({ stableKey: 'order_system', timeoutMs: 3000, headerNames: ['authorization'] })]);
    // The signing details: the signed text of an order lookup with this Destination's own base path.
    expect(await page.getByLabel('Signed text of an order lookup').textContent()).toMatch(/^<timestamp>\.POST \/api\/orders\/lookup\n\{"version":1,"type":"order_lookup\.requested"/);
    await page.getByText('Checking a call with the receiver package').click();
    expect(await page.getByLabel('Destination call check with Express').textContent()).toContain('verifyDestinationCall({ method: req.method, url: req.originalUrl, rawBody: req.body, headers: req.headers }');
    await noSeriousViolations(page, 'destination added, signing details open');

    // The same stable key again: the conflict explained.
    await page.getByLabel('Stable key').fill('order_system');
    await page.getByLabel('Name', { exact: true }).fill('Orders again');
    await page.getByLabel('Base URL').fill('http://127.0.0.1:9/other');
    await page.getByRole('button', { name: 'Add Destination' }).click();
    await page.getByRole('alert').filter({ hasText: 'DUPLICATE_KEY' }).waitFor();
    expect(await page.getByRole('alert').filter({ hasText: 'DUPLICATE_KEY' }).innerText()).toMatch(/already taken in this environment/);

    await page.setViewportSize({ width: 768, height: 1024 });
    await fits(page, 'destinations at tablet width');
    await noSeriousViolations(page, 'destinations at tablet width');
    await row.getByRole('button', { name: 'Delete Orders' }).click();
    await page.getByText('Orders was deleted.').waitFor();
    expect((await app.api.get(`${t.env}/destinations`, t.staff)).body.destinations).toEqual([]);
    expect((await seen.sent()).filter((r) => !r.url.startsWith(origin))).toEqual([]);
    expect(seen.problems).toEqual([]);
    await context.close();
  });
});
