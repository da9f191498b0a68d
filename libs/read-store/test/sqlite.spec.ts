import { mkdtempSync, rmSync } from 'node:fs';
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
    // eslint-disable-next-line @typescript-eslint/no-explicit-any
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
