import { randomUUID } from 'node:crypto';
import type { Page } from 'playwright-core';
import { TestApp } from '@svc/testing';
import { created, link, protocolBody, setUpTenant, waitForEmails } from '../../apps/patient-pathway/test/e2e-helpers';
import { Browser, axe, buildPages, describeInBrowser, launch, poll, screenshot, watch } from './browser';

/**
 * The check-in page behind the email link (docs/decisions.md, "Pages for people"), in a real browser over real HTTP: a
 * patient opens the outbox email's link and goes through the check-in to a case opened (English);
 * another stops at an emergency answer (Spanish). axe-core runs on every step; the page makes no
 * request outside the service's origin and sends no Referer; its token leaves the address bar.
 *
 * It runs against the six-process topology too (test/distributed/suites.js): there the link leads
 * to the gateway, which forwards the page's address to patient-pathway (the HTML or JSON answer by
 * the Accept header) and serves the page's assets itself.
 */
jest.setTimeout(120_000);

describeInBrowser('check-in page (browser)', () => {
  const app = new TestApp();
  let browser: Browser;

  beforeAll(async () => {
    buildPages();
    await app.start();
    browser = await launch();
  });
  afterAll(async () => {
    await browser?.close();
    await app.stop();
  });

  /** A patient enrolled in a tenant with the post-op protocol, and the link of the check-in email staff sent now. */
  async function checkInLink(programKey: string) {
    const t = await setUpTenant(app, programKey);
    const email = `page-${randomUUID()}@example.test`;
    const r = await app.api.post('/client/patient-events', created(`EXT-${randomUUID()}`, email, { programKey }), t.apiKey);
    expect(r.status).toBe(202);
    const sent = await app.api.post(`${t.env}/patients/${r.body.patientId}/check-ins`, undefined, t.staff);
    expect(sent.status).toBe(201);
    const emails = await waitForEmails(app.api, email, 1);
    expect(emails).toHaveLength(1);
    return { t, ...link(emails[0].text) };
  }

  async function noSeriousViolations(page: Page, step: string) {
    expect({ step, violations: await axe(page) }).toEqual({ step, violations: [] });
  }

  /** What the patient sees in the main region. */
  const mainText = (page: Page) => page.locator('main').innerText();

  it('takes a patient from the email link through the questions to a case opened (English), with back and forward', async () => {
    const { t, url, checkInId, token } = await checkInLink('post-op');
    const origin = new URL(url).origin;
    // The link leads to the service's public address (on the topology the gateway, never an app's internal port).
    expect(new URL(url).port).toBe(new URL(app.baseUrl).port);

    // API clients keep the JSON answer of the link (docs/decisions.md, "Patient pathway" and "Pages for people").
    const json = await fetch(url, { headers: { accept: '*/*' } });
    expect(json.headers.get('content-type')).toMatch(/^application\/json/);
    expect(JSON.parse(await json.text())).toEqual({ checkInId, questions: expect.any(Array), answered: {} });
    // A browser gets the page, under the strict policy, never stored, with no Referer to leak the token.
    const html = await fetch(url, { headers: { accept: 'text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8' } });
    expect(html.status).toBe(200);
    expect(html.headers.get('content-type')).toBe('text/html; charset=utf-8');
    expect(html.headers.get('content-security-policy')).toMatch(/default-src 'none'; script-src 'self'; style-src 'self'.*connect-src 'self'/);
    expect(html.headers.get('content-security-policy')).not.toMatch(/unsafe-inline|unsafe-eval|https?:/);
    expect(html.headers.get('referrer-policy')).toBe('no-referrer');
    expect(html.headers.get('cache-control')).toBe('no-store');
    expect(await html.text()).not.toMatch(/<script>|<script [^>]*>[^<]/); // no inline script

    const context = await browser.context({ locale: 'en-US' });
    const page = await context.newPage();
    const seen = watch(page);
    await page.goto(url);

    expect(
      await poll(
        () => page.locator('h2').innerText(),
        (v) => v === 'How bad is your pain today?',
      ),
    ).toBe('How bad is your pain today?');
    // The token is out of the address bar (and so of the history entry) at once.
    expect(page.url()).toBe(`${origin}/api/check-ins/${checkInId}`);
    expect(await page.locator('html').getAttribute('lang')).toBe('en');
    expect(await mainText(page)).toContain('Question 1 of 4');
    await noSeriousViolations(page, 'question 1');
    await screenshot(page, 'checkin-question');
    // Usable at phone width: nothing wider than the 375 px screen.
    expect(await page.evaluate('document.documentElement.scrollWidth')).toBeLessThanOrEqual(375);

    // Next without an answer: told kindly, nothing sent.
    await page.getByRole('button', { name: 'Next' }).click();
    expect(
      await poll(
        () => page.getByRole('alert').innerText(),
        (v) => v === 'Please choose an answer to go on.',
      ),
    ).toBe('Please choose an answer to go on.');
    await page.getByRole('radio', { name: '8' }).check();
    await page.getByRole('button', { name: 'Next' }).click();
    expect(
      await poll(
        () => page.locator('h2').innerText(),
        (v) => v === 'How is your mood?',
      ),
    ).toBe('How is your mood?');
    expect(await mainText(page)).toContain('Question 2 of 4');
    // The new step's heading has the focus.
    const focused = () => page.evaluate('document.activeElement && document.activeElement.textContent') as Promise<string | null>;
    expect(await poll(focused, (v) => v === 'How is your mood?')).toBe('How is your mood?');

    // Back: the first answer is still there; forward again.
    await page.getByRole('button', { name: 'Back' }).click();
    expect(
      await poll(
        () => page.locator('h2').innerText(),
        (v) => v === 'How bad is your pain today?',
      ),
    ).toBe('How bad is your pain today?');
    expect(await page.getByRole('radio', { name: '8' }).isChecked()).toBe(true);
    await page.getByRole('button', { name: 'Next' }).click();
    expect(
      await poll(
        () => page.locator('h2').innerText(),
        (v) => v === 'How is your mood?',
      ),
    ).toBe('How is your mood?');

    // Keyboard only: from the focused heading, Tab to the choices, arrows to move, Enter to go on.
    expect(await poll(focused, (v) => v === 'How is your mood?')).toBe('How is your mood?');
    await page.keyboard.press('Tab');
    await page.keyboard.press('ArrowRight');
    await page.keyboard.press('ArrowRight');
    await page.keyboard.press('ArrowRight');
    await page.keyboard.press('ArrowRight');
    await page.keyboard.press('ArrowRight');
    expect(await page.getByRole('radio', { name: '5' }).isChecked()).toBe(true);
    await page.keyboard.press('Enter');
    expect(
      await poll(
        () => page.locator('h2').innerText(),
        (v) => v === 'Do you have a fever?',
      ),
    ).toBe('Do you have a fever?');
    await noSeriousViolations(page, 'question 3');
    await page.getByRole('radio', { name: 'No' }).check();
    await page.getByRole('button', { name: 'Next' }).click();
    expect(
      await poll(
        () => page.locator('h2').innerText(),
        (v) => v === 'Anything else?',
      ),
    ).toBe('Anything else?');
    await page.getByRole('textbox').fill('My left ankle has been swollen since Monday');
    await noSeriousViolations(page, 'question 4');
    await page.getByRole('button', { name: 'Next' }).click();

    // The completion step with optional notes, then the outcome with the case reference.
    expect(
      await poll(
        () => page.locator('h2').innerText(),
        (v) => v === 'Anything else?',
      ),
    ).toBe('Anything else?');
    expect(
      await poll(
        () => page.getByLabel('Is there anything else you want your care team to know? (optional)').count(),
        (v) => v === 1,
      ),
    ).toBe(1);
    await page.getByLabel('Is there anything else you want your care team to know? (optional)').fill('Also the wound is leaking a bit.');
    await noSeriousViolations(page, 'notes');
    await page.getByRole('button', { name: 'Send my check-in' }).click();
    expect(
      await poll(
        () => page.locator('h2').innerText(),
        (v) => v === 'Thank you',
      ),
    ).toBe('Thank you');
    const outcome = await mainText(page);
    expect(outcome).toContain('Someone from the team will look at them and contact you.');
    const reference = /Your reference: (CC-[A-HJ-NP-Z2-9]{8})/.exec(outcome)?.[1];
    expect(reference).toBeDefined();
    await noSeriousViolations(page, 'outcome');
    await screenshot(page, 'checkin-outcome');

    // The answers as given, in the case the check-in opened.
    const staff = await app.staffToken({ sub: t.ownerSub });
    const cases = await app.api.get(`${t.env}/clinical-cases`, staff);
    const item = cases.body.clinicalCases.find((c: { reference: string }) => c.reference === reference);
    expect(item).toMatchObject({ source: 'check_in', priority: 'urgent' });
    const detail = await app.api.get(`${t.env}/clinical-cases/${item.caseId}`, staff);
    expect(detail.body).toMatchObject({
      symptomScores: { pain: 8, mood: 5, fever: false, other: 'My left ankle has been swollen since Monday' },
      patientNotes: 'Also the wound is leaking a bit.',
      stoppedEarly: false,
    });
    expect(detail.body.matchedRules).toEqual(expect.arrayContaining(['score:urgent:pain>=7', 'phrase:wound is leaking', 'semantic_phrase:leg swelling']));

    // Only the service's origin was asked for anything, never with a Referer; no policy was broken.
    const requests = await seen.sent();
    expect(requests.length).toBeGreaterThan(5);
    expect(requests.filter((r) => new URL(r.url).origin !== origin)).toEqual([]);
    expect(requests.filter((r) => r.referer !== null)).toEqual([]);
    expect(seen.problems).toEqual([]);

    // The used link again: a clear, kind page with the API's status, and no ids or codes.
    const again = await context.newPage();
    const reopened = await again.goto(url);
    expect(reopened!.status()).toBe(401);
    expect(
      await poll(
        () => again.locator('h2').innerText(),
        (v) => v === 'This link has already been used',
      ),
    ).toBe('This link has already been used');
    const text = await again.locator('body').innerText();
    for (const leak of [checkInId, token, 'INVALID_CHECK_IN_TOKEN', 'Error', '{']) expect(text).not.toContain(leak);
    await noSeriousViolations(again, 'used link');
    await screenshot(again, 'checkin-used-link');

    // A link to no check-in, and one without its token.
    const unknown = await again.goto(`${origin}/api/check-ins/${randomUUID()}?token=${token}`);
    expect(unknown!.status()).toBe(404);
    expect(
      await poll(
        () => again.locator('h2').innerText(),
        (v) => v === 'We could not find this check-in',
      ),
    ).toBe('We could not find this check-in');
    // A mangled link (its id cut short): the same kind page, with the API's 400.
    const mangled = await again.goto(`${origin}/api/check-ins/${checkInId.slice(0, 20)}?token=${token}`);
    expect(mangled!.status()).toBe(400);
    expect(
      await poll(
        () => again.locator('h2').innerText(),
        (v) => v === 'We could not find this check-in',
      ),
    ).toBe('We could not find this check-in');
    const fresh = await browser.context();
    const bare = await fresh.newPage();
    await bare.goto(`${origin}/api/check-ins/${checkInId}`);
    expect(
      await poll(
        () => bare.locator('h2').innerText(),
        (v) => v === 'Please open the link from your email',
      ),
    ).toBe('Please open the link from your email');
    await fresh.close();
    await context.close();
  });

  it('shows the emergency guidance at once in Spanish and stops the check-in; the language switch works', async () => {
    const { t, url, token } = await checkInLink('post-op-es');
    const origin = new URL(url).origin;
    const context = await browser.context({ locale: 'es-ES' });
    const page = await context.newPage();
    const seen = watch(page);
    await page.goto(url);

    expect(
      await poll(
        () => page.locator('h2').innerText(),
        (v) => v === 'How bad is your pain today?',
      ),
    ).toBe('How bad is your pain today?'); // the protocol's own words
    expect(await page.locator('html').getAttribute('lang')).toBe('es');
    expect(await mainText(page)).toContain('Pregunta 1 de 4');
    expect(await page.getByRole('button', { name: 'Siguiente' }).count()).toBe(1);
    await noSeriousViolations(page, 'pregunta 1');

    // The switch: English, then back to Spanish.
    await page.getByRole('button', { name: 'English' }).click();
    expect(
      await poll(
        () => mainText(page),
        (v) => v.includes('Question 1 of 4'),
      ),
    ).toContain('Question 1 of 4');
    expect(await page.locator('html').getAttribute('lang')).toBe('en');
    expect(await page.getByRole('button', { name: 'English' }).getAttribute('aria-pressed')).toBe('true');
    await page.getByRole('button', { name: 'Español' }).click();
    expect(
      await poll(
        () => mainText(page),
        (v) => v.includes('Pregunta 1 de 4'),
      ),
    ).toContain('Pregunta 1 de 4');

    await page.getByRole('radio', { name: '3' }).check();
    await page.getByRole('button', { name: 'Siguiente' }).click();
    expect(
      await poll(
        () => page.locator('h2').innerText(),
        (v) => v === 'How is your mood?',
      ),
    ).toBe('How is your mood?');
    await page.getByRole('radio', { name: '6' }).check();
    await page.getByRole('button', { name: 'Siguiente' }).click();
    await page.getByRole('radio', { name: 'Sí' }).check();
    await page.getByRole('button', { name: 'Siguiente' }).click();
    expect(
      await poll(
        () => page.locator('h2').innerText(),
        (v) => v === 'Anything else?',
      ),
    ).toBe('Anything else?');
    await page.getByRole('textbox').fill('Tengo un dolor fuerte en el pecho y no puedo respirar');
    await page.getByRole('button', { name: 'Siguiente' }).click();

    // At once, prominently, with the number to call; the check-in stops there.
    const alert = page.getByRole('alert');
    expect(
      await poll(
        () => alert.locator('h2').innerText(),
        (v) => v === 'Llame al 911 ahora',
      ),
    ).toBe('Llame al 911 ahora');
    expect(await alert.innerText()).toContain('Su respuesta indica que puede necesitar atención de emergencia.');
    expect(await alert.getByRole('link', { name: 'Llamar al 911' }).getAttribute('href')).toBe('tel:911');
    expect(await alert.innerText()).toContain('Hemos avisado a su equipo de atención.');
    expect(await alert.innerText()).toMatch(/Su referencia: CC-[A-HJ-NP-Z2-9]{8}/);
    expect(await page.getByRole('button', { name: 'Siguiente' }).count()).toBe(0);
    await noSeriousViolations(page, 'emergencia');
    await screenshot(page, 'checkin-emergency-es');

    // The case opened at once, emergency, stopped early with only what was answered.
    const staff = await app.staffToken({ sub: t.ownerSub });
    const cases = await app.api.get(`${t.env}/clinical-cases`, staff);
    expect(cases.body.clinicalCases).toHaveLength(1);
    const detail = await app.api.get(`${t.env}/clinical-cases/${cases.body.clinicalCases[0].caseId}`, staff);
    expect(detail.body).toMatchObject({
      priority: 'emergency',
      source: 'check_in',
      stoppedEarly: true,
      symptomScores: { pain: 3, mood: 6, fever: true, other: 'Tengo un dolor fuerte en el pecho y no puedo respirar' },
    });
    // The check-in is over: the same link no longer opens it.
    expect((await app.api.get(`/widget/v1/check-ins/${/check-ins\/([^?]+)/.exec(url)![1]}?token=${token}`)).status).toBe(401);

    const requests = await seen.sent();
    expect(requests.filter((r) => new URL(r.url).origin !== origin)).toEqual([]);
    expect(requests.filter((r) => r.referer !== null)).toEqual([]);
    expect(seen.problems).toEqual([]);
    await context.close();
  });

  it('keeps the protocol text as written and the page at phone width for a long question', async () => {
    const t = await app.tenant();
    const long = 'Over the last seven days, how often did you feel short of breath while walking up a flight of stairs or carrying groceries from the car?';
    const body = protocolBody('long-words', { questions: [{ key: 'breath', text: long, type: 'scale', min: 1, max: 5 }], redFlags: { emergencyTerms: true } });
    const p = await app.api.post(`${t.env}/protocols`, body, t.staff);
    expect(p.status).toBe(201);
    expect((await app.api.post(`${t.env}/protocols/${p.body.id}/activate`, undefined, t.staff)).status).toBe(200);
    const email = `page-${randomUUID()}@example.test`;
    const r = await app.api.post('/client/patient-events', created(`EXT-${randomUUID()}`, email, { programKey: 'long-words' }), t.apiKey);
    await app.api.post(`${t.env}/patients/${r.body.patientId}/check-ins`, undefined, t.staff);
    const { url } = link((await waitForEmails(app.api, email, 1))[0].text);
    const context = await browser.context({ locale: 'en-GB' });
    const page = await context.newPage();
    await page.goto(url);
    expect(
      await poll(
        () => page.locator('h2').innerText(),
        (v) => v === long,
      ),
    ).toBe(long);
    expect(await page.getByRole('radio').count()).toBe(5);
    expect(await mainText(page)).toContain('Choose a number from 1 (lowest) to 5 (highest).');
    expect(await page.evaluate('document.documentElement.scrollWidth')).toBeLessThanOrEqual(375);
    await page.getByRole('radio', { name: '2' }).check();
    await page.getByRole('button', { name: 'Next' }).click();
    expect(
      await poll(
        () => page.getByRole('button', { name: 'Send my check-in' }).count(),
        (v) => v === 1,
      ),
    ).toBe(1);
    await page.getByRole('button', { name: 'Send my check-in' }).click();
    expect(
      await poll(
        () => page.locator('h2').innerText(),
        (v) => v === 'Thank you',
      ),
    ).toBe('Thank you');
    expect(await mainText(page)).toContain('Nothing else is needed from you today.');
    expect(await mainText(page)).not.toContain('Your reference');
    await context.close();
  });
});
