import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { RecordedEvent } from '@svc/eventstore';
import { ProjectionReplay, ProjectionReplayError } from '../src/projection-replay';
import { ProjectionRunner } from '../src/projection-runner';
import { ReadStoreInUseError, SqliteReadStore } from '../src/sqlite-read-store';
import { Projection } from '../src/types';
import { InMemoryEventStore } from '@svc/eventstore';
import { fixedMetadata } from '@svc/testing';

const meta = fixedMetadata();

/** A counter per stream, a list partitioned by parity, a delete when a stream reaches 3. */
const counting = (name = 'counting'): Projection => ({
  name,
  streamPrefixes: ['count-'],
  collections: ['counters', 'by-parity'],
  async apply(event, tx) {
    const doc = (await tx.get<{ n: number }>('counters', event.streamId)) ?? { n: 0 };
    const n = doc.n + 1;
    tx.put('counters', event.streamId, { n }, { partition: 'all', score: event.position });
    if (n >= 3) tx.delete('by-parity', event.streamId);
    else tx.put('by-parity', event.streamId, { n, streamId: event.streamId }, { partition: n % 2 ? 'odd' : 'even', score: n });
  },
});

let dir: string;
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'projection-replay-'));
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

async function fill(store: InMemoryEventStore, n: number) {
  for (let i = 0; i < n; i++) {
    await store.append(i % 5 === 0 ? `other-${i}` : `count-${i % 7}`, [{ type: 'Counted', data: {}, metadata: { ...meta, eventId: `e${i}` } }], 'any');
  }
}

describe('ProjectionReplay', () => {
  it('builds exactly what the ProjectionRunner builds, replaced in one step at the given position', async () => {
    const events = new InMemoryEventStore();
    await fill(events, 120);
    const head = await events.headPosition();

    const live = new SqliteReadStore(join(dir, 'live.sqlite'));
    const runner = new ProjectionRunner({ eventStore: events, readStore: live });
    runner.register(counting());
    await runner.start();
    await runner.caughtUp(head);
    await runner.stop();

    const rebuilt = new SqliteReadStore(join(dir, 'rebuilt.sqlite'));
    await rebuilt.commit('counting', 3, [{ op: 'put', collection: 'counters', key: 'garbage', doc: { n: 99 }, partition: 'all' }]);
    const replay = new ProjectionReplay([counting()]);
    for (const e of await events.readAll(0, 1000)) await replay.apply(e);
    expect(replay.summary()).toEqual([{ name: 'counting', events: 96, documents: 7, collections: ['counters', 'by-parity'] }]);
    await rebuilt.replaceReadModels(replay.readModels(head));

    expect(await rebuilt.getCheckpoint('counting')).toBe(head);
    expect(await rebuilt.get('counters', 'garbage')).toBeNull();
    for (const c of ['counters', 'by-parity']) {
      for (const p of ['all', 'odd', 'even']) expect({ c, p, docs: await rebuilt.entries!(c, p) }).toEqual({ c, p, docs: await live.entries!(c, p) });
    }
    expect((await rebuilt.list('counters', 'all')).length).toBe(7);
    await live.close();
    await rebuilt.close();
  });

  it('refuses a projection without collections, a shared collection, and a write outside its collections', async () => {
    expect(() => new ProjectionReplay([{ name: 'bare', apply: () => undefined }])).toThrow(/declares no collections/);
    expect(() => new ProjectionReplay([counting('a'), counting('b')])).toThrow(/declared by two projections/);
    const sloppy: Projection = { name: 'sloppy', collections: ['mine'], apply: (_e, tx) => tx.put('yours', 'k', {}) };
    const replay = new ProjectionReplay([sloppy]);
    const event = { position: 1, streamId: 's', type: 'T', data: {}, metadata: meta, revision: 0 } as unknown as RecordedEvent;
    await expect(replay.apply(event)).rejects.toThrow(ProjectionReplayError);
    await expect(new ProjectionReplay([sloppy]).apply(event)).rejects.toThrow(/position 1 \(T\)/);
  });

  it('SqliteReadStore exclusive: refused while another connection has the file open; holds it while open', async () => {
    const file = join(dir, 'exclusive.sqlite');
    const service = new SqliteReadStore(file);
    expect(() => new SqliteReadStore(file, { exclusive: true })).toThrow(ReadStoreInUseError);
    await service.close();
    const tool = new SqliteReadStore(file, { exclusive: true });
    expect(() => new SqliteReadStore(file)).toThrow(/locked|busy/i);
    await tool.close();
    const again = new SqliteReadStore(file);
    await again.close();
  });
});
