import { createServer, IncomingMessage, Server, ServerResponse } from 'node:http';
import { call, retryAfterSeconds } from '../../web/shared/http';

/**
 * The pages' API calls (web/shared/http.ts), against a real HTTP server: Retry-After honoured on
 * 409, 429 and 503 with the same Idempotency-Key; network failures retried only when the request
 * is safe to repeat; other statuses answered at once.
 */
describe('web/shared/http call', () => {
  let server: Server;
  let base: string;
  let script: ((req: IncomingMessage, res: ServerResponse, n: number) => void) | null = null;
  const seen: { method: string; key: string | undefined; at: number }[] = [];

  beforeAll(async () => {
    server = createServer((req, res) => {
      req.resume();
      req.on('end', () => {
        seen.push({ method: req.method!, key: req.headers['idempotency-key'] as string | undefined, at: Date.now() });
        script!(req, res, seen.length);
      });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
    base = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
  });
  afterAll(() => new Promise<void>((r) => server.close(() => r())));
  beforeEach(() => {
    seen.length = 0;
  });

  const json = (res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}) =>
    res.writeHead(status, { 'content-type': 'application/json', ...headers }).end(JSON.stringify(body));

  it.each([409, 429, 503])('waits Retry-After on %i and sends the same Idempotency-Key again', async (status) => {
    script = (_req, res, n) => (n === 1 ? json(res, status, { code: 'BUSY', message: 'later' }, { 'retry-after': '1' }) : json(res, 201, { ok: true }));
    const a = await call(`${base}/x`, { body: { message: 'hi' }, idempotencyKey: 'k-1' });
    expect(a).toEqual({ status: 201, body: { ok: true }, code: null });
    expect(seen.map((s) => s.key)).toEqual(['k-1', 'k-1']);
    expect(seen[1].at - seen[0].at).toBeGreaterThanOrEqual(950);
  });

  it('answers a 409 without Retry-After (a reused key), and other errors, at once', async () => {
    script = (_req, res) => json(res, 409, { code: 'IDEMPOTENCY_KEY_REUSED', message: 'no' });
    expect(await call(`${base}/x`, { body: {}, idempotencyKey: 'k' })).toEqual({
      status: 409,
      body: { code: 'IDEMPOTENCY_KEY_REUSED', message: 'no' },
      code: 'IDEMPOTENCY_KEY_REUSED',
    });
    script = (_req, res) => json(res, 401, { code: 'SESSION_REQUIRED', message: 'no' });
    expect((await call(`${base}/x`)).code).toBe('SESSION_REQUIRED');
    expect(seen).toHaveLength(2);
  });

  it('gives up after its attempts, answering the last one', async () => {
    script = (_req, res) => json(res, 503, { code: 'UNAVAILABLE', message: 'down' }, { 'retry-after': '0' });
    const a = await call(`${base}/x`, { attempts: 3 });
    expect(a.status).toBe(503);
    expect(seen).toHaveLength(3);
  });

  it('retries a network failure only for a request that is safe to repeat', async () => {
    script = (req, res, n) => (n === 1 ? req.socket.destroy() : json(res, 200, { ok: 1 }));
    expect((await call(`${base}/x`, { body: { a: 1 }, idempotencyKey: 'k' })).status).toBe(200);
    expect(seen).toHaveLength(2);
    seen.length = 0;
    script = (req) => req.socket.destroy();
    expect(await call(`${base}/x`, { body: { a: 1 } })).toEqual({ status: 0, body: null, code: null });
    expect(seen).toHaveLength(1);
  });

  it('reads Retry-After as seconds or an HTTP date', () => {
    expect(retryAfterSeconds('3')).toBe(3);
    expect(retryAfterSeconds(null)).toBeNull();
    expect(retryAfterSeconds('soon')).toBeNull();
    expect(retryAfterSeconds(new Date(Date.now() + 5000).toUTCString())).toBeGreaterThanOrEqual(4);
  });
});
