import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import Redis from 'ioredis';
import { TestApp, TestResponse, tempDataDir } from '@svc/testing';

// Before any app starts: the PHI-safe logger reads SVC_LOG_FILE when first used.
const logFile = join(tempDataDir('svc-rate-log-'), 'svc.log');
process.env.SVC_LOG_FILE = logFile;

/**
 * docs/decisions.md, "Rate limits": a token bucket per API key, per staff subject and (on /widget/v1/* and
 * the check-in pages) per client address; over it, 429 RATE_LIMITED with Retry-After in whole
 * seconds; the buckets refill in real time; SVC_RATE_LIMITS=off turns them off; with the Redis read
 * store, processes share the buckets. Over real HTTP, with limits set low through the environment.
 */

/** One token a second, bursts of BURST. */
const BURST = 5;
const LOW = {
  SVC_RATE_LIMIT_API_KEY_PER_S: '1',
  SVC_RATE_LIMIT_API_KEY_BURST: String(BURST),
  SVC_RATE_LIMIT_STAFF_PER_S: '1',
  SVC_RATE_LIMIT_STAFF_BURST: String(BURST),
  SVC_RATE_LIMIT_ADDRESS_PER_S: '1',
  SVC_RATE_LIMIT_ADDRESS_BURST: String(BURST),
};

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * Sends `send()` until it is answered 429 (at most `BURST + 3` times): the first BURST must pass
 * (with one token a second, the bucket cannot run dry sooner); answers the 429.
 */
async function exhaust(send: () => Promise<TestResponse>, passes: (r: TestResponse) => boolean): Promise<TestResponse> {
  for (let i = 0; i < BURST + 3; i++) {
    const r = await send();
    if (r.status === 429) {
      expect(i).toBeGreaterThanOrEqual(BURST);
      return r;
    }
    expect({ i, status: r.status, passes: passes(r) }).toEqual({ i, status: r.status, passes: true });
  }
  throw new Error(`no 429 after ${BURST + 3} requests`);
}

/** The 429 of docs/decisions.md, "Errors and the HTTP edge" and "Rate limits": the error body, Retry-After in whole seconds (at least 1), the edge's headers. */
function expectRateLimited(r: TestResponse): number {
  expect({ status: r.status, body: r.body }).toEqual({ status: 429, body: { code: 'RATE_LIMITED', message: expect.any(String) } });
  const retryAfter = r.headers.get('retry-after');
  expect(retryAfter).toMatch(/^[1-9][0-9]*$/);
  expect(r.headers.get('cache-control')).toBe('no-store');
  return Number(retryAfter);
}

