import { randomUUID } from 'node:crypto';
import { MAILER, Mailer } from '@svc/platform';
import { inProcess, TestApp } from '@svc/testing';
import { created, emailsTo, setUpTenant, sleep, waitForEmails } from '../../apps/patient-pathway/test/e2e-helpers';

/** Finding 2: the patient's email about a provider message is a durable follow-up, never lost. */
describe('provider message email (e2e, real HTTP)', () => {
  const app = new TestApp();
  beforeAll(() => app.start());
  afterAll(() => app.stop());

  const mailerOf = () => (app as unknown as { app: { get(token: unknown): Mailer } }).app.get(MAILER);

  async function enrolledCase(prefix: string) {
    const t = await setUpTenant(app, `notify-${randomUUID().slice(0, 8)}`);
    const email = `${prefix}-${randomUUID()}@example.test`;
    const r = await app.api.post('/client/patient-events', created(`EXT-${randomUUID()}`, email, { checkInCadenceDays: 7 }), t.apiKey);
    expect(r.status).toBe(202);
    const c = await app.api.post(`${t.env}/clinical-cases`, { patientId: r.body.patientId, request: 'Please send the lab results' }, t.staff);
    expect(c.status).toBe(201);
    return { t, email, caseId: c.body.caseId as string };
  }

  it('emails the enrolled patient once, with a widget link and without the message body', async () => {
    const { t, email, caseId } = await enrolledCase('notify');
    const body = { messageId: randomUUID(), message: 'Your potassium level is 5.9; stop the supplement.', externalReference: 'msg-1' };
    const r = await app.api.post(`/v1/clinical-cases/${caseId}/messages`, body, t.apiKey);
    expect(r.status).toBe(200);
    expect((await app.api.post(`/v1/clinical-cases/${caseId}/messages`, body, t.apiKey)).body.duplicate).toBe(true);
    const emails = await waitForEmails(app.api, email, 1);
    expect(emails).toHaveLength(1);
    const [mail] = emails;
    expect(mail.text).toContain(`/cases/${caseId}`);
    expect(mail.html).toContain(`/cases/${caseId}`);
    for (const part of [mail.subject, mail.text, mail.html]) {
      expect(part).not.toContain('potassium');
      expect(part).not.toContain('supplement');
    }
    await sleep(1200); // the timer is gone: no second email
    expect(await emailsTo(app.api, email)).toHaveLength(1);
  });

  inProcess('replaces the mailer inside the process')('a mailer failure is retried: the email still goes out (the 200 was answered before)', async () => {
    const { t, email, caseId } = await enrolledCase('retry');
    const mailer = mailerOf();
    const original = mailer.send.bind(mailer);
    let failures = 0;
    mailer.send = async (...args: Parameters<Mailer['send']>) => {
      if (args[0].to === email && failures < 2) {
        failures++;
        throw Object.assign(new Error('smtp down'), { name: 'MailerDown' });
      }
      return original(...args);
    };
    try {
      const r = await app.api.post(
        `/v1/clinical-cases/${caseId}/messages`,
        { messageId: randomUUID(), message: 'Please call us back', externalReference: 'msg-2' },
        t.apiKey,
      );
      expect(r.status).toBe(200);
      const emails = await waitForEmails(app.api, email, 1, 10_000);
      expect(failures).toBe(2);
      expect(emails).toHaveLength(1);
      expect(emails[0].text).not.toContain('call us back');
    } finally {
      mailer.send = original;
    }
  });
});
