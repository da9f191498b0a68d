// Over 400 lines: the global-log checkpoints' cases on each store kind.
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { Client } from 'pg';
import {
  CHECKPOINT_BLOCK_EVENTS,
  CHECKPOINT_EVENT_TYPE,
  ChainCheckpoint,
  ChainCheckpointer,
  ChainVerifier,
  CheckpointReader,
  CheckpointVerifier,
  DEFAULT_DATABASE_URL,
  EventStore,
  HashChainingEventStore,
  InMemoryEventStore,
  PostgresEventStore,
  RecordedEvent,
  SqliteEventStore,
  checkpointHash,
  checkpointStream,
  isCheckpointStream,
} from '@svc/eventstore';
import { ev } from './conformance';

/**
 * Checkpoints of the global log (chain-checkpoints.ts, docs/audit.md): written by the background
 * job every K events or T seconds, chained to each other, recomputed by the verifier, which names
 * the first checkpoint (and the part of its range) that no longer matches the log: events removed
 * from the middle or the end of a stream, events moved, a checkpoint changed or removed.
 */

const CLOCK_TIME = new Date('2031-03-04T05:06:07.000Z');
const clock = () => CLOCK_TIME;

/** Every event up to the head through both verifiers, as `svc verify --all` does. */
async function verifyAll(store: EventStore) {
  const upTo = await store.headPosition();
  const checkpoints = new CheckpointVerifier(new CheckpointReader(store, upTo));
  const chain = new ChainVerifier();
  for (let from = 0; from < upTo;) {
    const page = await store.readAll(from, 500);
    if (!page.length) break;
    for (const e of page) {
      if (e.position > upTo) break;
      chain.add(e);
      if (checkpoints.needs(e.position)) await checkpoints.load();
      checkpoints.add(e);
    }
    from = page[page.length - 1].position;
  }
  return { report: await checkpoints.finish(), chainIssues: [...chain.issues(), ...chain.finish(true)] };
}

/** Every checkpoint, from all checkpoint streams. */
async function checkpointsOf(store: EventStore): Promise<(ChainCheckpoint & { position: number; streamId: string; revision: number; recordedAt: string })[]> {
  const reader = new CheckpointReader(store, Infinity);
  const all: RecordedEvent[] = [];
  while (!reader.done) all.push(...(await reader.read()));
  return all.map((e) => ({
    ...(e.data as ChainCheckpoint),
    position: e.position,
    streamId: e.streamId,
    revision: e.revision,
    recordedAt: e.metadata.recordedAt,
  }));
}

/** `count` events over `streams` streams, one append each, round robin. */
async function fill(store: EventStore, count: number, streams: number, prefix = 's'): Promise<void> {
  const next = new Map<string, number>();
  for (let i = 0; i < count; i++) {
    const streamId = `${prefix}-${i % streams}`;
    const rev = next.get(streamId);
    await store.append(streamId, [ev('Happened', { i })], rev === undefined ? 'no_stream' : rev);
    next.set(streamId, (rev ?? -1) + 1);
  }
}