describe('rate limits (e2e, real HTTP)', () => {
  describe('with low limits', () => {
    const app = new TestApp(undefined, LOW);
    let t: Awaited<ReturnType<TestApp['tenant']>>;
    let other: Awaited<ReturnType<TestApp['tenant']>>;
    beforeAll(async () => {
      await app.start();
      t = await app.tenant();
      other = await app.tenant();
    });
    afterAll(() => app.stop());

    it('per API key: 429 with Retry-After over the limit (Nest and lean routes alike), another key unaffected, the bucket refills', async () => {
      const limited = await exhaust(
        () => app.api.get('/v1/ping', t.apiKey),
        (r) => r.status === 200,
      );
      const retryAfter = expectRateLimited(limited);
      expect(retryAfter).toBeLessThanOrEqual(2);
      // The same key on a lean route and on a write: the same bucket.
      expectRateLimited(await app.api.get(`/v1/clinical-cases/${randomUUID()}/progress`, t.apiKey));
      expectRateLimited(await app.api.post('/client/patient-events', {}, t.apiKey));
      // Another key of another organization, and the same organization's staff: unaffected.
      expect((await app.api.get('/v1/ping', other.apiKey)).status).toBe(200);
      expect((await app.api.get(`/organizations/${t.orgId}`, t.staff)).status).toBe(200);
      // Refilled in real time: a token after Retry-After, one more a second later.
      await sleep(retryAfter * 1000 + 100);
      expect((await app.api.get('/v1/ping', t.apiKey)).status).toBe(200);
      await sleep(1100);
      expect((await app.api.get(`/v1/clinical-cases/${randomUUID()}/progress`, t.apiKey)).status).toBe(404);
    });

    it('per staff subject: 429 over the limit on any staff route, another subject unaffected, then refilled', async () => {
      const stranger = await app.staffToken({ sub: `rl-stranger-${randomUUID()}` });
      // Counted once the token is verified, whatever the route answers (here: another organization, 404).
      const limited = await exhaust(
        () => app.api.get(`/organizations/${t.orgId}`, stranger),
        (r) => r.status === 404,
      );
      const retryAfter = expectRateLimited(limited);
      expectRateLimited(await app.api.post('/organizations', { name: 'Over the limit' }, stranger));
      // Without a valid token nothing is counted against anyone: still 401.
      expect((await app.api.get(`/organizations/${t.orgId}`, 'not-a-token')).status).toBe(401);
      // The organization's owner, another subject: unaffected.
      expect((await app.api.get(`/organizations/${t.orgId}`, other.staff)).status).toBe(404);
      await sleep(retryAfter * 1000 + 100);
      expect((await app.api.get(`/organizations/${t.orgId}`, stranger)).status).toBe(404);
    });

    it('per client address on the widget and check-in routes; API-key routes are not counted by address', async () => {
      const limited = await exhaust(
        () => app.api.get(`/widget/v1/check-ins/${randomUUID()}`),
        (r) => r.status === 404,
      );
      const retryAfter = expectRateLimited(limited);
      // The same address on the check-in page and on a session's opening: the same bucket.
      expectRateLimited(await app.api.get(`/check-ins/${randomUUID()}`));
      expectRateLimited(await app.api.post('/widget/v1/sessions', { environmentId: t.sandbox }));
      // No trusted proxy is configured: an X-Forwarded-For of the caller's choosing changes nothing.
      expectRateLimited(await app.api.request('GET', `/check-ins/${randomUUID()}`, { headers: { 'x-forwarded-for': '203.0.113.9' } }));
      // Not the API-key routes, nor the staff routes (their own buckets).
      expect((await app.api.get('/v1/ping', other.apiKey)).status).toBe(200);
      expect((await app.api.get(`/organizations/${other.orgId}`, other.staff)).status).toBe(200);
      await sleep(retryAfter * 1000 + 100);
      expect((await app.api.get(`/check-ins/${randomUUID()}`)).status).toBe(404);
    });

    it('logs a 429 like any request, without the credential', async () => {
      const fresh = await app.tenant();
      await exhaust(
        () => app.api.get('/v1/ping', fresh.apiKey),
        (r) => r.status === 200,
      );
      const log = readFileSync(logFile, 'utf8');
      const lines = log
        .split('\n')
        .filter(Boolean)
        .map((l) => JSON.parse(l) as Record<string, unknown>);
      expect(lines.filter((l) => l.msg === 'request' && l.statusCode === 429 && l.route === '/api/v1/ping').length).toBeGreaterThan(0);
      expect(log).not.toContain(fresh.apiKey);
      expect(log).not.toContain(fresh.apiKey.slice(-20));
    });

    // Last of this app: the dev clock's jump ends the staff tokens minted before it.
    it('the buckets follow real time, not the dev clock: moving it neither refills nor drains them', async () => {
      const fresh = await app.tenant();
      await exhaust(
        () => app.api.get('/v1/ping', fresh.apiKey),
        (r) => r.status === 200,
      );
      await app.advanceClock(3600);
      expectRateLimited(await app.api.get('/v1/ping', fresh.apiKey));
      // A key that has not been used is not drained by the jump either.
      const unused = await app.tenant();
      for (let i = 0; i < BURST; i++) expect((await app.api.get('/v1/ping', unused.apiKey)).status).toBe(200);
    });
  });

  describe('behind a trusted proxy (SVC_TRUST_PROXY)', () => {
    const app = new TestApp(undefined, { ...LOW, SVC_TRUST_PROXY: 'loopback' });
    beforeAll(() => app.start());
    afterAll(() => app.stop());

    it('counts the client address the proxy forwards, not the proxy', async () => {
      const from = (address: string) => () => app.api.request('GET', `/check-ins/${randomUUID()}`, { headers: { 'x-forwarded-for': address } });
      expectRateLimited(await exhaust(from('203.0.113.1'), (r) => r.status === 404));
      expect((await from('203.0.113.2')()).status).toBe(404);
      expectRateLimited(await from('203.0.113.1')());
    });
  });

  describe('SVC_RATE_LIMITS=off', () => {
    const app = new TestApp(undefined, { ...LOW, SVC_RATE_LIMITS: 'off' });
    beforeAll(() => app.start());
    afterAll(() => app.stop());

    it('turns every limit off', async () => {
      const t = await app.tenant();
      for (let i = 0; i < BURST * 4; i++) {
        expect((await app.api.get('/v1/ping', t.apiKey)).status).toBe(200);
        expect((await app.api.get(`/organizations/${t.orgId}`, t.staff)).status).toBe(200);
        expect((await app.api.get(`/check-ins/${randomUUID()}`)).status).toBe(404);
      }
    });
  });

  describe('with the Redis read store: processes share the buckets', () => {
    const prefix = `svc-e2e-rl-${randomUUID()}`;
    const dataDir = tempDataDir();
    const env = { ...LOW, READ_STORE: 'redis', REDIS_URL: 'redis://127.0.0.1:6379', REDIS_KEY_PREFIX: prefix };
    // Two instances of the service on the same data and the same Redis (replicas behind one address).
    const a = new TestApp(dataDir, env);
    const b = new TestApp(dataDir, env);
    const redis = new Redis('redis://127.0.0.1:6379');
    beforeAll(async () => {
      await a.start();
      await b.start();
    });
    afterAll(async () => {
      await b.stop();
      await a.stop();
      const keys = await redis.keys(`${prefix}:*`);
      if (keys.length) await redis.del(...keys);
      redis.disconnect();
    });

    it('one API key, one staff subject and one address have one bucket across both instances', async () => {
      let n = 0;
      const either = () => (n++ % 2 ? a : b);
      const t = await a.tenant();
      expect((await b.api.get('/v1/ping', t.apiKey)).status).toBe(200); // the key is known to both (1 token used)
      // Alternating between the instances, the key has BURST requests in all, not BURST each.
      let passed = 1;
      let limited: TestResponse | undefined;
      for (let i = 0; i < BURST + 3 && !limited; i++) {
        const r = await (i % 2 ? a : b).api.get('/v1/ping', t.apiKey);
        if (r.status === 429) limited = r;
        else passed++;
      }
      expect(limited).toBeDefined();
      expectRateLimited(limited!);
      expect(passed).toBeGreaterThanOrEqual(BURST);
      expect(passed).toBeLessThan(BURST + 2);
      expectRateLimited(await a.api.get('/v1/ping', t.apiKey));
      expectRateLimited(await b.api.get('/v1/ping', t.apiKey));

      const staff = await a.staffToken({ sub: `rl-shared-${randomUUID()}` });
      await exhaust(
        () => either().api.get(`/organizations/${t.orgId}`, staff),
        (r) => r.status === 404,
      );
      expectRateLimited(await a.api.get(`/organizations/${t.orgId}`, staff));
      expectRateLimited(await b.api.get(`/organizations/${t.orgId}`, staff));

      await exhaust(
        () => either().api.get(`/check-ins/${randomUUID()}`),
        (r) => r.status === 404,
      );
      expectRateLimited(await a.api.get(`/widget/v1/check-ins/${randomUUID()}`));
      expectRateLimited(await b.api.get(`/widget/v1/check-ins/${randomUUID()}`));

      // The buckets live in Redis under the read store's prefix, keyed without the staff subject or the address in clear.
      const keys = await redis.keys(`${prefix}:rl:*`);
      expect(keys.length).toBeGreaterThanOrEqual(3);
      expect(keys.join('\n')).not.toMatch(/rl-shared|127\.0\.0\.1|::1|svc_sb_/);
    });
  });
});
