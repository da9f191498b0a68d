// Over 400 lines: the hash chain's cases, tampering included, on each store kind.
import { createHash, randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { Client } from 'pg';
import {
  CHAIN_TAG,
  ChainVerifier,
  DEFAULT_DATABASE_URL,
  EncryptingEventStore,
  EventStore,
  HashChainingEventStore,
  InMemoryEventStore,
  PostgresEventStore,
  RecordedEvent,
  SqliteEventStore,
  WrongExpectedRevisionError,
  chainContent,
  chainHash,
  isEncryptedData,
} from '@svc/eventstore';
import { canonicalJson } from '@svc/security';
import { describeEventStoreConformance, ev } from './conformance';

function keyFor(environmentId: string): Buffer {
  return createHash('sha256').update(`test-key:${environmentId}`).digest();
}

function tempDir(): string {
  return mkdtempSync(join(tmpdir(), 'eventstore-chain-'));
}

const pgUrl = process.env.DATABASE_URL || DEFAULT_DATABASE_URL;
const runId = randomUUID().replace(/-/g, '').slice(0, 10);
let schemaCount = 0;
const schemas = new Set<string>();
function newSchema(): string {
  const schema = `svc_events_chain${runId}_${++schemaCount}`;
  schemas.add(schema);
  return schema;
}
async function admin<T>(fn: (c: Client) => Promise<T>): Promise<T> {
  const c = new Client({ connectionString: pgUrl });
  await c.connect();
  try {
    return await fn(c);
  } finally {
    await c.end();
  }
}
afterAll(async () => {
  for (const schema of [...schemas]) await admin((c) => c.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`));
});
function openPg(schema: string): Promise<PostgresEventStore> {
  return PostgresEventStore.open({ connectionString: pgUrl, schema, pollIntervalMs: 100, poolSize: 4 });
}

/** Every event of the log through a verifier: the issues found. */
async function verifyLog(store: EventStore, options: ConstructorParameters<typeof ChainVerifier>[0] = {}) {
  const verifier = new ChainVerifier(options);
  for (let from = 0; ;) {
    const page = await store.readAll(from, 500);
    if (!page.length) break;
    for (const e of page) verifier.add(e);
    from = page[page.length - 1].position;
  }
  return { verifier, issues: [...verifier.issues(), ...verifier.finish(true)] };
}

describeEventStoreConformance('HashChainingEventStore over in-memory', async () => {
  const store = new HashChainingEventStore(new InMemoryEventStore());
  return { store, ordered: true, chained: true, cleanup: () => store.close() };
});

describeEventStoreConformance('HashChainingEventStore over SQLite', async () => {
  const dir = tempDir();
  const file = join(dir, 'events.db');
  const store = new HashChainingEventStore(new SqliteEventStore(file, { pollIntervalMs: 50 }));
  return {
    store,
    ordered: true,
    chained: true,
    reopen: async () => new HashChainingEventStore(new SqliteEventStore(file)),
    cleanup: async () => {
      await store.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
});

describeEventStoreConformance('EncryptingEventStore over HashChainingEventStore over PostgreSQL', async () => {
  const schema = newSchema();
  const store = new EncryptingEventStore(new HashChainingEventStore(await openPg(schema)), keyFor);
  return {
    store,
    ordered: true,
    chained: true,
    reopen: async () => new EncryptingEventStore(new HashChainingEventStore(await openPg(schema)), keyFor),
    cleanup: async () => {
      await store.close();
      await admin((c) => c.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`));
      schemas.delete(schema);
    },
  };
});

