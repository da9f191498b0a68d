// Over 400 lines: the patient pathway end to end (enrol, check-ins, links, cancellation, restart) on one service.
import { Keyring } from '@svc/security';
import { randomUUID } from 'node:crypto';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { describeInProcess, onTopology, TestApp } from '@svc/testing';
import { DAY, created, emailsTo, link, protocolBody, setUpTenant, sleep, waitForEmails } from '../../apps/patient-pathway/test/e2e-helpers';
import { busRequest, serviceDataDir } from './case-helpers';

/** Issue 3, "Must show": patient lifecycle, protocols and email check-ins over real HTTP. */

describe('patient pathway (e2e, real HTTP)', () => {
  const app = new TestApp();
  beforeAll(() => app.start());
  afterAll(() => app.stop());

  it('enrolls, sends the check-in email after one cadence, and a red-flag answer opens a case with the right priority and rules', async () => {
    const api = app.api;
    const t = await setUpTenant(app);
    expect(t.protocol).toMatchObject({
      programKey: 'post-op',
      active: false,
      defaultCadenceDays: 7,
      questions: expect.any(Array),
      redFlags: expect.any(Object),
      createdAt: expect.any(String),
      id: expect.any(String),
    });

    const email = `story-${randomUUID()}@example.test`;
    const ev = created('EXT-STORY-1', email, { programKey: 'post-op', checkInCadenceDays: 3 });
    const r = await api.post('/client/patient-events', ev, t.apiKey);
    expect(r.status).toBe(202);
    expect(r.body).toEqual({ accepted: true, duplicate: false, patientId: expect.stringMatching(/^[0-9a-f-]{36}$/) });

    // Nothing before the cadence has passed.
    await app.advanceClock(2 * DAY);
    await sleep(300);
    expect(await emailsTo(api, email)).toHaveLength(0);

    await app.advanceClock(1 * DAY + 60);
    const emails = await waitForEmails(api, email, 1);
    expect(emails).toHaveLength(1);
    const mail = emails[0];
    expect(mail.to).toBe(email);
    // No clinical content and no profile data in the email.
    for (const word of ['pain', 'mood', 'fever', 'Ana', 'García', 'EXT-STORY-1']) expect(mail.text + mail.html + mail.subject).not.toContain(word);
    const { checkInId, token, url } = link(mail.text);
    // docs/decisions.md, "Check-in links": `${WIDGET_BASE_URL}/check-ins/{id}?token=`, the base defaulting to the service's own base URL
    // (the topology's command sets it to the gateway's public address), and the link itself answers.
    const base = onTopology() ? app.baseUrl : app.baseUrl.replace('127.0.0.1', 'localhost');
    expect(url).toBe(`${base}/check-ins/${checkInId}?token=${token}`);
    const opened = await api.get(`/check-ins/${checkInId}?token=${token}`);
    expect(opened.status).toBe(200);
    expect(opened.body).toEqual({ checkInId, questions: expect.any(Array), answered: {} });

    const view = await api.get(`/widget/v1/check-ins/${checkInId}?token=${token}`);
    expect(view.status).toBe(200);
    expect(view.body).toEqual({ checkInId, questions: expect.any(Array), answered: {} });
    expect(view.body.questions.map((q: { key: string }) => q.key)).toEqual(['pain', 'mood', 'fever', 'other']);

    const a1 = await api.post(`/widget/v1/check-ins/${checkInId}/answers`, { token, questionKey: 'pain', value: 8 });
    expect(a1.status).toBe(200);
    expect(a1.body).toMatchObject({ emergency: false, next: { key: 'mood' } });
    const a2 = await api.post(`/widget/v1/check-ins/${checkInId}/answers`, { token, questionKey: 'mood', value: 2 });
    expect(a2.body.next.key).toBe('fever');
    await api.post(`/widget/v1/check-ins/${checkInId}/answers`, { token, questionKey: 'fever', value: false });
    const a4 = await api.post(`/widget/v1/check-ins/${checkInId}/answers`, {
      token,
      questionKey: 'other',
      value: 'My left ankle has been swollen since Monday',
    });
    expect(a4.body).toEqual({ next: null, emergency: false });

    const again = await api.get(`/widget/v1/check-ins/${checkInId}?token=${token}`);
    expect(again.body.answered).toEqual({ pain: 8, mood: 2, fever: false, other: 'My left ankle has been swollen since Monday' });

    const done = await api.post(`/widget/v1/check-ins/${checkInId}/complete`, { token, notes: 'Also the wound is leaking a bit.' });
    expect(done.status).toBe(200);
    expect(done.body).toEqual({ outcome: 'case_opened', caseReference: expect.stringMatching(/^CC-[A-HJ-NP-Z2-9]{8}$/) });

    // The case, as the case-ledger opened it.
    // (a fresh staff token: the clock moved days ahead, past the first token's expiry)
    const staff = await app.staffToken({ sub: t.ownerSub });
    const cases = await api.get(`${t.env}/clinical-cases`, staff);
    expect(cases.status).toBe(200);
    const item = cases.body.clinicalCases.find((x: { reference: string }) => x.reference === done.body.caseReference);
    expect(item).toBeDefined();
    const c = (await api.get(`${t.env}/clinical-cases/${item.caseId}`, staff)).body;
    expect(c).toMatchObject({
      priority: 'urgent',
      source: 'check_in',
      patientId: r.body.patientId,
      stoppedEarly: false,
      patientNotes: 'Also the wound is leaking a bit.',
    });
    expect(c.symptomScores).toEqual({ pain: 8, mood: 2, fever: false, other: 'My left ankle has been swollen since Monday' });
    expect(c.matchedRules).toEqual(['score:urgent:pain>=7', 'score:routine:mood<=2', 'phrase:wound is leaking', 'semantic_phrase:leg swelling']);

    // A retried completion (its answer lost on the way) gets the same outcome and case, nothing new.
    const retried = await api.post(`/widget/v1/check-ins/${checkInId}/complete`, { token, notes: 'Also the wound is leaking a bit.' });
    expect(retried.status).toBe(200);
    expect(retried.body).toEqual(done.body);
    expect(
      (await api.get(`${t.env}/clinical-cases`, staff)).body.clinicalCases.filter((x: { reference: string }) => x.reference === done.body.caseReference),
    ).toHaveLength(1);
    expect((await api.get(`${t.env}/clinical-cases`, staff)).body.clinicalCases).toHaveLength(cases.body.clinicalCases.length);

    // Otherwise the token was single-use.
    const used = await api.post(`/widget/v1/check-ins/${checkInId}/complete`, { token });
    expect(used.status).toBe(401);
    expect(used.body.code).toBe('INVALID_CHECK_IN_TOKEN');
    expect((await api.get(`/widget/v1/check-ins/${checkInId}?token=${token}`)).status).toBe(401);

    // The next check-in follows one cadence later.
    await app.advanceClock(3 * DAY + 60);
    expect(await waitForEmails(api, email, 2)).toHaveLength(2);
  });

  it('stops at an emergency answer and opens an emergency case at once with only the answered scores', async () => {
    const api = app.api;
    const t = await setUpTenant(app, 'cardio');
    const email = `emergency-${randomUUID()}@example.test`;
    const r = await api.post('/client/webhooks/patient-events', created('EXT-EMERG', email, { checkInCadenceDays: 1 }), t.apiKey);
    expect(r.status).toBe(202);
    await app.advanceClock(DAY + 60);
    const [mail] = await waitForEmails(api, email, 1);
    const { checkInId, token } = link(mail.text);
    await api.post(`/widget/v1/check-ins/${checkInId}/answers`, { token, questionKey: 'pain', value: 3 });
    const stop = await api.post(`/widget/v1/check-ins/${checkInId}/answers`, {
      token,
      questionKey: 'other',
      value: 'Tengo un dolor fuerte en el pecho y no puedo respirar',
    });
    expect(stop.status).toBe(200);
    expect(stop.body).toMatchObject({ next: null, emergency: true, guidance: expect.any(String), caseReference: expect.stringMatching(/^CC-/) });
    const staff = await app.staffToken({ sub: t.ownerSub });
    const cases = await api.get(`${t.env}/clinical-cases`, staff);
    const item = cases.body.clinicalCases.find((x: { reference: string }) => x.reference === stop.body.caseReference);
    const c = (await api.get(`${t.env}/clinical-cases/${item.caseId}`, staff)).body;
    expect(c).toMatchObject({ priority: 'emergency', source: 'check_in', stoppedEarly: true });
    // Only what was answered before the stop.
    expect(c.symptomScores).toEqual({ pain: 3, other: 'Tengo un dolor fuerte en el pecho y no puedo respirar' });
    expect(c.matchedRules).toEqual(['emergency_terms:chest_pain', 'emergency_terms:breathing']);
    // A retry of the answer that stopped it (the guidance lost on the way) gets the guidance and
    // the same case again; the check-in is over for anything else: another answer or completing.
    const retried = await api.post(`/widget/v1/check-ins/${checkInId}/answers`, {
      token,
      questionKey: 'other',
      value: 'Tengo un dolor fuerte en el pecho y no puedo respirar',
    });
    expect(retried.status).toBe(200);
    expect(retried.body).toEqual(stop.body);
    expect((await api.get(`${t.env}/clinical-cases`, staff)).body.clinicalCases).toHaveLength(cases.body.clinicalCases.length);
    const other = await api.post(`/widget/v1/check-ins/${checkInId}/answers`, { token, questionKey: 'pain', value: 3 });
    expect({ status: other.status, code: other.body.code }).toEqual({ status: 401, code: 'INVALID_CHECK_IN_TOKEN' });
    const after = await api.post(`/widget/v1/check-ins/${checkInId}/complete`, { token });
    expect(after.status).toBe(401);
    // A wrong token is refused all the same.
    expect(
      (
        await api.post(`/widget/v1/check-ins/${checkInId}/answers`, {
          token: 'x' + token.slice(1),
          questionKey: 'other',
          value: 'Tengo un dolor fuerte en el pecho y no puedo respirar',
        })
      ).status,
    ).toBe(401);
  });

  it('completes with no action when nothing matched', async () => {
    const api = app.api;
    const t = await setUpTenant(app, 'calm');
    const email = `calm-${randomUUID()}@example.test`;
    await api.post('/client/patient-events', created('EXT-CALM', email, { checkInCadenceDays: 2 }), t.apiKey);
    await app.advanceClock(2 * DAY + 60);
    const [mail] = await waitForEmails(api, email, 1);
    const { checkInId, token } = link(mail.text);
    await api.post(`/widget/v1/check-ins/${checkInId}/answers`, { token, questionKey: 'pain', value: 1 });
    const done = await api.post(`/widget/v1/check-ins/${checkInId}/complete`, { token, notes: 'Feeling fine' });
    expect(done.body).toEqual({ outcome: 'no_action' });
    const retried = await api.post(`/widget/v1/check-ins/${checkInId}/complete`, { token, notes: 'Feeling fine' });
    expect({ status: retried.status, body: retried.body }).toEqual({ status: 200, body: { outcome: 'no_action' } });
    expect((await api.post(`/widget/v1/check-ins/${checkInId}/complete`, { token, notes: 'Feeling fine, really' })).status).toBe(401);
  });

  it('is idempotent by eventId: identical retry, reuse with another body, twenty at once', async () => {
    const api = app.api;
    const t = await setUpTenant(app);
    const ev = created('EXT-IDEM', `idem-${randomUUID()}@example.test`);
    const first = await api.post('/client/patient-events', ev, t.apiKey);
    expect(first.status).toBe(202);
    const retry = await api.post('/client/webhooks/patient-events', ev, t.apiKey);
    expect(retry.status).toBe(202);
    expect(retry.body).toEqual({ accepted: true, duplicate: true, patientId: first.body.patientId });
    // Key order does not matter.
    const reordered = Object.fromEntries(Object.entries(ev).reverse());
    expect((await api.post('/client/patient-events', reordered, t.apiKey)).body.duplicate).toBe(true);
    // Nor does the case of the uuid: the same eventId in capitals is the same event.
    expect((await api.post('/client/patient-events', { ...ev, eventId: ev.eventId.toUpperCase() }, t.apiKey)).body).toEqual({
      accepted: true,
      duplicate: true,
      patientId: first.body.patientId,
    });

    const reused = await api.post('/client/patient-events', { ...ev, firstName: 'Other' }, t.apiKey);
    expect(reused.status).toBe(409);
    expect(reused.body.code).toBe('IDEMPOTENCY_KEY_REUSED');
    const reusedOtherPatient = await api.post('/client/patient-events', { ...ev, externalPatientId: 'EXT-SOMEONE-ELSE' }, t.apiKey);
    expect(reusedOtherPatient.status).toBe(409);
    expect(reusedOtherPatient.body.code).toBe('IDEMPOTENCY_KEY_REUSED');

    // The same eventId in another tenant is another request.
    const t2 = await setUpTenant(app);
    const elsewhere = await api.post('/client/patient-events', ev, t2.apiKey);
    expect(elsewhere.status).toBe(202);
    expect(elsewhere.body.duplicate).toBe(false);
    expect(elsewhere.body.patientId).not.toBe(first.body.patientId);

    // Twenty identical requests at the same moment enroll once.
    const email = `burst-${randomUUID()}@example.test`;
    const burst = created('EXT-BURST', email, { checkInCadenceDays: 1 });
    const results = await Promise.all(Array.from({ length: 20 }, () => api.post('/client/patient-events', burst, t.apiKey)));
    expect(results.map((x) => x.status)).toEqual(Array(20).fill(202));
    expect(results.filter((x) => x.body.duplicate === false)).toHaveLength(1);
    expect(new Set(results.map((x) => x.body.patientId)).size).toBe(1);

    // Two different eventIds for the same new patient at once: one enrolls, the other is out of order.
    const racers = await Promise.all([
      api.post('/client/patient-events', created('EXT-RACE', `race-${randomUUID()}@example.test`), t.apiKey),
      api.post('/client/patient-events', created('EXT-RACE', `race-${randomUUID()}@example.test`), t.apiKey),
    ]);
    expect(racers.map((x) => x.status).sort()).toEqual([202, 409]);
    expect(racers.find((x) => x.status === 409)!.body.code).toBe('OUT_OF_ORDER');

    // Enrolled once: one check-in after one cadence.
    await app.advanceClock(DAY + 60);
    expect(await waitForEmails(api, email, 1)).toHaveLength(1);
    await sleep(500);
    expect(await emailsTo(api, email)).toHaveLength(1);
  });

  it('writes nothing on a refusal: the same eventId, corrected, is then accepted (PROTOCOL_NOT_FOUND, PROTOCOL_AMBIGUOUS, OUT_OF_ORDER)', async () => {
    const api = app.api;
    const t = await app.tenant();
    const a = (await api.post(`${t.env}/protocols`, protocolBody('fix-a'), t.staff)).body;
    const b = (await api.post(`${t.env}/protocols`, protocolBody('fix-b'), t.staff)).body;
    await api.post(`${t.env}/protocols/${a.id}/activate`, undefined, t.staff);

    const wrongKey = created('EXT-FIX-1', `fix1-${randomUUID()}@example.test`, { programKey: 'no-such-program' });
    const r1 = await api.post('/client/patient-events', wrongKey, t.apiKey);
    expect([r1.status, r1.body.code]).toEqual([404, 'PROTOCOL_NOT_FOUND']);
    const fixed1 = await api.post('/client/patient-events', { ...wrongKey, programKey: 'fix-a' }, t.apiKey);
    expect(fixed1.status).toBe(202);
    expect(fixed1.body).toEqual({ accepted: true, duplicate: false, patientId: expect.any(String) });
    // And the corrected one is now the eventId's body: a retry is a duplicate, the wrong one is reused.
    expect((await api.post('/client/patient-events', { ...wrongKey, programKey: 'fix-a' }, t.apiKey)).body).toEqual({ ...fixed1.body, duplicate: true });
    expect((await api.post('/client/patient-events', wrongKey, t.apiKey)).body.code).toBe('IDEMPOTENCY_KEY_REUSED');

    await api.post(`${t.env}/protocols/${b.id}/activate`, undefined, t.staff);
    const unnamed = created('EXT-FIX-2', `fix2-${randomUUID()}@example.test`);
    const r2 = await api.post('/client/patient-events', unnamed, t.apiKey);
    expect([r2.status, r2.body.code]).toEqual([400, 'PROTOCOL_AMBIGUOUS']);
    expect((await api.post('/client/patient-events', { ...unnamed, protocolId: b.id }, t.apiKey)).status).toBe(202);

    // Out of order: an update before the patient exists, then the same eventId as the create.
    const early = { eventId: randomUUID(), type: 'patient.updated', externalPatientId: 'EXT-FIX-3', firstName: 'Early' };
    const r3 = await api.post('/client/patient-events', early, t.apiKey);
    expect([r3.status, r3.body.code]).toEqual([409, 'OUT_OF_ORDER']);
    const asCreate = { ...created('EXT-FIX-3', `fix3-${randomUUID()}@example.test`, { programKey: 'fix-a' }), eventId: early.eventId };
    const r4 = await api.post('/client/patient-events', asCreate, t.apiKey);
    expect(r4.status).toBe(202);
    expect(r4.body.duplicate).toBe(false);
    // A create while active is refused without taking the eventId either.
    const again = created('EXT-FIX-3', `fix3b-${randomUUID()}@example.test`, { programKey: 'fix-a' });
    expect((await api.post('/client/patient-events', again, t.apiKey)).body.code).toBe('OUT_OF_ORDER');
    const asUpdate = { eventId: again.eventId, type: 'patient.updated', externalPatientId: 'EXT-FIX-3', firstName: 'Later' };
    expect((await api.post('/client/patient-events', asUpdate, t.apiKey)).body).toEqual({ accepted: true, duplicate: false, patientId: r4.body.patientId });
  });

  it('applies updates to the sent fields only, answers 409 OUT_OF_ORDER out of sequence, and cancellation stops check-ins', async () => {
    const api = app.api;
    const t = await setUpTenant(app);
    const ev = (type: string, extra: Record<string, unknown> = {}) => ({ eventId: randomUUID(), type, externalPatientId: 'EXT-SEQ', ...extra });

    const updateFirst = await api.post('/client/patient-events', ev('patient.updated', { firstName: 'X' }), t.apiKey);
    expect(updateFirst.status).toBe(409);
    expect(updateFirst.body.code).toBe('OUT_OF_ORDER');
    const cancelFirst = await api.post('/client/patient-events', ev('patient.cancelled'), t.apiKey);
    expect(cancelFirst.status).toBe(409);
    expect(cancelFirst.body.code).toBe('OUT_OF_ORDER');

    const oldEmail = `seq-old-${randomUUID()}@example.test`;
    const newEmail = `seq-new-${randomUUID()}@example.test`;
    const c = await api.post('/client/patient-events', created('EXT-SEQ', oldEmail, { checkInCadenceDays: 1 }), t.apiKey);
    expect(c.status).toBe(202);
    const twice = await api.post('/client/patient-events', created('EXT-SEQ', oldEmail), t.apiKey);
    expect(twice.status).toBe(409);
    expect(twice.body.code).toBe('OUT_OF_ORDER');

    // An update or cancel naming a protocol that is not an active one of the environment: 404, nothing applied.
    for (const named of [{ programKey: 'no-such-program' }, { protocolId: randomUUID() }]) {
      for (const type of ['patient.updated', 'patient.cancelled']) {
        const r = await api.post(
          '/client/patient-events',
          ev(type, { ...named, ...(type === 'patient.updated' ? { email: 'never@example.test' } : {}) }),
          t.apiKey,
        );
        expect({ type, named, status: r.status, code: r.body.code }).toEqual({ type, named, status: 404, code: 'PROTOCOL_NOT_FOUND' });
      }
    }
    // Naming the active protocol is accepted (the patient stays on the protocol it was enrolled with).
    expect((await api.post('/client/patient-events', ev('patient.updated', { programKey: 'post-op' }), t.apiKey)).status).toBe(202);

    // Update: only the email changes; the patient keeps its id.
    const u = await api.post('/client/patient-events', ev('patient.updated', { email: newEmail }), t.apiKey);
    expect(u.status).toBe(202);
    expect(u.body.patientId).toBe(c.body.patientId);
    await app.advanceClock(DAY + 60);
    expect(await waitForEmails(api, newEmail, 1)).toHaveLength(1);
    expect(await emailsTo(api, oldEmail)).toHaveLength(0);

    // Cancel: no check-in afterwards, whatever the clock does.
    const x = await api.post('/client/patient-events', ev('patient.cancelled'), t.apiKey);
    expect(x.status).toBe(202);
    const again = await api.post('/client/patient-events', ev('patient.cancelled'), t.apiKey);
    expect(again.status).toBe(409);
    expect((await api.post('/client/patient-events', ev('patient.updated', { lastName: 'Y' }), t.apiKey)).body.code).toBe('OUT_OF_ORDER');
    const control = `control-${randomUUID()}@example.test`;
    await api.post('/client/patient-events', created('EXT-CONTROL', control, { checkInCadenceDays: 1 }), t.apiKey);
    await app.advanceClock(5 * DAY);
    expect(await waitForEmails(api, control, 1)).toHaveLength(1);
    await sleep(500);
    expect(await emailsTo(api, newEmail)).toHaveLength(1);

    // Staff cannot send a check-in to a cancelled pathway.
    const staffNow = await api.post(`${t.env}/patients/${c.body.patientId}/check-ins`, undefined, await app.staffToken({ sub: t.ownerSub }));
    expect(staffNow.status).toBe(409);
    expect(staffNow.body.code).toBe('OUT_OF_ORDER');

    // A cancelled patient can be enrolled again with patient.created (same patientId).
    const re = await api.post('/client/patient-events', created('EXT-SEQ', newEmail, { checkInCadenceDays: 2 }), t.apiKey);
    expect(re.status).toBe(202);
    expect(re.body.patientId).toBe(c.body.patientId);
  });

  it('resolves the protocol: programKey, protocolId, the single active one; 404 PROTOCOL_NOT_FOUND and 400 PROTOCOL_AMBIGUOUS', async () => {
    const api = app.api;
    const t = await app.tenant();
    const none = await api.post('/client/patient-events', created('EXT-P1', 'p1@example.test'), t.apiKey);
    expect(none.status).toBe(404);
    expect(none.body.code).toBe('PROTOCOL_NOT_FOUND');

    const a = (await api.post(`${t.env}/protocols`, protocolBody('program-a'), t.staff)).body;
    const b = (await api.post(`${t.env}/protocols`, protocolBody('program-b', { defaultCadenceDays: 2 }), t.staff)).body;
    // Not active yet: not found by key or id.
    expect((await api.post('/client/patient-events', created('EXT-P1', 'p1@example.test', { programKey: 'program-a' }), t.apiKey)).body.code).toBe(
      'PROTOCOL_NOT_FOUND',
    );
    expect((await api.post('/client/patient-events', created('EXT-P1', 'p1@example.test', { protocolId: a.id }), t.apiKey)).body.code).toBe(
      'PROTOCOL_NOT_FOUND',
    );
    expect((await api.post('/client/patient-events', created('EXT-P1', 'p1@example.test', { programKey: 'no-such-program' }), t.apiKey)).status).toBe(404);

    expect((await api.post(`${t.env}/protocols/${a.id}/activate`, undefined, t.staff)).body.active).toBe(true);
    const single = await api.post('/client/patient-events', created('EXT-P1', 'p1@example.test'), t.apiKey);
    expect(single.status).toBe(202);

    expect((await api.post(`${t.env}/protocols/${b.id}/activate`, undefined, t.staff)).status).toBe(200);
    const ambiguous = await api.post('/client/patient-events', created('EXT-P2', 'p2@example.test'), t.apiKey);
    expect(ambiguous.status).toBe(400);
    expect(ambiguous.body.code).toBe('PROTOCOL_AMBIGUOUS');
    expect((await api.post('/client/patient-events', created('EXT-P2', 'p2@example.test', { programKey: 'program-b' }), t.apiKey)).status).toBe(202);
    expect((await api.post('/client/patient-events', created('EXT-P3', 'p3@example.test', { protocolId: b.id }), t.apiKey)).status).toBe(202);
    // A protocolId in capitals names the same protocol.
    expect((await api.post('/client/patient-events', created('EXT-P4', 'p4@example.test', { protocolId: b.id.toUpperCase() }), t.apiKey)).status).toBe(202);

    const off = await api.post(`${t.env}/protocols/${b.id}/deactivate`, undefined, t.staff);
    expect(off.status).toBe(200);
    expect(off.body).toMatchObject({ id: b.id, active: false });
    const list = await api.get(`${t.env}/protocols`, t.staff);
    expect(list.status).toBe(200);
    expect(list.body.protocols.map((p: { programKey: string; active: boolean }) => [p.programKey, p.active])).toEqual([
      ['program-a', true],
      ['program-b', false],
    ]);

    // A protocol of another environment is 404.
    const other = await app.tenant();
    expect((await api.post(`${other.env}/protocols/${a.id}/activate`, undefined, other.staff)).status).toBe(404);
    expect((await api.post(`${t.env}/protocols/${randomUUID()}/activate`, undefined, t.staff)).status).toBe(404);
    expect((await api.post('/client/patient-events', created('EXT-P9', 'p9@example.test', { protocolId: a.id }), other.apiKey)).body.code).toBe(
      'PROTOCOL_NOT_FOUND',
    );
  });

  it('validates protocols: 400 on every rule, 409 DUPLICATE_KEY, staff auth', async () => {
    const api = app.api;
    const t = await app.tenant();
    const post = (body: unknown) => api.post(`${t.env}/protocols`, body, t.staff);
    const base = protocolBody('valid-key');
    const bad: [unknown, string][] = [
      [{ ...base, programKey: 'Bad_Key' }, 'programKey'],
      [{ ...base, programKey: 'a' }, 'programKey'],
      [{ ...base, name: '' }, 'name'],
      [{ ...base, defaultCadenceDays: 0 }, 'defaultCadenceDays'],
      [{ ...base, defaultCadenceDays: 31 }, 'defaultCadenceDays'],
      [{ ...base, questions: [] }, 'questions'],
      [{ ...base, questions: [{ key: 'Pain', text: 'x', type: 'scale' }] }, 'questions[0].key'],
      [{ ...base, questions: [{ key: 'pain', text: 'x', type: 'slider' }] }, 'questions[0].type'],
      [{ ...base, questions: [{ key: 'pain', text: 'x', type: 'scale', min: 5, max: 5 }] }, 'questions[0].max'],
      [{ ...base, questions: [{ key: 'pain', text: 'x', type: 'scale', extra: 1 }] }, 'questions[0].extra'],
      [
        {
          ...base,
          questions: [
            { key: 'a', text: 'x', type: 'text' },
            { key: 'a', text: 'y', type: 'text' },
          ],
          redFlags: {},
        },
        'questions[1].key',
      ],
      [{ ...base, redFlags: { scores: [{ question: 'nope', tier: 'urgent', op: '>=', value: 1 }] } }, 'redFlags.scores[0].question'],
      [{ ...base, redFlags: { scores: [{ question: 'pain', tier: 'critical', op: '>=', value: 1 }] } }, 'redFlags.scores[0].tier'],
      [{ ...base, redFlags: { scores: [{ question: 'pain', tier: 'urgent', op: '>', value: 1 }] } }, 'redFlags.scores[0].op'],
      [{ ...base, redFlags: { phrases: [{ phrase: '', tier: 'urgent' }] } }, 'redFlags.phrases[0].phrase'],
      [
        {
          ...base,
          redFlags: {
            phrases: [
              { phrase: 'боль', tier: 'urgent' },
              { phrase: '...', tier: 'urgent' },
            ],
          },
        },
        'redFlags.phrases[1].phrase',
      ],
      [{ ...base, redFlags: { semanticPhrases: [{ phrase: 'the and of', tier: 'urgent' }] } }, 'redFlags.semanticPhrases[0].phrase'],
      [{ ...base, redFlags: { emergencyTerms: 'yes' } }, 'redFlags.emergencyTerms'],
      [{ ...base, redFlags: undefined }, 'redFlags'],
      [{ ...base, surprise: true }, 'surprise'],
      // Items that are arrays are not objects (class-validator walks nested arrays as if they were the list).
      [{ ...base, questions: [[{ key: 'pain', text: 'x', type: 'scale' }]] }, 'questions'],
      [{ ...base, questions: [[]] }, 'questions'],
      [{ ...base, redFlags: { phrases: [[]] } }, 'redFlags.phrases'],
      [{ ...base, redFlags: { phrases: [[{ phrase: 'x', tier: 'urgent' }]] } }, 'redFlags.phrases'],
      [{ ...base, redFlags: { semanticPhrases: [[]] } }, 'redFlags.semanticPhrases'],
      [{ ...base, redFlags: { scores: [[]] } }, 'redFlags.scores'],
    ];
    for (const [body, path] of bad) {
      const r = await post(body);
      expect({ path, status: r.status, code: r.body.code }).toEqual({ path, status: 400, code: 'VALIDATION_FAILED' });
      expect(r.body.details.map((d: { path: string }) => d.path)).toContain(path);
    }
    const malformed = await api.request('POST', `${t.env}/protocols`, { rawBody: '{"programKey":', token: t.staff });
    expect(malformed.status).toBe(400);

    expect((await post(base)).status).toBe(201);
    const dup = await post({ ...base, name: 'Another' });
    expect(dup.status).toBe(409);
    expect(dup.body.code).toBe('DUPLICATE_KEY');
    // Same key in another environment is fine.
    expect((await api.post(`/organizations/${t.orgId}/environments/${t.production}/protocols`, base, t.staff)).status).toBe(201);

    expect((await api.post(`${t.env}/protocols`, base, t.apiKey)).status).toBe(401);
    const noPerm = await app.staffToken({ sub: t.ownerSub, permissions: [] });
    expect((await api.get(`${t.env}/protocols`, noPerm)).body.code).toBe('PERMISSION_REQUIRED');
  });

  it("ten concurrent creates with one programKey: exactly one 201, the others 409 DUPLICATE_KEY, the stored body is the winner's", async () => {
    const api = app.api;
    const t = await app.tenant();
    for (let round = 0; round < 3; round++) {
      const key = `race-key-${round}`;
      const results = await Promise.all(
        Array.from({ length: 10 }, (_, i) => api.post(`${t.env}/protocols`, protocolBody(key, { name: `Racer ${i}` }), t.staff)),
      );
      const statuses = results.map((r) => r.status);
      expect(statuses.filter((s) => s === 201)).toHaveLength(1);
      expect(statuses.filter((s) => s === 409)).toHaveLength(9);
      for (const r of results.filter((x) => x.status === 409)) expect(r.body.code).toBe('DUPLICATE_KEY');
      const winner = results.find((r) => r.status === 201)!.body;
      const listed = (await api.get(`${t.env}/protocols`, t.staff)).body.protocols.filter((p: { programKey: string }) => p.programKey === key);
      expect(listed).toHaveLength(1);
      expect(listed[0]).toEqual(winner);
    }
  });

  it("another environment's protocols answer 404 (production staff path, foreign protocol id)", async () => {
    const api = app.api;
    const t = await setUpTenant(app, 'env-scope');
    const prodEnv = `/organizations/${t.orgId}/environments/${t.production}`;
    // Same organization and staff, production environment: the sandbox protocol is not there.
    for (const action of ['activate', 'deactivate']) {
      const r = await api.post(`${prodEnv}/protocols/${t.protocol.id}/${action}`, undefined, t.staff);
      expect({ action, status: r.status, code: r.body.code }).toEqual({ action, status: 404, code: 'NOT_FOUND' });
    }
    // A production protocol's id used on the sandbox path is 404 as well.
    const prod = await api.post(`${prodEnv}/protocols`, protocolBody('env-scope'), t.staff);
    expect(prod.status).toBe(201);
    for (const action of ['activate', 'deactivate']) {
      expect((await api.post(`${t.env}/protocols/${prod.body.id}/${action}`, undefined, t.staff)).status).toBe(404);
    }
    // Nothing changed: the sandbox one is still active, the production one still inactive.
    expect((await api.get(`${t.env}/protocols`, t.staff)).body.protocols).toEqual([expect.objectContaining({ id: t.protocol.id, active: true })]);
    expect((await api.get(`${prodEnv}/protocols`, t.staff)).body.protocols).toEqual([expect.objectContaining({ id: prod.body.id, active: false })]);
  });

  it('validates lifecycle events: every field rule, malformed JSON and unknown fields are 400', async () => {
    const api = app.api;
    const t = await setUpTenant(app);
    const ok = created('EXT-VAL', 'val@example.test');
    const cases: [Record<string, unknown>, string][] = [
      [{ ...ok, eventId: 'not-a-uuid' }, 'eventId'],
      [{ ...ok, eventId: undefined }, 'eventId'],
      [{ ...ok, type: 'patient.deleted' }, 'type'],
      [{ ...ok, externalPatientId: '' }, 'externalPatientId'],
      [{ ...ok, externalPatientId: 'x'.repeat(201) }, 'externalPatientId'],
      [{ ...ok, firstName: '' }, 'firstName'],
      [{ ...ok, lastName: 'x'.repeat(81) }, 'lastName'],
      [{ ...ok, firstName: null }, 'firstName'],
      [{ ...ok, phone: '123456' }, 'phone'],
      [{ ...ok, phone: '1'.repeat(31) }, 'phone'],
      [{ ...ok, email: undefined }, 'email'],
      [{ ...ok, email: 'not-an-email' }, 'email'],
      [{ ...ok, email: `${'a'.repeat(250)}@example.test` }, 'email'],
      [{ ...ok, dateOfBirth: '2023-02-30' }, 'dateOfBirth'],
      [{ ...ok, dateOfBirth: '2023/01/01' }, 'dateOfBirth'],
      [{ ...ok, protocolId: 'nope' }, 'protocolId'],
      [{ ...ok, programKey: 'Post_Op' }, 'programKey'],
      [{ ...ok, programKey: 'post-' }, 'programKey'],
      [{ ...ok, programKey: 'post-op', protocolId: t.protocol.id }, 'programKey'],
      [{ ...ok, checkInCadenceDays: 0 }, 'checkInCadenceDays'],
      [{ ...ok, checkInCadenceDays: 31 }, 'checkInCadenceDays'],
      [{ ...ok, checkInCadenceDays: 1.5 }, 'checkInCadenceDays'],
      [{ ...ok, checkInCadenceDays: '3' }, 'checkInCadenceDays'],
      [{ ...ok, unknownField: 1 }, 'unknownField'],
    ];
    for (const [body, path] of cases) {
      const r = await api.post('/client/patient-events', body, t.apiKey);
      expect({ path, status: r.status, code: r.body?.code }).toEqual({ path, status: 400, code: 'VALIDATION_FAILED' });
      expect(r.body.details.map((d: { path: string }) => d.path)).toContain(path);
    }
    const malformed = await api.request('POST', '/client/patient-events', { rawBody: '{"eventId": ', token: t.apiKey });
    expect(malformed.status).toBe(400);
    expect(malformed.body.code).toBe('VALIDATION_FAILED');
    // Email is optional on updates; a valid leap day is fine.
    expect((await api.post('/client/patient-events', { ...ok, dateOfBirth: '2024-02-29' }, t.apiKey)).status).toBe(202);
    expect(
      (
        await api.post(
          '/client/patient-events',
          { eventId: randomUUID(), type: 'patient.updated', externalPatientId: 'EXT-VAL', phone: '5550001234' },
          t.apiKey,
        )
      ).status,
    ).toBe(202);

    // Auth: no key 401, unsigned BAA 403.
    expect((await api.post('/client/patient-events', ok)).status).toBe(401);
    const noBaa = await app.tenant({ baa: false });
    const forbidden = await api.post('/client/patient-events', ok, noBaa.apiKey);
    expect(forbidden.status).toBe(403);
    expect(forbidden.body.code).toBe('BAA_REQUIRED');
  });

  it('staff send a check-in now; widget errors are 404 / 401 / 400', async () => {
    const api = app.api;
    const t = await setUpTenant(app);
    const email = `now-${randomUUID()}@example.test`;
    const p = await api.post('/client/patient-events', created('EXT-NOW', email), t.apiKey);
    const now = await api.post(`${t.env}/patients/${p.body.patientId}/check-ins`, undefined, t.staff);
    expect(now.status).toBe(201);
    expect(now.body).toEqual({ checkInId: expect.any(String) });
    // When the 201 is sent the email is out and its link works (no waiting).
    const outbox = await api.get(`/dev/outbox?to=${encodeURIComponent(email)}`);
    expect(outbox.body.emails).toHaveLength(1);
    const { checkInId, token } = link(outbox.body.emails[0].text);
    expect(checkInId).toBe(now.body.checkInId);
    expect((await api.get(`/widget/v1/check-ins/${checkInId}?token=${token}`)).status).toBe(200);
    // The token is not a keyed hash of the kind stream names hold (external IDs): no external ID
    // an API key holder chooses can make it appear in the data dir.
    const keyring = new Keyring(Buffer.from(readFileSync(join(serviceDataDir(app), 'master.key'), 'utf8').trim(), 'base64'));
    expect(token).not.toBe(keyring.keyedHash(t.sandbox, `check-in-token:${checkInId}`));
    expect(token).toBe(keyring.purposeHash('check-in-token', t.sandbox, checkInId));
    await new Promise((r) => setTimeout(r, 700)); // a dispatch timer tick later: still one email
    expect(await waitForEmails(api, email, 1)).toHaveLength(1);

    expect((await api.post(`${t.env}/patients/${randomUUID()}/check-ins`, undefined, t.staff)).status).toBe(404);
    const other = await app.tenant();
    expect((await api.post(`${other.env}/patients/${p.body.patientId}/check-ins`, undefined, other.staff)).status).toBe(404);

    const unknown = await api.get(`/widget/v1/check-ins/${randomUUID()}?token=${token}`);
    expect(unknown.status).toBe(404);
    expect(unknown.body.code).toBe('NOT_FOUND');
    const badToken = await api.get(`/widget/v1/check-ins/${checkInId}?token=nope`);
    expect(badToken.status).toBe(401);
    expect(badToken.body.code).toBe('INVALID_CHECK_IN_TOKEN');
    expect((await api.get(`/widget/v1/check-ins/${checkInId}`)).status).toBe(401);
    expect((await api.post(`/widget/v1/check-ins/${checkInId}/answers`, { token: 'nope', questionKey: 'pain', value: 1 })).status).toBe(401);

    const answer = (questionKey: string, value: unknown) => api.post(`/widget/v1/check-ins/${checkInId}/answers`, { token, questionKey, value });
    for (const [k, v] of [
      ['pain', 11],
      ['pain', -1],
      ['pain', 2.5],
      ['pain', '3'],
      ['fever', 'yes'],
      ['other', ''],
      ['other', 'x'.repeat(2001)],
      ['nope', 1],
    ] as [string, unknown][]) {
      const r = await answer(k, v);
      expect({ k, v, status: r.status, code: r.body.code }).toEqual({ k, v, status: 400, code: 'VALIDATION_FAILED' });
    }
    expect((await api.post(`/widget/v1/check-ins/${checkInId}/answers`, { token, questionKey: 'pain' })).status).toBe(400);
    expect((await api.post(`/widget/v1/check-ins/${checkInId}/answers`, { token, questionKey: 'pain', value: 1, extra: true })).status).toBe(400);
    expect((await api.request('POST', `/widget/v1/check-ins/${checkInId}/complete`, { rawBody: '{"token":' })).status).toBe(400);
    expect((await answer('pain', 10)).status).toBe(200);
  });

  it('answers the bus queries it owns (findPatient, patientContact)', async () => {
    const api = app.api;
    const t = await setUpTenant(app);
    const email = `bus-${randomUUID()}@example.test`;
    const p = await api.post('/client/patient-events', created('EXT-BUS', email), t.apiKey);
    const { Patterns } = await import('@svc/messaging');
    expect(await busRequest(app, Patterns.findPatient, { environmentId: t.sandbox, externalPatientId: 'EXT-BUS' })).toEqual({ patientId: p.body.patientId });
    expect(await busRequest(app, Patterns.findPatient, { environmentId: t.production, externalPatientId: 'EXT-BUS' })).toEqual({ patientId: null });
    expect(await busRequest(app, Patterns.findPatient, { environmentId: t.sandbox, externalPatientId: 'EXT-NOBODY' })).toEqual({ patientId: null });
    expect(await busRequest(app, Patterns.patientContact, { environmentId: t.sandbox, patientId: p.body.patientId })).toEqual({
      known: true,
      email,
      externalPatientId: null,
    });
    expect(await busRequest(app, Patterns.patientContact, { environmentId: t.production, patientId: p.body.patientId })).toEqual({
      known: false,
      email: null,
      externalPatientId: null,
    });
    expect(await busRequest(app, Patterns.patientContact, { environmentId: t.sandbox, patientId: randomUUID() })).toEqual({
      known: false,
      email: null,
      externalPatientId: null,
    });
    expect(await busRequest(app, Patterns.patientContact, { environmentId: t.sandbox, patientId: 'not-a-uuid' })).toEqual({
      known: false,
      email: null,
      externalPatientId: null,
    });

    // Enrolled patients only: once cancelled, findPatient answers null (a widget session gets no patientId).
    const cancel = await api.post('/client/patient-events', { eventId: randomUUID(), type: 'patient.cancelled', externalPatientId: 'EXT-BUS' }, t.apiKey);
    expect(cancel.status).toBe(202);
    expect(await busRequest(app, Patterns.findPatient, { environmentId: t.sandbox, externalPatientId: 'EXT-BUS' })).toEqual({ patientId: null });
    // ...but still known to patientContact (staff may raise a case about a patient whose pathway ended).
    expect(await busRequest(app, Patterns.patientContact, { environmentId: t.sandbox, patientId: p.body.patientId })).toEqual({
      known: true,
      email,
      externalPatientId: null,
    });
    // Re-enrolled: found again, with the same patientId.
    expect((await api.post('/client/patient-events', created('EXT-BUS', email), t.apiKey)).body.patientId).toBe(p.body.patientId);
    expect(await busRequest(app, Patterns.findPatient, { environmentId: t.sandbox, externalPatientId: 'EXT-BUS' })).toEqual({ patientId: p.body.patientId });
  });
});

