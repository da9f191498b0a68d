import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { Worker } from 'node:worker_threads';
import { encryptString } from '@svc/security';
import { EncryptedData, isEncryptedData, openSealedText, sealedKeyId } from './encrypting-event-store';
import { stopWorker } from './stop-worker';
import { RecordedEvent } from './types';

/** One sealed payload to open: stream, revision, type, key id, then the sealed form's iv, tag, ct. */
type OpenItem = [string, number, string, string, string, string, string];

/** A request to a crypto thread: the keys it does not hold yet, and the work. */
export type PayloadCryptoRequest = { id: number; keys: [string, Buffer][] } & (
  { op: 'open'; items: OpenItem[] } | { op: 'seal'; keyIds: string[]; plaintexts: string[] }
);
export type PayloadCryptoReply = { id: number; out: string[] } | { id: number; error: string };

/**
 * The work itself, the same in a worker thread and in the calling thread: `open` gives each
 * payload's JSON text (`openSealedText`, as EncryptingEventStore opens it), `seal` each plaintext's
 * envelope (`encryptString`, as Keyring.encrypt seals it). `keys` holds the keys sent so far.
 */
export function handlePayloadCrypto(req: PayloadCryptoRequest, keys: Map<string, Buffer>): string[] {
  for (const [id, key] of req.keys) keys.set(id, Buffer.from(key));
  const keyFor = (id: string) => {
    const key = keys.get(id);
    if (!key) throw new Error(`no key ${id} was sent to the crypto thread`);
    return key;
  };
  if (req.op === 'open') {
    return req.items.map(([streamId, revision, type, keyId, iv, tag, ct]) =>
      openSealedText({ streamId, revision, type, metadata: { environmentId: keyId } as RecordedEvent['metadata'], data: { enc: 'v1', iv, tag, ct } }, keyFor),
    );
  }
  return req.plaintexts.map((p, i) => encryptString(keyFor(req.keyIds[i]), p));
}

interface Thread {
  worker: Worker;
  /** Key ids this thread holds. */
  keys: Set<string>;
}

/**
 * AES-GCM work of a bulk reader of the log (`svc rebuild`) on worker threads beside the one that
 * applies the events: opening event payloads (what EncryptingEventStore does on every read path)
 * and sealing stored fields (what the projections' Keyring.encrypt does). Requests go to the
 * threads in turn; each answers in order. With `threads: 0`, or where the compiled worker file is
 * absent (running from TypeScript sources), the work is done in the calling thread, the same way.
 * Keys are handed to a thread the first time a request needs them, and live only in this process.
 */
export class PayloadCrypto {
  private readonly threads: Thread[] = [];
  private next = 0;
  private ids = 0;
  private readonly pending = new Map<number, { resolve: (out: string[]) => void; reject: (err: Error) => void }>();
  private readonly localKeys = new Map<string, Buffer>();
  private failure: Error | null = null;
  private closing = false;

  constructor(
    private readonly keyFor: (keyId: string) => Buffer,
    options: { threads: number },
  ) {
    const file = join(__dirname, 'payload-crypto-worker.js');
    if (options.threads <= 0 || !existsSync(file)) return;
    for (let i = 0; i < options.threads; i++) {
      const worker = new Worker(file);
      worker.on('message', (m: PayloadCryptoReply) => {
        const p = this.pending.get(m.id);
        if (!p) return;
        this.pending.delete(m.id);
        if ('error' in m) p.reject(new Error(m.error));
        else p.resolve(m.out);
      });
      worker.on('error', (err) => this.fail(err));
      worker.on('exit', () => {
        if (!this.closing) this.fail(new Error('a payload crypto thread exited'));
      });
      this.threads.push({ worker, keys: new Set() });
    }
  }

  /** Worker threads doing the work (0: the calling thread does it). */
  get threadCount(): number {
    return this.threads.length;
  }

  /** The events with their data opened, as EncryptingEventStore's read paths return them. */
  async open(events: RecordedEvent[]): Promise<RecordedEvent[]> {
    const items: OpenItem[] = [];
    const sealed: number[] = [];
    for (let i = 0; i < events.length; i++) {
      const e = events[i];
      if (!isEncryptedData(e.data)) continue;
      const d = e.data as EncryptedData;
      items.push([e.streamId, e.revision, e.type, sealedKeyId(e), d.iv, d.tag, d.ct]);
      sealed.push(i);
    }
    if (!items.length) return events;
    const texts = await this.run(
      { op: 'open', items },
      items.map((it) => it[3]),
    );
    const out = events.slice();
    for (let j = 0; j < sealed.length; j++) out[sealed[j]] = { ...events[sealed[j]], data: JSON.parse(texts[j]) };
    return out;
  }

  /** Each plaintext sealed under its key id (Keyring.encrypt's envelope). */
  seal(keyIds: string[], plaintexts: string[]): Promise<string[]> {
    if (!plaintexts.length) return Promise.resolve([]);
    return this.run({ op: 'seal', keyIds, plaintexts }, keyIds);
  }

  private run(work: { op: 'open'; items: OpenItem[] } | { op: 'seal'; keyIds: string[]; plaintexts: string[] }, keyIds: string[]): Promise<string[]> {
    if (this.failure) return Promise.reject(this.failure);
    const id = ++this.ids;
    if (!this.threads.length) {
      try {
        return Promise.resolve(handlePayloadCrypto({ id, keys: this.newKeys(this.localKeys, keyIds), ...work } as PayloadCryptoRequest, this.localKeys));
      } catch (err) {
        return Promise.reject(err);
      }
    }
    const thread = this.threads[this.next++ % this.threads.length];
    let keys: [string, Buffer][];
    try {
      keys = this.newKeys(thread.keys, keyIds);
    } catch (err) {
      return Promise.reject(err);
    }
    return new Promise<string[]>((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      thread.worker.postMessage({ id, keys, ...work });
    });
  }

  /** The keys among `keyIds` a holder has not got yet (recorded as held). */
  private newKeys(held: Set<string> | Map<string, Buffer>, keyIds: string[]): [string, Buffer][] {
    const out: [string, Buffer][] = [];
    for (const id of keyIds) {
      if (held.has(id) || out.some(([k]) => k === id)) continue;
      out.push([id, this.keyFor(id)]);
      if (held instanceof Set) held.add(id);
    }
    return out;
  }

  private fail(err: Error): void {
    if (this.failure || this.closing) return;
    this.failure = err;
    for (const p of this.pending.values()) p.reject(err);
    this.pending.clear();
  }

  /** Stops the threads (work still pending is refused). */
  async close(): Promise<void> {
    if (this.closing) return;
    this.closing = true;
    for (const p of this.pending.values()) p.reject(new Error('payload crypto closed'));
    this.pending.clear();
    await Promise.all(this.threads.map((t) => stopWorker(t.worker, 'stop')));
  }
}
