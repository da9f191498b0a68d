import { randomUUID } from 'node:crypto';
import Redis from 'ioredis';
import { Leases, PostgresCoordination, PostgresEventStore, RecordedEvent } from '@svc/eventstore';
import { ProjectionRunner } from '../src/projection-runner';
import { RedisReadStore } from '../src/redis-read-store';
import { Projection, ReadStoreLogger } from '../src/types';
import { TestEventSchema, testEvent as ev } from '@svc/testing';

/**
 * Two replicas of one app (docs/scaling.md): two ProjectionRunners, each with its own PostgreSQL
 * event store connection, Redis read store connection and `Leases`, on one event-store schema and
 * one Redis key prefix of this run's own.
 */
const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
const schema = new TestEventSchema('projlease');
const TTL = 1000;
const RENEW = 200;
let admin: Redis;
let prefix: string;
const toClose: { close?(): Promise<void>; stop?(): Promise<void> }[] = [];

interface Counter {
  count: number;
  positions: number[];
}

/** Counts events per stream in a document; `applied` records which replica applied what. */
function counter(applied: number[], gate: { closed: Promise<void> | null }): Projection {
  return {
    name: 'counter',
    streamPrefixes: ['case-'],
    async apply(event: RecordedEvent, tx) {
      if (gate.closed) await gate.closed;
      applied.push(event.position);
      const doc = (await tx.get<Counter>('counters', event.streamId)) ?? { count: 0, positions: [] };
      doc.count++;
      doc.positions.push(event.position);
      tx.put('counters', event.streamId, doc);
    },
  };
}

interface Replica {
  events: PostgresEventStore;
  store: RedisReadStore;
  leases: Leases;
  runner: ProjectionRunner;
  applied: number[];
  logs: string[];
  /** While `closed` is set, this replica's applies wait for it. */
  gate: { closed: Promise<void> | null };
}

async function replica(options: { followPollMs?: number; publish?: boolean } = {}): Promise<Replica> {
  const events = await PostgresEventStore.open({ connectionString: schema.url, schema: schema.name, pollIntervalMs: 50, poolSize: 2 });
  const store = new RedisReadStore(REDIS_URL, prefix);
  if (options.publish === false) (store as { publishPositions?: unknown }).publishPositions = undefined;
  const leases = new Leases(new PostgresCoordination({ connectionString: schema.url, schema: schema.name }), { ttlMs: TTL, renewMs: RENEW });
  const logs: string[] = [];
  const logger: ReadStoreLogger = { warn: (_meta, msg) => void logs.push(msg) };
  const applied: number[] = [];
  const gate: Replica['gate'] = { closed: null };
  const runner = new ProjectionRunner({
    eventStore: events,
    readStore: store,
    logger,
    leases,
    retryDelayMs: 10,
    maxRetryDelayMs: 40,
    followPollMs: options.followPollMs,
    checkpointIntervalMs: 100,
    lossCheckIntervalMs: 200,
  });
  runner.register(counter(applied, gate));
  await runner.start();
  // Stopped in this order (as the platform does): runner, leases, stores.
  toClose.push(runner, leases, events, store);
  return { events, store, leases, runner, applied, logs, gate };
}

async function until(cond: () => boolean, timeoutMs: number, what: string): Promise<number> {
  const t0 = Date.now();
  while (!cond()) {
    if (Date.now() - t0 > timeoutMs) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
  return Date.now() - t0;
}

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
  await schema.create();
});

beforeEach(() => {
  prefix = `test:projlease:${randomUUID()}`;
});

afterEach(async () => {
  for (const c of toClose.splice(0)) {
    await (c.stop ? c.stop() : c.close?.())?.catch(() => undefined);
  }
  await deleteKeys(`${prefix}:*`);
  await schema.truncate('events', 'leases');
});

afterAll(async () => {
  await admin.quit();
  await schema.drop();
});

