import { chmodSync, lstatSync, mkdirSync, readdirSync, writeFileSync } from 'node:fs';
import { AddressInfo, Socket, connect } from 'node:net';
import { networkInterfaces } from 'node:os';
import { join } from 'node:path';
import { StandaloneProcess, TestApp, tempDataDir } from '@svc/testing';

/** Every entry under `dir` (itself included, `skip` left out) whose permission bits are not the expected ones. */
function looseModes(dir: string, skip: string[] = []): string[] {
  const out: string[] = [];
  const walk = (p: string, name: string) => {
    if (skip.includes(name)) return;
    const st = lstatSync(p);
    const mode = st.mode & 0o777;
    if (st.isDirectory()) {
      if (mode !== 0o700) out.push(`${name}/ ${mode.toString(8)}`);
      for (const f of readdirSync(p)) walk(join(p, f), `${name}/${f}`);
    } else if (mode !== 0o600) out.push(`${name} ${mode.toString(8)}`);
  };
  walk(dir, '.');
  return out;
}

/** Everything under `dir` (names relative to it), files and folders. */
function entries(dir: string, prefix = ''): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => [
    `${prefix}${e.name}${e.isDirectory() ? '/' : ''}`,
    ...(e.isDirectory() ? entries(join(dir, e.name), `${prefix}${e.name}/`) : []),
  ]);
}

const wait = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * docs/decisions.md, "Deployment safety", on a started standalone service: the data dir holds only owner-only files (0600)
 * and folders (0700), including the SQLite files and their -wal/-shm, the outbox with its live
 * check-in links, the dev issuer's key pair and the master key, and an existing data dir's looser
 * modes are tightened at start; with the dev tools on and no HOST, the listener is on 127.0.0.1.
 */
describe('standalone data dir and listener (e2e)', () => {
  let umask: number;
  const dataDir = tempDataDir('svc-modes-');
  // HOST empty counts as unset: the service picks its own default (TestApp passes 127.0.0.1 otherwise).
  const app = new TestApp(dataDir, { HOST: '' });

  beforeAll(async () => {
    // A usual umask: the modes must come from the service, not from the test's environment.
    umask = process.umask(0o022);
    // A data dir left looser by an earlier version or by hand.
    chmodSync(dataDir, 0o755);
    mkdirSync(join(dataDir, 'outbox'), { mode: 0o755 });
    chmodSync(join(dataDir, 'outbox'), 0o755);
    writeFileSync(join(dataDir, 'outbox', 'old.eml'), 'From: x\r\n\r\nold link', { mode: 0o644 });
    chmodSync(join(dataDir, 'outbox', 'old.eml'), 0o644);
    writeFileSync(join(dataDir, 'events.sqlite'), '', { mode: 0o644 });
    chmodSync(join(dataDir, 'events.sqlite'), 0o644);
    // Not the service's: left as it is (a data dir set by mistake to a shared folder keeps its other content).
    writeFileSync(join(dataDir, 'notes.txt'), 'kept by an operator', { mode: 0o664 });
    chmodSync(join(dataDir, 'notes.txt'), 0o664);
    await app.start();
  });
  afterAll(async () => {
    await app.stop();
    process.umask(umask);
  });

  it('listens on 127.0.0.1 only while the dev tools are on and HOST is not set', async () => {
    const address = app.httpServer().address() as AddressInfo;
    expect(address.address).toBe('127.0.0.1');
    expect((await app.api.get('/v1/ping')).status).toBe(401); // answered: no API key
    // Through any other interface of this machine the port is closed.
    const external = Object.values(networkInterfaces())
      .flat()
      .find((i) => i && i.family === 'IPv4' && !i.internal);
    if (external) {
      const outcome = await new Promise<string>((resolve) => {
        const s = connect(address.port, external.address);
        s.once('connect', () => (s.destroy(), resolve('connected')));
        s.once('error', (err: NodeJS.ErrnoException) => resolve(err.code ?? 'error'));
      });
      expect(outcome).toBe('ECONNREFUSED');
    }
  });

  it('keeps every file 0600 and every folder 0700 once check-ins have gone out', async () => {
    const t = await app.tenant();
    const patient = await app.enrolledPatient(t);
    await app.advanceClock(30 * 86_400);
    let emails: unknown[] = [];
    for (let i = 0; i < 200 && emails.length === 0; i++) {
      emails = (await app.api.get(`/dev/outbox?to=${encodeURIComponent(patient.email)}`)).body.emails;
      if (emails.length === 0) await wait(50);
    }
    expect(emails).toHaveLength(1);
    const names = entries(dataDir);
    // What the service wrote is there (so the check below covers it).
    for (const expected of [
      'events.sqlite',
      'events.sqlite-wal',
      'events.sqlite-shm',
      'read-models.sqlite',
      'master.key',
      'dev-idp.json',
      'clock.json',
      'outbox/',
    ])
      expect(names).toContain(expected);
    expect(names.filter((n) => n.startsWith('outbox/') && n.endsWith('.eml')).length).toBeGreaterThanOrEqual(2);
    expect(looseModes(dataDir, ['./notes.txt'])).toEqual([]);
    expect(lstatSync(join(dataDir, 'notes.txt')).mode & 0o777).toBe(0o664);
  });

  it('keeps the modes across a restart on the same data dir', async () => {
    await app.restart();
    expect(looseModes(dataDir, ['./notes.txt'])).toEqual([]);
  });
});

