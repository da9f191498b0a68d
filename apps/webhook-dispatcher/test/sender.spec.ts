import { createServer, Server } from 'node:http';
import { AddressInfo, LookupFunction } from 'node:net';
import { LookupAddress } from 'node:dns';
import { verifyWebhook } from '../../../libs/security/src/webhooks';
import { guardedLookup, isBlockedAddress } from '@svc/security';
import { DELIVERY_TIMEOUT_MS, MAX_SOCKETS_PER_ORIGIN, sendWebhook } from '../src/adapters/outbound/send-webhook';
import { ATTEMPT_LEASE_MS } from '../src/domain/delivery';
import { RecordingServer } from './receiver';

type Resolver = (hostname: string, options: { all: true }, cb: (err: NodeJS.ErrnoException | null, addresses: LookupAddress[]) => void) => void;

/** A DNS answer that changes between calls (rebinding): public first, then loopback. */
function rebinding(...answers: LookupAddress[][]): Resolver & { calls: number } {
  const r = ((_h: string, _o: unknown, cb: (err: NodeJS.ErrnoException | null, a: LookupAddress[]) => void) => {
    const a = answers[Math.min(r.calls, answers.length - 1)];
    r.calls++;
    setImmediate(() => cb(null, a));
  }) as Resolver & { calls: number };
  r.calls = 0;
  return r;
}

const call = (lookup: LookupFunction, host: string, all: boolean) =>
  new Promise<{ err: NodeJS.ErrnoException | null; result: unknown }>((resolve) =>
    (lookup as (h: string, o: object, cb: (...a: unknown[]) => void) => void)(host, { all }, (err: unknown, address: unknown, family: unknown) =>
      resolve({ err: err as NodeJS.ErrnoException | null, result: all ? address : { address, family } }),
    ),
  );

describe('webhook address guard', () => {
  it('blocks NAT64 (64:ff9b::/96), 6to4 (2002::/16) and IPv4-mapped addresses in either notation', () => {
    for (const a of ['64:ff9b::a00:1', '64:ff9b::7f00:1', '2002:7f00:1::1', '2002::1', '::ffff:7f00:1', '::ffff:a00:1', '::ffff:127.0.0.1'])
      expect([a, isBlockedAddress(a)]).toEqual([a, true]);
    for (const a of ['::ffff:5db8:d822', '2003::1']) expect([a, isBlockedAddress(a)]).toEqual([a, false]);
    // Next to NAT64 but outside global unicast space (2000::/3): no public receiver lives there either.
    expect(isBlockedAddress('64:ff9c::1')).toBe(true);
  });

  it('checks the addresses at connect time, in both lookup shapes (all: true for happy eyeballs, all: false)', async () => {
    const dns = rebinding(
      [{ address: '93.184.216.34', family: 4 }],
      [{ address: '127.0.0.1', family: 4 }],
      [
        { address: '93.184.216.34', family: 4 },
        { address: '::1', family: 6 },
      ],
    );
    const lookup = guardedLookup(dns);
    expect(await call(lookup, 'rebind.test', false)).toEqual({ err: null, result: { address: '93.184.216.34', family: 4 } });
    const second = await call(lookup, 'rebind.test', true); // the answer changed: refused
    expect(second.err?.code).toBe('ESVCBLOCKED');
    const third = await call(lookup, 'rebind.test', true); // any blocked address among several: refused
    expect(third.err?.code).toBe('ESVCBLOCKED');
    const ok = await call(
      guardedLookup(
        rebinding([
          { address: '93.184.216.34', family: 4 },
          { address: '2606:4700::1111', family: 6 },
        ]),
      ),
      'x.test',
      true,
    );
    expect(ok).toEqual({
      err: null,
      result: [
        { address: '93.184.216.34', family: 4 },
        { address: '2606:4700::1111', family: 6 },
      ],
    });
  });
});

