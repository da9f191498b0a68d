import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { SqliteEventStore } from '@svc/eventstore';
import { describeEventStoreConformance, ev } from './conformance';

function tempFile(): { file: string; dir: string } {
  const dir = mkdtempSync(join(tmpdir(), 'eventstore-sqlite-'));
  return { dir, file: join(dir, 'events.db') };
}

describeEventStoreConformance('SQLite (temp file)', async () => {
  const { dir, file } = tempFile();
  const store = new SqliteEventStore(file, { pollIntervalMs: 50 });
  return {
    store,
    ordered: true,
    reopen: async () => new SqliteEventStore(file),
    cleanup: async () => {
      await store.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
});

describeEventStoreConformance('SQLite (temp file, writing on the calling thread)', async () => {
  const { dir, file } = tempFile();
  const store = new SqliteEventStore(file, { pollIntervalMs: 50, writerThread: false });
  return {
    store,
    ordered: true,
    reopen: async () => new SqliteEventStore(file, { writerThread: false }),
    cleanup: async () => {
      await store.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
});

describe('SqliteEventStore specifics', () => {
  let dir: string;
  let file: string;
  beforeEach(() => ({ dir, file } = tempFile()));
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it('opens the file in WAL mode with synchronous=FULL', async () => {
    const store = new SqliteEventStore(file);
    await store.append('s-1', [ev('E', {})], 'no_stream');
    await store.close();
    const db = new Database(file);
    expect(db.pragma('journal_mode', { simple: true })).toBe('wal');
    expect(db.pragma('page_size', { simple: true })).toBe(2048);
    db.close();
    // synchronous is per connection: check the store's own connection setting through a second store
    const again = new SqliteEventStore(file);
    expect((again as unknown as { db: Database.Database }).db.pragma('synchronous', { simple: true })).toBe(2);
    await again.close();
  });

  it.each([
    ['on the writer thread', true],
    ['on the calling thread', false],
  ])('writes every append of one tick in a single transaction (%s)', async (_, writerThread) => {
    const store = new SqliteEventStore(file, { writerThread });
    await Promise.all(Array.from({ length: 50 }, (_, i) => store.append(`s-${i}`, [ev('E', { i })], 'no_stream')));
    expect(store.stats).toMatchObject({ commits: 1, appends: 50 });
    await store.append('s-x', [ev('E', {})], 'no_stream');
    expect(store.stats).toMatchObject({ commits: 2, appends: 51 });
    expect(await store.headPosition()).toBe(51);
    // What the transactions wrote, read back through a separate connection.
    const db = new Database(file, { readonly: true });
    expect(db.prepare('SELECT COUNT(*) AS n FROM events').get()).toEqual({ n: 51 });
    db.close();
    await store.close();
  });

  it('sends the appends made while the writer thread commits a batch as the next batch, each caller answered after its own COMMIT', async () => {
    const store = new SqliteEventStore(file);
    const first = store.append('s-0', [ev('E', {})], 'no_stream');
    // The first batch leaves on the next turn; these 30 are queued while it is on the writer thread.
    await new Promise((res) => setImmediate(res));
    const more = Array.from({ length: 30 }, (_, i) => store.append(`s-${i + 1}`, [ev('E', { i })], 'no_stream'));
    await Promise.all([first, ...more]);
    expect(store.stats.appends).toBe(31);
    expect(store.stats.commits).toBeLessThanOrEqual(3);
    // Each answered append is readable from this thread's connection at once (read-your-writes).
    for (let i = 0; i <= 30; i++) expect(await store.readStream(`s-${i}`)).toHaveLength(1);
    await store.close();
  });

  it('rejects the whole batch when the writer thread cannot take the write lock (SQLITE_BUSY), then goes on', async () => {
    const store = new SqliteEventStore(file, { busyTimeoutMs: 50 });
    await store.append('s-0', [ev('E', {})], 'no_stream');
    const other = new Database(file);
    other.prepare('BEGIN IMMEDIATE').run(); // another process holds the write lock
    const results = await Promise.allSettled([store.append('s-1', [ev('E', {})], 'no_stream'), store.append('s-2', [ev('E', {})], 'no_stream')]);
    expect(results.map((r) => r.status)).toEqual(['rejected', 'rejected']);
    expect((results[0] as PromiseRejectedResult).reason).toMatchObject({ code: 'SQLITE_BUSY' });
    other.prepare('ROLLBACK').run();
    other.close();
    await store.append('s-1', [ev('E', {})], 'no_stream');
    expect((await store.readAll(0, 10)).map((e) => e.streamId)).toEqual(['s-0', 's-1']);
    await store.close();
  });

  it('goes on writing on its own connection when the writer thread dies', async () => {
    const warnings: string[] = [];
    const store = new SqliteEventStore(file, { logger: { warn: (m) => warnings.push(m) } });
    await store.append('s-1', [ev('E', { n: 1 })], 'no_stream');
    const worker = (store as unknown as { thread: { worker: { terminate(): Promise<number> } } }).thread.worker;
    await worker.terminate();
    await store.append('s-1', [ev('E', { n: 2 })], 0);
    await expect(store.append('s-1', [ev('E', { n: 3 })], 0)).rejects.toMatchObject({ actual: 1 });
    expect((await store.readStream('s-1')).map((e) => e.data)).toEqual([{ n: 1 }, { n: 2 }]);
    expect(warnings).toEqual(['event store writer thread stopped; writing on the main thread']);
    await store.close();
  });

  it('sees appends made by another connection (another process) through polling', async () => {
    const a = new SqliteEventStore(file, { pollIntervalMs: 50 });
    const b = new SqliteEventStore(file);
    const seen: number[] = [];
    const sub = a.subscribeToAll({ fromPosition: 0 }, async (e) => {
      seen.push(e.position);
    });
    const r = await b.append('s-1', [ev('E', {}), ev('E', {})], 'no_stream');
    const deadline = Date.now() + 5000;
    while (seen.length < 2 && Date.now() < deadline) await new Promise((res) => setTimeout(res, 20));
    expect(seen).toEqual([r.position - 1, r.position]);
    await sub.close();
    await b.close();
    await a.close();
  });

  describe('committed tail (live subscriptions served from memory)', () => {
    const waitFor = async (cond: () => boolean) => {
      const deadline = Date.now() + 5000;
      while (!cond() && Date.now() < deadline) await new Promise((res) => setTimeout(res, 10));
    };

    it('hands live subscribers exactly what SQLite holds, from memory, frozen', async () => {
      const store = new SqliteEventStore(file, { pollIntervalMs: 5000 });
      await store.append('s-0', [ev('E', { n: 0 })], 'no_stream');
      const seen: import('@svc/eventstore').RecordedEvent[] = [];
      const sub = store.subscribeToAll({ fromPosition: 0 }, async (e) => {
        seen.push(e);
      });
      await waitFor(() => seen.length === 1);
      const before = { ...store.stats };
      await Promise.all([
        store.append('s-1', [ev('E', { n: 1, nested: { a: [1] } }), ev('F', { n: 2 })], 'no_stream'),
        store.append('s-2', [ev('E', { n: 3 })], 'no_stream'),
      ]);
      await store.append('s-1', [ev('G', { n: 4 })], 1);
      await waitFor(() => seen.length === 5);
      expect(store.stats.tailReads).toBeGreaterThan(before.tailReads);
      expect(store.stats.sqlReads).toBe(before.sqlReads);
      // Same values, in the same order, as a read of the log from SQLite.
      expect(JSON.parse(JSON.stringify(seen))).toEqual(JSON.parse(JSON.stringify(await store.readAll(0, 100))));
      const last = seen[1] as { data: { nested: { a: number[] } }; metadata: object };
      expect(Object.isFrozen(last)).toBe(true);
      expect(Object.isFrozen(last.metadata)).toBe(true);
      expect(Object.isFrozen(last.data.nested.a)).toBe(true);
      await sub.close();
      await store.close();
    });

    it("misses nothing when another connection writes between this connection's commits", async () => {
      const a = new SqliteEventStore(file, { pollIntervalMs: 30 });
      const b = new SqliteEventStore(file);
      const seen: string[] = [];
      const sub = a.subscribeToAll({ fromPosition: 0 }, async (e) => {
        seen.push(`${e.position}:${(e.data as { by: string }).by}`);
      });
      await a.append('s-a', [ev('E', { by: 'a1' })], 'no_stream');
      await b.append('s-b', [ev('E', { by: 'b1' }), ev('E', { by: 'b2' })], 'no_stream');
      await a.append('s-a', [ev('E', { by: 'a2' })], 0);
      await b.append('s-b', [ev('E', { by: 'b3' })], 1);
      await a.append('s-a', [ev('E', { by: 'a3' })], 1);
      await waitFor(() => seen.length === 6);
      expect(seen).toEqual(['1:a1', '2:b1', '3:b2', '4:a2', '5:b3', '6:a3']);
      await sub.close();
      await b.close();
      await a.close();
    });

    it('catches a subscriber up from SQLite when it is further behind than the tail holds', async () => {
      const store = new SqliteEventStore(file, { pollIntervalMs: 5000, tailSize: 3, pageSize: 2 });
      for (let i = 0; i < 10; i++) await store.append(`s-${i}`, [ev('E', { i })], 'no_stream');
      const seen: number[] = [];
      let release: () => void = () => undefined;
      const gate = new Promise<void>((res) => (release = res));
      const sub = store.subscribeToAll({ fromPosition: 0 }, async (e) => {
        if (e.position === 1) await gate; // hold the subscriber back while more is committed
        seen.push(e.position);
      });
      for (let i = 10; i < 20; i++) await store.append(`s-${i}`, [ev('E', { i })], 'no_stream');
      release();
      await waitFor(() => seen.length === 20);
      expect(seen).toEqual(Array.from({ length: 20 }, (_, i) => i + 1));
      expect(store.stats.sqlReads).toBeGreaterThan(0);
      await sub.close();
      await store.close();
    });

    it('works with the tail turned off (tailSize 0)', async () => {
      const store = new SqliteEventStore(file, { pollIntervalMs: 5000, tailSize: 0 });
      const seen: number[] = [];
      const sub = store.subscribeToAll({ fromPosition: 0 }, async (e) => {
        seen.push(e.position);
      });
      await store.append('s-1', [ev('E', {}), ev('E', {})], 'no_stream');
      await waitFor(() => seen.length === 2);
      expect(seen).toEqual([1, 2]);
      expect(store.stats.tailReads).toBe(0);
      await sub.close();
      await store.close();
    });
  });

  it('checks expected revisions against appends made by another connection', async () => {
    const a = new SqliteEventStore(file);
    const b = new SqliteEventStore(file);
    await a.append('s-1', [ev('E', { by: 'a' })], 'no_stream');
    await b.append('s-1', [ev('E', { by: 'b' })], 0);
    await expect(a.append('s-1', [ev('E', { by: 'a' })], 0)).rejects.toMatchObject({ actual: 1 });
    await expect(a.append('s-1', [ev('E', { by: 'a' })], 'no_stream')).rejects.toMatchObject({ actual: 1 });
    await a.append('s-1', [ev('E', { by: 'a' })], 1);
    await expect(b.append('s-1', [ev('E', { by: 'b' })], 1)).rejects.toMatchObject({ actual: 2 });
    expect((await b.readStream('s-1')).map((e) => (e.data as { by: string }).by)).toEqual(['a', 'b', 'a']);
    await a.close();
    await b.close();
  });

  it('rejects an append whose INSERT fails alone (nothing of it written) and keeps the rest of the batch', async () => {
    const store = new SqliteEventStore(file);
    await store.append('s-1', [ev('E', { n: 1 })], 'no_stream');
    // A null type violates NOT NULL on the second row: the first row of that append must not stay.
    const bad = { ...ev('E', { n: 3 }), type: null as unknown as string };
    const results = await Promise.allSettled([
      store.append('s-1', [ev('E', { n: 2 })], 0),
      store.append('s-2', [ev('E', { n: 2 }), bad], 'no_stream'),
      store.append('s-3', [ev('E', { n: 4 })], 'no_stream'),
    ]);
    expect(results.map((r) => r.status)).toEqual(['fulfilled', 'rejected', 'fulfilled']);
    expect(await store.readStream('s-1')).toHaveLength(2);
    expect(await store.readStream('s-2')).toEqual([]);
    expect(await store.readStream('s-3')).toHaveLength(1);
    // The store's cached heads are still right after the batch was redone.
    await store.append('s-1', [ev('E', { n: 5 }), ev('E', { n: 6 })], 1);
    await store.append('s-2', [ev('E', { n: 7 })], 'no_stream');
    expect((await store.readStream('s-1')).map((e) => e.revision)).toEqual([0, 1, 2, 3]);
    const all = await store.readAll(0, 100);
    expect(all.map((e) => e.position)).toEqual([1, 2, 3, 4, 5, 6]);
    await store.close();
  });

  it('fails the whole batch, writing nothing more, when an INSERT error made SQLite roll back the transaction (SQLITE_FULL)', async () => {
    // max_page_count is a setting of one connection: the store's own, so it writes on this thread.
    const store = new SqliteEventStore(file, { writerThread: false });
    await store.append('s-before', [ev('E', {})], 'no_stream');
    const db = (store as unknown as { db: Database.Database }).db;
    // A full database: SQLite answers SQLITE_FULL and rolls back the whole transaction (checked here, not assumed).
    const pages = db.pragma('page_count', { simple: true }) as number;
    db.pragma(`max_page_count = ${pages + 3}`);
    const results = await Promise.allSettled([
      store.append('s-a', [ev('E', { n: 1 })], 'no_stream'),
      store.append('s-b', [ev('E', { big: 'x'.repeat(200_000) })], 'no_stream'),
      store.append('s-c', [ev('E', { n: 3 })], 'no_stream'),
      store.append('s-d', [ev('E', { n: 4 }), ev('E', { n: 5 })], 'no_stream'),
    ]);
    expect(db.inTransaction).toBe(false);
    expect(results.map((r) => r.status)).toEqual(['rejected', 'rejected', 'rejected', 'rejected']);
    expect((results[1] as PromiseRejectedResult).reason).toMatchObject({ code: 'SQLITE_FULL' });
    // Nothing of the batch is in the file: not the appends before the failed one (rolled back by
    // SQLite), nor those after it (which would otherwise have gone in as autocommit writes).
    for (const s of ['s-a', 's-b', 's-c', 's-d']) expect(await store.readStream(s)).toEqual([]);
    expect(await store.headPosition()).toBe(1);
    // Room again: the store goes on (its stream cache was dropped with the batch).
    db.pragma('max_page_count = 1073741823');
    await store.append('s-c', [ev('E', { n: 3 })], 'no_stream');
    expect(await store.headPosition()).toBe(2);
    await store.close();
  });

  it('does not police event id uniqueness (ids are minted by the services; idempotency lives in the streams)', async () => {
    const store = new SqliteEventStore(file);
    const first = ev('E', { n: 1 });
    await store.append('s-1', [first], 'no_stream');
    await store.append('s-2', [{ ...ev('E', { n: 2 }), metadata: first.metadata }], 'no_stream');
    expect((await store.readStream('s-2'))[0].metadata.eventId).toBe(first.metadata.eventId);
    await store.close();
  });

  it('keeps positions strictly increasing across reopen (plain INTEGER PRIMARY KEY, rows never deleted)', async () => {
    const a = new SqliteEventStore(file);
    const r1 = await a.append('s-1', [ev('E', {}), ev('E', {})], 'no_stream');
    await a.close();
    const b = new SqliteEventStore(file);
    const r2 = await b.append('s-2', [ev('E', {})], 'no_stream');
    expect(r2.position).toBe(r1.position + 1);
    await b.close();
  });

  it('answers appends queued before close, then refuses new ones', async () => {
    const store = new SqliteEventStore(file);
    const pending = store.append('s-1', [ev('E', {})], 'no_stream');
    await store.close();
    await expect(pending).resolves.toMatchObject({ nextExpectedRevision: 0 });
    await expect(store.append('s-1', [ev('E', {})], 0)).rejects.toThrow('closed');
    const again = new SqliteEventStore(file);
    expect(await again.readStream('s-1')).toHaveLength(1);
    await again.close();
  });

  it('supports :memory:', async () => {
    const store = new SqliteEventStore(':memory:');
    await store.append('s-1', [ev('E', { ok: true })], 'no_stream');
    expect((await store.readStream('s-1'))[0].data).toEqual({ ok: true });
    await store.close();
  });
});

describe('SqliteEventStore close() in a process with nothing else to do', () => {
  // The writer and checkpoint threads are unref'd while idle; close() must still keep the process
  // alive until it has finished, or the code after `await store.close()` would never run.
  it.each([
    ['writer thread and checkpointer', '{}'],
    ['checkpointer only', '{ writerThread: false }'],
  ])('resolves, and the code after it runs (%s)', (_, options) => {
    const dir = mkdtempSync(join(tmpdir(), 'eventstore-close-'));
    try {
      const lib = join(__dirname, '..', '..', '..', 'dist', 'libs', 'eventstore', 'src');
      const script = `
        const { SqliteEventStore } = require(${JSON.stringify(lib)});
        (async () => {
          const store = new SqliteEventStore(${JSON.stringify(join(dir, 'events.db'))}, ${options});
          await store.append('s-1', [{ type: 'E', data: {}, metadata: {} }], 'no_stream');
          // Long enough for the threads to be up and idle (the checkpointer's first round is at 1 s).
          await new Promise((r) => setTimeout(r, 1500));
          await store.close();
          console.log('after close');
        })();`;
      const r = spawnSync(process.execPath, ['-e', script], { encoding: 'utf8', timeout: 20_000 });
      expect(r.stderr).toBe('');
      expect(r.stdout.trim()).toBe('after close');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
