// Over 400 lines: the workflow builder in Chromium, one flow from draft to published run.
import type { Page } from 'playwright-core';
import { TestApp, enrollPatient } from '@svc/testing';
import { identityToken } from '../e2e/case-helpers';
import { OrderDestination } from '../e2e/order-destination';
import { Browser, buildPages, describeInBrowser, launch, poll, screenshot, watch } from './browser';
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
    page.setDefaultTimeout(20_000);
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
    await poll(
      () => errorOf(page, 'Program key'),
      (m) => m !== '',
    );
    expect(await errorOf(page, 'Program key')).toBe(said('programKey'));
    expect(await errorOf(page, 'Check-in every (days)')).toBe(said('defaultCadenceDays'));
    expect(await page.locator('#p-q1-text').getAttribute('aria-invalid')).toBe('true');
    expect(await page.locator(`[id="${await page.locator('#p-q1-text').getAttribute('aria-describedby')}"]`).textContent()).toBe(said('questions[1].text'));
    expect(await errorOf(page, 'Name')).toBe('');
    // The first field named has the focus.
    expect(
      await poll(
        () => page.evaluate('document.activeElement.id'),
        (id) => id === 'p-key',
      ),
    ).toBe('p-key');
    await noSeriousViolations(page, 'protocol form with errors');

    // A rule across fields (the service's domain check): a duplicate question key, next to the second key.
    await page.getByLabel('Program key').fill('knee-rehab');
    await page.getByLabel('Check-in every (days)').fill('7');
    await page.locator('#p-q1-text').fill('Is the knee swollen?');
    await page.locator('#p-q1-key').fill('pain');
    await page.getByRole('button', { name: 'Create protocol' }).click();
    await poll(
      async () => (await page.locator('#p-q1-key').getAttribute('aria-invalid')) ?? '',
      (v) => v === 'true',
    );
    expect(await page.locator(`[id="${await page.locator('#p-q1-key').getAttribute('aria-describedby')}"]`).textContent()).toMatch(
      /duplicate question key pain/,
    );
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
    const listed = async () =>
      (await app.api.get(`${t.env}/protocols`, t.staff)).body.protocols.find((p: { programKey: string }) => p.programKey === 'knee-rehab');
    expect(await listed()).toMatchObject({
      active: false,
      defaultCadenceDays: 7,
      questions: [
        { key: 'pain', type: 'scale', min: 0, max: 10 },
        { key: 'swelling', type: 'yes_no' },
      ],
      redFlags: {
        scores: [{ question: 'pain', op: '>=', value: 8, tier: 'urgent' }],
        phrases: [{ phrase: 'cannot bend', tier: 'urgent' }],
        emergencyTerms: true,
      },
    });
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
    await poll(
      () => errorOf(page, 'Patient id'),
      (m) => m !== '',
    );
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
    page.setDefaultTimeout(20_000);
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
    await poll(
      () => errorOf(page, 'Stable key'),
      (m) => m !== '',
    );
    expect(await errorOf(page, 'Stable key')).toMatch(/stableKey must match/);
    expect(await errorOf(page, 'Base URL')).toBe('baseUrl must be an http(s) URL');
    expect(
      await poll(
        () => page.evaluate('document.activeElement.id'),
        (id) => id === 'd-key',
      ),
    ).toBe('d-key');
    await noSeriousViolations(page, 'destination form with errors');
    await page.getByLabel('Stable key').fill('order_system');
    await page.getByLabel('Base URL').fill('http://127.0.0.1:9/api');
    await page.getByRole('button', { name: 'Add Destination' }).click();
    await poll(
      () => errorOf(page, 'Header 1 name'),
      (m) => m !== '',
    );
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
    expect((await app.api.get(`${t.env}/destinations`, t.staff)).body.destinations).toEqual([
      expect.objectContaining({ stableKey: 'order_system', timeoutMs: 3000, headerNames: ['authorization'] }),
    ]);
    // The signing details: the signed text of an order lookup with this Destination's own base path.
    expect(await page.getByLabel('Signed text of an order lookup').textContent()).toMatch(
      /^<timestamp>\.POST \/api\/orders\/lookup\n\{"version":1,"type":"order_lookup\.requested"/,
    );
    await page.getByText('Checking a call with the receiver package').click();
    expect(await page.getByLabel('Destination call check with Express').textContent()).toContain(
      'verifyDestinationCall({ method: req.method, url: req.originalUrl, rawBody: req.body, headers: req.headers }',
    );
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

  it('workflows: a draft built against a test Destination (rules checked as you type, JSON both ways), tested, switched on, and its run', async () => {
    const t = await app.tenant();
    const dest = new OrderDestination();
    await dest.start();
    const context = await browser.context({ viewport: { width: 1280, height: 900 }, locale: 'en-US' });
    const page = await context.newPage();
    page.setDefaultTimeout(20_000);
    page.on('dialog', (d) => void d.accept());
    const seen = watch(page);
    try {
      await signInWithDevIssuer(page, origin, t.ownerSub);

      // The widget signing secret that signs Destination calls, read by rotating it (shown once).
      await page.getByRole('link', { name: 'API keys and secrets' }).click();
      await page.locator('.env-card.env-sandbox').getByRole('button', { name: 'Rotate the widget signing secret' }).click();
      dest.secret = await page.locator('[data-secret]').inputValue();
      expect(dest.secret.length).toBeGreaterThan(20);
      await page.getByRole('button', { name: 'I saved it' }).click();

      // The Destination, with a base path of its own.
      await page.getByRole('link', { name: 'Destinations' }).click();
      await page.getByLabel('Stable key').fill('order_system');
      await page.getByLabel('Name', { exact: true }).fill('Order system');
      await page.getByLabel('Base URL').fill(`${dest.baseUrl}/api`);
      await page.getByRole('button', { name: 'Add Destination' }).click();
      await page.locator('tr[data-destination="order_system"]').waitFor();

      // A workflow from the template.
      await page.getByRole('link', { name: 'Workflows' }).click();
      await page.getByText('No workflows (archived ones aside) in this environment yet.').waitFor();
      await noSeriousViolations(page, 'workflows, none yet');
      await page.getByLabel('Start from').selectOption({ label: 'the “Order status and tracking” template' });
      await page.getByLabel('Destination it calls').selectOption('order_system');
      await page.getByRole('button', { name: 'Create workflow' }).click();
      await page.getByRole('heading', { name: /Order status and tracking/, level: 2 }).waitFor();
      const workflowId = new URL(page.url()).pathname.split('/').pop()!;
      const P = `${t.env}/conversation-workflows`;
      const stored = async () => (await app.api.get(P, t.staff)).body.workflows.find((w: { id: string }) => w.id === workflowId);
      const draftId = (await stored()).draftVersionId as string;
      expect(
        await poll(
          () => page.locator('li.step').count(),
          (n) => n === 2,
        ),
      ).toBe(2);
      await page.getByText('Checks ownership: the order lookup is scoped to the signed-in patient.').waitFor();
      await page.getByText('The service’s checks pass: saving would be accepted.').waitFor();
      await noSeriousViolations(page, 'builder, template draft');

      const jsonBox = page.getByLabel('Definition as JSON (edit here or in the form)');
      const shownDefinition = async () => JSON.parse(await jsonBox.inputValue());
      /** What the service answers to saving this definition (the console's draft is at revision 1 here, so the API's refusals are compared, nothing is saved). */
      const serviceSays = async (definition: unknown) => {
        const r = await app.api.put(`${P}/versions/${draftId}`, { expectedRevision: 1, definition }, t.staff);
        expect(r.status).toBe(400);
        return (r.body.details as { path: string; message: string }[]).map((d) => `${d.path} ${d.message}`);
      };
      const consoleSays = async () => (await page.locator('.check-summary li').allInnerTexts()).map((x) => x.replace(/\s+/, ' ').trim());

      // A field rule as you type: the message next to the field is the service's own.
      await page.locator('#s1-message').fill('');
      await page.locator('#s1-message-err').waitFor();
      // The JSON view follows the form a moment later.
      const settled = (check: (d: { steps: Record<string, unknown>[] }) => boolean) => poll(shownDefinition, check);
      expect(await consoleSays()).toEqual(await serviceSays(await settled((d) => d.steps[1].message === '')));
      expect(await page.locator('#s1-message-err').textContent()).toBe('must be 1-1000 characters');
      expect(await page.locator('#s1-message').getAttribute('aria-describedby')).toContain('s1-message-err');
      await page.locator('#s1-message').fill('Here are your latest orders. Anything else?');

      // A rule across steps: a call that changes an account needs a confirm before it on every path.
      await page.getByLabel('New step').selectOption({ label: 'Call a Destination' });
      await page.getByRole('button', { name: 'Add the step' }).click();
      expect(
        await poll(
          () => page.evaluate('document.activeElement.id'),
          (id) => id === 's2-id',
        ),
      ).toBe('s2-id');
      await page.keyboard.press('Control+A');
      await page.keyboard.type('cancel');
      await page.locator('#s2-method').selectOption('POST');
      await page.locator('#s2-path').fill('/orders/cancel');
      await page.locator('#s2-notFoundReply').fill('I could not find an order to cancel.');
      await page.locator('#s2-errorReply').fill('I could not cancel it. Shall I connect you with our team?');
      const cancel = page.locator('li.step[data-step="cancel"]');
      await cancel.locator('.rule-errors').waitFor();
      expect(await cancel.locator('.rule-errors').innerText()).toBe(
        'step `cancel` changes an account (non-GET, not readOnly) and must come after a confirm step',
      );
      expect(await consoleSays()).toEqual(
        await serviceSays(await settled((d) => typeof d.steps[2]?.errorReply === 'string' && (d.steps[2].errorReply as string).endsWith('team?'))),
      );
      await cancel.getByText('Changes an account: on every path it must come after a call that checks ownership and after a confirm step.').waitFor();
      await noSeriousViolations(page, 'builder, a rule across steps broken');
      // The README's picture of the builder: the step with its broken rule, beside the JSON.
      if (process.env.SVC_SCREENSHOTS === '1') {
        await page.setViewportSize({ width: 1280, height: 1250 });
        await page.evaluate(`window.scrollTo(0, document.querySelector('li.step[data-step="done"] h4').getBoundingClientRect().top + window.scrollY - 24)`);
        await screenshot(page, 'console-workflow-builder', { fullPage: false });
        await page.setViewportSize({ width: 1280, height: 900 });
      }

      // Fixed by keyboard: a confirm step, moved up before the call.
      await page.getByLabel('New step').selectOption({ label: 'Confirm (yes or no)' });
      await page.getByRole('button', { name: 'Add the step' }).click();
      await page.locator('#s3-id').fill('sure');
      await page.locator('#s3-prompt').fill('Cancel your latest order?');
      await page.locator('#s3-declineReply').fill('OK, nothing was changed.');
      await page.locator('#s3-up').focus();
      await page.keyboard.press('Enter');
      expect(
        await poll(
          () => page.evaluate('document.activeElement.id'),
          (id) => id === 's2-up',
        ),
      ).toBe('s2-up');
      expect(await page.locator('li.step').evaluateAll((els) => els.map((e) => e.getAttribute('data-step')))).toEqual(['lookup', 'done', 'sure', 'cancel']);
      await expect(cancel.locator('.rule-errors').count()).resolves.toBe(0);
      await page.getByText('The service’s checks pass: saving would be accepted.').waitFor();
      // Not this workflow's job after all: both steps removed again.
      await cancel.getByRole('button', { name: 'Remove step 4' }).click();
      await page.locator('li.step[data-step="sure"]').getByRole('button', { name: 'Remove step 3' }).click();
      expect(
        await poll(
          () => page.locator('li.step').count(),
          (n) => n === 2,
        ),
      ).toBe(2);

      // The JSON view and the form follow each other.
      await page.getByLabel('Trigger phrases').press('End');
      await page.getByLabel('Trigger phrases').press('Control+End');
      await page.keyboard.type('\nwhere are my things');
      expect(
        await poll(
          async () => (await shownDefinition()).triggerPhrases as string[],
          (v) => v.includes('where are my things'),
        ),
      ).toContain('where are my things');
      await jsonBox.fill(JSON.stringify({ ...(await shownDefinition()), description: 'Order status for signed-in patients' }, null, 2));
      expect(
        await poll(
          () => page.getByLabel('Description', { exact: true }).inputValue(),
          (v) => v === 'Order status for signed-in patients',
        ),
      ).toBe('Order status for signed-in patients');
      await jsonBox.press('Control+End');
      await page.keyboard.type(',');
      await page.locator('#wf-json-err').waitFor();
      expect(await page.locator('#wf-json-err').textContent()).toMatch(/^Not JSON: .*The form shows the last valid JSON\.$/);
      expect(await page.getByLabel('Description', { exact: true }).inputValue()).toBe('Order status for signed-in patients');
      await page.keyboard.press('Backspace');
      await expect(page.locator('#wf-json-err').count()).resolves.toBe(0);

      await page.getByRole('button', { name: 'Save draft' }).click();
      await page.getByText('Saved: revision 2.').waitFor();
      const saved = (await stored()).versions.find((v: { id: string }) => v.id === draftId);
      expect(saved).toMatchObject({
        revision: 2,
        definition: {
          description: 'Order status for signed-in patients',
          steps: [{ id: 'lookup' }, { id: 'done', message: 'Here are your latest orders. Anything else?' }],
        },
      });
      expect(saved.definition.triggerPhrases).toContain('where are my things');

      // Not ready: no passing test yet.
      const checklist = page.locator('.checklist');
      await poll(
        async () => checklist.innerText(),
        (x) => /missing: A test of this revision passed/.test(x),
      );
      expect(await page.getByRole('button', { name: 'Switch on version 1' }).isDisabled()).toBe(true);

      // Test: the transcript turn by turn, with the Destination's request and response (secrets redacted).
      await page.getByLabel("The patient's first message").fill('where is my order');
      await page.getByLabel("Sample patient's id in your system").fill('ext-patient-7');
      await page.getByRole('button', { name: 'Run the test' }).click();
      await page.getByText(/^Passed: revision 2, run /).waitFor();
      expect(dest.arrivals.at(-1)).toMatchObject({ signatureOk: true, externalId: 'ext-patient-7' });
      const turn = page.locator('.turn').first();
      expect(await turn.locator('.msg-patient').innerText()).toMatch(/where is my order/);
      expect(await turn.locator('.msg-agent').allInnerTexts()).toEqual([
        expect.stringMatching(/Order A-1: shipped \(track: https:\/\/track\.example\/A-1\)/),
        expect.stringMatching(/Here are your latest orders/),
      ]);
      await turn.locator('.trace').first().locator('summary').click();
      const exchange = turn.locator('.exchange-body').first();
      expect(await exchange.innerText()).toContain(`POST ${dest.baseUrl}/api/orders/lookup`);
      expect(await exchange.locator('table.headers').innerText()).toMatch(/x-svc-timestamp\s+\d+\s+x-svc-signature\s+\[redacted\]/);
      expect(JSON.parse((await exchange.getByLabel('Request body of lookup').textContent())!)).toMatchObject({
        type: 'order_lookup.requested',
        patient: { externalId: 'ext-patient-7' },
      });
      expect(await exchange.innerText()).toContain('Status 200');
      expect(JSON.parse((await exchange.getByLabel('Response body of lookup').textContent())!)).toEqual({ orders: [expect.objectContaining({ id: 'A-1' })] });
      expect(await page.content()).not.toContain(dest.secret);
      await noSeriousViolations(page, 'test transcript with a Destination exchange');
      await page.setViewportSize({ width: 768, height: 1024 });
      await fits(page, 'builder and test at tablet width');
      await noSeriousViolations(page, 'builder and test at tablet width');
      await page.setViewportSize({ width: 1280, height: 900 });

      // Ready: switch it on.
      await poll(
        async () => checklist.locator('li.todo').count(),
        (n) => n === 0,
      );
      await page.getByRole('button', { name: 'Switch on version 1' }).click();
      await page.getByText("Version 1 is live: patients' matching messages now start it.").waitFor();
      await page.locator('h2 .wf-state', { hasText: 'Live: version 1' }).waitFor();
      expect(await stored()).toMatchObject({ active: true, everLive: true, draftVersionId: null });

      // A signed-in patient asks in the widget (as the widget's API is driven in the e2e suites); the run appears.
      const identity = await app.api.post(`${t.env}/secrets/rotate`, { kind: 'identity_token' }, t.staff);
      const session = (
        await app.api.post('/widget/v1/sessions', { environmentId: t.sandbox, identityToken: await identityToken(app, identity.body.secret, 'ext-patient-8') })
      ).body.sessionToken;
      const asked = await app.api.post('/widget/v1/messages', { message: 'Where is my order?' }, session);
      expect(asked.status).toBe(201);
      expect(asked.body.replies.some((r: { type: string }) => r.type === 'orders')).toBe(true);
      await page.getByRole('button', { name: 'Refresh runs' }).click();
      const runRows = page.locator('tr[data-run]');
      await poll(
        () => runRows.count(),
        (n) => n === 2,
      );
      const cells = async (i: number) => (await runRows.nth(i).locator('td').allInnerTexts()).map((x) => x.replace(/\s+/g, ' ').trim());
      expect(await cells(0)).toEqual([expect.not.stringContaining('test'), '1', 'completed', 'lookup call ok done replied']);
      expect(await cells(1)).toEqual([expect.stringContaining('test'), '1', 'completed', 'lookup call ok done replied']);
      expect(await page.locator('table.runs').innerText()).not.toContain('ext-patient-8');

      // Runs are paged (10 a page here): more test runs of the live version, then Older and Newer.
      for (let i = 0; i < 9; i++)
        expect(
          (
            await app.api.post(
              `${P}/versions/${draftId}/test`,
              { expectedRevision: 2, opening: 'where is my order', replies: [], patientId: `ext-${i}` },
              t.staff,
            )
          ).status,
        ).toBe(201);
      await page.getByRole('button', { name: 'Refresh runs' }).click();
      await poll(
        () => page.getByRole('button', { name: 'Older' }).count(),
        (n) => n === 1,
      );
      expect(await runRows.count()).toBe(10);
      await page.getByRole('button', { name: 'Older' }).click();
      await poll(
        () => runRows.count(),
        (n) => n === 1,
      );
      expect(await runRows.nth(0).innerText()).toMatch(/test/);
      await noSeriousViolations(page, 'runs, second page');
      await page.getByRole('button', { name: 'Newer' }).click();
      await poll(
        () => runRows.count(),
        (n) => n === 10,
      );
      await page.setViewportSize({ width: 768, height: 1024 });
      await fits(page, 'live workflow and runs at tablet width');

      expect((await seen.sent()).filter((r) => !r.url.startsWith(origin))).toEqual([]);
      expect(seen.problems).toEqual([]);
    } finally {
      await context.close();
      await dest.stop();
    }
  });

  it('workflows: a save that lost the race says what changed and merges; the 409s explained; rename, switch off, new draft, discard, archive, restore, delete', async () => {
    const t = await app.tenant();
    const P = `${t.env}/conversation-workflows`;
    const context = await browser.context({ viewport: { width: 1280, height: 900 }, locale: 'en-US' });
    const page = await context.newPage();
    page.setDefaultTimeout(20_000);
    page.on('dialog', (d) => void d.accept());
    const seen = watch(page);
    const byKey = async (key: string) => (await app.api.get(P, t.staff)).body.workflows.find((w: { stableKey: string }) => w.stableKey === key);
    const create = async (key: string, name: string) => {
      await page.getByLabel('Start from').selectOption({ label: 'a blank workflow' });
      await page.getByLabel('Stable key').fill(key);
      await page.getByLabel('Name', { exact: true }).fill(name);
      await page.getByRole('button', { name: 'Create workflow' }).click();
      await page.getByRole('heading', { name: new RegExp(`^${name}`), level: 2 }).waitFor();
      return byKey(key);
    };
    try {
      await signInWithDevIssuer(page, origin, t.ownerSub);
      await page.getByRole('link', { name: 'Workflows' }).click();
      const w = await create('greeting', 'Greeting');
      const draftId = w.draftVersionId as string;
      const draftOf = async () => (await byKey('greeting')).versions.find((v: { id: string }) => v.id === draftId);
      expect(await page.getByText('It has never been live: it can still be deleted.').count()).toBe(1);

      // Someone else saves revision 2 while the builder holds revision 1.
      const rev1 = (await draftOf()).definition;
      expect(
        (await app.api.put(`${P}/versions/${draftId}`, { expectedRevision: 1, definition: { ...rev1, triggerPhrases: ['hello there'] } }, t.staff)).status,
      ).toBe(200);
      await page.locator('#s0-message').fill('Hi! How can I help today?');
      await page.getByRole('button', { name: 'Save draft' }).click();
      const conflict = page.locator('section.conflict');
      await conflict.waitFor();
      expect(
        await poll(
          () => page.evaluate('document.activeElement.id'),
          (id) => id === 'conflict-h',
        ),
      ).toBe('conflict-h');
      expect(await conflict.locator('dd').allInnerTexts()).toEqual(['Trigger phrases (changed)', 'Step hello (changed)']);
      await conflict.getByText('No part was changed on both sides: merging keeps both sets of changes.').waitFor();
      expect(await page.getByRole('alert').filter({ hasText: 'STALE_REVISION' }).innerText()).toMatch(
        /Someone saved this draft after you opened it[\s\S]*The service said: The draft is at revision 2/,
      );
      await noSeriousViolations(page, 'save conflict');
      await page.setViewportSize({ width: 768, height: 1024 });
      await fits(page, 'save conflict at tablet width');
      await page.setViewportSize({ width: 1280, height: 900 });
      await conflict.getByRole('button', { name: 'Merge onto revision 2' }).click();
      await page.getByText('Merged onto revision 2: review the draft and save it.').waitFor();
      await page.getByRole('button', { name: 'Save draft' }).click();
      await page.getByText('Saved: revision 3.').waitFor();
      expect(await draftOf()).toMatchObject({
        revision: 3,
        definition: { triggerPhrases: ['hello there'], steps: [{ id: 'hello', message: 'Hi! How can I help today?' }] },
      });

      // Both sides changed the same step: the builder asks which to keep.
      const rev3 = (await draftOf()).definition;
      expect(
        (
          await app.api.put(
            `${P}/versions/${draftId}`,
            { expectedRevision: 3, definition: { ...rev3, steps: [{ ...rev3.steps[0], message: 'Welcome!' }] } },
            t.staff,
          )
        ).status,
      ).toBe(200);
      await page.locator('#s0-message').fill('Hello from me');
      await page.getByRole('button', { name: 'Save draft' }).click();
      await conflict.getByRole('radiogroup', { name: 'Step hello' }).waitFor();
      await conflict.getByRole('radio', { name: 'revision 4' }).check();
      await conflict.getByRole('button', { name: 'Merge onto revision 4' }).click();
      expect(
        await poll(
          () => page.locator('#s0-message').inputValue(),
          (v) => v === 'Welcome!',
        ),
      ).toBe('Welcome!');
      expect(await page.getByRole('button', { name: 'Save draft' }).isDisabled()).toBe(true);

      // Archived meanwhile: the save is refused, and the console says why and what to do.
      expect((await app.api.post(`${P}/${w.id}/archive`, undefined, t.staff)).status).toBe(200);
      await page.locator('#s0-message').fill('Welcome back!');
      await page.getByRole('button', { name: 'Save draft' }).click();
      expect(await page.getByRole('alert').filter({ hasText: 'WORKFLOW_ARCHIVED' }).innerText()).toMatch(
        /cannot be edited, tested or switched on until it is restored\. Restore it first\./,
      );
      await page.reload();
      await page.locator('h2 .wf-state', { hasText: 'Archived' }).waitFor();
      await page.getByRole('button', { name: 'Restore' }).click();
      await page.getByText('Greeting is restored, still switched off.').waitFor();
      await page.getByLabel('Name', { exact: true }).fill('Greeting (web)');
      await page.getByRole('button', { name: 'Rename' }).click();
      await page.getByText('Renamed to Greeting (web).').waitFor();

      // Tested (it calls no Destination) and switched on: now it can only be archived, not deleted.
      await page.getByLabel("The patient's first message").fill('hello there');
      await page.getByRole('button', { name: 'Run the test' }).click();
      await page.getByText(/^Passed: revision 4, run /).waitFor();
      await page.getByRole('button', { name: 'Switch on version 1' }).click();
      await page.locator('h2 .wf-state', { hasText: 'Live: version 1' }).waitFor();
      expect(await page.getByRole('button', { name: 'Delete' }).count()).toBe(0);
      await page.getByRole('button', { name: 'Archive' }).waitFor();

      // Switched off; a new draft copied from it, then discarded.
      await page.getByRole('button', { name: 'Switch off' }).click();
      await page.getByText('Greeting (web) is switched off.').waitFor();
      await page.locator('h2 .wf-state', { hasText: 'Off' }).waitFor();
      await page.getByRole('button', { name: 'Edit in a new draft' }).click();
      await page.getByRole('heading', { name: /Draft: version 2, revision 1/ }).waitFor();
      await page.getByRole('button', { name: 'Discard draft version 2' }).click();
      await page.getByRole('button', { name: 'Edit in a new draft' }).waitFor();
      expect(await byKey('greeting')).toMatchObject({ draftVersionId: null, versions: [{ number: 1, state: 'retired' }] });
      await noSeriousViolations(page, 'workflow switched off, no draft');

      // Archived: out of the default list, shown with "Show archived".
      await page.getByRole('button', { name: 'Archive' }).click();
      await page.getByText('Greeting (web) is archived.').waitFor();
      await page.getByRole('link', { name: 'All workflows' }).click();
      await page.getByText('No workflows (archived ones aside) in this environment yet.').waitFor();
      await page.getByLabel('Show archived workflows').check();
      expect(await page.locator('tr[data-workflow="greeting"]').innerText()).toContain('Archived');
      await noSeriousViolations(page, 'workflow list with archived');

      // Switched on elsewhere while this page offers Delete: the 409 explained, and the page catches up.
      const faq = await create('faq', 'Questions');
      expect((await app.api.post(`${P}/versions/${faq.draftVersionId}/test`, { expectedRevision: 1, opening: 'hi', replies: [] }, t.staff)).body.passed).toBe(
        true,
      );
      expect((await app.api.post(`${P}/versions/${faq.draftVersionId}/activate`, { expectedRevision: 1 }, t.staff)).status).toBe(200);
      await page.getByRole('button', { name: 'Delete' }).click();
      expect(await page.getByRole('alert').filter({ hasText: 'WORKFLOW_EVER_LIVE' }).innerText()).toMatch(
        /has been live, so it cannot be deleted[\s\S]*archive it instead/,
      );
      await page.getByRole('button', { name: 'Archive' }).waitFor();
      expect(await page.getByRole('button', { name: 'Delete' }).count()).toBe(0);
      await noSeriousViolations(page, 'ever-live refusal explained');

      // A never-live workflow is deleted.
      await page.getByRole('link', { name: 'All workflows' }).click();
      await create('scratch', 'Scratch');
      await page.getByRole('button', { name: 'Delete' }).click();
      await page.getByRole('heading', { name: /Conversation workflows/ }).waitFor();
      expect(await byKey('scratch')).toBeUndefined();

      expect((await seen.sent()).filter((r) => !r.url.startsWith(origin))).toEqual([]);
      expect(seen.problems).toEqual([]);
    } finally {
      await context.close();
    }
  });
});
