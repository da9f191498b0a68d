// Over 400 lines: the one conformance suite every event store passes.
import { randomUUID } from 'node:crypto';
import { EventMetadata, EventStore, NewEvent, RecordedEvent, Subscription, WrongExpectedRevisionError } from '@svc/eventstore';

export interface EventStoreFixture {
  store: EventStore;
  cleanup(): Promise<void>;
  /**
   * Opens a second, independent connection to the same storage (a fresh process would see the
   * same). Adapters without durable storage leave it out and the durability test is skipped.
   */
  reopen?: () => Promise<EventStore>;
  /**
   * True when appends issued in the same tick are applied in call order (in-process adapters).
   * A server adapter may apply concurrent requests in any order.
   */
  ordered?: boolean;
  /**
   * True for a store that chains events (`HashChainingEventStore`): metadata reads back with the
   * chain fields (`prevHash`, `hash`) added to what was written.
   */
  chained?: boolean;
}

export function meta(overrides: Partial<EventMetadata> = {}): EventMetadata {
  return {
    eventId: randomUUID(),
    correlationId: randomUUID(),
    causationId: null,
    organizationId: 'org_1',
    environmentId: 'env_1',
    actor: 'system',
    recordedAt: '2026-01-01T00:00:00.000Z',
    ...overrides,
  };
}

export function ev<T>(type: string, data: T, overrides: Partial<EventMetadata> = {}): NewEvent<T> {
  return { type, data, metadata: meta(overrides) };
}

/** Unique stream-name prefix per test, so the suite also runs against a shared server. */
function prefix(): string {
  return `t${randomUUID().replace(/-/g, '').slice(0, 12)}-`;
}

async function expectWrongRevision(p: Promise<unknown>): Promise<WrongExpectedRevisionError> {
  let caught: unknown;
  try {
    await p;
  } catch (e) {
    caught = e;
  }
  expect(caught).toBeInstanceOf(WrongExpectedRevisionError);
  return caught as WrongExpectedRevisionError;
}

/** Collects handler calls; `waitFor(n)` resolves once n events have been handled. */
class Collector {
  readonly events: RecordedEvent[] = [];
  active = 0;
  maxActive = 0;
  private waiters: { n: number; resolve(): void }[] = [];

  constructor(private readonly onEvent?: (e: RecordedEvent) => Promise<void>) {}

  readonly handler = async (e: RecordedEvent): Promise<void> => {
    this.active++;
    this.maxActive = Math.max(this.maxActive, this.active);
    try {
      await new Promise((r) => setTimeout(r, 2));
      if (this.onEvent) await this.onEvent(e);
      this.events.push(e);
    } finally {
      this.active--;
    }
    this.waiters = this.waiters.filter((w) => {
      if (this.events.length >= w.n) {
        w.resolve();
        return false;
      }
      return true;
    });
  };