describe('chain hash', () => {
  const base = {
    streamId: 's-1',
    revision: 0,
    type: 'Opened',
    data: { b: 1, a: [1, { y: 2, x: null }] },
    metadata: { eventId: 'e1', actor: 'system', recordedAt: '2026-01-01T00:00:00.000Z' },
  };

  it('is SHA-256 over the tag, the previous hash and the canonical content (key order does not matter)', () => {
    const content = chainContent(base);
    expect(content).toBe(
      '{"data":{"a":[1,{"x":null,"y":2}],"b":1},"metadata":{"actor":"system","eventId":"e1","recordedAt":"2026-01-01T00:00:00.000Z"},"revision":0,"streamId":"s-1","type":"Opened"}',
    );
    const expected = createHash('sha256').update(`${CHAIN_TAG}\nabc\n${content}`).digest('hex');
    expect(chainHash('abc', content)).toBe(expected);
    expect(chainHash(null, content)).toBe(createHash('sha256').update(`${CHAIN_TAG}\n\n${content}`).digest('hex'));
    const reordered = {
      type: 'Opened',
      metadata: { recordedAt: base.metadata.recordedAt, actor: 'system', eventId: 'e1' },
      data: { a: [1, { x: null, y: 2 }], b: 1 },
      revision: 0,
      streamId: 's-1',
    };
    expect(chainContent(reordered)).toBe(content);
  });

  it('is exactly canonicalJson of { data, metadata without the chain fields, revision, streamId, type }, whatever the shapes', () => {
    const sealed = { enc: 'v1', iv: 'aXY=', tag: 'dGFn', ct: 'Y3Qi\\u2028"' };
    const shapes = [
      base,
      { ...base, data: sealed },
      { ...base, data: { ...sealed, extra: 1 } },
      { ...base, data: null },
      { ...base, data: 'text' },
      { ...base, data: [1, { b: undefined, a: 'x' }] },
      { ...base, metadata: { ...base.metadata, causationId: null, organizationId: undefined, nested: { z: 1, a: [null] }, hash: 'h', prevHash: null } },
      { ...base, metadata: {} },
      { ...base, metadata: { 'ünï"code': 'line\nbreak \u2028 \ud800', n: -0, big: 1e21 } },
    ];
    for (const e of shapes) {
      const metadata = { ...(e.metadata as Record<string, unknown>) };
      delete metadata.prevHash;
      delete metadata.hash;
      expect(chainContent(e)).toBe(canonicalJson({ streamId: e.streamId, revision: e.revision, type: e.type, data: e.data ?? null, metadata }));
    }
  });

  it('covers a value as JSON stores it: the same text for a value and for its JSON round trip', () => {
    const odd = {
      ...base,
      data: { when: new Date('2026-02-03T04:05:06Z'), gone: undefined, fn: () => 1, list: [undefined, NaN, Infinity, new Date(0)], n: new Number(3) },
      metadata: { ...base.metadata, causationId: undefined },
    };
    const stored = JSON.parse(JSON.stringify(odd));
    expect(chainContent(odd)).toBe(chainContent(stored));
    expect(chainContent(stored)).toBe(canonicalJson(stored));
  });

  it('leaves the chain fields themselves out of the content, and changes with every covered part', () => {
    const content = chainContent(base);
    expect(chainContent({ ...base, metadata: { ...base.metadata, prevHash: 'p', hash: 'h' } })).toBe(content);
    for (const changed of [
      { ...base, streamId: 's-2' },
      { ...base, revision: 1 },
      { ...base, type: 'Closed' },
      { ...base, data: { ...base.data, b: 2 } },
      { ...base, metadata: { ...base.metadata, actor: 'staff:x' } },
    ]) {
      expect(chainContent(changed)).not.toBe(content);
    }
  });
});

