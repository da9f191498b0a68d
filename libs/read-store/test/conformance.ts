// Over 400 lines: the one conformance suite every read store passes.
import { ReadStore } from '../src/types';

/**
 * One conformance suite for every ReadStore adapter. `factory` returns a fresh, empty store
 * (and is called once per test); `reopen`, when given, opens a second handle on the same data
 * as the last store the factory returned (persistence check).
 */
export interface ReadStoreFactory {
  create(): Promise<ReadStore>;
  reopen?(): Promise<ReadStore>;
  /** Called after each test (clean up keys / files). */
  cleanup?(): Promise<void>;
}

interface Doc {
  id: string;
  n?: number;
}

export function describeReadStoreConformance(name: string, factory: ReadStoreFactory): void {
  describe(`ReadStore conformance: ${name}`, () => {
    let store: ReadStore;
    const opened: ReadStore[] = [];

    beforeEach(async () => {
      store = await factory.create();
      opened.push(store);
    });

    afterEach(async () => {
      for (const s of opened.splice(0)) await s.close();
      await factory.cleanup?.();
    });

    it('get returns null for a missing document', async () => {
      expect(await store.get('cases', 'nope')).toBeNull();
    });

    it('puts, overwrites and deletes documents', async () => {
      await store.write([{ op: 'put', collection: 'cases', key: 'a', doc: { id: 'a', n: 1, nested: { x: [1, 'two', null] } } }]);
      expect(await store.get('cases', 'a')).toEqual({ id: 'a', n: 1, nested: { x: [1, 'two', null] } });
      await store.write([{ op: 'put', collection: 'cases', key: 'a', doc: { id: 'a', n: 2 } }]);
      expect(await store.get('cases', 'a')).toEqual({ id: 'a', n: 2 });
      // Same key in another collection is another document.
      await store.write([{ op: 'put', collection: 'other', key: 'a', doc: { id: 'other' } }]);
      expect(await store.get('cases', 'a')).toEqual({ id: 'a', n: 2 });
      await store.write([{ op: 'delete', collection: 'cases', key: 'a' }]);
      expect(await store.get('cases', 'a')).toBeNull();
      expect(await store.get('other', 'a')).toEqual({ id: 'other' });
      // Deleting what is not there is fine.
      await store.write([{ op: 'delete', collection: 'cases', key: 'a' }]);
    });

    it('keeps documents of scalar and unicode content intact', async () => {
      await store.write([
        { op: 'put', collection: 'misc', key: 'str', doc: 'plain string' },
        { op: 'put', collection: 'misc', key: 'num', doc: 42 },
        { op: 'put', collection: 'misc', key: 'ünï:cødé 🙂', doc: { text: 'Grüße 🙂 "quoted" \\ back' } },
      ]);
      expect(await store.get('misc', 'str')).toBe('plain string');
      expect(await store.get('misc', 'num')).toBe(42);
      expect(await store.get('misc', 'ünï:cødé 🙂')).toEqual({ text: 'Grüße 🙂 "quoted" \\ back' });
    });

    it('lists a partition ordered by score then key, with a limit', async () => {
      await store.write([
        { op: 'put', collection: 'cases', key: 'c', doc: { id: 'c' }, partition: 'p1', score: 2 },
        { op: 'put', collection: 'cases', key: 'b', doc: { id: 'b' }, partition: 'p1', score: 1 },
        { op: 'put', collection: 'cases', key: 'a', doc: { id: 'a' }, partition: 'p1', score: 2 },
        { op: 'put', collection: 'cases', key: 'z', doc: { id: 'z' }, partition: 'p1' }, // score 0
        { op: 'put', collection: 'cases', key: 'x', doc: { id: 'x' }, partition: 'p2', score: 0 },
        { op: 'put', collection: 'cases', key: 'y', doc: { id: 'y' } }, // no partition
        { op: 'put', collection: 'other', key: 'q', doc: { id: 'q' }, partition: 'p1', score: 0 },
      ]);
      const ids = (docs: Doc[]) => docs.map((d) => d.id);
      expect(ids(await store.list<Doc>('cases', 'p1'))).toEqual(['z', 'b', 'a', 'c']);
      expect(ids(await store.list<Doc>('cases', 'p1', { limit: 2 }))).toEqual(['z', 'b']);
      expect(ids(await store.list<Doc>('cases', 'p2'))).toEqual(['x']);
      expect(await store.list('cases', 'nope')).toEqual([]);
      expect(await store.get('cases', 'y')).toEqual({ id: 'y' });
      // Negative and fractional scores, and large ones (timestamps in ms).
      await store.write([
        { op: 'put', collection: 'ord', key: 'k1', doc: { id: 'k1' }, partition: 'p', score: 1767225600000 },
        { op: 'put', collection: 'ord', key: 'k2', doc: { id: 'k2' }, partition: 'p', score: -5.5 },
        { op: 'put', collection: 'ord', key: 'k3', doc: { id: 'k3' }, partition: 'p', score: 0.25 },
      ]);
      expect(ids(await store.list<Doc>('ord', 'p'))).toEqual(['k2', 'k3', 'k1']);
    });

    it('entries (when implemented) report key, partition and score', async () => {
      if (!store.entries) return;
      await store.write([
        { op: 'put', collection: 'cases', key: 'a', doc: { id: 'a' }, partition: 'p1', score: 3 },
        { op: 'put', collection: 'cases', key: 'b', doc: { id: 'b' }, partition: 'p1', score: 1.5 },
      ]);
      expect(await store.entries('cases', 'p1')).toEqual([
        { key: 'b', partition: 'p1', score: 1.5, doc: { id: 'b' } },
        { key: 'a', partition: 'p1', score: 3, doc: { id: 'a' } },
      ]);
      expect(await store.entries('cases', 'p1', { maxScore: 2 })).toEqual([{ key: 'b', partition: 'p1', score: 1.5, doc: { id: 'b' } }]);
    });

    it('moves a document between partitions and drops it from indexes on delete', async () => {
      await store.write([{ op: 'put', collection: 'cases', key: 'a', doc: { id: 'a', n: 1 }, partition: 'p1', score: 1 }]);
      await store.write([{ op: 'put', collection: 'cases', key: 'a', doc: { id: 'a', n: 2 }, partition: 'p2', score: 1 }]);
      expect(await store.list('cases', 'p1')).toEqual([]);
      expect(await store.list('cases', 'p2')).toEqual([{ id: 'a', n: 2 }]);
      // Re-scoring within the partition reorders.
      await store.write([{ op: 'put', collection: 'cases', key: 'b', doc: { id: 'b' }, partition: 'p2', score: 5 }]);
      await store.write([{ op: 'put', collection: 'cases', key: 'a', doc: { id: 'a', n: 3 }, partition: 'p2', score: 9 }]);
      expect(await store.list('cases', 'p2')).toEqual([{ id: 'b' }, { id: 'a', n: 3 }]);
      // Rewritten in place (same partition, same score): new content, same position.
      await store.write([{ op: 'put', collection: 'cases', key: 'b', doc: { id: 'b', n: 7 }, partition: 'p2', score: 5 }]);
      expect(await store.list('cases', 'p2')).toEqual([
        { id: 'b', n: 7 },
        { id: 'a', n: 3 },
      ]);
      await store.write([{ op: 'put', collection: 'cases', key: 'b', doc: { id: 'b' }, partition: 'p2', score: 5 }]);
      // Put without a partition takes it out of every partition, but keeps the document.
      await store.write([{ op: 'put', collection: 'cases', key: 'a', doc: { id: 'a', n: 4 } }]);
      expect(await store.list('cases', 'p2')).toEqual([{ id: 'b' }]);
      expect(await store.get('cases', 'a')).toEqual({ id: 'a', n: 4 });
      // Moved inside one commit, then deleted.
      await store.write([
        { op: 'put', collection: 'cases', key: 'b', doc: { id: 'b' }, partition: 'p3', score: 1 },
        { op: 'put', collection: 'cases', key: 'b', doc: { id: 'b', n: 1 }, partition: 'p4', score: 1 },
      ]);
      expect(await store.list('cases', 'p2')).toEqual([]);
      expect(await store.list('cases', 'p3')).toEqual([]);
      expect(await store.list('cases', 'p4')).toEqual([{ id: 'b', n: 1 }]);
      await store.write([{ op: 'delete', collection: 'cases', key: 'b' }]);
      expect(await store.list('cases', 'p4')).toEqual([]);
      expect(await store.get('cases', 'b')).toBeNull();
    });

    it('range returns documents with score <= max in score order, limited', async () => {
      const ops = [5, 1, 3, 3, 10].map((score, i) => ({
        op: 'put' as const,
        collection: 'timers',
        key: `t${i}`,
        doc: { id: `t${i}`, n: score },
        partition: 'env1',
        score,
      }));
      await store.write(ops);
      await store.write([{ op: 'put', collection: 'timers', key: 'o', doc: { id: 'o' }, partition: 'env2', score: 0 }]);
      const ids = (docs: Doc[]) => docs.map((d) => d.id);
      expect(ids(await store.range<Doc>('timers', 'env1', 3, 100))).toEqual(['t1', 't2', 't3']);
      expect(ids(await store.range<Doc>('timers', 'env1', 3, 2))).toEqual(['t1', 't2']);
      expect(ids(await store.range<Doc>('timers', 'env1', 0.5, 100))).toEqual([]);
      expect(ids(await store.range<Doc>('timers', 'env1', 100, 100))).toEqual(['t1', 't2', 't3', 't0', 't4']);
      expect(ids(await store.range<Doc>('timers', 'env1', Number.MAX_SAFE_INTEGER, 1))).toEqual(['t1']);
    });

    describe('page (range reads by position)', () => {
      /** Ten documents in p1, several sharing a score (ties broken by key, byte order), plus noise elsewhere. */
      const layout: [string, number][] = [
        ['m', 2],
        ['a', 2],
        ['z', 2],
        ['B', 2],
        ['é', 2],
        ['~', 2],
        ['k1', -5.5],
        ['k2', 0.25],
        ['k3', 1767225600000],
        ['k4', 0],
      ];
      /** The order the port promises: score, then key by bytes (UTF-8). */
      const ascending = [...layout].sort(([ka, sa], [kb, sb]) => sa - sb || Buffer.compare(Buffer.from(ka), Buffer.from(kb))).map(([k]) => k);
      beforeEach(async () => {
        await store.write([
          ...layout.map(([key, score]) => ({ op: 'put' as const, collection: 'pg', key, doc: { id: key }, partition: 'p1', score })),
          { op: 'put', collection: 'pg', key: 'other', doc: { id: 'other' }, partition: 'p2', score: 2 },
          { op: 'put', collection: 'pg2', key: 'b', doc: { id: 'b' }, partition: 'p1', score: 2 },
          { op: 'put', collection: 'pg', key: 'loose', doc: { id: 'loose' } },
        ]);
      });
      const keys = (p: { entries: { key: string }[] }) => p.entries.map((e) => e.key);

      it('reads the first page in either order with entries and hasMore', async () => {
        expect(ascending).toEqual(['k1', 'k4', 'k2', 'B', 'a', 'm', 'z', '~', 'é', 'k3']);
        const first = await store.page<Doc>('pg', 'p1', { limit: 3 });
        expect(first).toEqual({
          entries: [
            { key: 'k1', partition: 'p1', score: -5.5, doc: { id: 'k1' } },
            { key: 'k4', partition: 'p1', score: 0, doc: { id: 'k4' } },
            { key: 'k2', partition: 'p1', score: 0.25, doc: { id: 'k2' } },
          ],
          hasMore: true,
        });
        expect(keys(await store.page('pg', 'p1', { limit: 3, order: 'desc' }))).toEqual(['k3', 'é', '~']);
        // Exactly all: no more; more than all: no more.
        expect(await store.page('pg', 'p1', { limit: 10 })).toMatchObject({ hasMore: false });
        expect(keys(await store.page('pg', 'p1', { limit: 10 }))).toEqual(ascending);
        expect(keys(await store.page('pg', 'p1', { limit: 500, order: 'desc' }))).toEqual([...ascending].reverse());
        expect(await store.page('pg', 'p1', { limit: 11 })).toMatchObject({ hasMore: false });
        expect(await store.page('pg', 'p1', { limit: 9 })).toMatchObject({ hasMore: true });
        expect(await store.page('pg', 'nope', { limit: 5 })).toEqual({ entries: [], hasMore: false });
        // The list order is the ascending page order.
        expect((await store.list<Doc>('pg', 'p1')).map((d) => d.id)).toEqual(ascending);
      });

      it('walks a partition from the last entry of each page: every document exactly once, ties included, both orders', async () => {
        for (const order of ['asc', 'desc'] as const) {
          const want = order === 'asc' ? ascending : [...ascending].reverse();
          for (const limit of [1, 2, 3, 4, 9, 10, 11]) {
            const seen: string[] = [];
            let after: { score: number; key: string } | undefined;
            for (let i = 0; i < 20; i++) {
              const page = await store.page<Doc>('pg', 'p1', { limit, order, after });
              seen.push(...keys(page));
              const last = page.entries.at(-1);
              if (!page.hasMore) break;
              expect(page.entries).toHaveLength(limit);
              after = { score: last!.score, key: last!.key };
            }
            expect([order, limit, seen]).toEqual([order, limit, want]);
          }
        }
      });

      it('starts after a score alone: past every document of that score', async () => {
        expect(keys(await store.page('pg', 'p1', { limit: 10, after: { score: 0 } }))).toEqual(['k2', 'B', 'a', 'm', 'z', '~', 'é', 'k3']);
        expect(keys(await store.page('pg', 'p1', { limit: 2, after: { score: 2 } }))).toEqual(['k3']);
        expect(keys(await store.page('pg', 'p1', { limit: 10, order: 'desc', after: { score: 2 } }))).toEqual(['k2', 'k4', 'k1']);
        expect(keys(await store.page('pg', 'p1', { limit: 10, after: { score: 1.5 } }))).toEqual(['B', 'a', 'm', 'z', '~', 'é', 'k3']);
        expect(await store.page('pg', 'p1', { limit: 10, after: { score: 1767225600000 } })).toEqual({ entries: [], hasMore: false });
        expect(keys(await store.page('pg', 'p1', { limit: 1, after: { score: -6 } }))).toEqual(['k1']);
      });

      it('starts after a position whose document is gone or moved, among ties, in both orders', async () => {
        // 'm' (score 2) is deleted, 'z' moves to another score: the positions still mark where to go on.
        await store.write([
          { op: 'delete', collection: 'pg', key: 'm' },
          { op: 'put', collection: 'pg', key: 'z', doc: { id: 'z' }, partition: 'p1', score: 1 },
        ]);
        expect(keys(await store.page('pg', 'p1', { limit: 10, after: { score: 2, key: 'm' } }))).toEqual(['~', 'é', 'k3']);
        expect(keys(await store.page('pg', 'p1', { limit: 2, after: { score: 2, key: 'm' } }))).toEqual(['~', 'é']);
        expect(keys(await store.page('pg', 'p1', { limit: 10, order: 'desc', after: { score: 2, key: 'm' } }))).toEqual(['a', 'B', 'z', 'k2', 'k4', 'k1']);
        expect(keys(await store.page('pg', 'p1', { limit: 10, after: { score: 2, key: 'z' } }))).toEqual(['~', 'é', 'k3']);
        // A key between existing ones, before all and after all of the tie, and a score no document has.
        expect(keys(await store.page('pg', 'p1', { limit: 3, after: { score: 2, key: 'b' } }))).toEqual(['~', 'é', 'k3']);
        expect(keys(await store.page('pg', 'p1', { limit: 3, after: { score: 2, key: '' } }))).toEqual(['B', 'a', '~']);
        expect(keys(await store.page('pg', 'p1', { limit: 3, after: { score: 2, key: '\u{10FFFF}' } }))).toEqual(['k3']);
        expect(keys(await store.page('pg', 'p1', { limit: 3, order: 'desc', after: { score: 2, key: 'é' } }))).toEqual(['~', 'a', 'B']);
        expect(keys(await store.page('pg', 'p1', { limit: 2, after: { score: 1.5, key: 'x' } }))).toEqual(['B', 'a']);
        expect(keys(await store.page('pg', 'p1', { limit: 2, order: 'desc', after: { score: 1.5, key: 'x' } }))).toEqual(['z', 'k2']);
        // A position that does exist (the rank path) agrees with the one that does not (the scan path).
        expect(keys(await store.page('pg', 'p1', { limit: 10, after: { score: 2, key: 'a' } }))).toEqual(['~', 'é', 'k3']);
        expect(keys(await store.page('pg', 'p1', { limit: 10, order: 'desc', after: { score: 2, key: '~' } }))).toEqual(['a', 'B', 'z', 'k2', 'k4', 'k1']);
      });

      it('walks many documents sharing one score while the document at the position is deleted between pages', async () => {
        const ops = Array.from({ length: 250 }, (_, i) => ({
          op: 'put' as const,
          collection: 'tie',
          key: `d${String(i).padStart(3, '0')}`,
          doc: { id: i },
          partition: 'p',
          score: 7,
        }));
        await store.write(ops);
        const seen: string[] = [];
        let after: { score: number; key: string } | undefined;
        for (;;) {
          const page = await store.page('tie', 'p', { limit: 40, order: 'desc', after });
          seen.push(...keys(page));
          if (!page.hasMore) break;
          after = { score: page.entries.at(-1)!.score, key: page.entries.at(-1)!.key };
          // A writer deletes the position's document between pages: the next page still goes on from it.
          await store.write([{ op: 'delete', collection: 'tie', key: after.key }]);
        }
        expect(seen).toEqual(ops.map((o) => o.key).reverse());
      });

      it('refuses a limit below 1 or not an integer, a bad order and a score that is not finite', async () => {
        await expect(store.page('pg', 'p1', { limit: 0 })).rejects.toThrow();
        await expect(store.page('pg', 'p1', { limit: 1.5 })).rejects.toThrow();
        await expect(store.page('pg', 'p1', { limit: 2, order: 'up' as 'asc' })).rejects.toThrow();
        await expect(store.page('pg', 'p1', { limit: 2, after: { score: Number.NaN } })).rejects.toThrow();
        await expect(store.page('pg', 'p1', { limit: 2, after: { score: Infinity, key: 'a' } })).rejects.toThrow();
        await expect(store.page('bad:name', 'p1', { limit: 2 })).rejects.toThrow();
      });
    });

    it('commit applies ops and checkpoint together', async () => {
      expect(await store.getCheckpoint('proj')).toBe(0);
      await store.commit('proj', 7, [
        { op: 'put', collection: 'cases', key: 'a', doc: { id: 'a' }, partition: 'p', score: 1 },
        { op: 'put', collection: 'cases', key: 'b', doc: { id: 'b' }, partition: 'p', score: 2 },
      ]);
      expect(await store.getCheckpoint('proj')).toBe(7);
      expect(await store.getCheckpoint('other-proj')).toBe(0);
      expect(await store.list('cases', 'p')).toEqual([{ id: 'a' }, { id: 'b' }]);
      await store.commit('proj', 9, [{ op: 'delete', collection: 'cases', key: 'a' }]);
      expect(await store.getCheckpoint('proj')).toBe(9);
      expect(await store.list('cases', 'p')).toEqual([{ id: 'b' }]);
      // A checkpoint-only commit.
      await store.commit('proj', 12, []);
      expect(await store.getCheckpoint('proj')).toBe(12);
    });

    it('a rejected commit leaves neither ops nor checkpoint', async () => {
      await store.commit('proj', 3, [{ op: 'put', collection: 'cases', key: 'a', doc: { id: 'a' } }]);
      await expect(
        store.commit('proj', 4, [
          { op: 'put', collection: 'cases', key: 'b', doc: { id: 'b' } },
          { op: 'put', collection: 'cases', key: 'c', doc: { id: 'c' }, score: Number.NaN },
        ]),
      ).rejects.toThrow();
      await expect(store.commit('proj', 4, [{ op: 'put', collection: 'bad:name', key: 'x', doc: 1 }])).rejects.toThrow();
      expect(await store.getCheckpoint('proj')).toBe(3);
      expect(await store.get('cases', 'b')).toBeNull();
      expect(await store.get('cases', 'a')).toEqual({ id: 'a' });
    });

    it('commits of one projection are all-or-nothing under concurrency', async () => {
      // Many concurrent commits: whatever order they land in, every document written by a
      // commit that took effect is there, and each checkpoint value matches a commit that landed.
      const commits = Array.from({ length: 20 }, (_, i) =>
        store.commit('race', i + 1, [
          { op: 'put', collection: 'race', key: `k${i + 1}a`, doc: { id: `k${i + 1}a` }, partition: 'p', score: i + 1 },
          { op: 'put', collection: 'race', key: `k${i + 1}b`, doc: { id: `k${i + 1}b` }, partition: 'p', score: i + 1 },
        ]),
      );
      await Promise.all(commits);
      const cp = await store.getCheckpoint('race');
      expect(cp).toBe(20);
      const docs = await store.list<Doc>('race', 'p');
      // Pairs are never torn.
      const keys = new Set(docs.map((d) => d.id));
      for (let i = 1; i <= 20; i++) expect(keys.has(`k${i}a`)).toBe(keys.has(`k${i}b`));
      expect(keys.has('k20a')).toBe(true);
    });

    it('the checkpoint never goes backwards and a stale commit writes nothing', async () => {
      await store.commit('proj', 10, [{ op: 'put', collection: 'cases', key: 'a', doc: { id: 'a', n: 10 }, partition: 'p' }]);
      await store.commit('proj', 5, [
        { op: 'put', collection: 'cases', key: 'a', doc: { id: 'a', n: 5 }, partition: 'q' },
        { op: 'put', collection: 'cases', key: 'stale', doc: { id: 'stale' } },
      ]);
      expect(await store.getCheckpoint('proj')).toBe(10);
      expect(await store.get('cases', 'a')).toEqual({ id: 'a', n: 10 });
      expect(await store.list('cases', 'p')).toEqual([{ id: 'a', n: 10 }]);
      expect(await store.list('cases', 'q')).toEqual([]);
      expect(await store.get('cases', 'stale')).toBeNull();
      // Equal position: already applied, also ignored.
      await store.commit('proj', 10, [{ op: 'put', collection: 'cases', key: 'dup', doc: { id: 'dup' } }]);
      expect(await store.get('cases', 'dup')).toBeNull();
      // Projections are independent.
      await store.commit('other', 2, []);
      expect(await store.getCheckpoint('other')).toBe(2);
      expect(await store.getCheckpoint('proj')).toBe(10);
      await store.commit('proj', 11, []);
      expect(await store.getCheckpoint('proj')).toBe(11);
    });

    it('checkpoint stays monotonic when two writers race', async () => {
      const a = (async () => {
        for (let p = 1; p <= 40; p += 2) await store.commit('race2', p, []);
      })();
      const b = (async () => {
        for (let p = 40; p >= 2; p -= 2) await store.commit('race2', p, []);
      })();
      await Promise.all([a, b]);
      expect(await store.getCheckpoint('race2')).toBe(40);
    });

    it('ping answers while the store is open, and fails once it is closed', async () => {
      await expect(store.ping()).resolves.toBeUndefined();
      await store.commit('proj', 1, [{ op: 'put', collection: 'cases', key: 'a', doc: { id: 'a' } }]);
      await expect(store.ping()).resolves.toBeUndefined();
      await store.close();
      await expect(store.ping()).rejects.toThrow();
    });

    it('replaceReadModels: the rebuilt collections replace the stored ones whole, other collections and checkpoints stay', async () => {
      await store.commit('proj', 50, [
        { op: 'put', collection: 'cases', key: 'stale', doc: { id: 'stale' }, partition: 'p', score: 9 },
        { op: 'put', collection: 'cases', key: 'a', doc: { id: 'a', n: 0 }, partition: 'old', score: 1 },
        { op: 'put', collection: 'timers', key: 't', doc: { id: 't' }, partition: 'due', score: 5 },
      ]);
      await store.commit('other', 7, [{ op: 'put', collection: 'notes', key: 'n', doc: { id: 'n' }, partition: 'p' }]);
      await store.write([{ op: 'put', collection: 'ops', key: 'x', doc: { id: 'x' } }]);
      expect(store.replaceReadModels).toBeDefined();
      await store.replaceReadModels!([
        {
          projection: 'proj',
          collections: ['cases', 'timers'],
          position: 40,
          docs: () => [
            { collection: 'cases', key: 'a', partition: 'p', score: 2, json: JSON.stringify({ id: 'a', n: 1 }) },
            { collection: 'cases', key: 'b', partition: 'p', score: 1, json: JSON.stringify({ id: 'b' }) },
            { collection: 'cases', key: 'c', partition: null, score: 0, json: JSON.stringify({ id: 'c' }) },
          ],
        },
      ]);
      expect(await store.getCheckpoint('proj')).toBe(40);
      expect(await store.get('cases', 'stale')).toBeNull();
      expect(await store.get('cases', 'c')).toEqual({ id: 'c' });
      expect(await store.list('cases', 'p')).toEqual([{ id: 'b' }, { id: 'a', n: 1 }]);
      expect(await store.list('cases', 'old')).toEqual([]);
      expect(await store.range('timers', 'due', 100, 10)).toEqual([]);
      // Not the rebuilt projection's: untouched.
      expect(await store.getCheckpoint('other')).toBe(7);
      expect(await store.list('notes', 'p')).toEqual([{ id: 'n' }]);
      expect(await store.get('ops', 'x')).toEqual({ id: 'x' });
      // A projection continues from the rebuilt checkpoint.
      await store.commit('proj', 41, [{ op: 'put', collection: 'cases', key: 'b', doc: { id: 'b', n: 2 }, partition: 'q', score: 1 }]);
      expect(await store.list('cases', 'p')).toEqual([{ id: 'a', n: 1 }]);
      expect(await store.list('cases', 'q')).toEqual([{ id: 'b', n: 2 }]);
    });

    if (factory.reopen) {
      it('persists documents and checkpoints across reopen', async () => {
        await store.commit('proj', 42, [
          { op: 'put', collection: 'cases', key: 'a', doc: { id: 'a', n: 1 }, partition: 'p', score: 2 },
          { op: 'put', collection: 'cases', key: 'b', doc: { id: 'b' }, partition: 'p', score: 1 },
        ]);
        await store.close();
        const again = await factory.reopen!();
        opened.push(again);
        expect(await again.getCheckpoint('proj')).toBe(42);
        expect(await again.get('cases', 'a')).toEqual({ id: 'a', n: 1 });
        expect(await again.list('cases', 'p')).toEqual([{ id: 'b' }, { id: 'a', n: 1 }]);
      });
    }
  });
}
