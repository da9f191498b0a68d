import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import {
  CHAIN_ANCHOR_STREAM,
  ChainVerifier,
  EventStore,
  HashChainingEventStore,
  SqliteEventStore,
  chainContent,
  chainHash,
  migrateChains,
  readMigrationAnchors,
} from '@svc/eventstore';
import { ev } from './conformance';

/**
 * The chain migration (chain-migration.ts, docs/audit.md): streams written before the chain existed
 * get one ChainAnchored entry each, in a stream of its own, with the hash of their unchained events
 * as stored; verify checks those events against it from then on. Nothing stored is rewritten, and a
 * second run appends nothing.
 */
describe('chain migration', () => {
  let dir: string;
  let file: string;
  const open = () => new SqliteEventStore(file, { writerThread: false, backgroundCheckpoint: false });
  const sql = <T>(fn: (db: Database.Database) => T): T => {
    const db = new Database(file);
    try {
      return fn(db);
    } finally {
      db.close();
    }
  };

  async function verify(store: EventStore, withAnchors = true) {
    const { anchors } = await readMigrationAnchors(store);
    const verifier = new ChainVerifier({ migrationAnchors: withAnchors ? anchors : undefined });
    for (let from = 0; ;) {
      const page = await store.readAll(from, 500);
      if (!page.length) break;
      for (const e of page) verifier.add(e);
      from = page[page.length - 1].position;
    }
    return { verifier, issues: [...verifier.issues(), ...verifier.finish(true)] };
  }

  beforeEach(async () => {
    dir = mkdtempSync(join(tmpdir(), 'chain-migration-'));
    file = join(dir, 'events.sqlite');
    // Before the chain: streams a (3 events) and b (2), written by the bare store.
    const raw = open();
    await raw.append('a', [ev('A0', { n: 0 }), ev('A1', { n: 1 })], 'no_stream');
    await raw.append('b', [ev('B0', { n: 0 })], 'no_stream');
    await raw.append('a', [ev('A2', { n: 2 })], 1);
    await raw.append('b', [ev('B1', { n: 1 })], 0);
    // Then the chain: a goes on chained from null, c is chained from its start.
    const chained = new HashChainingEventStore(raw);
    await chained.append('a', [ev('A3', { n: 3 })], 2);
    await chained.append('c', [ev('C0', {})], 'no_stream');
    await raw.close();
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it('anchors each stream that begins unchained, with the hash of those events as stored; verify checks them from then on', async () => {
    const store = new HashChainingEventStore(open());
    try {
      const before = await verify(store);
      expect(before.issues).toEqual([]);
      expect(before.verifier.reports().map((r) => [r.streamId, r.unchained, r.anchored])).toEqual([
        ['a', 3, 0],
        ['b', 2, 0],
        ['c', 0, 0],
      ]);

      const dry = await migrateChains(store, { actor: 'auditor:test', dryRun: true });
      expect(dry).toMatchObject({ unchainedStreams: 2, unchainedEvents: 5, anchored: [], alreadyAnchored: 0 });
      expect(await store.readStream(CHAIN_ANCHOR_STREAM)).toEqual([]);

      const run = await migrateChains(store, { actor: 'auditor:test', now: () => new Date('2030-01-01T00:00:00Z') });
      expect(run.anchored.map((a) => [a.streamId, a.toRevision, a.events])).toEqual([
        ['a', 2, 3],
        ['b', 1, 2],
      ]);
      const a = await store.readStream('a');
      let h: string | null = null;
      for (const e of a.slice(0, 3)) h = chainHash(h, chainContent(e));
      expect(run.anchored[0]).toMatchObject({ hash: h, lastPosition: a[2].position });
      const entries = await store.readStream(CHAIN_ANCHOR_STREAM);
      expect(entries.map((e) => [e.type, e.metadata.actor, e.metadata.recordedAt])).toEqual([
        ['ChainAnchored', 'auditor:test', '2030-01-01T00:00:00.000Z'],
        ['ChainAnchored', 'auditor:test', '2030-01-01T00:00:00.000Z'],
      ]);
      // The anchors are chained like any event; the events themselves are untouched.
      expect(entries[1].metadata.prevHash).toBe(entries[0].metadata.hash);
      expect(a[0].metadata.hash).toBeUndefined();

      const after = await verify(store);
      expect(after.issues).toEqual([]);
      expect(
        after.verifier
          .reports()
          .filter((r) => r.unchained)
          .map((r) => [r.streamId, r.unchained, r.anchored]),
      ).toEqual([
        ['a', 3, 3],
        ['b', 2, 2],
      ]);

      // Idempotent: a second run appends nothing.
      const again = await migrateChains(store, { actor: 'auditor:test' });
      expect(again).toMatchObject({ unchainedStreams: 2, anchored: [], alreadyAnchored: 2 });
      expect((await store.readStream(CHAIN_ANCHOR_STREAM)).length).toBe(2);
    } finally {
      await store.close();
    }
  });

  it('after the migration, a changed or removed unchained event is named; before it, nothing could tell', async () => {
    const target = sql((db) => db.prepare("SELECT * FROM events WHERE stream_id = 'b' AND revision = 0").get() as Record<string, unknown>);
    const change = () => sql((db) => db.prepare('UPDATE events SET data = ? WHERE position = ?').run(JSON.stringify({ n: 42 }), target.position));
    const restore = () => sql((db) => db.prepare('UPDATE events SET data = ? WHERE position = ?').run(target.data, target.position));

    change();
    let store = open();
    expect((await verify(store)).issues).toEqual([]); // unchained, not anchored: not checked
    await store.close();
    restore();

    store = open();
    await migrateChains(new HashChainingEventStore(store), { actor: 'auditor:test' });
    await store.close();

    change();
    store = open();
    try {
      const { issues } = await verify(store);
      expect(issues).toEqual([expect.objectContaining({ streamId: 'b', revision: 1 })]);
      expect(issues[0].reason).toContain('do not match what the chain migration anchored');
      // Without the anchors (as before the migration), the change goes unseen.
      expect((await verify(store, false)).issues).toEqual([]);
    } finally {
      await store.close();
      restore();
    }

    const last = sql((db) => db.prepare("SELECT * FROM events WHERE stream_id = 'b' AND revision = 1").get() as Record<string, unknown>);
    sql((db) => db.prepare('DELETE FROM events WHERE position = ?').run(last.position));
    store = open();
    try {
      const { issues } = await verify(store);
      expect(issues).toEqual([expect.objectContaining({ streamId: 'b', revision: 1 })]);
      expect(issues[0].reason).toContain('events were removed');
    } finally {
      await store.close();
    }
  });

  it('two runs at once anchor each stream once', async () => {
    const stores = [new HashChainingEventStore(open()), new HashChainingEventStore(open())];
    try {
      const results = await Promise.all(stores.map((s) => migrateChains(s, { actor: 'auditor:test', batchSize: 1 })));
      expect(results[0].anchored.length + results[1].anchored.length).toBe(2);
      const { anchors } = await readMigrationAnchors(stores[0]);
      expect([...anchors].map(([s, list]) => [s, list.length])).toEqual([
        ['a', 1],
        ['b', 1],
      ]);
    } finally {
      for (const s of stores) await s.close();
    }
  });

  it('a stream whose unchained events have a gap is not anchored, and said', async () => {
    sql((db) => db.prepare("DELETE FROM events WHERE stream_id = 'a' AND revision = 1").run());
    const store = new HashChainingEventStore(open());
    try {
      const r = await migrateChains(store, { actor: 'auditor:test' });
      expect(r.anchored.map((a) => a.streamId)).toEqual(['b']);
      expect(r.skipped).toEqual([{ streamId: 'a', reason: 'revision 1 is missing: the next event found is revision 2' }]);
    } finally {
      await store.close();
    }
  });
});
