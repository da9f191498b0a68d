import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { InMemoryEventStore, type EventStore, type RecordedEvent } from '@svc/eventstore';
import { ProjectionReplay, SqliteReadStore, type Projection } from '@svc/read-store';
import { fixedMetadata } from '@svc/testing';
import { rebuildReadModels, type RebuildSource } from '../src/commands/rebuild';

const meta = fixedMetadata();

/** A counter per stream and the last position seen per stream, partitioned by parity. */
const counting: Projection = {
  name: 'counting',
  streamPrefixes: ['count-'],
  collections: ['counters'],
  async apply(event, tx) {
    const doc = (await tx.get<{ n: number; last: number }>('counters', event.streamId)) ?? { n: 0, last: 0 };
    tx.put('counters', event.streamId, { n: doc.n + 1, last: event.position }, { partition: event.position % 2 ? 'odd' : 'even', score: event.position });
  },
};

let dir: string;
let log: InMemoryEventStore;
let head: number;
beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'rebuild-replay-'));
  log = new InMemoryEventStore();
  // Several of the command's pages, the last one partial.
  for (let i = 0; i < 1234; i++) {
    await log.append(i % 9 === 0 ? `other-${i}` : `count-${i % 37}`, [{ type: 'Counted', data: { i }, metadata: { ...meta, eventId: `e${i}` } }], 'any');
  }
  head = await log.headPosition();
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** The log as a remote store serves it: every page after a delay, and optionally a failure on one page. */
function slowLog(failFrom?: number): EventStore {
  return new Proxy(log, {
    get(target, prop, receiver) {
      if (prop === 'readAll') {
        return async (from: number, limit: number) => {
          await new Promise((r) => setTimeout(r, 2));
          if (failFrom !== undefined && from >= failFrom) throw new Error('connection reset');
          return target.readAll(from, limit);
        };
      }
      return Reflect.get(target, prop, receiver) as unknown;
    },
  });
}

const source = (events: EventStore, open: (page: RecordedEvent[]) => Promise<RecordedEvent[]> = async (p) => p): RebuildSource => ({
  events,
  open,
  sealing: null,
});

async function stored(store: SqliteReadStore) {
  return { even: await store.entries!('counters', 'even'), odd: await store.entries!('counters', 'odd'), checkpoint: await store.getCheckpoint('counting') };
}

describe('rebuildReadModels: reads the log ahead while pages are applied', () => {
  it('builds what one ProjectionReplay over the whole log builds, from a store that answers after a delay', async () => {
    const expected = new SqliteReadStore(join(dir, 'expected.sqlite'));
    const rebuilt = new SqliteReadStore(join(dir, 'rebuilt.sqlite'));
    try {
      const replay = new ProjectionReplay([counting]);
      for (const e of await log.readAll(0, 10_000)) await replay.apply(e);
      await expected.replaceReadModels!(replay.readModels(head));

      const result = await rebuildReadModels(source(slowLog()), rebuilt, [counting], head);
      expect(result.events).toBe(1234);
      const docs = await stored(rebuilt);
      expect(docs).toEqual(await stored(expected));
      expect(docs.odd.length + docs.even.length).toBe(37);
    } finally {
      await expected.close();
      await rebuilt.close();
    }
  });

  it('a read of the log that fails on a later page fails the rebuild, and nothing is replaced', async () => {
    const store = new SqliteReadStore(join(dir, 'read-fails.sqlite'));
    try {
      await store.commit('counting', 5, [{ op: 'put', collection: 'counters', key: 'count-1', doc: { n: 99, last: 5 }, partition: 'odd', score: 5 }]);
      await expect(rebuildReadModels(source(slowLog(900)), store, [counting], head)).rejects.toThrow('connection reset');
      expect(await stored(store)).toEqual({ even: [], odd: [{ key: 'count-1', partition: 'odd', score: 5, doc: { n: 99, last: 5 } }], checkpoint: 5 });
    } finally {
      await store.close();
    }
  });

  it('a page that cannot be opened fails the rebuild, and nothing is replaced', async () => {
    const store = new SqliteReadStore(join(dir, 'open-fails.sqlite'));
    try {
      await store.commit('counting', 5, [{ op: 'put', collection: 'counters', key: 'count-1', doc: { n: 99, last: 5 }, partition: 'odd', score: 5 }]);
      const open = async (page: RecordedEvent[]) => {
        if (page.some((e) => e.position === 1100)) throw new Error('event data of count-8@29 failed authentication');
        return page;
      };
      await expect(rebuildReadModels(source(slowLog(), open), store, [counting], head)).rejects.toThrow('failed authentication');
      expect((await stored(store)).checkpoint).toBe(5);
      expect(await store.get('counters', 'count-1')).toEqual({ n: 99, last: 5 });
    } finally {
      await store.close();
    }
  });
});
