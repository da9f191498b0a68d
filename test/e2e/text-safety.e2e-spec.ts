import { randomUUID } from 'node:crypto';
import { TestApp } from '@svc/testing';
import { DAY, created, link, setUpTenant, waitForEmails } from '../../apps/patient-pathway/test/e2e-helpers';
import { identityToken } from './case-helpers';

/**
 * Issue 24 over real HTTP: emergency words behind invisible, full-width and look-alike characters
 * get emergency guidance and an emergency case in every context (widget agent, staff chat request,
 * check-in answer), and a maximum-length adversarial message is answered while other requests
 * still are. Nothing is timed here: linear cost is proven by counting work (libs/clinical/test).
 */
describe('text safety: disguised emergency words and adversarial text (e2e, real HTTP)', () => {
  const app = new TestApp();
  let t: Awaited<ReturnType<typeof setUpTenant>>;
  const ENROLLED = `EXT-TEXT-${randomUUID()}`;
  beforeAll(async () => {
    await app.start();
    t = await setUpTenant(app, 'text-safety');
    const r = await app.api.post('/client/patient-events', created(ENROLLED, `text-${randomUUID()}@example.test`, { programKey: 'text-safety' }), t.apiKey);
    expect(r.status).toBeLessThan(300);
  });
  afterAll(() => app.stop());

  async function session(externalId: string | null): Promise<string> {
    let signed: string | undefined;
    if (externalId) {
      const rotated = await app.api.post(`${t.env}/secrets/rotate`, { kind: 'identity_token' }, t.staff);
      signed = await identityToken(app, rotated.body.secret, externalId);
    }
    const r = await app.api.post('/widget/v1/sessions', { environmentId: t.sandbox, ...(signed ? { identityToken: signed } : {}) });
    expect(r.status).toBe(201);
    return r.body.sessionToken;
  }

  async function caseByReference(reference: string, staff = t.staff) {
    const list = await app.api.get(`${t.env}/clinical-cases`, staff);
    const item = list.body.clinicalCases.find((c: { reference: string }) => c.reference === reference);
    expect(item).toBeDefined();
    return (await app.api.get(`${t.env}/clinical-cases/${item.caseId}`, staff)).body;
  }

  const DISGUISED: [string, string][] = [
    ['I have crushing ｃｈｅｓｔ ｐａｉｎ', 'chest_pain'], // full-width
    ['I want to kill my\u00adself', 'self_harm'], // soft hyphen
    ['I feel sui\u200dcidal', 'self_harm'], // zero-width joiner
    ['I think I took an over\u200bdose', 'overdose'], // zero-width space
  ];

  it.each(DISGUISED)('a signed-in patient: %j gets emergency guidance and an emergency case (%s)', async (message, kind) => {
    const token = await session(ENROLLED);
    const r = await app.api.post('/widget/v1/messages', { message }, token);
    expect(r.status).toBe(201);
    expect(r.body).toMatchObject({ handedOff: true, caseReference: expect.any(String) });
    expect(r.body.replies[0].text).toMatch(/This may be an emergency/);
    expect(r.body.replies[0].text).toMatch(/alerted your care team/);
    const c = await caseByReference(r.body.caseReference);
    expect(c).toMatchObject({ priority: 'emergency', source: 'patient_concern' });
    expect(c.matchedRules).toEqual([`emergency_terms:${kind}`]);
  });

  it.each(DISGUISED)('an anonymous visitor: %j gets emergency guidance', async (message) => {
    const r = await app.api.post('/widget/v1/messages', { message }, await session(null));
    expect(r.status).toBe(201);
    expect(r.body.replies[0].text).toMatch(/This may be an emergency/);
  });

  it('a staff chat request with a disguised emergency word opens an emergency case', async () => {
    const patientId = (await app.enrolledPatient(t)).patientId;
    const r = await app.api.post(`${t.env}/clinical-cases`, { patientId, request: 'Patient writes that he has сhеst раіn (Cyrillic letters)' }, t.staff);
    expect(r.status).toBe(201);
    expect(r.body.priority).toBe('emergency');
  });

  it('a maximum-length adversarial message is answered (an emergency word at its very end is seen) while a cheap route is answered too', async () => {
    const tail = ' ｃｈｅｓｔ ｐａｉｎ';
    // The message that took 0.8 s of the event loop (a y-run before a Porter suffix), at the edge's 4,000 characters.
    const froze = `${'y'.repeat(3993)}ational`;
    const yRuns = `${'y'.repeat(192)}ational `.repeat(20).slice(0, 4000 - tail.length) + tail;
    // The densest message the edge takes as 4,000 characters: 12,000 UTF-16 code units.
    const dense = '😀\ufe0f'.repeat(4000 - tail.length) + tail;
    expect([froze.length, yRuns.length, dense.length]).toEqual([4000, 4000, 3989 * 3 + tail.length]);

    const [s1, s2, s3] = [await session(null), await session(null), await session(null)];
    const [a, b, c, ping, ping2] = await Promise.all([
      app.api.post('/widget/v1/messages', { message: froze }, s1),
      app.api.post('/widget/v1/messages', { message: yRuns }, s2),
      app.api.post('/widget/v1/messages', { message: dense }, s3),
      app.api.get('/v1/ping', t.apiKey),
      app.api.get('/v1/ping', t.apiKey),
    ]);
    for (const p of [ping, ping2])
      expect({ status: p.status, body: p.body }).toEqual({
        status: 200,
        body: { organizationId: t.orgId, environmentId: t.sandbox, environmentKind: 'sandbox' },
      });
    for (const r of [a, b, c]) expect(r.status).toBe(201);
    expect(a.body.replies[0].text).toMatch(/connect you with our team/);
    expect(b.body.replies[0].text).toMatch(/This may be an emergency/);
    expect(c.body.replies[0].text).toMatch(/This may be an emergency/);

    // A message one character over the edge's limit is refused, never analysed.
    const over = await app.api.post('/widget/v1/messages', { message: '😀\ufe0f'.repeat(4001) }, await session(null));
    expect(over.status).toBe(400);
  });

  it('a check-in answer with a disguised emergency word stops the check-in at emergency guidance', async () => {
    const email = `text-check-in-${randomUUID()}@example.test`;
    const r = await app.api.post(
      '/client/patient-events',
      created(`EXT-TEXT-CI-${randomUUID()}`, email, { programKey: 'text-safety', checkInCadenceDays: 1 }),
      t.apiKey,
    );
    expect(r.status).toBe(202);
    await app.advanceClock(DAY + 60);
    const [mail] = await waitForEmails(app.api, email, 1);
    const { checkInId, token } = link(mail.text);
    const stop = await app.api.post(`/widget/v1/check-ins/${checkInId}/answers`, { token, questionKey: 'other', value: 'No puedo res\u00adpi\u200brar' });
    expect(stop.status).toBe(200);
    expect(stop.body).toMatchObject({ next: null, emergency: true, guidance: expect.any(String), caseReference: expect.stringMatching(/^CC-/) });
    const c = await caseByReference(stop.body.caseReference, await app.staffToken({ sub: t.ownerSub })); // the day's clock jump outlived the first token
    expect(c).toMatchObject({ priority: 'emergency', source: 'check_in', stoppedEarly: true });
    expect(c.matchedRules).toEqual(['emergency_terms:breathing']);
  });
});
