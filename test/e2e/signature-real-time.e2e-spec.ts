import { ChildProcess, spawn } from 'node:child_process';
import { createHmac, timingSafeEqual } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { IncomingHttpHeaders, Server, createServer } from 'node:http';
import { join } from 'node:path';
import { TestApp, freePort, tempDataDir } from '@svc/testing';
import { verifyWebhook } from '@svc/security';

/**
 * `x-svc-timestamp` is the real Unix time of the attempt, not the service clock (decisions: signature
 * timestamps): after `POST /dev/clock` has moved the service clock by days, a webhook delivery and a
 * Destination call still carry a timestamp within a few seconds of real time, and both verify with
 * the receivers' usual 300 s tolerance against the receivers' own clock.
 */

interface Arrival {
  method: string;
  url: string;
  headers: IncomingHttpHeaders;
  raw: Buffer;
  /** Real time (Unix seconds) when the request arrived. */
  arrivedS: number;
}

/** One loopback server standing for the caller: a webhook receiver on /hooks/*, an order system elsewhere. */
class Caller {
  server!: Server;
  baseUrl = '';
  arrivals: Arrival[] = [];

  async start(): Promise<void> {
    this.server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        this.arrivals.push({ method: req.method!, url: req.url!, headers: req.headers, raw: Buffer.concat(chunks), arrivedS: Math.floor(Date.now() / 1000) });
        const body = req.url!.startsWith('/hooks/') ? '{"ok":true}' : JSON.stringify({ orders: [] });
        res.writeHead(200, { 'content-type': 'application/json' }).end(body);
      });
    });
    await new Promise<void>((r) => this.server.listen(0, '127.0.0.1', () => r()));
    this.baseUrl = `http://127.0.0.1:${(this.server.address() as { port: number }).port}`;
  }

  async waitFor(match: (a: Arrival) => boolean, timeoutMs = 15_000): Promise<Arrival> {
    const end = Date.now() + timeoutMs;
    for (;;) {
      const found = this.arrivals.find(match);
      if (found) return found;
      if (Date.now() > end)
        throw new Error(`no matching request after ${timeoutMs} ms (got ${this.arrivals.map((a) => `${a.method} ${a.url}`).join(', ') || 'none'})`);
      await new Promise((r) => setTimeout(r, 25));
    }
  }

  stop(): Promise<void> {
    this.server.closeAllConnections();
    return new Promise((r) => this.server.close(() => r()));
  }
}

/** A Destination's check (spec, order_lookup.requested): HMAC of `<ts>.<METHOD> <path and query>\n<raw body>`, 5 minutes, against its own clock. */
function destinationCallVerifies(a: Arrival, secret: string, toleranceS = 300): boolean {
  const ts = String(a.headers['x-svc-timestamp'] ?? '');
  const sig = String(a.headers['x-svc-signature'] ?? '');
  if (!/^[0-9]+$/.test(ts) || !/^v1=[a-f0-9]{64}$/.test(sig)) return false;
  const expected = createHmac('sha256', secret).update(`${ts}.${a.method} ${a.url}\n`).update(a.raw).digest();
  if (!timingSafeEqual(expected, Buffer.from(sig.slice(3), 'hex'))) return false;
  return Math.abs(Math.floor(Date.now() / 1000) - Number(ts)) <= toleranceS;
}

async function waitForOutput<T>(found: () => T | undefined, timeoutMs = 15_000): Promise<T> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const v = found();
    if (v !== undefined) return v;
    if (Date.now() > end) throw new Error('the receiver did not print what was expected in time');
    await new Promise((r) => setTimeout(r, 25));
  }
}