describe('ProjectionRunner with leases (two replicas)', () => {
  it('one replica applies each event once; waitFor on the other resolves after the leader commits', async () => {
    const a = await replica();
    const b = await replica();
    await until(() => a.runner.leading.length + b.runner.leading.length === 1, 3000, 'a leader');
    const [leader, follower] = a.runner.leading.length ? [a, b] : [b, a];
    let last = 0;
    for (let i = 0; i < 20; i++) last = (await leader.events.append(`case-${i % 4}`, [ev('A')], 'any')).position;
    // The follower applies nothing itself, yet its waitFor resolves once the leader's commit is in Redis.
    const t0 = Date.now();
    await follower.runner.waitFor(['counter'], last, 3000);
    expect(Date.now() - t0).toBeLessThan(2000);
    const doc = await follower.store.get<Counter>('counters', 'case-0');
    expect(doc?.count).toBe(5);
    expect(follower.applied).toEqual([]);
    expect(leader.applied).toHaveLength(20);
  });

  it('a follower learns the leader position from the stored checkpoint when nothing is published', async () => {
    const a = await replica({ publish: false, followPollMs: 100 });
    const b = await replica({ publish: false, followPollMs: 100 });
    await until(() => a.runner.leading.length + b.runner.leading.length === 1, 3000, 'a leader');
    const follower = a.runner.leading.length ? b : a;
    const r = await follower.events.append('case-x', [ev('A')], 'any');
    await follower.runner.waitFor(['counter'], r.position, 3000);
    expect((await follower.store.get<Counter>('counters', 'case-x'))?.count).toBe(1);
  });

  it('when the leader dies the other replica takes the projection over within the ttl and goes on from the stored checkpoint', async () => {
    const a = await replica();
    const b = await replica();
    await until(() => a.runner.leading.length + b.runner.leading.length === 1, 3000, 'a leader');
    const [leader, follower] = a.runner.leading.length ? [a, b] : [b, a];
    let last = 0;
    for (let i = 0; i < 10; i++) last = (await leader.events.append('case-1', [ev('A')], 'any')).position;
    await follower.runner.waitFor(['counter'], last, 3000);
    // kill -9 of the leader: no release, no more renewals or commits.
    leader.leases.pauseForTest({ watchdogs: false });
    await leader.runner.stop();
    const took = await until(() => follower.runner.leading.length === 1, TTL + 2 * RENEW + 3000, 'the takeover');
    expect(took).toBeLessThanOrEqual(TTL + 2 * RENEW + 1000);
    for (let i = 0; i < 5; i++) last = (await follower.events.append('case-1', [ev('A')], 'any')).position;
    await follower.runner.waitFor(['counter'], last, 3000);
    const doc = await follower.store.get<Counter>('counters', 'case-1');
    expect(doc?.count).toBe(15);
    expect(new Set(doc?.positions).size).toBe(15);
    // It started from the stored checkpoint: none of the first ten applied again.
    expect(follower.applied).toHaveLength(5);
  });

  it('a stale leader that did not notice the loss of its lease has its commit refused by Redis', async () => {
    const a = await replica();
    const b = await replica();
    await until(() => a.runner.leading.length + b.runner.leading.length === 1, 3000, 'a leader');
    const [stale, next] = a.runner.leading.length ? [a, b] : [b, a];
    const first = await next.events.append('case-1', [ev('A')], 'any');
    await next.runner.waitFor(['counter'], first.position, 3000);
    // Paused (a long GC, a partition): it keeps following the log and believes it leads.
    stale.leases.pauseForTest({ watchdogs: false });
    await until(() => next.runner.leading.length === 1, TTL + 2 * RENEW + 3000, 'the takeover');
    expect(stale.runner.leading).toEqual(['counter']);
    // The stale leader applies the next event only after the new holder has committed it.
    let open!: () => void;
    stale.gate.closed = new Promise<void>((r) => (open = r));
    const second = await next.events.append('case-1', [ev('A')], 'any');
    await next.runner.waitFor(['counter'], second.position, 3000);
    stale.gate.closed = null;
    open();
    // Both applied the second event; only the new holder's commit counts.
    await until(() => stale.applied.includes(second.position), 3000, 'the stale apply');
    const third = await next.events.append('case-1', [ev('A')], 'any');
    await next.runner.waitFor(['counter'], third.position, 3000);
    await until(() => stale.runner.leading.length === 0, 3000, 'the stale leader to stop');
    expect(stale.logs).toContain('projection commit refused: a later lease holder committed; this replica stops running it');
    expect(stale.applied).not.toContain(third.position);
    expect((await next.store.get<Counter>('counters', 'case-1'))?.count).toBe(3);
  });

  it('when Redis loses the read model, a follower waits for the holder to rebuild it before it answers a waiter', async () => {
    const a = await replica();
    const b = await replica();
    await until(() => a.runner.leading.length + b.runner.leading.length === 1, 3000, 'a leader');
    const [leader, follower] = a.runner.leading.length ? [a, b] : [b, a];
    let last = 0;
    for (let i = 0; i < 5; i++) last = (await follower.events.append('case-1', [ev('A')], 'any')).position;
    await follower.runner.waitFor(['counter'], last, 3000);
    // The rebuild is held at its first event; Redis loses everything.
    let open!: () => void;
    leader.gate.closed = new Promise<void>((r) => (open = r));
    try {
      await deleteKeys(`${prefix}:*`);
      await until(() => follower.runner.position('counter') === 0, 3000, 'the follower to see the rebuild');
      await expect(follower.runner.waitFor(['counter'], last, 300)).rejects.toThrow(/not at position/);
    } finally {
      leader.gate.closed = null;
      open();
    }
    await follower.runner.waitFor(['counter'], last, 3000);
    expect((await follower.store.get<Counter>('counters', 'case-1'))?.count).toBe(5);
  });

  it('the Redis commit checks the fence atomically with the write and the checkpoint', async () => {
    const store = new RedisReadStore(REDIS_URL, prefix);
    toClose.push(store);
    const put = (n: number) => [{ op: 'put' as const, collection: 'c', key: 'k', doc: { n } }];
    expect(await store.commit('p', 1, put(1), { fence: 2 })).toEqual({ applied: true, generation: 0 });
    expect(await store.commit('p', 2, put(2), { fence: 1 })).toEqual({ applied: false, generation: 0, fenced: true });
    expect(await store.get('c', 'k')).toEqual({ n: 1 });
    expect(await store.getCheckpoint('p')).toBe(1);
    expect(await store.commit('p', 3, put(3), { fence: 3 })).toEqual({ applied: true, generation: 0 });
    expect(await admin.hget(`${prefix}:fence`, 'p')).toBe('3');
    // Unfenced writers (one process) are not checked.
    expect(await store.commit('p', 4, put(4))).toEqual({ applied: true, generation: 0 });
  });
});
