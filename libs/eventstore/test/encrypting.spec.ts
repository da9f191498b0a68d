import { createHash } from 'node:crypto';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { EncryptingEventStore, isEncryptedData, SqliteEventStore } from '@svc/eventstore';
import { describeEventStoreConformance, ev } from './conformance';

/** Test keys: a distinct 32-byte key per environment id. */
function keyFor(environmentId: string): Buffer {
  return createHash('sha256').update(`test-key:${environmentId}`).digest();
}

function tempDir(): string {
  return mkdtempSync(join(tmpdir(), 'eventstore-enc-'));
}

describeEventStoreConformance('EncryptingEventStore over SQLite', async () => {
  const dir = tempDir();
  const file = join(dir, 'events.db');
  const store = new EncryptingEventStore(new SqliteEventStore(file, { pollIntervalMs: 50 }), keyFor);
  return {
    store,
    ordered: true,
    reopen: async () => new EncryptingEventStore(new SqliteEventStore(file), keyFor),
    cleanup: async () => {
      await store.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
});

describe('EncryptingEventStore at rest', () => {
  let dir: string;
  let file: string;
  beforeEach(() => {
    dir = tempDir();
    file = join(dir, 'events.db');
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  const CANARY = 'CANARY-PHI-3f9c1e7a-Jane-Roe-1970-01-01';

  it('never writes a planted canary in clear to any file under the data dir', async () => {
    const keysAsked: string[] = [];
    const store = new EncryptingEventStore(new SqliteEventStore(file), (id) => {
      keysAsked.push(id);
      return keyFor(id);
    });
    await store.append('conv-1', [ev('MessageReceived', { body: `hello ${CANARY}` }, { environmentId: 'env_a' })], 'no_stream');
    await store.append('conv-2', [ev('MessageReceived', { body: CANARY, nested: [CANARY] }, { environmentId: null })], 'no_stream');
    expect(keysAsked).toEqual(expect.arrayContaining(['env_a', 'global']));

    // While the store is open (data still in the WAL) and after close (checkpointed into the db).
    const scan = () => {
      for (const name of readdirSync(dir)) {
        const bytes = readFileSync(join(dir, name));
        expect({ name, found: bytes.includes(Buffer.from(CANARY, 'utf8')) }).toEqual({ name, found: false });
        expect(bytes.includes(Buffer.from('Jane-Roe', 'utf8'))).toBe(false);
      }
    };
    scan();
    expect((await store.readStream('conv-1'))[0].data).toEqual({ body: `hello ${CANARY}` });
    await store.close();
    scan();

    // What is stored is the sealed form, with metadata in clear.
    const db = new Database(file, { readonly: true });
    const rows = db.prepare('SELECT data, metadata FROM events ORDER BY position').all() as { data: string; metadata: string }[];
    db.close();
    expect(rows).toHaveLength(2);
    for (const r of rows) {
      const data = JSON.parse(r.data);
      expect(isEncryptedData(data)).toBe(true);
      expect(Object.keys(data).sort()).toEqual(['ct', 'enc', 'iv', 'tag']);
      expect(Buffer.from(data.iv, 'base64')).toHaveLength(12);
      expect(Buffer.from(data.tag, 'base64')).toHaveLength(16);
    }
    expect(JSON.parse(rows[0].metadata).environmentId).toBe('env_a');
  });

  it('decrypts on readStream, readAll and subscriptions', async () => {
    const store = new EncryptingEventStore(new SqliteEventStore(file, { pollIntervalMs: 50 }), keyFor);
    await store.append('c-1', [ev('Noted', { text: CANARY }, { environmentId: 'env_b' })], 'no_stream');
    expect((await store.readStream('c-1'))[0].data).toEqual({ text: CANARY });
    expect((await store.readAll(0, 10))[0].data).toEqual({ text: CANARY });
    const got = await new Promise<unknown>((resolve) => {
      const sub = store.subscribeToAll({ fromPosition: 0 }, async (e) => {
        resolve(e.data);
        void sub.close();
      });
    });
    expect(got).toEqual({ text: CANARY });
    await store.close();
  });

  it('uses the key of the event environment: another key cannot open it', async () => {
    const writer = new EncryptingEventStore(new SqliteEventStore(file), keyFor);
    await writer.append('c-1', [ev('Noted', { text: CANARY }, { environmentId: 'env_c' })], 'no_stream');
    await writer.close();
    const wrongKeys = new EncryptingEventStore(new SqliteEventStore(file), (id) => keyFor(`other-${id}`));
    const err = await wrongKeys.readStream('c-1').then(
      () => null,
      (e: Error) => e,
    );
    expect(err).toBeInstanceOf(Error);
    expect(String(err?.message)).not.toContain(CANARY);
    await wrongKeys.close();
  });

  it('detects a sealed payload moved to another stream', async () => {
    const raw = new SqliteEventStore(file);
    const store = new EncryptingEventStore(raw, keyFor);
    await store.append('c-1', [ev('Noted', { text: CANARY }, { environmentId: 'env_d' })], 'no_stream');
    const [sealed] = await raw.readStream('c-1');
    await raw.append('c-2', [{ type: 'Noted', data: sealed.data, metadata: { ...sealed.metadata, eventId: 'copy-1' } }], 'no_stream');
    await expect(store.readStream('c-2')).rejects.toThrow('failed authentication');
    await store.close();
  });

  it('subscriptions open data only when the handler reads it, and a payload failing authentication is retried, not skipped', async () => {
    const raw = new SqliteEventStore(file, { pollIntervalMs: 20, retryDelayMs: 5 });
    const store = new EncryptingEventStore(raw, keyFor);
    await store.append('c-1', [ev('Noted', { text: CANARY }, { environmentId: 'env_e' })], 'no_stream');
    const [sealed] = await raw.readStream('c-1');
    // A moved payload: fails authentication, but only for a handler that reads its data.
    await raw.append('c-2', [{ type: 'Noted', data: sealed.data, metadata: { ...sealed.metadata, eventId: 'copy-2' } }], 'no_stream');
    await store.append('c-3', [ev('Noted', { n: 3 }, { environmentId: 'env_e' })], 'no_stream');
    const skipping: string[] = [];
    const reading: unknown[] = [];
    let failures = 0;
    await new Promise<void>((resolve) => {
      const sub = store.subscribeToAll({ fromPosition: 0 }, async (e) => {
        skipping.push(e.streamId);
        if (skipping.length === 3) {
          void sub.close();
          resolve();
        }
      });
    });
    expect(skipping).toEqual(['c-1', 'c-2', 'c-3']);
    await new Promise<void>((resolve) => {
      const sub = store.subscribeToAll({ fromPosition: 0 }, async (e) => {
        try {
          reading.push({ ...e }.data);
        } catch (err) {
          if (++failures === 2) {
            void sub.close();
            resolve();
          }
          throw err;
        }
      });
    });
    expect(reading).toEqual([{ text: CANARY }]); // stuck on c-2, retried, never past it
    expect(failures).toBe(2);
    await store.close();
  });

  it('refuses a key that is not 32 bytes', async () => {
    const store = new EncryptingEventStore(new SqliteEventStore(file), () => Buffer.alloc(16));
    await expect(store.append('c-1', [ev('E', { a: 1 })], 'no_stream')).rejects.toThrow('32-byte');
    await store.close();
  });

  describe('events this process sealed', () => {
    /** keyFor, counting its calls: sealing asks it once per event, every decryption once more. */
    const counting = () => {
      const asked: string[] = [];
      return { asked, keyFor: (id: string) => (asked.push(id), keyFor(id)) };
    };

    it('are opened from what was sealed, without a decryption, on every read path; another process decrypts them', async () => {
      const k = counting();
      const store = new EncryptingEventStore(new SqliteEventStore(file, { pollIntervalMs: 20 }), k.keyFor);
      await store.append('c-1', [ev('Noted', { text: CANARY, n: [1, { x: null }] }, { environmentId: 'env_m' })], 'no_stream');
      expect(k.asked).toEqual(['env_m']); // the seal
      const first = (await store.readStream('c-1'))[0].data as { n: unknown[] };
      expect(first).toEqual({ text: CANARY, n: [1, { x: null }] });
      expect((await store.readAll(0, 10))[0].data).toEqual({ text: CANARY, n: [1, { x: null }] });
      const viaSub = await new Promise<unknown>((resolve) => {
        const sub = store.subscribeToAll({ fromPosition: 0 }, async (e) => {
          resolve(e.data);
          void sub.close();
        });
      });
      expect(viaSub).toEqual({ text: CANARY, n: [1, { x: null }] });
      expect(k.asked).toEqual(['env_m']); // no decryption asked for a key
      // Each read gets its own copy.
      first.n.push('mutated');
      expect((await store.readStream('c-1'))[0].data).toEqual({ text: CANARY, n: [1, { x: null }] });
      await store.close();

      const other = counting();
      const reader = new EncryptingEventStore(new SqliteEventStore(file), other.keyFor);
      expect((await reader.readStream('c-1'))[0].data).toEqual({ text: CANARY, n: [1, { x: null }] });
      expect(other.asked).toEqual(['env_m']);
      await reader.close();
    });

    it('are decrypted when anything of the stored event differs from what was sealed: stream, type, environment, tag or ciphertext', async () => {
      const raw = new SqliteEventStore(file);
      const store = new EncryptingEventStore(raw, keyFor);
      await store.append('c-1', [ev('Noted', { text: CANARY }, { environmentId: 'env_n' })], 'no_stream');
      const [sealed] = await raw.readStream('c-1');
      const data = sealed.data as { iv: string; tag: string; ct: string };
      const flip = (b64: string) => {
        const b = Buffer.from(b64, 'base64');
        b[0] ^= 1;
        return b.toString('base64');
      };
      const copies: [string, string, unknown, typeof sealed.metadata][] = [
        ['moved', 'Noted', data, sealed.metadata],
        ['retyped', 'Other', data, sealed.metadata],
        ['rekeyed', 'Noted', data, { ...sealed.metadata, environmentId: 'env_other' }],
        ['tag', 'Noted', { ...data, tag: flip(data.tag) }, sealed.metadata],
        ['ct', 'Noted', { ...data, ct: flip(data.ct) }, sealed.metadata],
      ];
      for (const [stream, type, d, metadata] of copies) {
        await raw.append(stream, [{ type, data: d, metadata: { ...metadata, eventId: `copy-${stream}` } }], 'no_stream');
        await expect(store.readStream(stream)).rejects.toThrow('failed authentication');
      }
      // The original is still answered.
      expect((await store.readStream('c-1'))[0].data).toEqual({ text: CANARY });
      await store.close();
    });

    it('larger than 16 KiB are not remembered (decrypted on read)', async () => {
      const k = counting();
      const store = new EncryptingEventStore(new SqliteEventStore(file), k.keyFor);
      await store.append('big', [ev('N', { text: 'x'.repeat(EncryptingEventStore.MAX_SEALED_MEMO_CHARS + 1) }, { environmentId: 'env_p' })], 'no_stream');
      await store.append('small', [ev('N', { text: 'x' }, { environmentId: 'env_p' })], 'no_stream');
      k.asked.length = 0;
      expect(((await store.readStream('big'))[0].data as { text: string }).text).toHaveLength(EncryptingEventStore.MAX_SEALED_MEMO_CHARS + 1);
      expect(k.asked).toEqual(['env_p']);
      await store.readStream('small');
      expect(k.asked).toEqual(['env_p']);
      await store.close();
    });

    it('are remembered up to a bound, oldest first out', async () => {
      const k = counting();
      const store = new EncryptingEventStore(new SqliteEventStore(file), k.keyFor);
      const n = EncryptingEventStore.MAX_RECENTLY_SEALED + 1;
      for (let i = 0; i < n; i += 500) {
        await store.append(
          'bulk',
          Array.from({ length: Math.min(500, n - i) }, (_, j) => ev('N', { i: i + j }, { environmentId: 'env_o' })),
          i === 0 ? 'no_stream' : i - 1,
        );
      }
      k.asked.length = 0;
      const events = await store.readStream('bulk');
      expect(events.map((e) => (e.data as { i: number }).i)).toEqual(Array.from({ length: n }, (_, i) => i));
      expect(k.asked).toEqual(['env_o']); // only the first event, pushed out by the last, was decrypted
      await store.close();
    });
  });
});
