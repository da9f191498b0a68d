import { randomUUID } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { TestApp } from '@svc/testing';
import { OrderDestination } from './order-destination';
import { identityToken } from './case-helpers';

/**
 * docs/decisions.md ("Check-ins after a cancellation"): after `patient.cancelled` "the widget does not link the patient" — also for a
 * session token issued before the cancel (it lives an hour): from the 202 on, such a session is
 * treated as unlinked (no case, no call that identifies the patient, its case-thread replies 404 like
 * an anonymous session's), while another, still active patient's session is unaffected.
 */

const HEALTH = 'I have had a high fever and bad headache since yesterday, is that worrying?';

describe('a widget session issued before patient.cancelled (e2e, real HTTP, real Destination)', () => {
  const app = new TestApp();
  const dest = new OrderDestination();
  beforeAll(async () => {
    await app.start();
    await dest.start();
  });
  afterAll(async () => {
    await dest.stop();
    await app.stop();
  });

  it('from the 202 on: no case for the cancelled patient, no call naming them, their case replies 404 like an anonymous session; another patient is unaffected', async () => {
    const t = await app.tenant();
    const P = `${t.env}/conversation-workflows`;
    dest.secret = (await app.api.post(`${t.env}/secrets/rotate`, { kind: 'widget_signing' }, t.staff)).body.secret;
    expect((await app.api.post(`${t.env}/destinations`, { stableKey: 'order_system', name: 'Orders', baseUrl: dest.baseUrl }, t.staff)).status).toBe(201);
    const wf = await app.api.post(`${P}/from-template`, { templateKey: 'order_status_tracking' }, t.staff);
    expect(wf.status).toBe(201);
    const v = wf.body.draftVersionId;
    expect(
      (await app.api.post(`${P}/versions/${v}/test`, { expectedRevision: 1, opening: 'where is my order', replies: [], patientId: 'ext-sample' }, t.staff)).body
        .passed,
    ).toBe(true);
    expect((await app.api.post(`${P}/versions/${v}/activate`, { expectedRevision: 1 }, t.staff)).status).toBe(200);

    const identity = (await app.api.post(`${t.env}/secrets/rotate`, { kind: 'identity_token' }, t.staff)).body.secret as string;
    const session = async (sub: string | null): Promise<{ token: string; patientId: string | null }> => {
      const signed = sub ? await identityToken(app, identity, sub, { email: `${sub}@example.test` }) : undefined;
      const r = await app.api.post('/widget/v1/sessions', { environmentId: t.sandbox, ...(signed ? { identityToken: signed } : {}) });
      expect(r.status).toBe(201);
      return { token: r.body.sessionToken, patientId: r.body.patientId };
    };
    const casesOf = async (patientId: string) =>
      ((await app.api.get(`${t.env}/clinical-cases`, t.staff)).body.clinicalCases as { caseId: string; reference: string; patientId: string }[]).filter(
        (c) => c.patientId === patientId,
      );

    const cancelled = await app.enrolledPatient(t);
    const other = await app.enrolledPatient(t);
    const old = await session(cancelled.externalPatientId);
    const otherSession = await session(other.externalPatientId);
    const anonymous = await session(null);
    expect(old.patientId).toBe(cancelled.patientId);
    expect(otherSession.patientId).toBe(other.patientId);

    // Before the cancel the old session is linked: its health question opens a case, a reply in it is taken.
    const before = await app.api.post('/widget/v1/messages', { message: HEALTH }, old.token);
    expect(before.body).toMatchObject({ handedOff: true, caseReference: expect.any(String) });
    const [theCase] = await casesOf(cancelled.patientId);
    expect(theCase.reference).toBe(before.body.caseReference);
    expect((await app.api.post(`/widget/v1/cases/${theCase.caseId}/messages`, { message: 'It is a bit better now' }, old.token)).status).toBe(201);
    dest.arrivals = [];
    expect(
      (await app.api.post('/widget/v1/messages', { message: 'where is my order' }, old.token)).body.replies.some((r: { type: string }) => r.type === 'orders'),
    ).toBe(true);
    expect(dest.arrivals.map((a) => a.externalId)).toEqual([cancelled.externalPatientId]);

    const cancel = await app.api.post(
      '/client/patient-events',
      { eventId: randomUUID(), type: 'patient.cancelled', externalPatientId: cancelled.externalPatientId },
      t.apiKey,
    );
    expect(cancel.status).toBe(202);
    const cancelAt = performance.now();
    dest.arrivals = [];

    // The old session after the 202: a health question opens no case, and the reply says so.
    const health = await app.api.post('/widget/v1/messages', { message: HEALTH }, old.token);
    expect(health.status).toBe(201);
    expect(health.body.handedOff).toBe(false);
    expect(health.body.caseReference).toBeUndefined();
    expect(health.body.replies[0].text).toMatch(/couldn't pass your question/);
    // An emergency: guidance, but nobody alerted and no case.
    const emergency = await app.api.post('/widget/v1/messages', { message: 'I have chest pain' }, old.token);
    expect(emergency.body.handedOff).toBe(false);
    expect(emergency.body.replies[0].text).toMatch(/emergency/i);
    expect(emergency.body.replies[0].text).not.toMatch(/alerted/i);
    // An order lookup: no call that names the cancelled patient reaches the Destination.
    const lookup = await app.api.post('/widget/v1/messages', { message: 'where is my order' }, old.token);
    expect(lookup.status).toBe(201);
    expect(lookup.body.replies.some((r: { type: string }) => r.type === 'orders')).toBe(false);
    // The case-thread reply: 404 exactly like an anonymous session's to the same case.
    const reply = await app.api.post(`/widget/v1/cases/${theCase.caseId}/messages`, { message: 'Still there?' }, old.token);
    const anonReply = await app.api.post(`/widget/v1/cases/${theCase.caseId}/messages`, { message: 'Still there?' }, anonymous.token);
    expect(reply.status).toBe(404);
    expect(anonReply.status).toBe(404);
    expect(reply.body).toEqual(anonReply.body);
    expect(await casesOf(cancelled.patientId)).toHaveLength(1);
    const thread = await app.api.get(`/v1/conversations/${theCase.caseId}/messages`, t.apiKey);
    expect(thread.body.messages.filter((m: { sender: string }) => m.sender === 'patient')).toHaveLength(1);
    expect(dest.arrivals.filter((a) => a.externalId === cancelled.externalPatientId)).toEqual([]);
    expect(dest.arrivals.filter((a) => a.at > cancelAt && a.externalId === cancelled.externalPatientId)).toHaveLength(0);

    // The other, still active patient's session is unaffected: case, case reply, order lookup.
    const otherHealth = await app.api.post('/widget/v1/messages', { message: HEALTH }, otherSession.token);
    expect(otherHealth.body).toMatchObject({ handedOff: true, caseReference: expect.any(String) });
    const [otherCase] = await casesOf(other.patientId);
    expect(otherCase.reference).toBe(otherHealth.body.caseReference);
    expect((await app.api.post(`/widget/v1/cases/${otherCase.caseId}/messages`, { message: 'Thanks' }, otherSession.token)).status).toBe(201);
    const otherLookup = await app.api.post('/widget/v1/messages', { message: 'where is my order' }, otherSession.token);
    expect(otherLookup.body.replies.some((r: { type: string }) => r.type === 'orders')).toBe(true);
    expect(dest.arrivals.map((a) => a.externalId)).toEqual([other.externalPatientId]);
    expect(dest.arrivals.every((a) => a.signatureOk)).toBe(true);

    // A session made after the cancel is unlinked too (as before).
    expect((await session(cancelled.externalPatientId)).patientId).toBeNull();
  });
});