describeInProcess('restarts the app in place and reads its data dir')('patient pathway: restart and PHI at rest', () => {
  const app = new TestApp();
  beforeAll(() => app.start());
  afterAll(() => app.stop());

  it('loses nothing across a restart between enrolment and the due check-in, which goes out once; no PHI in clear in the data dir', async () => {
    const t = await setUpTenant(app, 'restart-program');
    const externalId = `CANARY-EXT-${randomUUID()}`;
    const email = `canary-${randomUUID()}@example.test`;
    const original = created(externalId, email, { checkInCadenceDays: 2, firstName: 'Canaryfirstname', phone: '+1-555-CANARY-9' });
    const r = await app.api.post('/client/patient-events', original, t.apiKey);
    expect(r.status).toBe(202);

    await app.restart();
    await app.advanceClock(2 * DAY + 60);
    const emails = await waitForEmails(app.api, email, 1);
    expect(emails).toHaveLength(1);
    const { checkInId, token } = link(emails[0].text);
    const notes = `canary note ${randomUUID()}`;
    await app.api.post(`/widget/v1/check-ins/${checkInId}/answers`, { token, questionKey: 'other', value: notes });

    await app.restart();
    await new Promise((res) => setTimeout(res, 1500));
    expect(await emailsTo(app.api, email)).toHaveLength(1);
    // Duplicate after a restart: the original body again is recognised from the streams.
    const dup = await app.api.post('/client/patient-events', original, t.apiKey);
    expect(dup.status).toBe(202);
    expect(dup.body).toEqual({ accepted: true, duplicate: true, patientId: r.body.patientId });
    // A new eventId for the same active patient is out of order.
    const again = await app.api.post('/client/patient-events', created(externalId, email), t.apiKey);
    expect(again.status).toBe(409);
    expect(again.body.code).toBe('OUT_OF_ORDER');

    await app.stop();
    const canaries = [externalId, email, 'Canaryfirstname', 'CANARY-9', notes];
    const files: string[] = [];
    const walk = (dir: string) => {
      for (const f of readdirSync(dir)) {
        const p = join(dir, f);
        if (statSync(p).isDirectory()) {
          if (f !== 'outbox') walk(p);
        } else files.push(p);
      }
    };
    walk(app.dataDir);
    expect(files.some((f) => f.endsWith('events.sqlite'))).toBe(true);
    expect(files.some((f) => f.endsWith('read-models.sqlite'))).toBe(true);
    for (const f of files) {
      const content = readFileSync(f).toString('latin1');
      for (const c of canaries) expect({ file: f, found: content.includes(c) }).toEqual({ file: f, found: false });
    }
    await app.start();
  });
});
