import Redis from 'ioredis';
import { randomUUID } from 'node:crypto';
import { RedisReadStore } from '../src/redis-read-store';
import { describeReadStoreConformance } from './conformance';

/** Real Redis on 127.0.0.1:6379 (architecture: Testing). Every run uses its own key prefix. */
const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
const runPrefix = `test:rs:${randomUUID()}`;
let admin: Redis;
let prefix: string;
let n = 0;

async function deleteKeys(pattern: string): Promise<void> {
  let cursor = '0';
  do {
    const [next, keys] = await admin.scan(cursor, 'MATCH', pattern, 'COUNT', 1000);
    cursor = next;
    if (keys.length) await admin.del(...keys);
  } while (cursor !== '0');
}

beforeAll(async () => {
  admin = new Redis(REDIS_URL, { maxRetriesPerRequest: 1 });
  await admin.ping();
});
afterAll(async () => {
  await deleteKeys(`${runPrefix}:*`);
  await admin.quit();
});

describeReadStoreConformance('redis', {
  async create() {
    prefix = `${runPrefix}:${++n}`;
    return new RedisReadStore(REDIS_URL, prefix);
  },
  async reopen() {
    return new RedisReadStore(REDIS_URL, prefix);
  },
  async cleanup() {
    await deleteKeys(`${prefix}:*`);
  },
});

describe('RedisReadStore key layout', () => {
  it('keeps the documented keys and cleans up indexes and pointers', async () => {
    const p = `${runPrefix}:layout`;
    const store = new RedisReadStore(admin, p);
    await store.commit('proj', 3, [{ op: 'put', collection: 'cases', key: 'a', doc: { id: 'a' }, partition: 'env1', score: 4 }]);
    expect(JSON.parse((await admin.get(`${p}:doc:cases:a`)) as string)).toEqual({ id: 'a' });
    expect(await admin.zscore(`${p}:idx:cases:env1`, 'a')).toBe('4');
    expect(await admin.hget(`${p}:checkpoint`, 'proj')).toBe('3');
    await store.commit('proj', 4, [{ op: 'put', collection: 'cases', key: 'a', doc: { id: 'a' }, partition: 'env2', score: 4 }]);
    expect(await admin.exists(`${p}:idx:cases:env1`)).toBe(0);
    await store.commit('proj', 5, [{ op: 'delete', collection: 'cases', key: 'a' }]);
    expect(await admin.keys(`${p}:*`)).toEqual([`${p}:checkpoint`]);
    await store.close(); // does not close a client it was given
    expect(await admin.ping()).toBe('PONG');
  });

  it('two stores on one client and on separate connections share data', async () => {
    const p = `${runPrefix}:shared`;
    const a = new RedisReadStore(REDIS_URL, p);
    const b = new RedisReadStore(REDIS_URL, p);
    await a.commit('x', 1, [{ op: 'put', collection: 'c', key: 'k', doc: 1 }]);
    await b.commit('x', 1, [{ op: 'put', collection: 'c', key: 'k', doc: 2 }]); // stale: same position
    expect(await b.get('c', 'k')).toBe(1);
    await a.close();
    await b.close();
  });
});
