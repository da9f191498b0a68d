import { randomBytes } from 'node:crypto';
import { AddressInfo } from 'node:net';
import { SMTPServer } from 'smtp-server';
import { OidcIssuer, TestApp } from '@svc/testing';

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

/**
 * docs/decisions.md, "Deployment safety": in production mode the check-in email goes out over TLS only (STARTTLS required),
 * with an https link; a plain SMTP_URL stops start-up.
 */
describe('check-in email over SMTP in production mode (e2e)', () => {
  const received: (Received & { secure: boolean })[] = [];
  // STARTTLS on offer, with smtp-server's own test certificate (trusted through the URL below).
  const smtp = new SMTPServer({
    authOptional: true,
    disabledCommands: ['AUTH'],
    logger: false,
    onData(stream, session, callback) {
      const chunks: Buffer[] = [];
      stream.on('data', (c: Buffer) => chunks.push(c));
      stream.on('end', () => {
        received.push({
          secure: session.secure,
          from: session.envelope.mailFrom ? session.envelope.mailFrom.address : '',
          to: session.envelope.rcptTo.map((r) => r.address),
          raw: Buffer.concat(chunks).toString('utf8'),
        });
        callback();
      });
    },
  });
  const oidc = new OidcIssuer();
  let port: number;
  const production = (smtpUrl: string) => ({
    NODE_ENV: 'production',
    SVC_MASTER_KEY: randomBytes(32).toString('base64'),
    WIDGET_BASE_URL: 'https://care.example.test/api',
    MAIL: 'smtp',
    SMTP_URL: smtpUrl,
    MAIL_FROM: 'Care Team <care@example.test>',
  });

  beforeAll(async () => {
    await oidc.start();
    await new Promise<void>((r) => smtp.listen(0, '127.0.0.1', () => r()));
    port = (smtp.server.address() as AddressInfo).port;
  });
  afterAll(async () => {
    await oidc.stop();
    await new Promise<void>((r) => smtp.close(() => r()));
  });

  it('refuses to start with an SMTP_URL that does not require TLS', async () => {
    const app = new TestApp(undefined, production(`smtp://127.0.0.1:${port}`), oidc);
    const outcome = await app.start().then(
      () => null,
      (err: Error) => err.message,
    );
    if (outcome === null) await app.stop();
    expect(outcome).toMatch(/SMTP_URL must use TLS in production mode/);
  });

  it('sends the check-in over STARTTLS, its link https', async () => {
    const app = new TestApp(undefined, production(`smtp://127.0.0.1:${port}?requireTLS=true&tls.rejectUnauthorized=false`), oidc);
    await app.start();
    try {
      const t = await app.tenant();
      const patient = await app.enrolledPatient(t);
      const sent = await app.api.post(`${t.env}/patients/${patient.patientId}/check-ins`, undefined, t.staff);
      expect(sent.status).toBe(201);
      const until = Date.now() + 10_000;
      while (received.length === 0 && Date.now() < until) await new Promise((r) => setTimeout(r, 50));
      expect(received).toHaveLength(1);
      expect(received[0]).toMatchObject({ secure: true, to: [patient.email] });
      expect(received[0].raw.replace(/=\r?\n/g, '')).toMatch(/https:\/\/care\.example\.test\/api\/check-ins\/[0-9a-f-]{36}\?token=/);
    } finally {
      await app.stop();
    }
  });
});
