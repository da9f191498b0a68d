import { createHash, randomUUID } from 'node:crypto';
import { Client } from 'pg';
import {
  DEFAULT_DATABASE_URL,
  EVENT_SCHEMA_VERSION,
  EncryptingEventStore,
  EventStore,
  PostgresEventStore,
  PostgresEventStoreOptions,
  RecordedEvent,
  WrongExpectedRevisionError,
  isEncryptedData,
} from '@svc/eventstore';
import { describeEventStoreConformance, ev } from './conformance';

/**
 * The PostgreSQL adapter against the real server at DATABASE_URL (default: the local one). Every
 * store of this file lives in a schema of its own, made for it and dropped at the end, so runs never
 * see each other's events and leave nothing behind.
 */
const url = process.env.DATABASE_URL || DEFAULT_DATABASE_URL;
const runId = randomUUID().replace(/-/g, '').slice(0, 10);
let schemaCount = 0;
const schemas = new Set<string>();

function newSchema(): string {
  const schema = `svc_events_t${runId}_${++schemaCount}`;
  schemas.add(schema);
  return schema;
}

async function admin<T>(fn: (c: Client) => Promise<T>): Promise<T> {
  const c = new Client({ connectionString: url });
  await c.connect();
  try {
    return await fn(c);
  } finally {
    await c.end();
  }
}

