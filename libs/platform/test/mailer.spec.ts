import { mkdirSync, mkdtempSync, readdirSync, rmSync, statSync } from 'node:fs';
import { AddressInfo, Server, Socket, createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SMTPServer } from 'smtp-server';
import { OutboxMailer, SMTP_TIMEOUT_MS, SmtpMailer, smtpTlsProblem } from '../src/mailer';

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
    expect(options).toMatchObject({
      host: '127.0.0.1',
      port,
      auth: { user: 'user', pass: 'pass' },
      connectionTimeout: SMTP_TIMEOUT_MS,
      greetingTimeout: SMTP_TIMEOUT_MS,
      socketTimeout: SMTP_TIMEOUT_MS,
    });
  });
});

/**
 * docs/decisions.md, "Deployment safety": in production mode mail goes over TLS. The rule (`smtpTlsProblem`) is what start-up
 * checks; the mailer applies it too, and these tests hold it to a real SMTP server (smtp-server,
 * with and without STARTTLS): a message is never handed over in plain text.
 */
describe('SmtpMailer and TLS', () => {
  interface Received {
    secure: boolean;
    to: string[];
  }
  const received: Received[] = [];
  const email = { id: 'tls-1', to: 'p@example.test', subject: 's', text: 't', html: '<p>t</p>' };
  const server = (starttls: boolean) =>
    new SMTPServer({
      authOptional: true,
      disabledCommands: starttls ? ['AUTH'] : ['STARTTLS', 'AUTH'],
      logger: false,
      onData(stream, session, callback) {
        stream.resume();
        stream.on('end', () => {
          received.push({ secure: session.secure, to: session.envelope.rcptTo.map((r) => r.address) });
          callback();
        });
      },
    });
  const plain = server(false);
  const tls = server(true);
  let plainPort: number;
  let tlsPort: number;
  beforeAll(async () => {
    await new Promise<void>((r) => plain.listen(0, '127.0.0.1', () => r()));
    await new Promise<void>((r) => tls.listen(0, '127.0.0.1', () => r()));
    plainPort = (plain.server.address() as AddressInfo).port;
    tlsPort = (tls.server.address() as AddressInfo).port;
  });
  afterAll(async () => {
    await new Promise<void>((r) => plain.close(() => r()));
    await new Promise<void>((r) => tls.close(() => r()));
  });
  beforeEach(() => (received.length = 0));

  it('names what is wrong with a URL that would send in plain text', () => {
    expect(smtpTlsProblem('smtp://mail.example.com:587')).toMatch(/requireTLS=true/);
    expect(smtpTlsProblem('smtp://mail.example.com:587?requireTLS=true&ignoreTLS=true')).toMatch(/ignoreTLS/);
    expect(smtpTlsProblem('direct://')).toMatch(/smtps:\/\/ or smtp:\/\//);
    expect(smtpTlsProblem('smtps://mail.example.com')).toBeNull();
    expect(smtpTlsProblem('smtp://mail.example.com:587?requireTLS=true')).toBeNull();
  });

  it('with TLS required, refuses a URL that would send in plain text when it is built', () => {
    expect(() => new SmtpMailer(`smtp://127.0.0.1:${plainPort}`, 'svc@example.test', { requireTls: true })).toThrow(/SMTP_URL must use TLS/);
    expect(() => new SmtpMailer(`smtp://127.0.0.1:${plainPort}`, 'svc@example.test')).not.toThrow();
  });

  it('with STARTTLS required, sends nothing to a server that does not offer it', async () => {
    const mailer = new SmtpMailer(`smtp://127.0.0.1:${plainPort}?requireTLS=true`, 'svc@example.test', { requireTls: true });
    await expect(mailer.send(email, new Date())).rejects.toThrow();
    expect(received).toEqual([]);
  });

  it("verifies the server certificate by default (smtp-server's own test certificate is refused), and sends over TLS once it is trusted", async () => {
    await expect(
      new SmtpMailer(`smtp://127.0.0.1:${tlsPort}?requireTLS=true`, 'svc@example.test', { requireTls: true }).send(email, new Date()),
    ).rejects.toThrow(/certificate/i);
    expect(received).toEqual([]);
    // A relay with a certificate of its own (a test catcher): trusted explicitly in the URL.
    await new SmtpMailer(`smtp://127.0.0.1:${tlsPort}?requireTLS=true&tls.rejectUnauthorized=false`, 'svc@example.test', { requireTls: true }).send(
      email,
      new Date(),
    );
    expect(received).toEqual([{ secure: true, to: ['p@example.test'] }]);
  });
});

/** docs/decisions.md, "Deployment safety": the outbox holds live check-in links: its folder is 0700 and its files 0600, whatever the umask. */
describe('OutboxMailer file modes', () => {
  let dir: string;
  let umask: number;
  beforeAll(() => {
    umask = process.umask(0o022);
    dir = mkdtempSync(join(tmpdir(), 'outbox-modes-'));
  });
  afterAll(() => {
    process.umask(umask);
    rmSync(dir, { recursive: true, force: true });
  });
  const mode = (p: string) => statSync(p).mode & 0o777;

  it('creates its folder 0700 and every file 0600', async () => {
    const outbox = join(dir, 'new', 'outbox');
    const mailer = new OutboxMailer(outbox, 'svc@example.test');
    await mailer.send({ id: 'm-1', to: 'p@example.test', subject: 's', text: 'https://x.example/check-ins/1?token=t', html: '<p>t</p>' }, new Date());
    expect(mode(outbox)).toBe(0o700);
    expect(readdirSync(outbox).sort()).toEqual(['m-1.eml', 'm-1.json']);
    for (const f of readdirSync(outbox)) expect([f, mode(join(outbox, f)).toString(8)]).toEqual([f, '600']);
  });

  it('tightens an outbox folder created looser', () => {
    const outbox = join(dir, 'loose');
    mkdirSync(outbox, { mode: 0o755 });
    new OutboxMailer(outbox, 'svc@example.test');
    expect(mode(outbox)).toBe(0o700);
  });
});
