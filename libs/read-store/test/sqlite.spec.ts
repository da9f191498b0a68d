import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
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

describeReadStoreConformance('sqlite, opened exclusive (svc rebuild)', {
  async create() {
    file = join(dir, `rs-${++n}.db`);
    return new SqliteReadStore(file, { exclusive: true, backgroundCheckpoint: false });
  },
  async reopen() {
    return new SqliteReadStore(file, { exclusive: true, backgroundCheckpoint: false });
  },
});

describe('SqliteReadStore.replaceReadModels on a store opened exclusive (rollback journal for the swap)', () => {
  const oldModel = async (path: string) => {
    const store = new SqliteReadStore(path);
    await store.commit(
      'proj',
      10,
      Array.from({ length: 300 }, (_, i) => ({ op: 'put' as const, collection: 'cases', key: `old-${i}`, doc: { v: 'old', i }, partition: 'p', score: i })),
    );
    await store.write([{ op: 'put', collection: 'other', key: 'x', doc: { v: 'other' } }]);
    await store.close();
  };
  const expectOld = async (path: string) => {
    const store = new SqliteReadStore(path);
    try {
      expect(await store.getCheckpoint('proj')).toBe(10);
      expect((await store.list('cases', 'p')).length).toBe(300);
      expect(await store.get('cases', 'old-7')).toEqual({ v: 'old', i: 7 });
      expect(await store.get('cases', 'new-7')).toBeNull();
      expect(await store.get('other', 'x')).toEqual({ v: 'other' });
      expect((store as any).db.pragma('journal_mode', { simple: true })).toBe('wal');
    } finally {
      await store.close();
    }
  };
  const big = 'n'.repeat(2000);

  it('a new file gets the pages a service-made one has (2 KiB), opened exclusive or not', async () => {
    for (const exclusive of [false, true]) {
      const store = new SqliteReadStore(join(dir, `pages-${exclusive}.db`), { exclusive, backgroundCheckpoint: false });
      try {
        expect((store as any).db.pragma('page_size', { simple: true })).toBe(2048);
      } finally {
        await store.close();
      }
    }
  });

  it('a swap that fails leaves the old models, and the file back in WAL', async () => {
    const path = join(dir, 'swap-fails.db');
    await oldModel(path);
    const store = new SqliteReadStore(path, { exclusive: true, backgroundCheckpoint: false });
    await expect(
      store.replaceReadModels([
        {
          projection: 'proj',
          collections: ['cases'],
          position: 20,
          *docs() {
            for (let i = 0; i < 2000; i++) yield { collection: 'cases', key: `new-${i}`, partition: 'p', score: i, json: JSON.stringify({ big }) };
            throw new Error('the replay failed');
          },
        },
      ]),
    ).rejects.toThrow('the replay failed');
    expect((store as any).db.pragma('journal_mode', { simple: true })).toBe('wal');
    await store.close();
    await expectOld(path);
  });

  it('a swap that rewrites most of the table builds the partition index again after its inserts; a small one keeps it', async () => {
    const path = join(dir, 'swap-index.db');
    await oldModel(path);
    const store = new SqliteReadStore(path, { exclusive: true, backgroundCheckpoint: false });
    try {
      const db = (store as any).db;
      const schema = () => db.pragma('schema_version', { simple: true }) as number;
      const indexed = () => db.prepare("SELECT sql FROM sqlite_master WHERE name = 'docs_by_partition'").pluck().get() as string;
      const before = { schema: schema(), sql: indexed() };
      const model = (collection: string, n: number, position: number) => ({
        projection: collection,
        collections: [collection],
        position,
        documents: n,
        docs: () =>
          Array.from({ length: n }, (_, i) => ({
            collection,
            key: `k-${String(i).padStart(4, '0')}`,
            partition: i % 2 ? 'odd' : 'even',
            score: n - i,
            json: JSON.stringify({ i }),
          })),
      });
      // 10 documents beside 301 others: the index is kept as it is.
      await store.replaceReadModels([model('small', 10, 3)]);
      expect(schema()).toBe(before.schema);
      // The 300 documents of cases replaced by 500: dropped and built again, the same index.
      await store.replaceReadModels([{ ...model('cases', 500, 30), projection: 'proj' }]);
      expect(schema()).toBeGreaterThan(before.schema);
      expect(indexed()).toBe(before.sql);
      expect(db.prepare("EXPLAIN QUERY PLAN SELECT doc FROM docs WHERE collection = 'cases' AND partition = 'odd' ORDER BY score, key").all()).toEqual([
        expect.objectContaining({ detail: 'SEARCH docs USING INDEX docs_by_partition (collection=? AND partition=?)' }),
      ]);
      const odd = (await store.list<{ i: number }>('cases', 'odd')).map((d) => d.i);
      expect(odd).toEqual(Array.from({ length: 250 }, (_, j) => 499 - 2 * j));
      expect(await store.get('cases', 'old-7')).toBeNull();
      expect(await store.get('other', 'x')).toEqual({ v: 'other' });
      expect((await store.list('small', 'even')).length).toBe(5);
    } finally {
      await store.close();
    }
  });

  it('a process killed during the swap leaves the old models: the next opener rolls the swap back', () => {
    const path = join(dir, 'swap-killed.db');
    return (async () => {
      await oldModel(path);
      const lib = join(__dirname, '..', '..', '..', 'dist', 'libs', 'read-store', 'src');
      // A small page cache: the swap's pages spill into the file before the kill (the journal holds the old ones).
      const script = `
        const { SqliteReadStore } = require(${JSON.stringify(lib)});
        const store = new SqliteReadStore(${JSON.stringify(path)}, { exclusive: true, backgroundCheckpoint: false });
        store.db.pragma('cache_size = 20');
        const big = 'n'.repeat(2000);
        store.replaceReadModels([{ projection: 'proj', collections: ['cases'], position: 20, *docs() {
          for (let i = 0; ; i++) {
            if (i === 3000) { console.log(require('node:fs').existsSync(${JSON.stringify(path + '-journal')}) ? 'journal' : 'no journal'); process.kill(process.pid, 'SIGKILL'); }
            yield { collection: 'cases', key: 'new-' + i, partition: 'p', score: i, json: JSON.stringify({ big }) };
          }
        } }]);`;
      const r = spawnSync(process.execPath, ['-e', script], { encoding: 'utf8', timeout: 30_000 });
      expect(r.signal).toBe('SIGKILL');
      expect(r.stdout.trim()).toBe('journal');
      await expectOld(path);
      expect(existsSync(`${path}-journal`)).toBe(false);
    })();
  });
});
