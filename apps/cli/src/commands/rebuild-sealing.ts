import { randomBytes } from 'node:crypto';
import type { PayloadCrypto } from '@svc/eventstore';
import type { RebuiltDoc, RebuiltReadModel } from '@svc/read-store';
import { Keyring } from '@svc/security';

/**
 * The key ring the projections get during `svc rebuild`: `encrypt` answers at once with a
 * placeholder (a string of its own, unique to this run) and queues the plaintext; `flush` hands
 * what is queued to PayloadCrypto, which seals it on its threads while the replay goes on; the
 * rebuilt documents' JSON then gets each placeholder replaced by its envelope (`models`). Every
 * stored field is sealed exactly as Keyring.encrypt seals it (same key, a fresh nonce), so the
 * documents written are those the projections would have written with the real key ring. A
 * placeholder anywhere else than as a whole JSON string value of a document (a key, a partition,
 * inside another string) fails the rebuild: nothing is written with one left in.
 */
export class DeferredSealingKeyring extends Keyring {
  private readonly marker = `\u0000${randomBytes(8).toString('hex')}:`;
  private readonly escapedMarker = JSON.stringify(this.marker).slice(1, -1);
  private readonly placeholder = new RegExp(`"${this.escapedMarker.replace(/\\/g, '\\\\')}(\\d+)"`, 'g');
  private readonly plaintexts: string[] = [];
  private readonly keyIdsQueued: string[] = [];
  private readonly plaintextsQueued: string[] = [];
  private readonly envelopes: string[] = [];
  private readonly batches: Promise<void>[] = [];
  private queuedFrom = 0;

  constructor(
    masterKey: Buffer,
    private readonly crypto: PayloadCrypto,
  ) {
    super(masterKey);
  }

  override encrypt(environmentId: string, plaintext: string): string {
    if (typeof plaintext !== 'string') throw new TypeError('the plaintext to encrypt must be a string');
    this.encryptionKey(environmentId); // fails here, in apply, for a key that cannot be derived
    const n = this.plaintexts.length;
    this.plaintexts.push(plaintext);
    this.keyIdsQueued.push(environmentId);
    this.plaintextsQueued.push(plaintext);
    return `${this.marker}${n}`;
  }

  override decrypt(environmentId: string, envelope: string): string {
    if (envelope.startsWith(this.marker)) {
      const text = this.plaintexts[Number(envelope.slice(this.marker.length))];
      if (text !== undefined) return text;
    }
    return super.decrypt(environmentId, envelope);
  }

  /** Hands what was queued since the last flush to be sealed. */
  flush(): void {
    if (!this.plaintextsQueued.length) return;
    const from = this.queuedFrom;
    const keyIds = this.keyIdsQueued.splice(0);
    const plaintexts = this.plaintextsQueued.splice(0);
    this.queuedFrom += plaintexts.length;
    this.batches.push(
      this.crypto.seal(keyIds, plaintexts).then((envelopes) => {
        for (let i = 0; i < envelopes.length; i++) this.envelopes[from + i] = envelopes[i];
      }),
    );
  }

  /** Waits until every placeholder handed out has its envelope. */
  async settle(): Promise<void> {
    this.flush();
    await Promise.all(this.batches.splice(0));
  }

  /** The models with each document's placeholders replaced by their envelopes (after `settle`). */
  models(models: RebuiltReadModel[]): RebuiltReadModel[] {
    return models.map((m) => ({ ...m, docs: () => this.sealed(m.docs()) }));
  }

  private *sealed(docs: Iterable<RebuiltDoc>): Iterable<RebuiltDoc> {
    const marker = this.escapedMarker;
    for (const d of docs) {
      if (d.key.includes(this.marker) || (d.partition !== null && d.partition.includes(this.marker))) {
        throw new Error(`a document key or partition of ${d.collection} holds an encrypted value: a rebuild cannot write it`);
      }
      if (!d.json.includes(marker)) {
        yield d;
        continue;
      }
      const json = d.json.replace(this.placeholder, (_m, n: string) => {
        const envelope = this.envelopes[Number(n)];
        if (envelope === undefined) throw new Error('an encrypted field was not sealed before the rebuild wrote it');
        return `"${envelope}"`;
      });
      if (json.includes(marker)) throw new Error(`a document of ${d.collection} holds an encrypted value inside another value: a rebuild cannot write it`);
      yield { ...d, json };
    }
  }
}