describe('ChainCheckpointer', () => {
  let store: HashChainingEventStore;
  beforeEach(() => {
    store = new HashChainingEventStore(new InMemoryEventStore());
  });
  afterEach(() => store.close());

  it('writes a checkpoint every K events, cut exactly there, each chaining to the one before; the clock dates them', async () => {
    await fill(store, 25, 5);
    const writer = new ChainCheckpointer(store, { everyEvents: 10, intervalMs: 3_600_000, now: clock });
    expect(await writer.runOnce()).toBe(2);
    let cps = await checkpointsOf(store);
    expect(cps.map((c) => [c.checkpoint, c.afterPosition, c.toPosition, c.events])).toEqual([
      [0, 0, 10, 10],
      [1, 10, 20, 10],
    ]);
    expect(cps[0].prevHash).toBeNull();
    expect(cps[1].prevHash).toBe(cps[0].hash);
    for (const c of cps) expect(c.hash).toBe(checkpointHash(c));
    expect(cps.every((c) => c.recordedAt === CLOCK_TIME.toISOString())).toBe(true);
    // Not full, and the interval has not passed: nothing more.
    expect(await writer.runOnce()).toBe(0);
    // Forced: the rest, checkpoint events included.
    expect(await writer.runOnce(true)).toBe(1);
    cps = await checkpointsOf(store);
    expect(cps[2]).toMatchObject({ checkpoint: 2, afterPosition: 20, toPosition: 27, events: 7, prevHash: cps[1].hash });
    // Only a checkpoint came since: no checkpoint of checkpoints.
    expect(await writer.runOnce(true)).toBe(0);
    const { report, chainIssues } = await verifyAll(store);
    expect(chainIssues).toEqual([]);
    expect(report).toEqual({ checkpoints: 3, coveredEvents: 27, coveredTo: 27, uncoveredEvents: 1, issues: [] });
  });

  it('on a schedule of real time: a checkpoint once the interval passed and an event came, none while nothing comes', async () => {
    const writer = new ChainCheckpointer(store, { everyEvents: 10_000, intervalMs: 150, pollMs: 20, now: clock });
    writer.start();
    try {
      await new Promise((r) => setTimeout(r, 300));
      expect(await checkpointsOf(store)).toEqual([]); // nothing to cover yet
      // One append of three: the interval has passed, so the writer may run between two appends.
      await store.append('s-0', [ev('Happened', { i: 0 }), ev('Happened', { i: 1 }), ev('Happened', { i: 2 })], 'no_stream');
      const t0 = Date.now();
      while (!(await checkpointsOf(store)).length) {
        if (Date.now() - t0 > 5000) throw new Error('no checkpoint within 5 s');
        await new Promise((r) => setTimeout(r, 20));
      }
      const [c] = await checkpointsOf(store);
      expect(c).toMatchObject({ checkpoint: 0, afterPosition: 0, toPosition: 3, events: 3, recordedAt: CLOCK_TIME.toISOString() });
      await new Promise((r) => setTimeout(r, 400));
      expect((await checkpointsOf(store)).length).toBe(1);
    } finally {
      await writer.stop();
    }
    await fill(store, 2, 1, 'after-stop');
    await new Promise((r) => setTimeout(r, 300));
    expect((await checkpointsOf(store)).length).toBe(1);
  });

  it('a checkpoint stream whose last entry is not a checkpoint: nothing more is written, said once', async () => {
    await fill(store, 5, 2);
    await store.append(checkpointStream(0), [ev('SomethingElse', {})], 'no_stream');
    const warnings: string[] = [];
    const writer = new ChainCheckpointer(store, { everyEvents: 2, logger: { warn: (m) => warnings.push(m) } });
    expect(await writer.runOnce(true)).toBe(0);
    expect(await writer.runOnce(true)).toBe(0);
    expect(warnings).toHaveLength(1);
    expect((await verifyAll(store)).report.issues[0].reason).toContain('an event of type SomethingElse');
  });

  it('1,000 checkpoints to a stream; a new writer finds the last one without reading them all, and goes on', async () => {
    await fill(store, 2_100, 50);
    const first = new ChainCheckpointer(store, { everyEvents: 1 });
    expect(await first.runOnce()).toBe(2_100);
    const cps = await checkpointsOf(store);
    expect(cps.map((c) => c.checkpoint)).toEqual(cps.map((_, i) => i));
    expect([cps[999].streamId, cps[999].revision, cps[1000].streamId, cps[1000].revision, cps[2099].streamId, cps[2099].revision]).toEqual([
      'audit-checkpoint-0',
      999,
      'audit-checkpoint-1',
      0,
      'audit-checkpoint-2',
      99,
    ]);
    expect(cps[1000].prevHash).toBe(cps[999].hash);
    // Another process, started now: a handful of one-event reads find checkpoint 2099.
    await fill(store, 1, 1, 'more');
    const reads: [string, number | undefined][] = [];
    const watched = new Proxy(store, {
      get(target, prop, receiver) {
        if (prop !== 'readStream') return Reflect.get(target, prop, receiver);
        return (streamId: string, from?: number) => {
          reads.push([streamId, from]);
          return target.readStream(streamId, from);
        };
      },
    });
    expect(await new ChainCheckpointer(watched, { everyEvents: 10_000 }).runOnce(true)).toBe(1);
    expect(reads.length).toBeLessThanOrEqual(6);
    const [next] = (await store.readStream('audit-checkpoint-2', 100)) as RecordedEvent<ChainCheckpoint>[];
    expect(next.data).toMatchObject({ checkpoint: 2100, afterPosition: cps[2099].toPosition, prevHash: cps[2099].hash });
    const { report, chainIssues } = await verifyAll(store);
    expect(chainIssues).toEqual([]);
    expect(report).toMatchObject({ checkpoints: 2101, issues: [] });
  });
});