describe('HashChainingEventStore', () => {
  let inner: InMemoryEventStore;
  let store: HashChainingEventStore;
  beforeEach(() => {
    inner = new InMemoryEventStore();
    store = new HashChainingEventStore(inner);
  });
  afterEach(() => store.close());

  it('puts prevHash and hash in each event, chained per stream from null, over the data as the inner store keeps it', async () => {
    await store.append('a-1', [ev('One', { n: 1 }), ev('Two', { when: new Date('2026-02-03T04:05:06Z'), gone: undefined })], 'no_stream');
    await store.append('b-1', [ev('Other', {})], 'no_stream');
    await store.append('a-1', [ev('Three', { n: 3 })], 1);
    const events = await inner.readStream('a-1');
    expect(events[0].metadata.prevHash).toBeNull();
    expect(events[1].metadata.prevHash).toBe(events[0].metadata.hash);
    expect(events[2].metadata.prevHash).toBe(events[1].metadata.hash);
    for (const [i, e] of events.entries()) {
      expect(e.metadata.hash).toBe(chainHash(i === 0 ? null : events[i - 1].metadata.hash!, chainContent(e)));
    }
    expect(events[1].data).toEqual({ when: '2026-02-03T04:05:06.000Z' });
    expect((await inner.readStream('b-1'))[0].metadata.prevHash).toBeNull();
    const { issues, verifier } = await verifyLog(inner);
    expect(issues).toEqual([]);
    expect(verifier.reports().map((r) => [r.streamId, r.chained, r.unchained])).toEqual([
      ['a-1', 3, 0],
      ['b-1', 1, 0],
    ]);
  });

  it('beneath encryption: the hash covers the sealed bytes, and verifying needs no key', async () => {
    const sealedStore = new EncryptingEventStore(store, keyFor);
    await sealedStore.append('c-1', [ev('Secret', { note: 'canary-phi' })], 'no_stream');
    const [raw] = await inner.readStream('c-1');
    expect(isEncryptedData(raw.data)).toBe(true);
    expect(raw.metadata.hash).toBe(chainHash(null, chainContent(raw)));
    expect((await sealedStore.readStream('c-1'))[0].data).toEqual({ note: 'canary-phi' });
    expect((await verifyLog(inner)).issues).toEqual([]);
  });

  it('turns `any` into the exact head: the inner store only ever sees exact expectations', async () => {
    const seen: unknown[] = [];
    const original = inner.append.bind(inner);
    inner.append = (s, e, x) => {
      seen.push(x);
      return original(s, e, x);
    };
    await store.append('d-1', [ev('A', {})], 'any');
    await store.append('d-1', [ev('B', {}), ev('C', {})], 'any');
    // Another writer (not through this decorator's memory) moves the stream on.
    const other = new HashChainingEventStore(inner);
    await other.append('d-1', [ev('D', {})], 'any');
    await store.append('d-1', [ev('E', {})], 'any');
    expect(seen).toEqual(['no_stream', 0, 2, 2, 3]);
    expect((await inner.readStream('d-1')).map((e) => e.type)).toEqual(['A', 'B', 'C', 'D', 'E']);
    expect((await verifyLog(inner)).issues).toEqual([]);
  });

  it('refuses without a write an expectation behind the head it knows, and answers the actual revision', async () => {
    await store.append('e-1', [ev('A', {}), ev('B', {})], 'no_stream');
    const head = await inner.headPosition();
    await expect(store.append('e-1', [ev('X', {})], 0)).rejects.toMatchObject({ expected: 0, actual: 1 });
    await expect(store.append('e-1', [ev('X', {})], 'no_stream')).rejects.toBeInstanceOf(WrongExpectedRevisionError);
    // A fresh decorator (nothing remembered) reads the stream to find the event to chain to.
    const fresh = new HashChainingEventStore(inner);
    await expect(fresh.append('e-1', [ev('X', {})], 5)).rejects.toMatchObject({ expected: 5, actual: 1 });
    await expect(fresh.append('e-1', [ev('X', {})], 0)).rejects.toMatchObject({ expected: 0, actual: 1 });
    expect(await inner.headPosition()).toBe(head);
    await fresh.append('e-1', [ev('C', {})], 1);
    expect((await verifyLog(inner)).issues).toEqual([]);
  });

  it('continues a stream written before the chain existed: its events are unchained, the chain starts at the first chained event', async () => {
    await inner.append('old-1', [ev('A', {}), ev('B', {})], 'no_stream');
    await store.append('old-1', [ev('C', {})], 1);
    await store.append('old-1', [ev('D', {})], 'any');
    const events = await inner.readStream('old-1');
    expect(events.map((e) => e.metadata.prevHash)).toEqual([undefined, undefined, null, events[2].metadata.hash]);
    const { issues, verifier } = await verifyLog(inner);
    expect(issues).toEqual([]);
    expect(verifier.reports()).toEqual([expect.objectContaining({ streamId: 'old-1', unchained: 2, chained: 2, issue: null })]);
  });

  it('200 concurrent appends with `any` to one stream keep one unbroken chain', async () => {
    await Promise.all(Array.from({ length: 200 }, (_, i) => store.append('hot-1', [ev('E', { i })], 'any')));
    const events = await inner.readStream('hot-1');
    expect(events.map((e) => e.revision)).toEqual(Array.from({ length: 200 }, (_, i) => i));
    expect((await verifyLog(inner)).issues).toEqual([]);
  });
});

