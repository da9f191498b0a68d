import { randomBytes } from 'node:crypto';
import { EncryptingEventStore, InMemoryEventStore, PayloadCrypto } from '@svc/eventstore';
import { ProjectionReplay, type Projection, type RebuiltDoc } from '@svc/read-store';
import { Keyring } from '@svc/security';
import { fixedMetadata } from '@svc/testing';
import { DeferredSealingKeyring } from '../src/commands/rebuild-sealing';

const meta = (environmentId: string | null) => fixedMetadata({ environmentId });

/** A projection that seals a field per event, keeps the last one, and nests one in an object. */
const notes = (keyring: Keyring): Projection => ({
  name: 'notes',
  streamPrefixes: ['note-'],
  collections: ['notes'],
  async apply(event, tx) {
    const data = event.data as { text: string };
    const env = event.metadata.environmentId as string;
    const before = await tx.get<{ count: number; encText: string; first: string }>('notes', event.streamId);
    const sealed = keyring.encrypt(env, data.text);
    tx.put(
      'notes',
      event.streamId,
      { count: (before?.count ?? 0) + 1, encText: sealed, nested: { enc: [sealed] }, first: before ? before.first : keyring.decrypt(env, sealed) },
      { partition: env, score: event.position },
    );
  },
});

async function replayed(
  projection: Projection,
  store: InMemoryEventStore,
  open: (events: Awaited<ReturnType<InMemoryEventStore['readAll']>>) => Promise<Awaited<ReturnType<InMemoryEventStore['readAll']>>>,
): Promise<RebuiltDoc[]> {
  const replay = new ProjectionReplay([projection]);
  for (const e of await open(await store.readAll(0, 1000))) await replay.apply(e);
  const head = await store.headPosition();
  return replay.readModels(head).flatMap((m) => [...m.docs()]);
}

describe('svc rebuild: payloads opened by PayloadCrypto, fields sealed by DeferredSealingKeyring', () => {
  const master = randomBytes(32);
  const keyring = new Keyring(master);

  it('writes the documents the real key ring writes (envelopes opened to the same values), payloads opened as EncryptingEventStore opens them', async () => {
    const raw = new InMemoryEventStore();
    const sealedLog = new EncryptingEventStore(raw, (id) => keyring.encryptionKey(id));
    for (let i = 0; i < 30; i++) {
      await sealedLog.append(
        `note-${i % 4}`,
        [{ type: 'Noted', data: { text: `note ${i} é ✓` }, metadata: { ...meta(i % 2 ? 'env-a' : 'env-b'), eventId: `e${i}` } }],
        'any',
      );
    }
    const expected = await replayed(notes(keyring), raw, async (page) => (await sealedLog.readAll(0, 1000)).slice(0, page.length));

    const crypto = new PayloadCrypto((id) => keyring.encryptionKey(id), { threads: 0 });
    const sealing = new DeferredSealingKeyring(master, crypto);
    const replay = new ProjectionReplay([notes(sealing)]);
    for (const e of await crypto.open(await raw.readAll(0, 1000))) await replay.apply(e);
    await sealing.settle();
    const actual = sealing.models(replay.readModels(await raw.headPosition())).flatMap((m) => [...m.docs()]);

    const opened = (d: RebuiltDoc) => {
      const doc = JSON.parse(d.json) as { count: number; encText: string; nested: { enc: string[] }; first: string };
      const env = d.partition as string;
      return {
        ...d,
        json: undefined,
        doc: { ...doc, encText: keyring.decrypt(env, doc.encText), nested: { enc: doc.nested.enc.map((x) => keyring.decrypt(env, x)) } },
      };
    };
    expect(actual.length).toBe(4);
    expect(actual.map(opened)).toEqual(expected.map(opened));
    expect(actual.every((d) => /"encText":"v1\.[\w-]+\.[\w-]+\.[\w-]+"/.test(d.json))).toBe(true);
    await crypto.close();
  });

  it('refuses to write a document with a sealed value in its key, as an object key, or inside another string', async () => {
    const raw = new InMemoryEventStore();
    await raw.append('note-1', [{ type: 'Noted', data: { text: 'x' }, metadata: meta('env-a') }], 'any');
    for (const [name, put] of [
      ['key', (k: Keyring, tx: Parameters<Projection['apply']>[1]) => tx.put('notes', k.encrypt('env-a', 'x'), {})],
      ['inside', (k: Keyring, tx: Parameters<Projection['apply']>[1]) => tx.put('notes', 'n', { blob: JSON.stringify({ s: k.encrypt('env-a', 'x') }) })],
      ['after a quote', (k: Keyring, tx: Parameters<Projection['apply']>[1]) => tx.put('notes', 'n', { s: `"${k.encrypt('env-a', 'x')}` })],
      ['object key', (k: Keyring, tx: Parameters<Projection['apply']>[1]) => tx.put('notes', 'n', { byKey: { [k.encrypt('env-a', 'x')]: 1 } })],
    ] as const) {
      const crypto = new PayloadCrypto((id) => keyring.encryptionKey(id), { threads: 0 });
      const sealing = new DeferredSealingKeyring(master, crypto);
      const replay = new ProjectionReplay([{ name, collections: ['notes'], apply: (_e, tx) => put(sealing, tx) }]);
      for (const e of await raw.readAll(0, 10)) await replay.apply(e);
      await sealing.settle();
      expect(() => sealing.models(replay.readModels(1)).flatMap((m) => [...m.docs()])).toThrow(/cannot write it/);
      await crypto.close();
    }
  });

  it('a placeholder opens only under the key id it was sealed under, as the real key ring', async () => {
    const crypto = new PayloadCrypto((id) => keyring.encryptionKey(id), { threads: 0 });
    try {
      const deferred = new DeferredSealingKeyring(master, crypto);
      const placeholder = deferred.encrypt('env-a', 'for env-a only');
      expect(deferred.decrypt('env-a', placeholder)).toBe('for env-a only');
      expect(() => deferred.decrypt('env-b', placeholder)).toThrow();
      const real = keyring.encrypt('env-a', 'for env-a only');
      expect(() => keyring.decrypt('env-b', real)).toThrow();
    } finally {
      await crypto.close();
    }
  });

  it('a payload that does not authenticate fails the page, naming the event and nothing of its data', async () => {
    const raw = new InMemoryEventStore();
    const sealedLog = new EncryptingEventStore(raw, (id) => keyring.encryptionKey(id));
    await sealedLog.append('note-1', [{ type: 'Noted', data: { text: 'secret words' }, metadata: meta('env-a') }], 'any');
    const other = new Keyring(randomBytes(32));
    const crypto = new PayloadCrypto((id) => other.encryptionKey(id), { threads: 0 });
    await expect(crypto.open(await raw.readAll(0, 10))).rejects.toThrow('event data of note-1@0 failed authentication');
    await crypto.close();
  });
});