describe('CheckpointVerifier on SQLite tampered with SQL', () => {
  let dir: string;
  let file: string;
  let cps: ChainCheckpoint[];
  const open = () => new SqliteEventStore(file, { writerThread: false, backgroundCheckpoint: false });
  const sql = <T>(fn: (db: Database.Database) => T): T => {
    const db = new Database(file);
    try {
      return fn(db);
    } finally {
      db.close();
    }
  };
  const row = (position: number) => sql((db) => db.prepare('SELECT * FROM events WHERE position = ?').get(position) as Record<string, unknown>);
  const insert = (r: Record<string, unknown>) =>
    sql((db) =>
      db
        .prepare(
          'INSERT INTO events (position, event_id, stream_id, revision, type, data, metadata) VALUES (@position, @event_id, @stream_id, @revision, @type, @data, @metadata)',
        )
        .run(r),
    );
  async function verify() {
    const s = open();
    try {
      return await verifyAll(s);
    } finally {
      await s.close();
    }
  }

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'chain-checkpoints-'));
    file = join(dir, 'events.sqlite');
    const store = new HashChainingEventStore(open());
    // 700 events: checkpoint 0 covers positions 1-600 in three blocks (256, 256, 88); 100 more uncovered.
    await fill(store, 600, 40);
    expect(await new ChainCheckpointer(store, { everyEvents: 600 }).runOnce()).toBe(1);
    await fill(store, 100, 10, 'later');
    expect(await new ChainCheckpointer(store, { everyEvents: 99 }).runOnce()).toBe(1);
    cps = await checkpointsOf(store);
    await store.close();
    expect(cps[0].blocks.map((b) => [b.toPosition, b.events])).toEqual([
      [CHECKPOINT_BLOCK_EVENTS, CHECKPOINT_BLOCK_EVENTS],
      [2 * CHECKPOINT_BLOCK_EVENTS, CHECKPOINT_BLOCK_EVENTS],
      [600, 600 - 2 * CHECKPOINT_BLOCK_EVENTS],
    ]);
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('the untouched log matches', async () => {
    const { report, chainIssues } = await verify();
    expect(chainIssues).toEqual([]);
    expect(report).toMatchObject({ checkpoints: 2, coveredTo: cps[1].toPosition, issues: [] });
  });

  it("a stream's last event deleted in the middle of the log: the per-stream chains see nothing, the checkpoint names the block", async () => {
    // Stream s-5's events are at positions 6, 46, ..., 566: its last one is in the third block.
    const last = sql((db) => db.prepare("SELECT * FROM events WHERE stream_id = 's-5' ORDER BY revision DESC LIMIT 1").get() as Record<string, unknown>);
    const position = last.position as number;
    expect(position).toBeGreaterThan(2 * CHECKPOINT_BLOCK_EVENTS);
    sql((db) => db.prepare('DELETE FROM events WHERE position = ?').run(position));
    try {
      const { report, chainIssues } = await verify();
      expect(chainIssues).toEqual([]);
      expect(report.issues).toEqual([
        expect.objectContaining({
          checkpoint: 0,
          afterPosition: 0,
          toPosition: 600,
          fromPosition: 2 * CHECKPOINT_BLOCK_EVENTS,
          throughPosition: 600,
          firstEvent: expect.objectContaining({ position: 2 * CHECKPOINT_BLOCK_EVENTS + 1 }),
        }),
      ]);
      expect(report.issues[0].reason).toContain('1 of the 88 events it recorded');
      expect(report.issues[0].reason).toContain('removed');
    } finally {
      insert(last);
    }
    expect((await verify()).report.issues).toEqual([]);
  });

  it('an event deleted in the middle of a stream: the chain names the next event of its stream, the checkpoint its block', async () => {
    const target = row(300);
    sql((db) => db.prepare('DELETE FROM events WHERE position = 300').run());
    try {
      const { report, chainIssues } = await verify();
      expect(chainIssues[0]).toMatchObject({ streamId: target.stream_id, revision: (target.revision as number) + 1 });
      expect(report.issues[0]).toMatchObject({ checkpoint: 0, fromPosition: CHECKPOINT_BLOCK_EVENTS, throughPosition: 2 * CHECKPOINT_BLOCK_EVENTS });
    } finally {
      insert(target);
    }
  });

  it('two events of different streams swapped in the global order: only the checkpoint sees it', async () => {
    const [a, b] = [row(100), row(101)];
    expect(a.stream_id).not.toBe(b.stream_id);
    const move = (from: number, to: number) => sql((db) => db.prepare('UPDATE events SET position = ? WHERE position = ?').run(to, from));
    move(100, 1_000_000);
    move(101, 100);
    move(1_000_000, 101);
    try {
      const { report, chainIssues } = await verify();
      expect(chainIssues).toEqual([]);
      expect(report.issues[0]).toMatchObject({
        checkpoint: 0,
        fromPosition: 0,
        throughPosition: CHECKPOINT_BLOCK_EVENTS,
        firstEvent: expect.objectContaining({ position: 1 }),
      });
      expect(report.issues[0].reason).toContain('not the ones it recorded');
    } finally {
      move(101, 1_000_000);
      move(100, 101);
      move(1_000_000, 100);
    }
    expect((await verify()).report.issues).toEqual([]);
  });

  it('the log cut before the last checkpoint (its events kept): the last range names what is gone', async () => {
    const tail = sql(
      (db) => db.prepare('SELECT * FROM events WHERE position > 650 AND position <= ? ORDER BY position').all(cps[1].toPosition) as Record<string, unknown>[],
    );
    sql((db) => db.prepare('DELETE FROM events WHERE position > 650 AND position <= ?').run(cps[1].toPosition));
    try {
      const { report } = await verify();
      expect(report.issues[0]).toMatchObject({ checkpoint: 1, afterPosition: 600, fromPosition: 600 });
      expect(report.issues[0].reason).toContain(`${tail.length} of the`);
    } finally {
      for (const r of tail) insert(r);
    }
  });

  it('a checkpoint changed, or removed: named', async () => {
    const [first, second] = sql(
      (db) => db.prepare('SELECT * FROM events WHERE stream_id = ? ORDER BY revision').all(checkpointStream(0)) as Record<string, unknown>[],
    );
    const data = JSON.parse(first.data as string);
    sql((db) => db.prepare('UPDATE events SET data = ? WHERE position = ?').run(JSON.stringify({ ...data, toPosition: 590 }), first.position));
    try {
      const { report, chainIssues } = await verify();
      expect(report.issues[0]).toMatchObject({ checkpoint: 0, checkpointPosition: first.position });
      expect(report.issues[0].reason).toContain('the checkpoint was changed');
      expect(chainIssues[0]).toMatchObject({ streamId: checkpointStream(0), revision: 0 });
    } finally {
      sql((db) => db.prepare('UPDATE events SET data = ? WHERE position = ?').run(first.data, first.position));
    }
    sql((db) => db.prepare('DELETE FROM events WHERE position = ?').run(first.position));
    try {
      const { report } = await verify();
      expect(report.issues[0]).toMatchObject({ checkpoint: 1, checkpointPosition: second.position });
      expect(report.issues[0].reason).toContain('checkpoint 0 is missing: the next one found is checkpoint 1');
    } finally {
      insert(first);
    }
    expect((await verify()).report.issues).toEqual([]);
  });
});