describe('ChainVerifier', () => {
  /** A small chained log in memory, and its events as stored. */
  async function chainedLog(): Promise<RecordedEvent[]> {
    const inner = new InMemoryEventStore();
    const store = new HashChainingEventStore(inner);
    await store.append('s-1', [ev('A', { n: 0 }), ev('B', { n: 1 })], 'no_stream');
    await store.append('s-2', [ev('X', { n: 0 })], 'no_stream');
    await store.append('s-1', [ev('C', { n: 2 }), ev('D', { n: 3 })], 1);
    const all = await inner.readAll(0, 100);
    await store.close();
    return all;
  }
  const check = (events: RecordedEvent[], options?: ConstructorParameters<typeof ChainVerifier>[0]) => {
    const v = new ChainVerifier(options);
    for (const e of events) v.add(e);
    return [...v.issues(), ...v.finish(true)];
  };

  it('passes an untouched log', async () => {
    expect(check(await chainedLog())).toEqual([]);
  });

  it('names the event whose data, metadata or type was changed (later events of its stream are not judged)', async () => {
    for (const tamper of [
      (e: RecordedEvent) => ({ ...e, data: { n: 99 } }),
      (e: RecordedEvent) => ({ ...e, metadata: { ...e.metadata, actor: 'staff:mallory' } }),
      (e: RecordedEvent) => ({ ...e, type: 'Z' }),
    ]) {
      const log = await chainedLog();
      log[1] = tamper(log[1]);
      const issues = check(log);
      expect(issues).toEqual([
        { streamId: 's-1', revision: 1, position: log[1].position, eventId: log[1].metadata.eventId, reason: expect.stringContaining('hash does not match') },
      ]);
    }
  });

  it('names the event after one that was removed, and one whose prevHash was replaced', async () => {
    const log = await chainedLog();
    const removed = log.filter((e) => !(e.streamId === 's-1' && e.revision === 1));
    expect(check(removed)).toEqual([expect.objectContaining({ streamId: 's-1', revision: 2, reason: expect.stringContaining('revision 1 is missing') })]);
    const relinked = [...log];
    relinked[3] = { ...log[3], metadata: { ...log[3].metadata, prevHash: log[0].metadata.hash } };
    expect(check(relinked)).toEqual([expect.objectContaining({ streamId: 's-1', revision: 2, reason: expect.stringContaining('prevHash') })]);
  });

  it('an event stripped of its chain fields: a fault after chained events of its stream, and anywhere in the chained part of the log', async () => {
    const log = await chainedLog();
    const strip = (e: RecordedEvent): RecordedEvent => {
      const { prevHash: _p, hash: _h, ...metadata } = e.metadata;
      return { ...e, metadata };
    };
    const a = [...log];
    a[3] = strip(a[3]);
    expect(check(a)).toEqual([expect.objectContaining({ streamId: 's-1', revision: 2, reason: expect.stringContaining('no chain fields') })]);
    // Every event of s-2 stripped: unchained, but written after the first chained event.
    const b = log.map((e) => (e.streamId === 's-2' ? strip(e) : e));
    expect(check(b)).toEqual([expect.objectContaining({ streamId: 's-2', revision: 0, reason: expect.stringContaining('chained part of the log') })]);
    // ...which a whole-stream check without that rule reports as unchained, not as a fault.
    const v = new ChainVerifier({ chainStart: null });
    for (const e of b.filter((x) => x.streamId === 's-2')) expect(v.add(e)).toBeNull();
    expect(v.reports()).toEqual([expect.objectContaining({ unchained: 1, chained: 0, issue: null })]);
  });

  it('with saved anchors: a rewritten chain and events removed from the end are caught', async () => {
    const log = await chainedLog();
    const anchors = new Map([
      ['s-1', { revision: 3, hash: log[4].metadata.hash! }],
      ['s-2', { revision: 0, hash: log[2].metadata.hash! }],
    ]);
    expect(check(log, { anchors })).toEqual([]);
    // Truncated: s-1 ends at revision 2.
    expect(check(log.slice(0, 4), { anchors })).toEqual([expect.objectContaining({ streamId: 's-1', reason: expect.stringContaining('events were removed') })]);
    // Rewritten consistently (data changed and every hash recomputed): only the anchor tells.
    const rewritten = log.map((e) => ({ ...e }));
    let prev: string | null = null;
    for (const e of rewritten.filter((x) => x.streamId === 's-1')) {
      if (e.revision === 1) e.data = { n: 'rewritten' };
      const hash = chainHash(prev, chainContent(e));
      e.metadata = { ...e.metadata, prevHash: prev, hash };
      prev = hash;
    }
    expect(check(rewritten)).toEqual([]);
    expect(check(rewritten, { anchors })).toEqual([expect.objectContaining({ streamId: 's-1', revision: 3, reason: expect.stringContaining('anchor') })]);
  });
});