/** docs/decisions.md, "Deployment safety" / README: `SVC_MAX_CONNECTIONS` caps the listener's open connections. */
describe('connection cap (e2e)', () => {
  const app = new TestApp(undefined, { SVC_MAX_CONNECTIONS: '3' });
  const sockets: Socket[] = [];
  beforeAll(() => app.start());
  afterAll(async () => {
    for (const s of sockets) s.destroy();
    await app.stop();
  });

  /** A raw connection; resolves once connected, records whether the server closed it. */
  const open = (port: number) =>
    new Promise<Socket & { closedByServer?: boolean }>((resolve, reject) => {
      const s: Socket & { closedByServer?: boolean } = connect(port, '127.0.0.1');
      sockets.push(s);
      s.on('error', () => undefined);
      s.on('close', () => (s.closedByServer = true));
      s.once('connect', () => resolve(s));
      s.once('error', reject);
    });

  it('applies SVC_MAX_CONNECTIONS to the server, and drops connections past it', async () => {
    const server = app.httpServer();
    expect(server.maxConnections).toBe(3);
    const { port } = server.address() as AddressInfo;
    const held = [await open(port), await open(port), await open(port)];
    await wait(100);
    const fourth = await open(port);
    for (let i = 0; i < 40 && !fourth.closedByServer; i++) await wait(25);
    expect(fourth.closedByServer).toBe(true);
    expect(held.map((s) => s.closedByServer ?? false)).toEqual([false, false, false]);
    // One let go: a new connection is served again.
    held[0].destroy();
    await wait(100);
    const fifth = await open(port);
    const answer = await new Promise<string>((resolve) => {
      let text = '';
      fifth.on('data', (d: Buffer) => {
        text += d.toString();
        if (text.includes('\r\n\r\n')) resolve(text.split('\r\n')[0]);
      });
      fifth.write('GET /api/v1/ping HTTP/1.1\r\nHost: x\r\n\r\n');
    });
    expect(answer).toBe('HTTP/1.1 401 Unauthorized');
  });

  it('defaults to a cap without any setting', async () => {
    const other = new TestApp();
    await other.start();
    try {
      expect(other.httpServer().maxConnections).toBe(4096);
    } finally {
      await other.stop();
    }
  });
});

/** The same rules through the real entry point (`node dist/apps/standalone/main.js`, umask 077 at start). */
describe('the built standalone process (e2e)', () => {
  let umask: number;
  // HOST empty counts as unset (StandaloneProcess passes 127.0.0.1 otherwise).
  const proc = new StandaloneProcess(undefined, { HOST: '' });
  beforeAll(async () => {
    umask = process.umask(0o022); // inherited by the child: the service must not rely on it
    await proc.start();
  });
  afterAll(async () => {
    await proc.kill9();
    process.umask(umask);
  });

  it('listens on 127.0.0.1 only and keeps its data dir owner-only', async () => {
    expect((await proc.api.get('/v1/ping')).status).toBe(401);
    const port = Number(new URL(proc.baseUrl).port);
    const external = Object.values(networkInterfaces())
      .flat()
      .find((i) => i && i.family === 'IPv4' && !i.internal);
    if (external) {
      const outcome = await new Promise<string>((resolve) => {
        const s = connect(port, external.address);
        s.once('connect', () => (s.destroy(), resolve('connected')));
        s.once('error', (err: NodeJS.ErrnoException) => resolve(err.code ?? 'error'));
      });
      expect(outcome).toBe('ECONNREFUSED');
    }
    const names = entries(proc.dataDir);
    for (const expected of ['events.sqlite', 'read-models.sqlite', 'master.key', 'dev-idp.json']) expect(names).toContain(expected);
    expect(looseModes(proc.dataDir)).toEqual([]);
  });
});
