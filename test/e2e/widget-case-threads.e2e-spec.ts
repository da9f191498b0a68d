import { randomUUID } from 'node:crypto';
import { TestApp } from '@svc/testing';
import { identityToken, openCase, update } from './case-helpers';

/**
 * The widget's read side for a signed-in patient (docs/decisions.md, "Pages for patients"):
 * `GET /widget/v1/cases` (the patient's own cases) and `GET /widget/v1/cases/{caseId}/messages`
 * (the thread as the patient sees it), beside the reply route; and `emergency` on the agent's answer.
 */
describe('widget case list and threads (e2e, real HTTP)', () => {
  const app = new TestApp();
  beforeAll(() => app.start());
  afterAll(() => app.stop());

  async function signedIn(t: Awaited<ReturnType<TestApp['tenant']>>, secret: string, externalPatientId: string) {
    const r = await app.api.post('/widget/v1/sessions', { environmentId: t.sandbox, identityToken: await identityToken(app, secret, externalPatientId) });
    expect(r.status).toBe(201);
    return r.body.sessionToken as string;
  }

  it("lists the signed-in patient's own cases and threads, newest first; others' are 404 and anonymous sessions have none", async () => {
    const t = await app.tenant();
    const secret = (await app.api.post(`${t.env}/secrets/rotate`, { kind: 'identity_token' }, t.staff)).body.secret as string;
    const ana = await app.enrolledPatient(t);
    const ben = await app.enrolledPatient(t);
    const first = await openCase(app, t, 'Please call about the dressing (canary-staff-note)', ana.patientId);
    const second = await openCase(app, t, 'Review the new prescription', ana.patientId);
    const bens = await openCase(app, t, 'Another patient entirely', ben.patientId);
    const session = await signedIn(t, secret, ana.externalPatientId);

    const list = await app.api.get('/widget/v1/cases', session);
    expect(list.status).toBe(200);
    expect(list.body).toEqual({
      clinicalCases: [
        { caseId: second.caseId, reference: second.reference, status: 'awaiting_processing', openedAt: expect.any(String), resolvedAt: null },
        { caseId: first.caseId, reference: first.reference, status: 'awaiting_processing', openedAt: expect.any(String), resolvedAt: null },
      ],
      hasMore: false,
    });
    const one = await app.api.get('/widget/v1/cases?limit=1', session);
    expect(one.body).toEqual({ clinicalCases: [expect.objectContaining({ caseId: second.caseId })], hasMore: true });
    for (const limit of ['0', '51', 'x']) {
      const bad = await app.api.get(`/widget/v1/cases?limit=${limit}`, session);
      expect({ limit, status: bad.status, code: bad.body.code }).toEqual({ limit, status: 400, code: 'VALIDATION_FAILED' });
    }

    // The provider writes; the patient reads and replies; the thread shows both in order, and never the staff's request.
    const pm = await app.api.post(
      `/v1/clinical-cases/${first.caseId}/messages`,
      { messageId: randomUUID(), message: 'Please send a photo of the wound.', externalReference: 'ehr-1' },
      t.apiKey,
    );
    expect(pm.status).toBe(200);
    const thread = await app.api.get(`/widget/v1/cases/${first.caseId}/messages`, session);
    expect(thread.status).toBe(200);
    expect(thread.body).toEqual({
      conversationId: first.caseId,
      messages: [
        {
          id: expect.any(String),
          sequence: expect.any(Number),
          sender: 'provider',
          message: 'Please send a photo of the wound.',
          createdAt: expect.any(String),
        },
      ],
      hasMore: false,
      closed: false,
    });
    expect(thread.text).not.toContain('canary-staff-note');
    const reply = await app.api.request('POST', `/widget/v1/cases/${first.caseId}/messages`, {
      body: { message: 'Sent it by email just now.' },
      token: session,
      headers: { 'idempotency-key': randomUUID() },
    });
    expect(reply.status).toBe(201);
    const after = await app.api.get(`/widget/v1/cases/${first.caseId}/messages?afterSequence=${thread.body.messages[0].sequence}`, session);
    expect(after.body.messages).toEqual([expect.objectContaining({ sender: 'patient', message: 'Sent it by email just now.', sequence: reply.body.sequence })]);

    // Another patient's case, a case that does not exist, and an anonymous session: the same 404; no cases listed.
    for (const caseId of [bens.caseId, randomUUID()]) {
      const r = await app.api.get(`/widget/v1/cases/${caseId}/messages`, session);
      expect({ status: r.status, code: r.body.code }).toEqual({ status: 404, code: 'NOT_FOUND' });
    }
    const anonymous = (await app.api.post('/widget/v1/sessions', { environmentId: t.sandbox })).body.sessionToken as string;
    expect((await app.api.get('/widget/v1/cases', anonymous)).body).toEqual({ clinicalCases: [], hasMore: false });
    expect((await app.api.get(`/widget/v1/cases/${first.caseId}/messages`, anonymous)).status).toBe(404);
    const none = await app.api.get('/widget/v1/cases');
    expect({ status: none.status, code: none.body.code }).toEqual({ status: 401, code: 'SESSION_REQUIRED' });
    const benSession = await signedIn(t, secret, ben.externalPatientId);
    expect((await app.api.get('/widget/v1/cases', benSession)).body.clinicalCases.map((c: { caseId: string }) => c.caseId)).toEqual([bens.caseId]);

    // Resolved: the list says so and the thread is closed to replies.
    expect((await app.api.post(`/v1/clinical-cases/${first.caseId}/updates`, update(1, 'processed'), t.apiKey)).status).toBe(200);
    const resolved = await app.api.post(
      `/v1/clinical-cases/${first.caseId}/updates`,
      update(2, 'resolved', { resolutionOutcome: 'patient_contacted', resolutionNote: 'Photo reviewed, healing well.' }),
      t.apiKey,
    );
    expect(resolved.status).toBe(200);
    const closed = await app.api.get(`/widget/v1/cases/${first.caseId}/messages`, session);
    expect(closed.body.closed).toBe(true);
    const listed = (await app.api.get('/widget/v1/cases', session)).body.clinicalCases.find((c: { caseId: string }) => c.caseId === first.caseId);
    expect(listed).toMatchObject({ status: 'resolved', resolvedAt: expect.any(String) });
  });

  it('marks the answer to an emergency message (and only it) with emergency: true', async () => {
    const t = await app.tenant();
    const session = (await app.api.post('/widget/v1/sessions', { environmentId: t.sandbox })).body.sessionToken as string;
    const urgent = await app.api.post('/widget/v1/messages', { message: 'Me duele el pecho y no puedo respirar' }, session);
    expect(urgent.status).toBe(201);
    expect(urgent.body).toMatchObject({ emergency: true, replies: [{ type: 'text', text: expect.stringContaining('911') }] });
    const plain = await app.api.post('/widget/v1/messages', { message: 'What are your opening hours?' }, session);
    expect(plain.body.emergency).toBe(false);
  });
});
