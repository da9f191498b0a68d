import { randomUUID } from 'node:crypto';
import { TestApp } from '@svc/testing';
import { created, emailsTo, setUpTenant } from '../../apps/patient-pathway/test/e2e-helpers';

/** A cadence change applies to the check-in already scheduled (own app: this file moves the clock by days). */
describe('check-in cadence change (e2e, real HTTP)', () => {
  const app = new TestApp();
  beforeAll(() => app.start());
  afterAll(() => app.stop());

  it('moving a patient from 20 days to 2 sends the next check-in two days after enrolment, not twenty', async () => {
    const t = await setUpTenant(app);
    const email = `cadence-${randomUUID()}@example.test`;
    expect((await app.api.post('/client/patient-events', created('EXT-CADENCE', email, { checkInCadenceDays: 20 }), t.apiKey)).status).toBe(202);
    await app.advanceClock(3600);
    const update = { eventId: randomUUID(), type: 'patient.updated', externalPatientId: 'EXT-CADENCE', checkInCadenceDays: 2 };
    expect((await app.api.post('/client/patient-events', update, t.apiKey)).status).toBe(202);
    await app.advanceClock(86_400);
    await new Promise((r) => setTimeout(r, 1500));
    expect(await emailsTo(app.api, email)).toHaveLength(0); // one day in: not yet
    await app.advanceClock(86_400);
    const until = Date.now() + 8000;
    let emails = await emailsTo(app.api, email);
    while (emails.length === 0 && Date.now() < until) {
      await new Promise((r) => setTimeout(r, 100));
      emails = await emailsTo(app.api, email);
    }
    expect(emails).toHaveLength(1);
  });
});
