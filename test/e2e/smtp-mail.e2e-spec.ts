import { AddressInfo } from 'node:net';
import { SMTPServer } from 'smtp-server';
import { TestApp } from '@svc/testing';

interface Received {
  from: string;
  to: string[];
  raw: string;
}

/**
 * Issue 3: with MAIL=smtp the check-in email goes out over real SMTP (nodemailer to a local SMTP
 * server): to the patient, with the single-use link, and without clinical content.
 */
describe('check-in email over SMTP (e2e)', () => {
  const received: Received[] = [];
  const smtp = new SMTPServer({
    authOptional: true,
    disabledCommands: ['STARTTLS', 'AUTH'],
    logger: false,
    onData(stream, session, callback) {
      const chunks: Buffer[] = [];
      stream.on('data', (c: Buffer) => chunks.push(c));
      stream.on('end', () => {
        received.push({
          from: session.envelope.mailFrom ? session.envelope.mailFrom.address : '',
          to: session.envelope.rcptTo.map((r) => r.address),
          raw: Buffer.concat(chunks).toString('utf8'),
        });
        callback();
      });
    },
  });
  let app: TestApp;

  beforeAll(async () => {
    await new Promise<void>((r) => smtp.listen(0, '127.0.0.1', () => r()));
    const port = (smtp.server.address() as AddressInfo).port;
    app = new TestApp(undefined, { MAIL: 'smtp', SMTP_URL: `smtp://127.0.0.1:${port}`, MAIL_FROM: 'Care Team <care@example.test>' });
    await app.start();
  });
  afterAll(async () => {
    await app.stop();
    await new Promise<void>((r) => smtp.close(() => r()));
  });

  it('delivers the due check-in to the patient through the SMTP server', async () => {
    const t = await app.tenant();
    const patient = await app.enrolledPatient(t);
    expect(received).toHaveLength(0);
    await app.advanceClock(30 * 86_400);
    const until = Date.now() + 10_000;
    while (received.length === 0 && Date.now() < until) await new Promise((r) => setTimeout(r, 50));
    expect(received).toHaveLength(1);
    const [mail] = received;
    expect(mail.to).toEqual([patient.email]);
    expect(mail.from).toBe('care@example.test');
    const body = mail.raw.replace(/=\r?\n/g, '');
    expect(body).toMatch(/\/check-ins\/[0-9a-f-]{36}\?token=/);
    // No clinical content: not the protocol's questions, not the patient's name or external ID.
    expect(body).not.toContain('How bad is your pain');
    expect(body).not.toContain('Canary-First');
    expect(body).not.toContain(patient.externalPatientId);
    // The dev outbox is not used in SMTP mode.
    expect((await app.api.get(`/dev/outbox?to=${encodeURIComponent(patient.email)}`)).body.emails).toEqual([]);
  });
});
