import { randomBytes } from 'node:crypto';
import { Keyring } from '@svc/security';
import { TokenBucketLimit, TokenTake } from '@svc/read-store';
import { ApiError } from '../src/errors';
import { MemoryTokenBuckets, RATE_LIMIT_DEFAULTS, RateLimitSettings, RateLimiter, TokenBuckets } from '../src/rate-limit';

const T0 = 1_750_000_000_000;

/** A wall clock the test moves. */
class Wall {
  ms = T0;
  now(): Date {
    return new Date(this.ms);
  }
}

const settings = (over: Partial<RateLimitSettings> = {}): RateLimitSettings => ({
  enabled: true,
  apiKey: { ratePerS: 2, burst: 3 },
  staff: { ratePerS: 1, burst: 2 },
  address: { ratePerS: 1, burst: 1 },
  ...over,
});

function refusal(fn: () => unknown): ApiError {
  try {
    fn();
  } catch (err) {
    return err as ApiError;
  }
  throw new Error('not refused');
}

describe('RateLimiter', () => {
  const keyring = new Keyring(randomBytes(32));

  it('lets a burst through synchronously, then refuses with 429 RATE_LIMITED and Retry-After in whole seconds', () => {
    const wall = new Wall();
    const limiter = new RateLimiter(settings(), new MemoryTokenBuckets(), wall, keyring);
    for (let i = 0; i < 3; i++) expect(limiter.check('apiKey', 'key-1')).toBeUndefined();
    const err = refusal(() => limiter.check('apiKey', 'key-1'));
    expect(err).toBeInstanceOf(ApiError);
    expect({ status: err.status, code: err.code, headers: err.headers }).toEqual({ status: 429, code: 'RATE_LIMITED', headers: { 'retry-after': '1' } });
    // 500 ms a token: half of it gone, still 1 (whole seconds, never 0).
    wall.ms += 250;
    expect(refusal(() => limiter.check('apiKey', 'key-1')).headers).toEqual({ 'retry-after': '1' });
    wall.ms += 250;
    expect(limiter.check('apiKey', 'key-1')).toBeUndefined();
  });

  it('answers Retry-After as the wait rounded up to whole seconds, at least 1', () => {
    for (const [ms, header] of [
      [1, '1'],
      [999, '1'],
      [1000, '1'],
      [1001, '2'],
      [1500, '2'],
      [61_000, '61'],
    ] as const) {
      const buckets: TokenBuckets = { take: () => ({ allowed: false, retryAfterMs: ms }) };
      expect({ ms, headers: refusal(() => new RateLimiter(settings(), buckets, new Wall(), keyring).check('address', '10.0.0.1')).headers }).toEqual({
        ms,
        headers: { 'retry-after': header },
      });
    }
  });

  it('keeps one bucket per kind and caller', () => {
    const limiter = new RateLimiter(settings(), new MemoryTokenBuckets(), new Wall(), keyring);
    for (let i = 0; i < 2; i++) limiter.check('staff', 'same');
    expect(() => limiter.check('staff', 'same')).toThrow(ApiError);
    expect(limiter.check('staff', 'other')).toBeUndefined();
    expect(limiter.check('apiKey', 'same')).toBeUndefined();
    expect(limiter.check('address', 'same')).toBeUndefined();
  });

  it('counts nothing when turned off', () => {
    const seen: string[] = [];
    const buckets: TokenBuckets = { take: (b) => (seen.push(b), { allowed: false, retryAfterMs: 1000 }) };
    const limiter = new RateLimiter(settings({ enabled: false }), buckets, new Wall(), keyring);
    for (let i = 0; i < 10; i++) expect(limiter.check('apiKey', 'k')).toBeUndefined();
    expect(seen).toEqual([]);
  });

  it('names buckets without the staff subject or the client address in clear', () => {
    const seen: { bucket: string; limit: TokenBucketLimit }[] = [];
    const buckets: TokenBuckets = { take: (bucket, limit) => (seen.push({ bucket, limit }), { allowed: true, retryAfterMs: 0 }) };
    const s = settings();
    const limiter = new RateLimiter(s, buckets, new Wall(), keyring);
    limiter.check('apiKey', 'b1f0c2de-0000-4000-8000-000000000001');
    limiter.check('staff', 'auth0|alice@example.test');
    limiter.check('address', '203.0.113.7');
    expect(seen.map((x) => x.bucket)).toEqual([
      'k:b1f0c2de-0000-4000-8000-000000000001',
      expect.stringMatching(/^s:[0-9a-f]{32}$/),
      expect.stringMatching(/^a:[0-9a-f]{32}$/),
    ]);
    expect(seen.map((x) => x.limit)).toEqual([s.apiKey, s.staff, s.address]);
    // The same caller gets the same bucket in every process with the same master key.
    const again: string[] = [];
    new RateLimiter(s, { take: (b) => (again.push(b), { allowed: true, retryAfterMs: 0 }) }, new Wall(), keyring).check('address', '203.0.113.7');
    expect(again[0]).toBe(seen[2].bucket);
    // Buckets that never leave the process keep the names as they are (no hash to pay).
    const local: string[] = [];
    const inProcess: TokenBuckets = { inProcess: true, take: (b) => (local.push(b), { allowed: true, retryAfterMs: 0 }) };
    const l = new RateLimiter(s, inProcess, new Wall(), keyring);
    l.check('staff', 'alice');
    l.check('address', '203.0.113.7');
    expect(local).toEqual(['s:alice', 'a:203.0.113.7']);
  });

  it('waits for a store that answers later, and refuses as it says', async () => {
    let answer: TokenTake = { allowed: true, retryAfterMs: 0 };
    const buckets: TokenBuckets = { take: async () => answer };
    const limiter = new RateLimiter(settings(), buckets, new Wall(), keyring);
    await expect(limiter.check('apiKey', 'k')).resolves.toBeUndefined();
    answer = { allowed: false, retryAfterMs: 2200 };
    await expect(limiter.check('apiKey', 'k')).rejects.toMatchObject({ status: 429, code: 'RATE_LIMITED', headers: { 'retry-after': '3' } });
  });

  it('lets requests through while its store fails (the limit protects the service; an outage of its store must not refuse everyone)', async () => {
    const failing: TokenBuckets = { take: async () => Promise.reject(new Error('connection refused')) };
    const limiter = new RateLimiter(settings(), failing, new Wall(), keyring);
    for (let i = 0; i < 5; i++) await expect(limiter.check('apiKey', 'k')).resolves.toBeUndefined();
    const throwing: TokenBuckets = {
      take: () => {
        throw new Error('closed');
      },
    };
    expect(new RateLimiter(settings(), throwing, new Wall(), keyring).check('staff', 's')).toBeUndefined();
  });

  it("has defaults above the decisions' floor: 100/s per key and subject, 20/s per address, bursts of 5 s or more", () => {
    expect(RATE_LIMIT_DEFAULTS.enabled).toBe(true);
    for (const [kind, floor] of [
      ['apiKey', 100],
      ['staff', 100],
      ['address', 20],
    ] as const) {
      expect(RATE_LIMIT_DEFAULTS[kind].ratePerS).toBeGreaterThanOrEqual(floor);
      expect(RATE_LIMIT_DEFAULTS[kind].burst).toBeGreaterThanOrEqual(5 * RATE_LIMIT_DEFAULTS[kind].ratePerS);
    }
  });
});

describe('MemoryTokenBuckets', () => {
  it('forgets full buckets first when over its cap, and never holds more than the cap', () => {
    const buckets = new MemoryTokenBuckets(10);
    const limit = { ratePerS: 10, burst: 5 };
    for (let i = 0; i < 10; i++) buckets.take(`idle-${i}`, limit, T0);
    expect(buckets.size).toBe(10);
    // A second later every one of them is full again: the 11th bucket prunes them all.
    buckets.take('busy', limit, T0 + 1000);
    expect(buckets.size).toBe(1);
    // A flood of distinct callers at one instant: pruned to 90% of the cap each time it is passed.
    for (let i = 0; i < 100; i++) buckets.take(`flood-${i}`, limit, T0 + 1000);
    expect(buckets.size).toBeLessThanOrEqual(10);
  });

  it('keeps the state of a bucket that is not full', () => {
    const buckets = new MemoryTokenBuckets();
    const limit = { ratePerS: 1, burst: 2 };
    expect([1, 2, 3].map(() => buckets.take('k', limit, T0).allowed)).toEqual([true, true, false]);
    expect(buckets.take('k', limit, T0 + 999).allowed).toBe(false);
    expect(buckets.take('k', limit, T0 + 1000).allowed).toBe(true);
  });
});
