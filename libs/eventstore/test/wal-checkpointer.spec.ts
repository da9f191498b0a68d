import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { SqliteEventStore, WalCheckpointer } from '@svc/eventstore';
import { SqliteReadStore } from '@svc/read-store';
import { ev } from './conformance';

const until = async (cond: () => boolean, ms = 8000) => {
  const deadline = Date.now() + ms;
  while (!cond() && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
  return cond();
};

describe('WalCheckpointer (WAL checkpoints on a worker thread)', () => {
  let dir: string;
  beforeEach(() => (dir = mkdtempSync(join(tmpdir(), 'wal-ckpt-'))));
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it('checkpoints the event store WAL off the event loop, without changing data_version for the writer', async () => {
    const store = new SqliteEventStore(join(dir, 'events.db'));
    const internals = store as unknown as { db: Database.Database; checkpointer: WalCheckpointer };
    expect(internals.checkpointer).toBeInstanceOf(WalCheckpointer);
    // The COMMIT path only checkpoints as a backstop now.
    expect(internals.db.pragma('wal_autocheckpoint', { simple: true })).toBe(8192 * 8);
    for (let i = 0; i < 50; i++) await store.append(`s-${i}`, [ev('E', { pad: 'x'.repeat(1000), i })], 'no_stream');
    const version = internals.db.pragma('data_version', { simple: true });
    const before = internals.checkpointer.stats.checkpoints;
    // A checkpoint after the writes that copied every frame of the WAL into the database file.
    expect(
      await until(
        () =>
          internals.checkpointer.stats.checkpoints > before &&
          internals.checkpointer.stats.last[1] > 0 &&
          internals.checkpointer.stats.last[2] === internals.checkpointer.stats.last[1],
      ),
    ).toBe(true);
    expect(internals.db.pragma('data_version', { simple: true })).toBe(version); // nothing was committed by it
    expect((await store.readAll(0, 100)).length).toBe(50);
    await store.close(); // stops the worker (jest would report an open handle otherwise)
    const again = new SqliteEventStore(join(dir, 'events.db'), { backgroundCheckpoint: false });
    expect((await again.readStream('s-49'))[0].data).toMatchObject({ i: 49 });
    expect((again as unknown as { checkpointer: unknown }).checkpointer).toBeNull();
    await again.close();
  });

  it('runs for the read store too, and never for :memory:', async () => {
    const rs = new SqliteReadStore(join(dir, 'rm.db'));
    const internals = rs as unknown as { db: Database.Database; checkpointer: WalCheckpointer };
    expect(internals.db.pragma('wal_autocheckpoint', { simple: true })).toBe(8000);
    await rs.write(Array.from({ length: 200 }, (_, i) => ({ op: 'put' as const, collection: 'c', key: `k${i}`, doc: { pad: 'y'.repeat(500) } })));
    expect(await until(() => internals.checkpointer.stats.last[1] > 0 && internals.checkpointer.stats.last[2] === internals.checkpointer.stats.last[1])).toBe(
      true,
    );
    // A checkpoint by the worker's connection is not a foreign commit: the generation stays.
    await new Promise((r) => setImmediate(r));
    const g = rs.generation('c');
    const n = internals.checkpointer.stats.checkpoints;
    expect(await until(() => internals.checkpointer.stats.checkpoints > n)).toBe(true);
    await new Promise((r) => setImmediate(r));
    expect(rs.generation('c')).toBe(g);
    await rs.close();
    const mem = new SqliteEventStore(':memory:');
    expect((mem as unknown as { checkpointer: unknown }).checkpointer).toBeNull();
    await mem.close();
  });

  it('tells its owner when the worker fails, so the owner can checkpoint on its own again', async () => {
    let failed = 0;
    const c = new WalCheckpointer(join(dir, 'missing.db'), () => failed++, { intervalMs: 50 });
    expect(await until(() => failed === 1)).toBe(true);
    await c.close();
    expect(failed).toBe(1);
  });
});
