import { randomUUID } from 'node:crypto';
import Redis from 'ioredis';
import { Leases, PostgresCoordination, PostgresEventStore, RecordedEvent } from '@svc/eventstore';
import { OwnRedis, TestEventSchema, testEvent as ev } from '@svc/testing';
import { ProjectionRunner } from '../src/projection-runner';
import { RedisReadStore } from '../src/redis-read-store';
import { Projection } from '../src/types';

/**
 * A Redis read store killed (SIGKILL) and started again empty under running projections
 * (docs/scaling.md, "Read store loss"): `ProjectionRunner.available` is what the HTTP gate asks
 * before and after a read. Whenever a read would be served (available before and after it, no
 * drop or loss in between), it must read the complete read model, never the empty or half-rebuilt
 * one; and the model is available again once rebuilt. Its own redis-server on a free port (never
 * the shared one), PostgreSQL for the log and the leases, a schema of this run's own.
 */
const schema = new TestEventSchema('rsloss');
const EVENTS = 300;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Counts the events of each stream; each apply takes a little time, so that a rebuild lasts long enough to be read during it. */
const counter: Projection = {
  name: 'counter',
  streamPrefixes: ['case-'],
  async apply(event: RecordedEvent, tx) {
    await sleep(1);
    const doc = (await tx.get<{ count: number }>('counters', event.streamId)) ?? { count: 0 };
    doc.count++;
    tx.put('counters', event.streamId, doc);
  },
};

async function until(cond: () => boolean, timeoutMs: number, what: string): Promise<void> {
  const t0 = Date.now();
  while (!cond()) {
    if (Date.now() - t0 > timeoutMs) throw new Error(`timed out waiting for ${what}`);
    await sleep(10);
  }
}

describe('read models on a Redis restarted empty', () => {
  const redis = new OwnRedis();
  let prefix: string;
  const toClose: { close?(): Promise<void>; stop?(): Promise<void> }[] = [];

  interface Replica {
    events: PostgresEventStore;
    store: RedisReadStore;
    runner: ProjectionRunner;
    logs: string[];
  }

  async function replica(): Promise<Replica> {
    const events = await PostgresEventStore.open({ connectionString: schema.url, schema: schema.name, pollIntervalMs: 50, poolSize: 2 });
    const store = new RedisReadStore(redis.url, prefix);
    const leases = new Leases(new PostgresCoordination({ connectionString: schema.url, schema: schema.name }), { ttlMs: 1000, renewMs: 200 });
    const logs: string[] = [];
    const runner = new ProjectionRunner({
      eventStore: events,
      readStore: store,
      logger: { warn: (_meta, msg) => void logs.push(msg) },
      leases,
      retryDelayMs: 20,
      maxRetryDelayMs: 200,
      checkpointIntervalMs: 100,
      lossCheckIntervalMs: 60_000, // the connection drop finds the loss, not the periodic check
      maxBatchEvents: 20,
    });
    runner.register(counter);
    await runner.start();
    toClose.push(runner, leases, events, store);
    return { events, store, runner, logs };
  }

  /**
   * Reads the model as the HTTP gate serves it, every few ms until `stop()`: `served` when the
   * runner was available before and after the read with no drop or loss in between.
   */
  function sampler(r: Replica) {
    const samples: { served: boolean; count: number | null; available: boolean }[] = [];
    let running = true;
    const done = (async () => {
      while (running) {
        const [before, epoch] = [r.runner.available, r.runner.readEpoch];
        let count: number | null = null;
        try {
          count = (await r.store.get<{ count: number }>('counters', 'case-1'))?.count ?? 0;
        } catch {
          count = null; // the store is down: an error, which the service answers 503
        }
        const served = before && r.runner.available && epoch === r.runner.readEpoch && count !== null;
        samples.push({ served, count, available: r.runner.available });
        await sleep(3);
      }
    })();
    return {
      samples,
      stop: async () => {
        running = false;
        await done;
      },
    };
  }

  beforeAll(async () => {
    await Promise.all([redis.start(), schema.create()]);
  }, 30_000);

  beforeEach(() => {
    prefix = `test:rsloss:${randomUUID()}`;
  });

  afterEach(async () => {
    for (const c of toClose.splice(0)) await (c.stop ? c.stop() : c.close?.())?.catch(() => undefined);
    await schema.truncate('events', 'leases');
  });

  afterAll(async () => {
    await Promise.all([redis.destroy(), schema.drop()]);
  });

  /** EVENTS events on case-1, visible on every replica. */
  async function written(replicas: Replica[]): Promise<void> {
    let last = 0;
    for (let i = 0; i < EVENTS; i += 50)
      last = (
        await replicas[0].events.append(
          'case-1',
          Array.from({ length: 50 }, () => ev('A')),
          'any',
        )
      ).position;
    for (const r of replicas) await r.runner.waitFor(['counter'], last, 20_000);
    for (const r of replicas) expect(r.runner.available).toBe(true);
  }

  async function restartEmpty(replicas: Replica[]): Promise<void> {
    await redis.kill9();
    for (const r of replicas) await until(() => !r.runner.available, 5000, 'the drop to be seen');
    await sleep(300);
    await redis.start();
  }

  it('the holder of the projection serves nothing from the drop until its rebuild has reached what the model had', async () => {
    const a = await replica();
    await until(() => a.runner.leading.length === 1, 5000, 'the lease');
    await written([a]);
    const probe = sampler(a);
    await restartEmpty([a]);
    await until(() => a.runner.available, 30_000, 'the model rebuilt');
    await sleep(100);
    await probe.stop();
    const wrong = probe.samples.filter((s) => s.served && s.count !== EVENTS);
    expect(wrong).toEqual([]);
    // The rebuild was there to be seen: reads answered from Redis while the model was held back.
    expect(probe.samples.filter((s) => !s.available && s.count !== null).length).toBeGreaterThan(0);
    expect(probe.samples.at(-1)).toEqual({ served: true, count: EVENTS, available: true });
    expect(a.logs).toContain('read model lost by the store; rebuilding it from the start of the log');
    // The marker is gone once the rebuild passed it.
    const admin = new Redis(redis.url);
    try {
      expect(await admin.hget(`${prefix}:rebuild`, 'counter')).toBeNull();
    } finally {
      admin.disconnect();
    }
  }, 60_000);

  it('a replica that follows serves nothing either until the holder has rebuilt the model', async () => {
    const a = await replica();
    const b = await replica();
    await until(() => a.runner.leading.length + b.runner.leading.length === 1, 5000, 'a leader');
    const follower = a.runner.leading.length ? b : a;
    await written([a, b]);
    const probe = sampler(follower);
    await restartEmpty([a, b]);
    await until(() => a.runner.available && b.runner.available, 30_000, 'the model rebuilt');
    await sleep(100);
    await probe.stop();
    expect(probe.samples.filter((s) => s.served && s.count !== EVENTS)).toEqual([]);
    expect(probe.samples.filter((s) => !s.available && s.count !== null).length).toBeGreaterThan(0);
    expect(probe.samples.at(-1)).toEqual({ served: true, count: EVENTS, available: true });
  }, 60_000);
});
