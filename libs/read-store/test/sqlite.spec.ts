import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SqliteReadStore } from '../src/sqlite-read-store';
import { describeReadStoreConformance } from './conformance';

let dir: string;
let file: string;
let n = 0;

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'read-store-sqlite-'));
});
afterAll(() => {
  rmSync(dir, { recursive: true, force: true });
});

describeReadStoreConformance('sqlite', {
  async create() {
    file = join(dir, `rs-${++n}.db`);
    return new SqliteReadStore(file);
  },
  async reopen() {
    return new SqliteReadStore(file);
  },
});

describe('SqliteReadStore', () => {
  it('uses WAL with synchronous=NORMAL', async () => {
    const path = join(dir, 'pragmas.db');
    const store = new SqliteReadStore(path);

    const db = (store as any).db;
    expect(db.pragma('journal_mode', { simple: true })).toBe('wal');
    expect(db.pragma('synchronous', { simple: true })).toBe(1); // NORMAL
    await store.close();
  });

  it('creates the parent folder of the file', async () => {
    const store = new SqliteReadStore(join(dir, 'nested', 'deeper', 'rs.db'));
    await store.write([{ op: 'put', collection: 'c', key: 'k', doc: { ok: true } }]);
    expect(await store.get('c', 'k')).toEqual({ ok: true });
    await store.close();
  });
});

describe('SqliteReadStore.page', () => {
  it('is a range read on the partition index in its own order: no scan of the partition, no sort', async () => {
    const store = new SqliteReadStore(join(dir, `plan-${++n}.db`));

    const internals = store as any;
    const plans: string[] = [];
    for (const order of ['asc', 'desc']) {
      for (const start of ['first', 'score', 'key']) {
        const stmt = internals.stmts.page[order][start];
        const args = start === 'first' ? ['c', 'p', 3] : start === 'score' ? ['c', 'p', 1, 3] : ['c', 'p', 1, 'k', 3];
        const plan = (internals.db.prepare(`EXPLAIN QUERY PLAN ${stmt.source}`).all(...args) as { detail: string }[]).map((r) => r.detail).join('; ');
        plans.push(plan);
        expect(plan).toMatch(
          /^SEARCH docs USING INDEX docs_by_partition \(collection=\? AND partition=\?( AND (score<\?|score>\?|\(score,key\)<\(\?,\?\)|\(score,key\)>\(\?,\?\)))?\)$/,
        );
        expect(plan).not.toMatch(/TEMP B-TREE/);
      }
    }
    expect(plans).toHaveLength(6);
    await store.close();
  });
});

describe('SqliteReadStore.generation (cache invalidation)', () => {
  it('changes after a write or commit touching a collection, and (from the next turn) after a commit by another connection', async () => {
    const path = join(dir, `gen-${++n}.db`);
    const a = new SqliteReadStore(path);
    const b = new SqliteReadStore(path);
    const g0 = a.generation('keys', 'orgs');
    expect(a.generation('keys', 'orgs')).toBe(g0);
    await a.write([{ op: 'put', collection: 'other', key: 'x', doc: {} }]);
    expect(a.generation('keys', 'orgs')).toBe(g0); // another collection
    await a.commit('p', 1, [{ op: 'delete', collection: 'keys', key: 'k1' }]);
    const g1 = a.generation('keys', 'orgs');
    expect(g1).toBeGreaterThan(g0);
    expect(a.generation('orgs')).toBe(g0);
    await b.write([{ op: 'put', collection: 'unrelated', key: 'y', doc: {} }]);
    // Another connection's commits are looked for once per event-loop turn.
    await new Promise((r) => setImmediate(r));
    const g2 = a.generation('orgs');
    expect(g2).toBeGreaterThan(g1); // a foreign commit may have touched anything
    expect(a.generation('keys', 'orgs')).toBe(g2);
    await a.close();
    await b.close();
  });
});

