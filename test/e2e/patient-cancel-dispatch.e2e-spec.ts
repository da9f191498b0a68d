import { randomUUID } from 'node:crypto';
import { existsSync, readFileSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { onTopology, TestApp } from '@svc/testing';
import { checkInStream, patientStream } from '../../apps/patient-pathway/src/domain/streams';
import { DAY, created, setUpTenant, sleep } from '../../apps/patient-pathway/test/e2e-helpers';
import { eventStoreOf, serviceDataDir } from './case-helpers';

/**
 * A cancellation and a check-in falling due at the same moment (an audit saw the check-in email
 * written up to ~0.5 s after the cancellation's 202, with a working link, in 10 of 10 tries): once
 * the 202 is answered, no check-in email follows. One that was on its way before is out before the
 * 202; one not yet mailed never is, and its link is refused.
 */
describe('patient cancelled while a check-in falls due (e2e, real HTTP)', () => {
  const app = new TestApp();
  beforeAll(() => app.start());
  afterAll(() => app.stop());

  const store = () => eventStoreOf(app);
  /** When each check-in email to `to` was written (file times of the service's dev outbox). */
  const emailTimes = (to: string): number[] => {
    const dir = join(serviceDataDir(app), 'outbox');
    if (!existsSync(dir)) return [];
    return readdirSync(dir)
      .filter((f) => f.startsWith('check-in-') && f.endsWith('.json'))
      .filter((f) => (JSON.parse(readFileSync(join(dir, f), 'utf8')) as { to: string }).to === to)
      .map((f) => statSync(join(dir, f)).mtimeMs);
  };

  it('writes no check-in email after the 202 of patient.cancelled', async () => {
    const api = app.api;
    const t = await setUpTenant(app, 'cancel-race');
    const patients: { email: string; externalPatientId: string; patientId: string }[] = [];
    for (let i = 0; i < 12; i++) {
      const email = `cancel-race-${randomUUID()}@example.test`;
      const externalPatientId = `EXT-CR-${i}-${randomUUID().slice(0, 8)}`;
      const r = await api.post('/client/patient-events', created(externalPatientId, email, { checkInCadenceDays: 1 }), t.apiKey);
      expect(r.status).toBe(202);
      patients.push({ email, externalPatientId, patientId: r.body.patientId });
    }
    // The check-ins fall due; the cancellations arrive within the next ~60 ms, while they are dispatched
    // (on the topology the dispatch starts once the clock has reached patient-pathway, and each
    // request crosses the gateway: spread over ~600 ms).
    const due = app.advanceClock(DAY + 5);
    const spreadMs = onTopology() ? 600 : 60;
    const outcomes = await Promise.all(
      patients.map(async (p) => {
        await sleep(Math.random() * spreadMs);
        const r = await api.post(
          '/client/patient-events',
          { eventId: randomUUID(), type: 'patient.cancelled', externalPatientId: p.externalPatientId },
          t.apiKey,
        );
        const answeredAt = Date.now();
        expect(r.status).toBe(202);
        return { ...p, answeredAt };
      }),
    );
    await due;
    await sleep(1500); // several dispatch ticks
    await app.advanceClock(2 * DAY); // and past the next cadence
    await sleep(1000);
    for (const p of outcomes) {
      const late = emailTimes(p.email).filter((at) => at > p.answeredAt);
      expect({ patient: p.externalPatientId, emailsAfterThe202: late.length }).toEqual({ patient: p.externalPatientId, emailsAfterThe202: 0 });
    }
    // The race took place: some check-ins were decided before their patient's cancellation.
    let decidedBeforeCancel = 0;
    for (const p of outcomes) {
      const types = (await (await store()).readStream(patientStream(p.patientId))).map((e) => e.type);
      if (types.indexOf('CheckInSent') >= 0 && types.indexOf('CheckInSent') < types.indexOf('PatientCancelled')) decidedBeforeCancel++;
    }
    expect(decidedBeforeCancel).toBeGreaterThan(0);
  });

  it("refuses a voided check-in's link (401), whatever the token", async () => {
    const t = await setUpTenant(app, 'voided-link');
    const checkInId = randomUUID();
    const meta = {
      eventId: randomUUID(),
      correlationId: randomUUID(),
      causationId: null,
      organizationId: t.orgId,
      environmentId: t.sandbox,
      actor: 'system',
      recordedAt: new Date().toISOString(),
    };
    // What the dispatch records for a check-in whose patient was cancelled before it was issued.
    await (await store()).append(checkInStream(checkInId), [{ type: 'CheckInVoided', data: { at: meta.recordedAt }, metadata: meta }], 'no_stream');
    for (const r of [
      await app.api.get(`/check-ins/${checkInId}?token=abc`),
      await app.api.get(`/widget/v1/check-ins/${checkInId}?token=abc`),
      await app.api.post(`/widget/v1/check-ins/${checkInId}/answers`, { token: 'abc', questionKey: 'pain', value: 1 }),
      await app.api.post(`/widget/v1/check-ins/${checkInId}/complete`, { token: 'abc' }),
    ]) {
      expect({ status: r.status, code: r.body.code }).toEqual({ status: 401, code: 'INVALID_CHECK_IN_TOKEN' });
    }
  });
});
