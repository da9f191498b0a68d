import { randomUUID } from 'node:crypto';
import Redis from 'ioredis';
import { SystemClock } from '@svc/clock';
import { Leases, PostgresCoordination, PostgresEventStore } from '@svc/eventstore';
import { BrokerMessage, InProcessBroker, InProcessClient, IntegrationMessage } from '@svc/messaging';
import { RedisReadStore } from '@svc/read-store';
import { BackgroundWork } from '../src/background';
import { TestEventSchema, testEvent as ev } from '@svc/testing';

/**
 * Relays and timer schedulers of two replicas of one app (docs/scaling.md), each replica with its
 * own PostgreSQL event store connection, Redis read store connection, bus client and `Leases`, on
 * one event-store schema and one Redis key prefix of this run's own. Messages are counted where a
 * consumer would get them (one in-process broker for both replicas, as one Kafka topic).
 */
const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
const schema = new TestEventSchema('bglease');
const TOPIC = 'svc.test.events';
const TTL = 1000;
const RENEW = 200;
let admin: Redis;
let prefix: string;
let broker: InProcessBroker;
let received: BrokerMessage<IntegrationMessage>[];
const toClose: (() => Promise<unknown>)[] = [];

interface Replica {
  name: string;
  events: PostgresEventStore;
  store: RedisReadStore;
  leases: Leases;
  work: BackgroundWork;
  fired: string[];
  stop(): Promise<void>;
}

async function replica(name: string): Promise<Replica> {
  const events = await PostgresEventStore.open({ connectionString: schema.url, schema: schema.name, pollIntervalMs: 50, poolSize: 2 });
  const store = new RedisReadStore(REDIS_URL, prefix);
  const pg = new PostgresCoordination({ connectionString: schema.url, schema: schema.name });
  const leases = new Leases(pg, { ttlMs: TTL, renewMs: RENEW });
  const work = new BackgroundWork(events, store, new InProcessClient(broker) as never, new SystemClock(), leases, pg);
  const fired: string[] = [];
  work.relay({ name: 'test-relay', topic: TOPIC, streamPrefixes: ['case-'] });
  work.timers<{ id: string; dueAt: number }>({
    collection: 'test-timers',
    partition: 'p',
    pollMs: 50,
    // As a projection would after the command's event: the fired timer's document goes.
    handler: async (t) => {
      fired.push(t.id);
      await store.write([{ op: 'delete', collection: 'test-timers', key: t.id }]);
    },
  });
  let stopped = false;
  const stop = async () => {
    if (stopped) return;
    stopped = true;
    await work.stop();
    await leases.close();
    await events.close();
    await store.close();
  };
  toClose.push(stop);
  await work.start();
  return { name, events, store, leases, work, fired, stop };
}