describe('sendWebhook', () => {
  const receiver = new RecordingServer();
  const got = receiver.got;
  let port: number;
  beforeAll(async () => {
    await receiver.start();
    port = receiver.port;
  });
  afterAll(() => receiver.stop());
  beforeEach(() => (got.length = 0));

  const input = (url: string, production: boolean) => ({
    url,
    payload: '{"id":"e1","type":"t","createdAt":"2026-01-01T00:00:00.000Z","data":{"x":"é"}}',
    secret: 's',
    eventId: 'e1',
    eventType: 't',
    at: new Date(),
    signedAt: new Date(),
    production,
  });

  it('sends the exact signed bytes and headers', async () => {
    // The service clock (a dev clock moved 3 days ahead) stamps the attempt's record; the signature
    // carries the real time it was given (signedAt), which receivers compare with their own clocks.
    const signedAt = new Date(Date.UTC(2026, 0, 2, 3, 4, 5, 678));
    const i = { ...input(`http://127.0.0.1:${port}/hook`, false), at: new Date(Date.now() + 3 * 86_400_000), signedAt };
    const r = await sendWebhook(i);
    expect(r.attempt).toMatchObject({ statusCode: 200, error: null, at: i.at.toISOString() });
    expect(got[0]?.headers['x-svc-timestamp']).toBe(String(Math.floor(signedAt.getTime() / 1000)));
    expect(got).toHaveLength(1);
    expect(got[0].body.toString('utf8')).toBe(i.payload);
    expect(got[0].headers['content-length']).toBe(String(Buffer.byteLength(i.payload)));
    expect(got[0].headers).toMatchObject({ 'content-type': 'application/json', 'x-svc-event-id': 'e1', 'idempotency-key': 'e1', 'x-svc-event-type': 't' });
    await verifyWebhook({ rawBody: got[0].body, headers: got[0].headers as Record<string, string>, secret: 's', now: signedAt, seen: null });
  });

  it('production: a host name that resolves to a blocked address at connect time is refused and nothing is sent', async () => {
    const dns = rebinding([{ address: '127.0.0.1', family: 4 }]);
    const r = await sendWebhook({ ...input(`http://rebind.test:${port}/hook`, true), resolve: dns });
    expect(r.attempt).toMatchObject({ statusCode: null, error: 'address_refused' });
    expect(dns.calls).toBeGreaterThan(0);
    expect(got).toHaveLength(0);
    expect((await sendWebhook(input(`http://127.0.0.1:${port}/hook`, true))).attempt.error).toBe('address_refused');
    expect((await sendWebhook(input(`http://[::ffff:127.0.0.1]:${port}/hook`, true))).attempt.error).toBe('address_refused');
    expect(got).toHaveLength(0);
  });

  it('times out a receiver that does not answer, records a 429 (its Retry-After is not a result), does not follow redirects', async () => {
    receiver.answer = () => undefined; // never answers
    const slow = await sendWebhook({ ...input(`http://127.0.0.1:${port}/hook`, false), timeoutMs: 300 });
    expect(slow.attempt).toMatchObject({ statusCode: null, error: 'timeout' });
    receiver.answer = (res) => res.writeHead(429, { 'retry-after': '120' }).end();
    expect(await sendWebhook(input(`http://127.0.0.1:${port}/hook`, false))).toEqual({
      attempt: expect.objectContaining({ statusCode: 429, error: 'http_429' }),
    });
    receiver.answer = (res) => res.writeHead(302, { location: `http://127.0.0.1:${port}/elsewhere` }).end();
    got.length = 0;
    expect((await sendWebhook(input(`http://127.0.0.1:${port}/hook`, false))).attempt.statusCode).toBe(302);
    expect(got).toHaveLength(1);
    receiver.answer = (res) => res.writeHead(200).end('ok');
  });
});

describe('sendWebhook deadline', () => {
  let server: Server;
  let port: number;
  beforeAll(async () => {
    server = createServer(() => undefined); // never answers
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    port = (server.address() as AddressInfo).port;
  });
  afterAll(() => {
    server.closeAllConnections();
    return new Promise<void>((r) => server.close(() => r()));
  });

  it('is one overall deadline from the request creation: attempts queued for a pooled socket time out with the others', async () => {
    const timeoutMs = 500;
    const n = MAX_SOCKETS_PER_ORIGIN * 3; // two thirds wait for a socket of the origin's pool
    const t0 = performance.now();
    const results = await Promise.all(
      Array.from({ length: n }, (_, i) =>
        sendWebhook({
          url: `http://127.0.0.1:${port}/never`,
          payload: '{}',
          secret: 's',
          eventId: `e${i}`,
          eventType: 't',
          at: new Date(),
          signedAt: new Date(),
          production: false,
          timeoutMs,
        }).then((r) => ({ ...r, endedAt: performance.now() - t0 })),
      ),
    );
    for (const r of results) {
      expect(r.attempt).toMatchObject({ statusCode: null, error: 'timeout' });
      expect(r.endedAt).toBeLessThan(timeoutMs + 400);
      // measured from the request's creation, queue wait included
      expect(r.attempt.durationMs).toBeGreaterThanOrEqual(timeoutMs - 5);
      expect(r.attempt.durationMs).toBeLessThan(timeoutMs + 400);
    }
  });

  it('the attempt lease outlives the longest attempt', () => {
    expect(ATTEMPT_LEASE_MS).toBeGreaterThanOrEqual(2 * DELIVERY_TIMEOUT_MS + 10_000);
  });
});