describe('one unbroken chain under concurrent writers of several processes', () => {
  /** Many writers with `any`, and as many with read-decide-append loops on exact revisions, on two stores of one storage. */
  async function race(a: EventStore, b: EventStore): Promise<void> {
    const stream = `hot-${randomUUID()}`;
    const anyWriters = Array.from({ length: 60 }, (_, i) => (i % 2 ? a : b).append(stream, [ev('Any', { i })], 'any'));
    const exactWriter = async (store: EventStore, w: number) => {
      for (let done = 0; done < 5;) {
        const events = await store.readStream(stream);
        const expected = events.length ? events[events.length - 1].revision : 'no_stream';
        try {
          await store.append(stream, [ev('Exact', { w, done })], expected);
          done++;
        } catch (err) {
          if (!(err instanceof WrongExpectedRevisionError)) throw err;
        }
      }
    };
    await Promise.all([...anyWriters, ...Array.from({ length: 8 }, (_, w) => exactWriter(w % 2 ? a : b, w))]);
    const events = await a.readStream(stream);
    expect(events).toHaveLength(60 + 8 * 5);
    expect(events.map((e) => e.revision)).toEqual(events.map((_, i) => i));
    const v = new ChainVerifier({ chainStart: null });
    for (const e of events) v.add(e);
    expect(v.issues()).toEqual([]);
    expect(v.reports()[0]).toMatchObject({ chained: 100, unchained: 0 });
  }

  it('SQLite: two connections to one file', async () => {
    const dir = tempDir();
    const file = join(dir, 'events.db');
    const a = new HashChainingEventStore(new SqliteEventStore(file));
    const b = new HashChainingEventStore(new SqliteEventStore(file));
    try {
      await race(a, b);
    } finally {
      await a.close();
      await b.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('PostgreSQL: two stores on one schema', async () => {
    const schema = newSchema();
    const a = new HashChainingEventStore(await openPg(schema));
    const b = new HashChainingEventStore(await openPg(schema));
    try {
      await race(a, b);
    } finally {
      await a.close();
      await b.close();
    }
  });

  it('SQLite file tampered with SQL: verification names the changed event', async () => {
    const dir = tempDir();
    const file = join(dir, 'events.db');
    const store = new EncryptingEventStore(new HashChainingEventStore(new SqliteEventStore(file)), keyFor);
    await store.append('t-1', [ev('A', { n: 1 }), ev('B', { n: 2 }), ev('C', { n: 3 })], 'no_stream');
    await store.close();
    const db = new Database(file);
    const row = db.prepare("SELECT position, data FROM events WHERE stream_id = 't-1' AND revision = 1").get() as { position: number; data: string };
    const sealed = JSON.parse(row.data);
    sealed.ct = (sealed.ct[0] === 'A' ? 'B' : 'A') + sealed.ct.slice(1);
    db.prepare('UPDATE events SET data = ? WHERE position = ?').run(JSON.stringify(sealed), row.position);
    db.close();
    const raw = new SqliteEventStore(file, { writerThread: false, backgroundCheckpoint: false });
    try {
      const { issues } = await verifyLog(raw);
      expect(issues).toEqual([expect.objectContaining({ streamId: 't-1', revision: 1, position: row.position })]);
    } finally {
      await raw.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
