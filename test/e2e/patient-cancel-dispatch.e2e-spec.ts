import { randomUUID } from 'node:crypto';
import { TestApp } from '@svc/testing';
import { DAY, created, emailsTo, setUpTenant, sleep } from '../../apps/patient-pathway/test/e2e-helpers';

/**
 * A cancellation and a check-in falling due at the same moment (an audit saw the check-in email
 * written up to ~0.5 s after the cancellation's 202, with a working link, in 10 of 10 tries): once
 * the 202 is answered, no check-in email follows. One that was on its way before is out before the
 * 202; one not yet mailed never is, and its link does not work.
 */
describe('patient cancelled while a check-in falls due (e2e, real HTTP)', () => {
  const app = new TestApp();
  beforeAll(() => app.start());
  afterAll(() => app.stop());

  it('sends no check-in email after the 202 of patient.cancelled', async () => {
    const api = app.api;
    const t = await setUpTenant(app, 'cancel-race');
    const patients = [];
    for (let i = 0; i < 12; i++) {
      const email = `cancel-race-${randomUUID()}@example.test`;
      const externalPatientId = `EXT-CR-${i}-${randomUUID().slice(0, 8)}`;
      expect((await api.post('/client/patient-events', created(externalPatientId, email, { checkInCadenceDays: 1 }), t.apiKey)).status).toBe(202);
      patients.push({ email, externalPatientId });
    }
    // The check-ins fall due; the cancellations arrive within the next ~60 ms, while they are dispatched.
    const due = app.advanceClock(DAY + 5);
    const outcomes = await Promise.all(
      patients.map(async (p) => {
        await sleep(Math.random() * 60);
        const r = await api.post('/client/patient-events', { eventId: randomUUID(), type: 'patient.cancelled', externalPatientId: p.externalPatientId }, t.apiKey);
        expect(r.status).toBe(202);
        return { ...p, emailsAt202: (await emailsTo(api, p.email)).length };
      }),
    );
    await due;
    await sleep(1500); // several dispatch ticks
    await app.advanceClock(2 * DAY); // and past the next cadence
    await sleep(1000);
    for (const p of outcomes) {
      const emails = await emailsTo(api, p.email);
      expect({ patient: p.externalPatientId, emails: emails.length }).toEqual({ patient: p.externalPatientId, emails: p.emailsAt202 });
    }
  });
});