  waitFor(n: number, timeoutMs = 10_000): Promise<void> {
    if (this.events.length >= n) return Promise.resolve();
    return new Promise((resolve, reject) => {
      const t = setTimeout(() => reject(new Error(`timed out waiting for ${n} events, got ${this.events.length}`)), timeoutMs);
      this.waiters.push({
        n,
        resolve: () => {
          clearTimeout(t);
          resolve();
        },
      });
    });
  }
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * The one conformance suite of the EventStore port, run against every adapter. It assumes only
 * that nothing else writes to the store while a test runs; stream names are unique per test.
 */
export function describeEventStoreConformance(name: string, factory: () => Promise<EventStoreFixture>): void {
  describe(`EventStore conformance: ${name}`, () => {
    let fx: EventStoreFixture;
    let store: EventStore;
    let p: string;
    const subs: Subscription[] = [];

    beforeEach(async () => {
      fx = await factory();
      store = fx.store;
      p = prefix();
    });

    afterEach(async () => {
      await Promise.all(subs.splice(0).map((s) => s.close()));
      await fx.cleanup();
    });

    describe('append and readStream', () => {
      it('appends events and reads them back in order with revisions and positions', async () => {
        const s = `${p}case-1`;
        const r = await store.append(s, [ev('Opened', { a: 1 }), ev('Noted', { text: 'héllo ✓', n: [1, 2, { x: null }] })], 'no_stream');
        expect(r.nextExpectedRevision).toBe(1);
        expect(r.position).toBeGreaterThan(0);

        const events = await store.readStream(s);
        expect(events.map((e) => [e.streamId, e.revision, e.type])).toEqual([
          [s, 0, 'Opened'],
          [s, 1, 'Noted'],
        ]);
        expect(events[0].data).toEqual({ a: 1 });
        expect(events[1].data).toEqual({ text: 'héllo ✓', n: [1, 2, { x: null }] });
        expect(events[0].position).toBeGreaterThan(0);
        expect(events[1].position).toBeGreaterThan(events[0].position);
        expect(r.position).toBe(events[1].position);

        const r2 = await store.append(s, [ev('Closed', {})], 1);
        expect(r2.nextExpectedRevision).toBe(2);
        expect(r2.position).toBeGreaterThan(r.position);
        expect((await store.readStream(s, 1)).map((e) => e.revision)).toEqual([1, 2]);
        expect(await store.readStream(s, 3)).toEqual([]);
      });

      it('reads [] for a stream that does not exist', async () => {
        expect(await store.readStream(`${p}missing`)).toEqual([]);
      });

      it('round-trips every metadata field', async () => {
        const s = `${p}meta`;
        const m = meta({
          causationId: randomUUID(),
          organizationId: 'org_42',
          environmentId: null,
          actor: 'staff:user_7',
          recordedAt: '2026-03-04T05:06:07.890Z',
        });
        await store.append(s, [{ type: 'Happened', data: { ok: true }, metadata: m }], 'any');
        const [e] = await store.readStream(s);
        const written = fx.chained ? { ...m, prevHash: null, hash: expect.stringMatching(/^[0-9a-f]{64}$/) } : m;
        expect(e.metadata).toEqual(written);
        const all = (await store.readAll(e.position - 1, 10)).find((x) => x.streamId === s);
        expect(all?.metadata).toEqual(written);
      });
    });

    describe('expected revision', () => {
      it('no_stream: succeeds on a new stream, conflicts on an existing one and writes nothing', async () => {
        const s = `${p}ns`;
        await store.append(s, [ev('A', {})], 'no_stream');
        const head = await store.headPosition();
        const err = await expectWrongRevision(store.append(s, [ev('B', {})], 'no_stream'));
        expect(err.streamId).toBe(s);
        expect(err.expected).toBe('no_stream');
        expect(err.actual).toBe(0);
        expect((await store.readStream(s)).map((e) => e.type)).toEqual(['A']);
        expect(await store.headPosition()).toBe(head);
      });

      it('exact revision: succeeds when current, conflicts when stale or when the stream is missing', async () => {
        const s = `${p}exact`;
        await store.append(s, [ev('A', {}), ev('B', {})], 'no_stream');
        await store.append(s, [ev('C', {})], 1);
        const head = await store.headPosition();

        const stale = await expectWrongRevision(store.append(s, [ev('X', {}), ev('Y', {})], 1));
        expect(stale.expected).toBe(1);
        expect(stale.actual).toBe(2);
        const ahead = await expectWrongRevision(store.append(s, [ev('X', {})], 5));
        expect(ahead.actual).toBe(2);
        const missing = await expectWrongRevision(store.append(`${p}nothing`, [ev('X', {})], 0));
        expect(missing.actual).toBe('no_stream');

        expect((await store.readStream(s)).map((e) => e.type)).toEqual(['A', 'B', 'C']);
        expect(await store.readStream(`${p}nothing`)).toEqual([]);
        expect(await store.headPosition()).toBe(head);
      });

      it('any: appends whether or not the stream exists', async () => {
        const s = `${p}any`;
        expect((await store.append(s, [ev('A', {})], 'any')).nextExpectedRevision).toBe(0);
        expect((await store.append(s, [ev('B', {}), ev('C', {})], 'any')).nextExpectedRevision).toBe(2);
        expect((await store.readStream(s)).map((e) => e.revision)).toEqual([0, 1, 2]);
      });

      it('64 concurrent appends with no_stream, then with the same exact revision: exactly one winner each', async () => {
        const s = `${p}race`;
        const first = await Promise.allSettled(Array.from({ length: 64 }, (_, i) => store.append(s, [ev('Claimed', { by: i })], 'no_stream')));
        const won = first.filter((r) => r.status === 'fulfilled');
        const lost = first.filter((r) => r.status === 'rejected') as PromiseRejectedResult[];
        expect(won).toHaveLength(1);
        expect(lost).toHaveLength(63);
        for (const l of lost) expect(l.reason).toBeInstanceOf(WrongExpectedRevisionError);

        const second = await Promise.allSettled(Array.from({ length: 64 }, (_, i) => store.append(s, [ev('Next', { by: i })], 0)));
        expect(second.filter((r) => r.status === 'fulfilled')).toHaveLength(1);
        for (const l of second.filter((r) => r.status === 'rejected') as PromiseRejectedResult[]) {
          expect(l.reason).toBeInstanceOf(WrongExpectedRevisionError);
        }
        const events = await store.readStream(s);
        expect(events.map((e) => [e.revision, e.type])).toEqual([
          [0, 'Claimed'],
          [1, 'Next'],
        ]);
      });

      it('concurrent appends to many streams all commit with distinct, increasing positions', async () => {
        const results = await Promise.all(Array.from({ length: 64 }, (_, i) => store.append(`${p}s-${i}`, [ev('E', { i }), ev('F', { i })], 'no_stream')));
        const positions = results.map((r) => r.position);
        expect(new Set(positions).size).toBe(64);
        for (let i = 0; i < 64; i++) {
          const events = await store.readStream(`${p}s-${i}`);
          expect(events.map((e) => e.data)).toEqual([{ i }, { i }]);
          expect(events[1].position).toBe(results[i].position);
        }
      });
    });

    describe('readAll and headPosition', () => {
      it('returns events of all streams in append order, pages by position, and reports the head', async () => {
        const start = await store.headPosition();
        const plan = ['a', 'b', 'a', 'c', 'b', 'a', 'c'];
        const counts: Record<string, number> = {};
        for (const [i, k] of plan.entries()) {
          const expected = counts[k] === undefined ? 'no_stream' : counts[k];
          await store.append(`${p}${k}`, [ev('E', { i })], expected);
          counts[k] = (counts[k] ?? -1) + 1;
        }
        const all = (await store.readAll(start, 1000)).filter((e) => e.streamId.startsWith(p));
        expect(all.map((e) => (e.data as { i: number }).i)).toEqual(plan.map((_, i) => i));
        expect(all.map((e) => e.streamId)).toEqual(plan.map((k) => `${p}${k}`));
        for (let i = 1; i < all.length; i++) expect(all[i].position).toBeGreaterThan(all[i - 1].position);
        expect(all.every((e) => e.position > start)).toBe(true);

        const paged: RecordedEvent[] = [];
        let from = start;
        for (;;) {
          const page = await store.readAll(from, 2);
          expect(page.length).toBeLessThanOrEqual(2);
          if (page.length === 0) break;
          expect(page[0].position).toBeGreaterThan(from);
          paged.push(...page);
          from = page[page.length - 1].position;
        }
        expect(paged.filter((e) => e.streamId.startsWith(p)).map((e) => e.position)).toEqual(all.map((e) => e.position));

        const head = await store.headPosition();
        expect(head).toBe(all[all.length - 1].position);
        expect(await store.readAll(head, 10)).toEqual([]);
        expect(await store.readAll(start, 0)).toEqual([]);
      });
    });

    describe('subscribeToAll', () => {
      it('catches up from a checkpoint (exclusive), then follows live appends, one at a time', async () => {
        const s = `${p}sub`;
        const r1 = await store.append(s, [ev('E', { n: 1 })], 'no_stream');
        await store.append(s, [ev('E', { n: 2 }), ev('E', { n: 3 })], 0);

        const c = new Collector();
        subs.push(store.subscribeToAll({ fromPosition: r1.position }, c.handler));
        await c.waitFor(2);
        expect(c.events.map((e) => (e.data as { n: number }).n)).toEqual([2, 3]);

        await store.append(s, [ev('E', { n: 4 })], 2);
        await store.append(`${p}other`, [ev('E', { n: 5 })], 'no_stream');
        await store.append(s, [ev('E', { n: 6 }), ev('E', { n: 7 })], 3);
        await c.waitFor(6);
        const mine = c.events.filter((e) => e.streamId.startsWith(p));
        expect(mine.map((e) => (e.data as { n: number }).n)).toEqual([2, 3, 4, 5, 6, 7]);
        for (let i = 1; i < c.events.length; i++) expect(c.events[i].position).toBeGreaterThan(c.events[i - 1].position);
        expect(c.maxActive).toBe(1);
        expect(mine[0].metadata.actor).toBe('system');
      });

      it('delivers from the start when fromPosition is 0 and stops after close', async () => {
        const start = await store.headPosition();
        const s = `${p}closing`;
        await store.append(s, [ev('E', { n: 1 })], 'no_stream');
        const c = new Collector();
        const sub = store.subscribeToAll({ fromPosition: start }, c.handler);
        await c.waitFor(1);
        await sub.close();
        await store.append(s, [ev('E', { n: 2 })], 0);
        await sleep(400);
        expect(c.events.filter((e) => e.streamId === s).map((e) => e.revision)).toEqual([0]);

        if (start === 0) {
          const c0 = new Collector();
          subs.push(store.subscribeToAll({ fromPosition: 0 }, c0.handler));
          await c0.waitFor(2);
          expect(c0.events.map((e) => e.revision)).toEqual([0, 1]);
        }
      });

      it('retries an event whose handler throws, without skipping it or reordering', async () => {
        const start = await store.headPosition();
        const s = `${p}retry`;
        let failures = 0;
        const attempts: number[] = [];
        const c = new Collector(async (e) => {
          if (!e.streamId.startsWith(p)) return;
          attempts.push(e.revision);
          if (e.revision === 1 && failures < 2) {
            failures++;
            throw new Error('projection not ready');
          }
        });
        const warn = jest.spyOn(console, 'warn').mockImplementation(() => undefined);
        try {
          subs.push(store.subscribeToAll({ fromPosition: start }, c.handler));
          await store.append(s, [ev('E', { n: 0 }), ev('E', { n: 1 }), ev('E', { n: 2 })], 'no_stream');
          await c.waitFor(3);
        } finally {
          warn.mockRestore();
        }
        expect(c.events.map((e) => e.revision)).toEqual([0, 1, 2]);
        expect(attempts).toEqual([0, 1, 1, 1, 2]);
        expect(c.maxActive).toBe(1);
      });

      it('passOver: each event is either taken by it (true) or handed to the handler, exactly once and in order; a throw counts as no', async () => {
        const start = await store.headPosition();
        const s = `${p}passover`;
        const seen: { n: number; by: 'passOver' | 'handler' }[] = [];
        const c = new Collector(async (e) => {
          if (e.streamId === s) seen.push({ n: (e.data as { n: number }).n, by: 'handler' });
        });
        const passOver = (e: RecordedEvent) => {
          if (e.streamId !== s) return false;
          // Decides from position, stream and type only (data may still be sealed here).
          if (e.type === 'Skip') {
            seen.push({ n: e.revision, by: 'passOver' });
            return true;
          }
          if (e.type === 'Boom') throw new Error('passOver failed');
          return false;
        };
        subs.push(store.subscribeToAll({ fromPosition: start, passOver }, c.handler));
        await store.append(s, [ev('Keep', { n: 0 }), ev('Skip', { n: 1 }), ev('Boom', { n: 2 }), ev('Skip', { n: 3 }), ev('Keep', { n: 4 })], 'no_stream');
        const until = Date.now() + 5000;
        while (seen.length < 5 && Date.now() < until) await sleep(20);
        await sleep(100);
        expect(seen.map((x) => x.n)).toEqual([0, 1, 2, 3, 4]);
        const byHandler = seen.filter((x) => x.by === 'handler').map((x) => x.n);
        // A store may ignore passOver (KurrentDB): then every event reaches the handler.
        if (byHandler.length === 5) return;
        expect(seen).toEqual([
          { n: 0, by: 'handler' },
          { n: 1, by: 'passOver' },
          { n: 2, by: 'handler' },
          { n: 3, by: 'passOver' },
          { n: 4, by: 'handler' },
        ]);
      });

      it('filters by stream prefix', async () => {
        const start = await store.headPosition();
        const c = new Collector();
        subs.push(store.subscribeToAll({ fromPosition: start, streamPrefix: [`${p}case-`, `${p}pathway-`] }, c.handler));
        await store.append(`${p}case-1`, [ev('E', { n: 1 })], 'no_stream');
        await store.append(`${p}conversation-1`, [ev('E', { n: 2 })], 'no_stream');
        await store.append(`${p}pathway-1`, [ev('E', { n: 3 })], 'no_stream');
        await store.append(`${p}xcase-1`, [ev('E', { n: 4 })], 'no_stream');
        await store.append(`${p}case-2`, [ev('E', { n: 5 })], 'no_stream');
        await c.waitFor(3);
        await sleep(300);
        expect(c.events.map((e) => (e.data as { n: number }).n)).toEqual([1, 3, 5]);
      });
    });

    describe('group commit and durability', () => {
      it('answers each caller only after its append is committed (a fresh connection sees it)', async () => {
        if (!fx.reopen) return;
        const fresh = await fx.reopen();
        try {
          const checks = await Promise.all(
            Array.from({ length: 32 }, async (_, i) => {
              const s = `${p}durable-${i}`;
              const r = await store.append(s, [ev('E', { i })], 'no_stream');
              const seen = await fresh.readStream(s);
              return { r, seen };
            }),
          );
          for (const [i, { r, seen }] of checks.entries()) {
            expect(seen.map((e) => e.data)).toEqual([{ i }]);
            expect(seen[0].position).toBe(r.position);
          }
        } finally {
          await fresh.close();
        }
      });

      it('a conflicting append in a batch fails alone while the others commit', async () => {
        const s = `${p}batch`;
        await store.append(s, [ev('A', {})], 'no_stream');
        const results = await Promise.allSettled([
          store.append(`${p}batch-other-1`, [ev('X', {})], 'no_stream'),
          store.append(s, [ev('B', {})], 0),
          store.append(s, [ev('C', {})], 0),
          store.append(`${p}batch-other-2`, [ev('Y', {}), ev('Z', {})], 'any'),
        ]);
        expect(results[0].status).toBe('fulfilled');
        expect(results[3].status).toBe('fulfilled');
        const bc = [results[1], results[2]];
        expect(bc.filter((r) => r.status === 'fulfilled')).toHaveLength(1);
        const loser = bc.find((r) => r.status === 'rejected') as PromiseRejectedResult;
        expect(loser.reason).toBeInstanceOf(WrongExpectedRevisionError);
        const winner = results[1].status === 'fulfilled' ? 'B' : 'C';
        expect((await store.readStream(s)).map((e) => e.type)).toEqual(['A', winner]);
        expect(await store.readStream(`${p}batch-other-1`)).toHaveLength(1);
        expect(await store.readStream(`${p}batch-other-2`)).toHaveLength(2);
      });

      it('checks each expected revision against earlier appends of the same tick (in-process adapters)', async () => {
        if (!fx.ordered) return;
        const s = `${p}tick`;
        const results = await Promise.allSettled([
          store.append(s, [ev('A', {})], 'no_stream'),
          store.append(s, [ev('B', {}), ev('C', {})], 0),
          store.append(s, [ev('X', {})], 0),
          store.append(s, [ev('D', {})], 2),
          store.append(s, [ev('Y', {})], 'no_stream'),
          store.append(s, [ev('E', {})], 'any'),
        ]);
        expect(results.map((r) => r.status)).toEqual(['fulfilled', 'fulfilled', 'rejected', 'fulfilled', 'rejected', 'fulfilled']);
        expect((results[2] as PromiseRejectedResult).reason).toMatchObject({ expected: 0, actual: 2 });
        expect((results[4] as PromiseRejectedResult).reason).toMatchObject({ expected: 'no_stream', actual: 3 });
        expect((results[5] as PromiseFulfilledResult<{ nextExpectedRevision: number }>).value.nextExpectedRevision).toBe(4);
        expect((await store.readStream(s)).map((e) => e.type)).toEqual(['A', 'B', 'C', 'D', 'E']);
      });
    });

    describe('ping (readiness)', () => {
      it('answers while the store is open, and fails once it is closed', async () => {
        await expect(store.ping()).resolves.toBeUndefined();
        await store.append(`${p}ping`, [ev('A', {})], 'no_stream');
        await expect(store.ping()).resolves.toBeUndefined();
        await store.close();
        await expect(store.ping()).rejects.toThrow();
      });
    });
  });
}