describe('sendWebhook connections', () => {
  let server: Server;
  let port: number;
  let requests = 0;
  /** Requests seen per socket: the second one on a socket is dropped (the receiver closed it while idle). */
  const perSocket = new WeakMap<object, number>();
  beforeAll(async () => {
    server = createServer((req, res) => {
      requests++;
      const n = (perSocket.get(req.socket) ?? 0) + 1;
      perSocket.set(req.socket, n);
      req.resume();
      req.on('end', () => (n >= 2 ? req.socket.destroy() : res.writeHead(200).end('ok')));
    });
    server.keepAliveTimeout = 60_000;
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    port = (server.address() as AddressInfo).port;
  });
  afterAll(() => {
    server.closeAllConnections();
    return new Promise<void>((r) => server.close(() => r()));
  });
  afterEach(() => jest.restoreAllMocks());
  const input = (url: string, production: boolean) => ({
    url,
    payload: '{}',
    secret: 's',
    eventId: 'e1',
    eventType: 't',
    at: new Date(),
    signedAt: new Date(),
    production,
  });

  it('a reused keep-alive socket reset before any response is retried once on a fresh socket', async () => {
    const url = `http://127.0.0.1:${port}/hook`;
    expect((await sendWebhook(input(url, false))).attempt).toMatchObject({ statusCode: 200 });
    await new Promise((r) => setTimeout(r, 50)); // the socket back in the pool
    requests = 0;
    const second = await sendWebhook(input(url, false));
    expect(second.attempt).toMatchObject({ statusCode: 200, error: null });
    expect(requests).toBe(2); // the reset one, then the retry on a fresh socket
  });

  it('production, pooled Agent path: a host name the system resolver answers with loopback is refused at connect time, nothing reaches the server', async () => {
    // The module object itself (an `import * as` namespace would be a copy the sender never reads).
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    const dns = require('node:dns') as typeof import('node:dns');
    const spy = jest
      .spyOn(dns, 'lookup')
      .mockImplementation(((_host: string, _opts: unknown, cb: (err: null, a: LookupAddress[]) => void) =>
        setImmediate(() => cb(null, [{ address: '127.0.0.1', family: 4 }]))) as never);
    requests = 0;
    const r = await sendWebhook(input(`http://hooks.example.test:${port}/hook`, true));
    expect(r.attempt).toMatchObject({ statusCode: null, error: 'address_refused' });
    expect(spy.mock.calls.map((c) => c[0])).toContain('hooks.example.test');
    expect(requests).toBe(0);
  });
});

describe('sendWebhook abort (an endpoint deleted while its attempts are under way)', () => {
  let server: Server;
  let port: number;
  const got: string[] = [];
  const answers: (() => void)[] = [];
  beforeAll(async () => {
    server = createServer((req, res) => {
      req.resume();
      req.on('end', () => {
        got.push(String(req.headers['x-svc-event-id']));
        answers.push(() => res.writeHead(500).end());
      });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    port = (server.address() as AddressInfo).port;
  });
  afterAll(() => {
    server.closeAllConnections();
    return new Promise<void>((r) => server.close(() => r()));
  });

  it('ends an attempt not yet on the wire (queued for a socket) unsent; one already written runs to its answer', async () => {
    const input = (i: number) => ({
      url: `http://127.0.0.1:${port}/abort`,
      payload: '{}',
      secret: 's',
      eventId: `a${i}`,
      eventType: 't',
      at: new Date(),
      signedAt: new Date(),
      production: false,
      timeoutMs: 5000,
    });
    const n = MAX_SOCKETS_PER_ORIGIN + 20; // 20 wait for a socket of the origin's pool
    const controllers = Array.from({ length: n }, () => new AbortController());
    const results = Array.from({ length: n }, (_, i) => sendWebhook(input(i), controllers[i].signal));
    for (let i = 0; i < 200 && got.length < MAX_SOCKETS_PER_ORIGIN; i++) await new Promise((r) => setTimeout(r, 10));
    expect(got).toHaveLength(MAX_SOCKETS_PER_ORIGIN);
    for (const c of controllers) c.abort();
    for (const answer of answers.splice(0)) answer();
    const done = await Promise.all(results);
    const sent = done.filter((r) => !r.notSent);
    const unsent = done.filter((r) => r.notSent);
    expect(sent).toHaveLength(MAX_SOCKETS_PER_ORIGIN);
    for (const r of sent) expect(r.attempt).toMatchObject({ statusCode: 500, error: 'http_500' });
    expect(unsent).toHaveLength(20);
    for (const r of unsent) expect(r.attempt).toMatchObject({ statusCode: null, error: 'not_sent' });
    await new Promise((r) => setTimeout(r, 100));
    expect(got).toHaveLength(MAX_SOCKETS_PER_ORIGIN); // the aborted ones never arrive
    // Aborted before it started: nothing is sent at all.
    const early = new AbortController();
    early.abort();
    expect((await sendWebhook(input(999), early.signal)).notSent).toBe(true);
    expect(got).toHaveLength(MAX_SOCKETS_PER_ORIGIN);
  });
});
