import { randomUUID } from 'node:crypto';
import { TcpForwarder } from '@svc/testing';
import { RedisReadStore } from '../src/redis-read-store';

/**
 * `ping()` of the Redis adapter against the real Redis at REDIS_URL (default 127.0.0.1:6379),
 * reached through a real TCP forwarder the test can take away: the ping answers while Redis does,
 * is still pending while Redis is silent (GET /readyz bounds it with its own timeout), and fails
 * once Redis cannot be reached.
 */
const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';

async function within<T>(p: Promise<T>, ms: number): Promise<'pending' | 'resolved' | 'rejected'> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<'pending'>((resolve) => (timer = setTimeout(() => resolve('pending'), ms)));
  const settled = p.then(
    () => 'resolved' as const,
    () => 'rejected' as const,
  );
  try {
    return await Promise.race([settled, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

describe('RedisReadStore ping against a Redis that goes silent, then away', () => {
  it('answers, hangs while Redis is silent, answers again, and fails once Redis is unreachable', async () => {
    const { host, port } = TcpForwarder.target(REDIS_URL, 6379);
    const forwarder = await new TcpForwarder(host, port).start();
    const u = new URL(REDIS_URL);
    u.hostname = '127.0.0.1';
    u.port = String(forwarder.port);
    const store = new RedisReadStore(u.toString(), `test:ready:${randomUUID()}`);
    try {
      await expect(store.ping()).resolves.toBeUndefined();

      forwarder.hang();
      const silent = store.ping();
      expect(await within(silent, 500)).toBe('pending');
      forwarder.resume();
      expect(await within(silent, 5000)).toBe('resolved');

      await forwarder.close();
      expect(await within(store.ping(), 10_000)).toBe('rejected');
    } finally {
      await forwarder.close();
      // A client that cannot reach its server is ended without waiting for it.
      (store as unknown as { redis: { disconnect(): void } }).redis.disconnect();
    }
  });
});