describe('checkpoints of two stores on one PostgreSQL schema', () => {
  const url = process.env.DATABASE_URL || DEFAULT_DATABASE_URL;
  const schema = `svc_events_ckpt_${randomUUID().replace(/-/g, '').slice(0, 12)}`;
  const stores: PostgresEventStore[] = [];
  afterAll(async () => {
    for (const s of stores) await s.close().catch(() => undefined);
    const c = new Client({ connectionString: url });
    await c.connect();
    await c.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
    await c.end();
  });

  it('write each checkpoint once: the first writer wins, the other reads it and goes on from its end', async () => {
    for (let i = 0; i < 2; i++) stores.push(await PostgresEventStore.open({ connectionString: url, schema, pollIntervalMs: 100, poolSize: 4 }));
    const chained = stores.map((s) => new HashChainingEventStore(s));
    // Both reach their first append of checkpoint 0 before either writes it (a barrier on the
    // checkpoint stream's first append), so the race is certain.
    let arrived = 0;
    let release: () => void = () => undefined;
    const barrier = new Promise<void>((r) => (release = r));
    const racing = chained.map(
      (c) =>
        new Proxy(c, {
          get(target, prop, receiver) {
            if (prop !== 'append') return Reflect.get(target, prop, receiver);
            return async (streamId: string, events: never[], expected: never) => {
              if (isCheckpointStream(streamId) && expected === 'no_stream') {
                if (++arrived === 2) release();
                await barrier;
              }
              return target.append(streamId, events, expected);
            };
          },
        }),
    );
    const writers = racing.map((s) => new ChainCheckpointer(s, { everyEvents: 25, intervalMs: 3_600_000 }));
    // Events from both stores at once, interleaved in the log.
    await Promise.all([fill(chained[0], 120, 6, 'one'), fill(chained[1], 120, 6, 'two')]);
    for (let round = 0; round < 20; round++) {
      await Promise.all(writers.map((w) => w.runOnce()));
    }
    await Promise.all(writers.map((w) => w.runOnce(true)));
    const cps = await checkpointsOf(stores[0]);
    expect(cps.map((c) => c.checkpoint)).toEqual(cps.map((_, i) => i));
    for (let i = 1; i < cps.length; i++) expect([cps[i].afterPosition, cps[i].prevHash]).toEqual([cps[i - 1].toPosition, cps[i - 1].hash]);
    expect(cps.length).toBeGreaterThanOrEqual(Math.floor(240 / 25));
    expect(writers[0].stats.written + writers[1].stats.written).toBe(cps.length);
    expect(writers[0].stats.lost + writers[1].stats.lost).toBeGreaterThanOrEqual(1);
    const { report, chainIssues } = await verifyAll(stores[1]);
    expect(chainIssues).toEqual([]);
    expect(report.issues).toEqual([]);
    expect(report.checkpoints).toBe(cps.length);
  });
});

describe('checkpoint leaves', () => {
  it('an event without chain fields counts by its content, and cannot stand for a chained one', async () => {
    const raw = new InMemoryEventStore();
    await raw.append('old-1', [ev('Old', { a: 1 })], 'no_stream');
    const chained = new HashChainingEventStore(raw);
    await chained.append('new-1', [ev('New', { a: 1 })], 'no_stream');
    expect(await new ChainCheckpointer(chained, {}).runOnce(true)).toBe(1);
    const [cp] = (await raw.readStream(checkpointStream(0))) as RecordedEvent<ChainCheckpoint>[];
    expect(cp.type).toBe(CHECKPOINT_EVENT_TYPE);
    expect(cp.data.events).toBe(2);
    expect((await verifyAll(raw)).report.issues).toEqual([]);
    // The unchained event's data changed in the store: its leaf changes.
    (raw as unknown as { log: { data: string }[] }).log[0].data = JSON.stringify({ a: 2 });
    expect((await verifyAll(raw)).report.issues[0]).toMatchObject({ checkpoint: 0, firstEvent: expect.objectContaining({ streamId: 'old-1' }) });
  });
});
