import { Server, createServer } from 'node:http';
import { callDestination } from '../src/adapters/outbound/destination-client';
import { validHeader } from '../src/adapters/http/workflows.controller';

/** B2: whatever Node refuses while building a request is a failed call, never a rejection (500). */
describe('callDestination never rejects', () => {
  let server: Server;
  let baseUrl: string;
  let hits = 0;
  beforeAll(async () => {
    server = createServer((_req, res) => {
      hits++;
      res.writeHead(200, { 'content-type': 'application/json' }).end('{"orders":[]}');
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
    baseUrl = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
  });
  afterAll(() => new Promise<void>((r) => server.close(() => r())));

  const call = (headers: Record<string, string>) =>
    callDestination({ baseUrl, path: '/orders', method: 'POST', body: '{}', headers, secret: 's', nowS: 1, timeoutMs: 2000, production: false });

  it.each([
    ['CR/LF in a value', { 'x-token': 'abc\r\nx-injected: 1' }],
    ['a non-Latin-1 value', { 'x-token': 'price €5' }],
    ['an invalid header name', { 'bad name': 'v' }],
  ])('%s: failed call (invalid_request), nothing sent', async (_what, headers) => {
    const before = hits;
    await expect(call(headers)).resolves.toMatchObject({ kind: 'failed', reason: 'invalid_request', pathAndQuery: '/orders' });
    expect(hits).toBe(before);
  });

  it('a valid call still goes through', async () => {
    await expect(call({ authorization: 'Bearer ok', 'x-latin1': 'caf\u00e9' })).resolves.toMatchObject({ kind: 'response', status: 200 });
  });
});

describe('destination header check (creation)', () => {
  it('accepts tokens with printable or Latin-1 values', () => {
    expect(validHeader('authorization', 'Bearer abc')).toBe(true);
    expect(validHeader('x-name', 'caf\u00e9\tok')).toBe(true);
  });
  it('refuses CR, LF, other controls, non-Latin-1, bad names and x-svc-*', () => {
    expect(validHeader('x-token', 'a\r\nb')).toBe(false);
    expect(validHeader('x-token', 'a\nb')).toBe(false);
    expect(validHeader('x-token', 'a\u0000b')).toBe(false);
    expect(validHeader('x-token', '€')).toBe(false);
    expect(validHeader('x token', 'v')).toBe(false);
    expect(validHeader('x-svc-signature', 'v')).toBe(false);
    expect(validHeader('x-token', 'x'.repeat(4001))).toBe(false);
  });
});

/** One attempt, never a redirect followed, never more than 5 seconds (spec: order_lookup.requested). */
describe('callDestination: redirects and the 5 second cap', () => {
  let server: Server;
  let baseUrl: string;
  const seen: string[] = [];
  beforeAll(async () => {
    server = createServer((req, res) => {
      seen.push(req.url ?? '');
      if (req.url === '/moved') res.writeHead(302, { location: '/elsewhere' }).end();
      else if (req.url === '/slow') {
        // Answers after the 5 s cap; the client gives up first, and the timer goes with its socket
        // (a pending 7 s timer kept the test worker alive after the suite).
        const late = setTimeout(() => res.writeHead(200, { 'content-type': 'application/json' }).end('{"orders":[]}'), 7000);
        res.on('close', () => clearTimeout(late));
      } else res.writeHead(200, { 'content-type': 'application/json' }).end('{"orders":[]}');
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
    baseUrl = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
  });
  afterAll(() => {
    server.closeAllConnections();
    return new Promise<void>((r) => server.close(() => r()));
  });

  it('does not follow a redirect: the 302 is the answer, the target is never asked', async () => {
    const outcome = await callDestination({
      baseUrl,
      path: '/moved',
      method: 'GET',
      body: undefined,
      headers: {},
      secret: 's',
      nowS: 1,
      timeoutMs: 2000,
      production: false,
    });
    expect(outcome).toMatchObject({ kind: 'response', status: 302 });
    expect(seen).toEqual(['/moved']);
  });

  it('gives up after 5 seconds even when the Destination allows more', async () => {
    const started = Date.now();
    const outcome = await callDestination({
      baseUrl,
      path: '/slow',
      method: 'GET',
      body: undefined,
      headers: {},
      secret: 's',
      nowS: 1,
      timeoutMs: 60_000,
      production: false,
    });
    const took = Date.now() - started;
    expect(outcome).toMatchObject({ kind: 'failed', reason: 'timeout' });
    expect(took).toBeGreaterThanOrEqual(4900);
    expect(took).toBeLessThan(6900);
  }, 15_000);
});

/**
 * Production: a Destination stored with a loopback address (written without the creation check,
 * or one whose name now resolves there) is refused at connect time, in every spelling (the shared
 * url-policy of @svc/security), the hex form the URL parser writes for [::ffff:127.0.0.1]
 * included.
 */
describe('callDestination in production refuses non-public addresses at connect time', () => {
  let server: Server;
  let port: number;
  let hits = 0;
  beforeAll(async () => {
    server = createServer((_req, res) => {
      hits++;
      res.writeHead(200, { 'content-type': 'application/json' }).end('{"secret":"internal"}');
    });
    await new Promise<void>((r) => server.listen(0, '::', () => r()));
    port = (server.address() as { port: number }).port;
  });
  afterAll(() => {
    server.closeAllConnections();
    return new Promise<void>((r) => server.close(() => r()));
  });

  it.each(['127.0.0.1', '127.1', '[::1]', '[::ffff:127.0.0.1]', '[::ffff:7f00:1]', '[0:0:0:0:0:ffff:127.0.0.1]', 'localhost', '0x7f000001'])(
    '%s',
    async (host) => {
      const outcome = await callDestination({
        baseUrl: `http://${host}:${port}/api`,
        path: '/orders',
        method: 'GET',
        body: undefined,
        headers: {},
        secret: 's',
        nowS: 1,
        timeoutMs: 2000,
        production: true,
      });
      expect(outcome).toMatchObject({ kind: 'failed', reason: 'refused_address' });
      expect(hits).toBe(0);
    },
  );

  it('the same address outside production is reached (the check is production-only)', async () => {
    await expect(
      callDestination({
        baseUrl: `http://[::ffff:127.0.0.1]:${port}/api`,
        path: '/orders',
        method: 'GET',
        body: undefined,
        headers: {},
        secret: 's',
        nowS: 1,
        timeoutMs: 2000,
        production: false,
      }),
    ).resolves.toMatchObject({ kind: 'response', status: 200 });
    expect(hits).toBe(1);
  });
});