async function dropSchema(schema: string): Promise<void> {
  await admin((c) => c.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`));
  schemas.delete(schema);
}

afterAll(async () => {
  for (const schema of [...schemas]) await dropSchema(schema);
});

function open(schema: string, options: PostgresEventStoreOptions = {}): Promise<PostgresEventStore> {
  return PostgresEventStore.open({ connectionString: url, schema, pollIntervalMs: 100, poolSize: 4, ...options });
}

describeEventStoreConformance('PostgreSQL', async () => {
  const schema = newSchema();
  const store = await open(schema);
  return {
    store,
    ordered: true,
    reopen: () => open(schema),
    cleanup: async () => {
      await store.close();
      await dropSchema(schema);
    },
  };
});

function keyFor(environmentId: string): Buffer {
  return createHash('sha256').update(`test-key:${environmentId}`).digest();
}

describeEventStoreConformance('EncryptingEventStore over PostgreSQL', async () => {
  const schema = newSchema();
  const store = new EncryptingEventStore(await open(schema), keyFor);
  return {
    store,
    ordered: true,
    reopen: async () => new EncryptingEventStore(await open(schema), keyFor),
    cleanup: async () => {
      await store.close();
      await dropSchema(schema);
    },
  };
});

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function until(check: () => boolean, timeoutMs: number, what: string): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await sleep(10);
  }
}

describe('PostgresEventStore specifics', () => {
  const stores: EventStore[] = [];
  const track = <T extends EventStore>(s: T): T => {
    stores.push(s);
    return s;
  };
  afterEach(async () => {
    await Promise.all(stores.splice(0).map((s) => s.close()));
  });

  it('never lets a subscriber pass a commit: 16 writers x 1,000 events on 16 pools, a live subscriber sees each exactly once, in stream order', async () => {
    const schema = newSchema();
    const reader = track(await open(schema, { pollIntervalMs: 200 }));
    const seen: RecordedEvent[] = [];
    const sub = reader.subscribeToAll({ fromPosition: 0 }, async (e) => {
      seen.push(e);
    });
    // One store (pool, connection, group commit) per writer: 16 transactions truly in flight at once.
    const writers = await Promise.all(Array.from({ length: 16 }, () => open(schema, { listen: false, poolSize: 2 }).then(track)));
    const PER_WRITER = 1000;
    const write = async (store: PostgresEventStore, w: number) => {
      let revision = -1;
      let i = 0;
      while (revision < PER_WRITER - 1) {
        // 1 to 4 events per append (several-event appends are atomic), exact expected revision.
        const n = Math.min(1 + (i++ % 4), PER_WRITER - 1 - revision);
        const events = Array.from({ length: n }, (_, k) => ev('Counted', { w, n: revision + 1 + k }));
        const r = await store.append(`w${w}`, events, revision < 0 ? 'no_stream' : revision);
        revision = r.nextExpectedRevision;
      }
    };
    await Promise.all(writers.map((s, w) => write(s, w)));
    const total = 16 * PER_WRITER;
    await until(() => seen.length >= total, 60_000, `${total} events (got ${seen.length})`);
    await sleep(300);
    await sub.close();

    expect(seen).toHaveLength(total);
    for (let i = 1; i < seen.length; i++) expect(seen[i].position).toBeGreaterThan(seen[i - 1].position);
    expect(new Set(seen.map((e) => e.metadata.eventId)).size).toBe(total);
    const byStream = new Map<string, number[]>();
    for (const e of seen) {
      const list = byStream.get(e.streamId) ?? [];
      list.push((e.data as { n: number }).n);
      expect(e.revision).toBe(list.length - 1);
      byStream.set(e.streamId, list);
    }
    expect(byStream.size).toBe(16);
    for (const list of byStream.values()) expect(list).toEqual(Array.from({ length: PER_WRITER }, (_, n) => n));
    // The writers' transactions overlapped (more than one commit per group on average would hide it): 16 stores, each its own commits.
    expect(writers.reduce((n, s) => n + s.stats.commits, 0)).toBeGreaterThan(1000);
  }, 120_000);

  it('holds back a committed event while a transaction holding a lower position is open, then delivers both in order', async () => {
    const schema = newSchema();
    const store = track(await open(schema, { settleWaitMs: 50 }));
    const seen: RecordedEvent[] = [];
    store.subscribeToAll({ fromPosition: 0 }, async (e) => {
      seen.push(e);
    });
    // A writer of another process: allocates its position (as every append does), inserts, and stays open.
    const other = new Client({ connectionString: url });
    await other.connect();
    try {
      await other.query('BEGIN');
      const { rows } = await other.query<{ tx: string; first_position: string }>(`SELECT tx, first_position FROM "${schema}".allocate(1)`);
      await other.query(
        `INSERT INTO "${schema}".events (position, tx, stream_id, revision, event_id, type, data, metadata) VALUES ($1, $2, 'slow', 0, $3, 'Slow', '{}', $4)`,
        [rows[0].first_position, rows[0].tx, randomUUID(), JSON.stringify(ev('Slow', {}).metadata)],
      );
      const fast = await store.append('fast', [ev('Fast', {})], 'no_stream');
      expect(fast.position).toBeGreaterThan(Number(rows[0].first_position));
      // Committed and readable by stream, but not yet part of the global order.
      expect(await store.readStream('fast')).toHaveLength(1);
      expect(await store.readAll(0, 10)).toEqual([]);
      expect(await store.headPosition()).toBe(0);
      await sleep(300);
      expect(seen).toEqual([]);
      await other.query('COMMIT');
    } finally {
      await other.end();
    }
    await until(() => seen.length >= 2, 5000, 'both events');
    expect(seen.map((e) => e.streamId)).toEqual(['slow', 'fast']);
    expect((await store.readAll(0, 10)).map((e) => e.streamId)).toEqual(['slow', 'fast']);
  });

  it('optimistic concurrency holds across processes: 8 pools race for each revision of one stream, exactly one wins each', async () => {
    const schema = newSchema();
    const racers = await Promise.all(Array.from({ length: 8 }, () => open(schema, { listen: false, poolSize: 2 }).then(track)));
    for (let revision = -1; revision < 9; revision++) {
      const results = await Promise.allSettled(
        racers.map((s, i) => s.append('contended', [ev('Won', { by: i }), ev('Won', { by: i, second: true })], revision < 0 ? 'no_stream' : revision)),
      );
      const won = results.filter((r) => r.status === 'fulfilled');
      expect(won).toHaveLength(1);
      for (const r of results) if (r.status === 'rejected') expect(r.reason).toBeInstanceOf(WrongExpectedRevisionError);
      revision++; // two events per append
    }
    const events = await racers[0].readStream('contended');
    expect(events.map((e) => e.revision)).toEqual(Array.from({ length: 10 }, (_, i) => i));
    // Each winner's two events are adjacent (an append is atomic).
    for (let i = 0; i < 10; i += 2) expect(events[i + 1].position).toBe(events[i].position + 1);
  });

  it('wakes a subscriber of another process by NOTIFY, well before its poll', async () => {
    const schema = newSchema();
    const follower = track(await open(schema, { pollIntervalMs: 60_000 }));
    const writer = track(await open(schema, { listen: false }));
    const seen: RecordedEvent[] = [];
    follower.subscribeToAll({ fromPosition: 0 }, async (e) => {
      seen.push(e);
    });
    await sleep(100);
    const started = Date.now();
    await writer.append('n-1', [ev('E', {})], 'no_stream');
    await until(() => seen.length === 1, 5000, 'the notified event');
    expect(Date.now() - started).toBeLessThan(2000);
    expect(writer.stats.notifies).toBeGreaterThan(0);
  });

  it('listens again after its LISTEN connection is cut, and is woken by NOTIFY again', async () => {
    const schema = newSchema();
    const warnings: string[] = [];
    const follower = track(await open(schema, { pollIntervalMs: 60_000, logger: { warn: (m) => warnings.push(m) } }));
    const writer = track(await open(schema, { listen: false }));
    const seen: RecordedEvent[] = [];
    follower.subscribeToAll({ fromPosition: 0 }, async (e) => {
      seen.push(e);
    });
    await sleep(100);
    const cut = await admin((c) =>
      c.query(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE query = $1 AND pid <> pg_backend_pid()`, [`LISTEN "${schema}_appended"`]),
    );
    expect(cut.rowCount).toBe(1);
    await until(() => warnings.some((w) => w.includes('listener lost')), 5000, 'the lost listener to be noticed');
    // Reconnected (100 ms after the loss): a commit of another store wakes the subscriber again, long before its poll.
    await sleep(500);
    await writer.append('l-1', [ev('E', {})], 'no_stream');
    await until(() => seen.length === 1, 5000, 'the event after the reconnect');
  });

  it("still finds other processes' commits by polling when it does not listen", async () => {
    const schema = newSchema();
    const follower = track(await open(schema, { listen: false, pollIntervalMs: 100 }));
    const writer = track(await open(schema, { listen: false }));
    const seen: RecordedEvent[] = [];
    follower.subscribeToAll({ fromPosition: 0 }, async (e) => {
      seen.push(e);
    });
    await writer.append('p-1', [ev('E', {})], 'no_stream');
    await until(() => seen.length === 1, 5000, 'the polled event');
  });

  it('creates its schema once when several processes start at once, and opens an existing one unchanged', async () => {
    const schema = newSchema();
    const opened = await Promise.all(Array.from({ length: 6 }, () => open(schema, { listen: false })));
    opened.forEach(track);
    const versions = await admin((c) => c.query(`SELECT version FROM "${schema}".schema_migrations ORDER BY version`));
    expect(versions.rows.map((r) => r.version)).toEqual(Array.from({ length: EVENT_SCHEMA_VERSION }, (_, i) => i + 1));
    await opened[0].append('m-1', [ev('E', {})], 'no_stream');
    const again = track(await open(schema));
    expect((await again.readStream('m-1')).map((e) => e.type)).toEqual(['E']);
    // Only this schema was touched.
    const tables = await admin((c) => c.query(`SELECT table_name FROM information_schema.tables WHERE table_schema = $1 ORDER BY 1`, [schema]));
    expect(tables.rows.map((r) => r.table_name)).toEqual(['events', 'leases', 'relay_positions', 'schema_migrations']);
  });

  it('stores event data sealed under the encryption decorator, and opens it again on every read path', async () => {
    const schema = newSchema();
    const CANARY = 'CANARY-PHI-pg-7a1e-Jane-Roe';
    const store = track(new EncryptingEventStore(await open(schema), keyFor));
    await store.append('conv-1', [ev('MessageReceived', { body: CANARY }, { environmentId: 'env_a' })], 'no_stream');
    const raw = await admin((c) => c.query(`SELECT data FROM "${schema}".events`));
    expect(raw.rows).toHaveLength(1);
    expect(raw.rows[0].data).not.toContain(CANARY);
    expect(isEncryptedData(JSON.parse(raw.rows[0].data))).toBe(true);
    expect((await store.readStream('conv-1'))[0].data).toEqual({ body: CANARY });
    expect((await store.readAll(0, 10))[0].data).toEqual({ body: CANARY });
  });

  it('refuses text PostgreSQL cannot store exactly (NUL, unpaired surrogates) for that append alone', async () => {
    const schema = newSchema();
    const store = track(await open(schema));
    const results = await Promise.allSettled([
      store.append('ok-1', [ev('E', { text: 'nul \u0000 in data is fine' })], 'no_stream'),
      store.append('bad\u0000stream', [ev('E', {})], 'no_stream'),
      store.append('bad-type', [ev('E\ud800', {})], 'no_stream'),
      store.append('ok-2', [ev('E', { text: 'lone \ud800 in data is escaped by JSON' })], 'no_stream'),
    ]);
    expect(results.map((r) => r.status)).toEqual(['fulfilled', 'rejected', 'rejected', 'fulfilled']);
    expect((await store.readStream('ok-1'))[0].data).toEqual({ text: 'nul \u0000 in data is fine' });
    expect((await store.readStream('ok-2'))[0].data).toEqual({ text: 'lone \ud800 in data is escaped by JSON' });
  });

  it('refuses an expected revision beyond any stream (past PostgreSQL integers) alone, as a conflict', async () => {
    const schema = newSchema();
    const store = track(await open(schema));
    await store.append('big', [ev('E', {})], 'no_stream');
    const results = await Promise.allSettled([
      store.append('big', [ev('E', {})], 2 ** 40),
      store.append('other', [ev('E', {})], 'no_stream'),
      store.append('big', [ev('E', {})], 0),
    ]);
    expect(results.map((r) => r.status)).toEqual(['rejected', 'fulfilled', 'fulfilled']);
    expect((results[0] as PromiseRejectedResult).reason).toMatchObject({ expected: 2 ** 40, actual: 0 });
    expect((results[0] as PromiseRejectedResult).reason).toBeInstanceOf(WrongExpectedRevisionError);
  });

  it('answers every accepted append before close() ends the pool', async () => {
    const schema = newSchema();
    const store = await open(schema);
    const appends = Array.from({ length: 600 }, (_, i) => store.append(`c-${i}`, [ev('E', { i })], 'no_stream'));
    await store.close();
    const results = await Promise.allSettled(appends);
    expect(results.every((r) => r.status === 'fulfilled')).toBe(true);
    await expect(store.append('late', [ev('E', {})], 'any')).rejects.toThrow('closed');
    const check = track(await open(schema));
    expect(await check.headPosition()).toBe(600);
  });
});