describe('signature timestamps are real time (e2e, real HTTP)', () => {
  const app = new TestApp();
  const caller = new Caller();
  const DAYS = 3;

  beforeAll(async () => {
    await caller.start();
    await app.start();
    // The service clock moves days ahead of real time, as a sandbox user does with the dev tools.
    const before = Date.now();
    const moved = await app.advanceClock(DAYS * 86_400);
    expect(Date.parse(moved) - before).toBeGreaterThanOrEqual(DAYS * 86_400_000);
  });
  afterAll(async () => {
    await app.stop();
    await caller.stop();
  });

  it('a delivered webhook carries the real time of its attempt and verifies with the default 300 s tolerance', async () => {
    const t = await app.tenant();
    const ep = await app.api.post(`${t.env}/webhook-endpoints`, { url: `${caller.baseUrl}/hooks/cases`, events: ['clinical_case.opened'] }, t.staff);
    expect(ep.status).toBe(201);
    const { patientId } = await app.enrolledPatient(t);
    const opened = await app.api.post(`${t.env}/clinical-cases`, { patientId, request: 'Patient reports dizziness' }, t.staff);
    expect(opened.status).toBe(201);

    const got = await caller.waitFor((a) => a.url === '/hooks/cases');
    const ts = Number(got.headers['x-svc-timestamp']);
    // Within a few seconds of the real time it arrived at (not days ahead with the service clock).
    expect(Math.abs(ts - got.arrivedS)).toBeLessThanOrEqual(5);
    // The receiver's usual check: no `now` given (its own clock), default tolerance (300 s).
    const event = await verifyWebhook<{ caseId: string }>({
      rawBody: got.raw,
      headers: got.headers as Record<string, string>,
      secret: ep.body.secret,
      seen: null,
    });
    expect(event).toMatchObject({ type: 'clinical_case.opened', data: { caseId: opened.body.caseId } });
    // The envelope's createdAt stays on the service clock (days ahead): only the signing timestamp is real time.
    expect(Date.parse(event.createdAt) / 1000 - got.arrivedS).toBeGreaterThan(DAYS * 86_400 - 60);
  });

  it('a Destination call of a workflow test run carries the real time, verifies, and the test step shows that timestamp', async () => {
    const t = await app.tenant();
    const rotated = await app.api.post(`${t.env}/secrets/rotate`, { kind: 'widget_signing' }, t.staff);
    expect(rotated.status).toBe(201);
    const dest = await app.api.post(
      `${t.env}/destinations`,
      { stableKey: 'order_system', name: 'Orders', baseUrl: `${caller.baseUrl}/api`, headers: {}, timeoutMs: 3000 },
      t.staff,
    );
    expect(dest.status).toBe(201);
    const P = `${t.env}/conversation-workflows`;
    const wf = await app.api.post(`${P}/from-template`, { templateKey: 'order_status_tracking' }, t.staff);
    expect(wf.status).toBe(201);
    const tested = await app.api.post(
      `${P}/versions/${wf.body.draftVersionId}/test`,
      { expectedRevision: 1, opening: 'where is my order', replies: [], patientEmail: 'pat@example.test', patientId: 'ext-real-time-1' },
      t.staff,
    );
    expect(tested.status).toBe(201);

    const got = await caller.waitFor((a) => a.url.startsWith('/api/'));
    const ts = Number(got.headers['x-svc-timestamp']);
    expect(Math.abs(ts - got.arrivedS)).toBeLessThanOrEqual(5);
    expect(destinationCallVerifies(got, rotated.body.secret)).toBe(true);
    expect(tested.body.passed).toBe(true);
    const step = tested.body.steps.find((s: { type: string }) => s.type === 'call_api');
    expect(step.request.headers['x-svc-timestamp']).toBe(String(ts));
  });

  it("the README's copy-paste receiver prints its address, says why it rejects a request, and takes a delivery after the clock moved", async () => {
    const readme = readFileSync(join(__dirname, '../../README.md'), 'utf8');
    const code = /```js\n([\s\S]*?)```/.exec(readme.slice(readme.indexOf('## Receiving webhooks')))?.[1];
    expect(code).toContain('createServer');
    const file = join(tempDataDir('readme-receiver-'), 'receiver.js');
    writeFileSync(file, code!);
    // The endpoint first (its secret is the receiver's), on the port the receiver is then started on.
    const t = await app.tenant();
    const port = await freePort();
    const ep = await app.api.post(`${t.env}/webhook-endpoints`, { url: `http://127.0.0.1:${port}/`, events: ['clinical_case.opened'] }, t.staff);
    expect(ep.status).toBe(201);
    const secret = ep.body.secret as string;
    let output = '';
    const child: ChildProcess = spawn(process.execPath, [file], {
      env: { PATH: process.env.PATH ?? '', WEBHOOK_SECRET: secret, PORT: String(port) },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    child.stdout!.on('data', (c: Buffer) => (output += c.toString('utf8')));
    child.stderr!.on('data', (c: Buffer) => (output += c.toString('utf8')));
    const lines = (prefix: string) => output.split('\n').filter((l) => l.startsWith(prefix));
    try {
      expect(await waitForOutput(() => /listening on (\S+)/.exec(output)?.[1])).toBe(`http://127.0.0.1:${port}/`);

      // Why a request is refused, one line each: missing headers, an unparseable timestamp, a bad signature, a stale timestamp.
      const body = '{"id":"e-1","type":"clinical_case.opened","createdAt":"2026-01-01T00:00:00.000Z","data":{}}';
      const nowS = Math.floor(Date.now() / 1000);
      const sign = (ts: number | string, key = secret) => `v1=${createHmac('sha256', key).update(`${ts}.${body}`).digest('hex')}`;
      const send = (headers: Record<string, string>) =>
        fetch(`http://127.0.0.1:${port}/`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body });
      const ahead = nowS + DAYS * 86_400; // what a signature on the moved service clock carried
      expect((await send({})).status).toBe(400);
      expect((await send({ 'x-svc-event-id': 'e-1', 'x-svc-timestamp': 'yesterday', 'x-svc-signature': sign(nowS) })).status).toBe(400);
      expect((await send({ 'x-svc-event-id': 'e-1', 'x-svc-timestamp': String(nowS), 'x-svc-signature': sign(nowS, 'whsec_another') })).status).toBe(400);
      expect((await send({ 'x-svc-event-id': 'e-1', 'x-svc-timestamp': String(ahead), 'x-svc-signature': sign(ahead) })).status).toBe(400);
      await waitForOutput(() => (lines('rejected ').length >= 4 ? true : undefined));
      expect(lines('rejected ')).toEqual([
        expect.stringMatching(/missing header/),
        expect.stringMatching(/unparseable x-svc-timestamp/),
        expect.stringMatching(/bad signature/),
        expect.stringMatching(/stale timestamp: -2592\d\d s/),
      ]);

      // A real delivery from the service, its dev clock days ahead of real time: accepted.
      const { patientId } = await app.enrolledPatient(t);
      const opened = await app.api.post(`${t.env}/clinical-cases`, { patientId, request: 'Patient reports dizziness' }, t.staff);
      expect(opened.status).toBe(201);
      await waitForOutput(() => (lines('received clinical_case.opened ').length === 1 ? true : undefined));
      expect(lines('rejected ')).toHaveLength(4);
    } finally {
      child.kill();
    }
  });
});
