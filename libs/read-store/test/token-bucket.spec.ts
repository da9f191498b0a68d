import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Redis from 'ioredis';
import { RedisReadStore } from '../src/redis-read-store';
import { SqliteReadStore } from '../src/sqlite-read-store';
import { TokenBucketLimit, takeToken } from '../src/token-bucket';
import type { ReadStore } from '../src/types';

const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
const T0 = 1_750_000_000_000;

describe('takeToken (the bucket in GCRA form)', () => {
  const limit: TokenBucketLimit = { ratePerS: 2, burst: 3 };

  /** Runs takes at the given times from an empty store; answers allowed flags and retry times. */
  function run(times: number[], lim = limit): { allowed: boolean; retryAfterMs: number }[] {
    let tat: number | null = null;
    return times.map((now) => {
      const r = takeToken(tat, lim, now);
      tat = r.tat;
      return { allowed: r.allowed, retryAfterMs: r.retryAfterMs };
    });
  }

  it('lets a burst through at once, then one request per interval', () => {
    expect(run([T0, T0, T0, T0])).toEqual([
      { allowed: true, retryAfterMs: 0 },
      { allowed: true, retryAfterMs: 0 },
      { allowed: true, retryAfterMs: 0 },
      { allowed: false, retryAfterMs: 500 },
    ]);
    // After the interval one token is back, and only one.
    expect(run([T0, T0, T0, T0 + 500, T0 + 500]).map((r) => r.allowed)).toEqual([true, true, true, true, false]);
  });

  it('a refusal takes nothing: the wait shrinks as time passes', () => {
    const r = run([T0, T0, T0, T0, T0 + 200, T0 + 499, T0 + 500]);
    expect(r.slice(3)).toEqual([
      { allowed: false, retryAfterMs: 500 },
      { allowed: false, retryAfterMs: 300 },
      { allowed: false, retryAfterMs: 1 },
      { allowed: true, retryAfterMs: 0 },
    ]);
  });

  it('never holds more than the burst, however long the bucket was idle', () => {
    const r = run([T0, T0 + 3_600_000, T0 + 3_600_000, T0 + 3_600_000, T0 + 3_600_000]);
    expect(r.map((x) => x.allowed)).toEqual([true, true, true, true, false]);
  });

  it('sustains exactly its rate', () => {
    // 10 s of a request every 100 ms against 2/s with a burst of 3: 3 + 2 per second pass.
    const times = Array.from({ length: 100 }, (_, i) => T0 + i * 100);
    expect(run(times).filter((x) => x.allowed).length).toBe(3 + 19);
  });

  it('answers when the bucket is full again (its tat), so a full bucket can be forgotten', () => {
    const first = takeToken(null, limit, T0);
    expect(first.tat).toBe(T0 + 500);
    expect(takeToken(T0 - 10_000, limit, T0).tat).toBe(T0 + 500); // a tat in the past is a full bucket
  });
});

/** The adapters against the function, and two handles on one store sharing a bucket. */
function describeStore(label: string, open: () => { stores: [ReadStore, ReadStore]; cleanup(): Promise<void> }) {
  describe(`takeToken on ${label}`, () => {
    let stores: [ReadStore, ReadStore];
    let cleanup: () => Promise<void>;
    beforeEach(() => {
      ({ stores, cleanup } = open());
    });
    afterEach(() => cleanup());

    it('decides as takeToken does, over a sequence of times', async () => {
      const limit = { ratePerS: 3, burst: 4 };
      const times = [0, 0, 10, 20, 30, 40, 300, 333, 334, 340, 700, 5000, 5000, 5000, 5000, 5000, 5001].map((d) => T0 + d);
      let tat: number | null = null;
      const bucket = `b-${randomUUID()}`;
      for (const now of times) {
        const want = takeToken(tat, limit, now);
        tat = want.tat;
        const got = await stores[0].takeToken!(bucket, limit, now);
        expect({ now: now - T0, allowed: got.allowed }).toEqual({ now: now - T0, allowed: want.allowed });
        if (!want.allowed) expect(Math.abs(got.retryAfterMs - want.retryAfterMs)).toBeLessThanOrEqual(1);
        else expect(got.retryAfterMs).toBe(0);
      }
    });

    it('shares one bucket between two handles on the store, and keeps buckets apart', async () => {
      const limit = { ratePerS: 1, burst: 4 };
      const bucket = `shared-${randomUUID()}`;
      const answers = [];
      for (let i = 0; i < 6; i++) answers.push((await stores[i % 2].takeToken!(bucket, limit, T0)).allowed);
      expect(answers).toEqual([true, true, true, true, false, false]);
      expect((await stores[1].takeToken!(`other-${randomUUID()}`, limit, T0)).allowed).toBe(true);
      expect((await stores[0].takeToken!(bucket, limit, T0 + 1000)).allowed).toBe(true);
    });

    it('refuses a limit that would admit or refuse everything', async () => {
      await expect(stores[0].takeToken!('x', { ratePerS: 0, burst: 1 }, T0)).rejects.toThrow(RangeError);
      await expect(stores[0].takeToken!('x', { ratePerS: 1, burst: 0 }, T0)).rejects.toThrow(RangeError);
      await expect(stores[0].takeToken!('x', { ratePerS: Number.NaN, burst: 1 }, T0)).rejects.toThrow(RangeError);
      await expect(stores[0].takeToken!('', { ratePerS: 1, burst: 1 }, T0)).rejects.toThrow(TypeError);
    });
  });
}

describeStore('SqliteReadStore (two connections on one file)', () => {
  const dir = mkdtempSync(join(tmpdir(), 'token-bucket-'));
  const file = join(dir, 'read-models.sqlite');
  const a = new SqliteReadStore(file, { backgroundCheckpoint: false });
  const b = new SqliteReadStore(file, { backgroundCheckpoint: false });
  return {
    stores: [a, b],
    cleanup: async () => {
      await a.close();
      await b.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
});

describeStore('RedisReadStore (two clients on one prefix)', () => {
  const prefix = `svc-test-tb-${randomUUID()}`;
  const a = new RedisReadStore(REDIS_URL, prefix);
  const b = new RedisReadStore(REDIS_URL, prefix);
  return {
    stores: [a, b],
    cleanup: async () => {
      const admin = new Redis(REDIS_URL);
      const keys = await admin.keys(`${prefix}:*`);
      if (keys.length) await admin.del(...keys);
      admin.disconnect();
      await a.close();
      await b.close();
    },
  };
});

describe('RedisReadStore token buckets expire once full again', () => {
  it('sets the key to expire when the bucket is full (a missing key is a full bucket)', async () => {
    const prefix = `svc-test-tb-${randomUUID()}`;
    const store = new RedisReadStore(REDIS_URL, prefix);
    const admin = new Redis(REDIS_URL);
    try {
      const now = Date.now();
      for (let i = 0; i < 3; i++) await store.takeToken('k', { ratePerS: 10, burst: 5 }, now);
      // Three tokens used at 100 ms each: full again in 300 ms.
      const ttl = await admin.pttl(`${prefix}:rl:k`);
      expect(ttl).toBeGreaterThan(200);
      expect(ttl).toBeLessThanOrEqual(300);
    } finally {
      const keys = await admin.keys(`${prefix}:*`);
      if (keys.length) await admin.del(...keys);
      admin.disconnect();
      await store.close();
    }
  });
});