async function until(cond: () => boolean, timeoutMs: number, what: string): Promise<number> {
  const t0 = Date.now();
  while (!cond()) {
    if (Date.now() - t0 > timeoutMs) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
  return Date.now() - t0;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function deleteKeys(pattern: string): Promise<void> {
  let cursor = '0';
  do {
    const [next, keys] = await admin.scan(cursor, 'MATCH', pattern, 'COUNT', 1000);
    cursor = next;
    if (keys.length) await admin.del(...keys);
  } while (cursor !== '0');
}

async function addTimers(store: RedisReadStore, ids: string[]): Promise<void> {
  await store.write(ids.map((id) => ({ op: 'put' as const, collection: 'test-timers', key: id, doc: { id, dueAt: 1 }, partition: 'p', score: 1 })));
}

const eventIds = () => received.map((m) => m.data.metadata.eventId);

beforeAll(async () => {
  admin = new Redis(REDIS_URL, { maxRetriesPerRequest: 1 });
  await schema.create();
});

beforeEach(() => {
  prefix = `test:bglease:${randomUUID()}`;
  broker = new InProcessBroker();
  received = [];
  broker.subscribe(TOPIC, (m) => void received.push(m as BrokerMessage<IntegrationMessage>));
});

afterEach(async () => {
  for (const stop of toClose.splice(0)) await stop().catch(() => undefined);
  await deleteKeys(`${prefix}:*`);
  await schema.truncate('events', 'leases', 'relay_positions');
});

afterAll(async () => {
  await admin.quit();
  await schema.drop();
});

describe('BackgroundWork with leases (two replicas)', () => {
  it('the relay and the timers run in one replica; when it dies the other takes them over and nothing is published or fired twice', async () => {
    const a = await replica('a');
    const b = await replica('b');
    await until(() => a.leases.heldNames().length + b.leases.heldNames().length === 2, 3000, 'the holders');
    for (let i = 0; i < 10; i++) await a.events.append(`case-${i}`, [ev('Opened')], 'no_stream');
    await addTimers(a.store, ['t1', 't2', 't3', 't4', 't5']);
    await until(() => received.length >= 10 && a.fired.length + b.fired.length >= 5, 5000, 'the first round');
    await sleep(500);
    expect(received).toHaveLength(10);
    expect(new Set(eventIds()).size).toBe(10);
    expect([...a.fired, ...b.fired].sort()).toEqual(['t1', 't2', 't3', 't4', 't5']);
    // Both jobs in one replica here (it claimed first); the other did nothing.
    const holder = a.leases.heldNames().length ? a : b;
    const other = holder === a ? b : a;
    expect(holder.leases.heldNames().sort()).toEqual(['relay:test-relay', 'timers:test-timers/p']);
    expect(other.fired).toEqual([]);
    // The holder dies without releasing its leases.
    holder.leases.pauseForTest({ watchdogs: false });
    await holder.work.stop();
    for (let i = 10; i < 15; i++) await other.events.append(`case-${i}`, [ev('Opened')], 'no_stream');
    await addTimers(other.store, ['t6', 't7']);
    const took = await until(() => received.length >= 15 && other.fired.length >= 2, TTL + 2 * RENEW + 3000, 'the takeover');
    expect(took).toBeLessThan(TTL + 2 * RENEW + 1500);
    await sleep(500);
    expect(received).toHaveLength(15);
    expect(new Set(eventIds()).size).toBe(15);
    expect(other.fired.sort()).toEqual(['t6', 't7']);
  });

  it('a relay started again after the Redis read store was flushed does not publish again what it had published', async () => {
    const a = await replica('a');
    for (let i = 0; i < 5; i++) await a.events.append(`case-${i}`, [ev('Opened')], 'no_stream');
    await until(() => received.length >= 5, 5000, 'the first five');
    await a.stop();
    await deleteKeys(`${prefix}:*`);
    const b = await replica('b');
    const last = await b.events.append('case-new', [ev('Opened')], 'no_stream');
    await until(() => received.some((m) => m.data.position === last.position), 5000, 'the new event');
    await sleep(500);
    expect(received).toHaveLength(6);
    expect(new Set(eventIds()).size).toBe(6);
  });

  it('a relay position written by a holder that lost its lease is refused, and that relay stops', async () => {
    const a = await replica('a');
    await until(() => a.leases.heldNames().length === 2, 3000, 'a holds');
    const b = await replica('b');
    await a.events.append('case-1', [ev('Opened')], 'no_stream');
    await until(() => received.length === 1, 3000, 'the first');
    // a is paused without noticing: b takes over and publishes.
    a.leases.pauseForTest({ watchdogs: false });
    await until(() => b.leases.heldNames().length === 2, TTL + 2 * RENEW + 1500, 'b holds');
    const second = await b.events.append('case-2', [ev('Opened')], 'no_stream');
    // At least once: both may publish the second event; a's position write is refused.
    await until(() => received.filter((m) => m.data.position === second.position).length >= 1, 3000, 'the second');
    await sleep(1500);
    // a may publish the next event too (an emit cannot be fenced; consumers dedupe by event id), but
    // its position write after it is refused, and its relay stops there.
    const third = await b.events.append('case-3', [ev('Opened')], 'no_stream');
    await until(() => received.some((m) => m.data.position === third.position), 3000, 'the third');
    await sleep(1500);
    const fourth = await b.events.append('case-4', [ev('Opened')], 'no_stream');
    await until(() => received.some((m) => m.data.position === fourth.position), 3000, 'the fourth');
    await sleep(1000);
    expect(received.filter((m) => m.data.position === fourth.position)).toHaveLength(1);
    const pg = new PostgresCoordination({ connectionString: schema.url, schema: schema.name });
    expect(await pg.get('test-relay')).toBe(fourth.position);
    await pg.close();
  });
});