describe('SqliteReadStore.documentGeneration (one document)', () => {
  it('changes after a write touching that document, not after writes to others of its collection', async () => {
    const path = join(dir, `docgen-${++n}.db`);
    const a = new SqliteReadStore(path);
    const d0 = a.documentGeneration('cases', 'c1');
    await a.commit('p', 1, [{ op: 'put', collection: 'cases', key: 'c2', doc: {} }]);
    expect(a.documentGeneration('cases', 'c1')).toBe(d0); // another document of the collection
    await a.commit('p', 2, [{ op: 'put', collection: 'cases', key: 'c1', doc: { v: 1 } }]);
    const d1 = a.documentGeneration('cases', 'c1');
    expect(d1).toBeGreaterThan(d0);
    await a.write([{ op: 'delete', collection: 'cases', key: 'c1' }]);
    expect(a.documentGeneration('cases', 'c1')).toBeGreaterThan(d1);
    expect(a.documentGeneration('other', 'c1')).toBe(d0); // same key, another collection
    await a.close();
  });

  it('changes (from the next turn) after a commit by another connection', async () => {
    const path = join(dir, `docgen-${++n}.db`);
    const a = new SqliteReadStore(path);
    const b = new SqliteReadStore(path);
    const d0 = a.documentGeneration('cases', 'c1');
    await b.write([{ op: 'put', collection: 'cases', key: 'c1', doc: { by: 'b' } }]);
    await new Promise((r) => setImmediate(r));
    expect(a.documentGeneration('cases', 'c1')).toBeGreaterThan(d0);
    await a.close();
    await b.close();
  });

  it('never reports an older generation for a document whose entry was evicted', async () => {
    const path = join(dir, `docgen-${++n}.db`);
    const a = new SqliteReadStore(path);
    await a.write([{ op: 'put', collection: 'cases', key: 'first', doc: {} }]);
    const seen = a.documentGeneration('cases', 'first');
    // Write more documents than are tracked: 'first' is evicted, and must not go back to an old value.
    const ops = Array.from({ length: 50_001 }, (_, i) => ({ op: 'put' as const, collection: 'cases', key: `k${i}`, doc: {} }));
    await a.write(ops);
    expect(a.documentGeneration('cases', 'first')).toBeGreaterThanOrEqual(seen);
    await a.write([{ op: 'put', collection: 'cases', key: 'first', doc: { v: 2 } }]);
    const after = a.documentGeneration('cases', 'first');
    await a.write(Array.from({ length: 50_001 }, (_, i) => ({ op: 'put' as const, collection: 'cases', key: `m${i}`, doc: {} })));
    expect(a.documentGeneration('cases', 'first')).toBeGreaterThanOrEqual(after);
    await a.close();
  });
});

describe('SqliteReadStore: replaced documents do not linger in the file', () => {
  it('zeroes the cells a commit replaces (secure_delete=FAST): after a checkpoint none of the old values is in the file', async () => {
    const path = join(dir, 'secure-delete.db');
    const store = new SqliteReadStore(path);
    const canary = (i: number) => `CANARY-OLD-RULE-${String(i).padStart(4, '0')}`;
    await store.commit(
      'p',
      1,
      Array.from({ length: 200 }, (_, i) => ({
        op: 'put' as const,
        collection: 'cases',
        key: `case-${i}`,
        doc: { rules: canary(i) },
        partition: 'env',
        score: i,
      })),
    );
    await store.commit(
      'p',
      2,
      Array.from({ length: 200 }, (_, i) => ({
        op: 'put' as const,
        collection: 'cases',
        key: `case-${i}`,
        doc: { rules: 'encrypted-now' },
        partition: 'env',
        score: i,
      })),
    );
    await store.close(); // the last connection checkpoints the WAL into the file and removes it
    const bytes = readFileSync(path).toString('latin1');
    const left = Array.from({ length: 200 }, (_, i) => canary(i)).filter((c) => bytes.includes(c));
    expect(left).toEqual([]);
    expect(bytes).toContain('encrypted-now');
  });
});
