import { Server, Socket, createServer } from 'node:net';
import { SMTP_TIMEOUT_MS, SmtpMailer } from '../src/mailer';

/** A mail server that takes the connection and never says a word (a stalled SMTP server). */
describe('SmtpMailer against a stalled server', () => {
  let server: Server;
  let port: number;
  const sockets = new Set<Socket>();
  beforeAll(async () => {
    server = createServer((s) => {
      sockets.add(s);
      s.on('close', () => sockets.delete(s));
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
    port = (server.address() as { port: number }).port;
  });
  afterAll(async () => {
    for (const s of sockets) s.destroy();
    await new Promise<void>((r) => server.close(() => r()));
  });

  const email = { id: 'e1', to: 'p@example.test', subject: 's', text: 't', html: '<p>t</p>' };

  it('gives up instead of waiting for ever (a check-in email is sent in its patient turn)', async () => {
    // The URL's own setting wins over the service's default; a short one keeps the test quick.
    const mailer = new SmtpMailer(`smtp://127.0.0.1:${port}/?greetingTimeout=300`, 'svc@example.test');
    await expect(mailer.send(email, new Date())).rejects.toMatchObject({ code: 'ETIMEDOUT' });
  });

  it('bounds every step by default (connect, greeting, socket)', () => {
    const mailer = new SmtpMailer(`smtp://user:pass@127.0.0.1:${port}`, 'svc@example.test');
    const options = (mailer as unknown as { transport: { options: Record<string, unknown> } }).transport.options;
    expect(options).toMatchObject({ host: '127.0.0.1', port, auth: { user: 'user', pass: 'pass' }, connectionTimeout: SMTP_TIMEOUT_MS, greetingTimeout: SMTP_TIMEOUT_MS, socketTimeout: SMTP_TIMEOUT_MS });
  });
});
