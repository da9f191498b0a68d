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
  private readonly plaintexts: string[] = [];
  /** The key id each placeholder was handed out under (decrypt answers only under the same one, as Keyring does). */
  private readonly keyIds: string[] = [];
  private readonly keyIdsQueued: string[] = [];
  private readonly plaintextsQueued: string[] = [];
  private readonly envelopes: string[] = [];
  private readonly batches: Promise<void>[] = [];
  private queuedFrom = 0;
  /** Key ids already derived once (a key that cannot be derived fails the first encrypt under it). */
  private readonly keyIdsChecked = new Set<string>();

  constructor(
    masterKey: Buffer,
    private readonly crypto: PayloadCrypto,
  ) {
    super(masterKey);
  }

  override encrypt(environmentId: string, plaintext: string): string {
    if (typeof plaintext !== 'string') throw new TypeError('the plaintext to encrypt must be a string');
    if (!this.keyIdsChecked.has(environmentId)) {
      this.encryptionKey(environmentId); // fails here, in apply, for a key that cannot be derived
      this.keyIdsChecked.add(environmentId);
    }
    const n = this.plaintexts.length;
    this.plaintexts.push(plaintext);
    this.keyIds.push(environmentId);
    this.keyIdsQueued.push(environmentId);
    this.plaintextsQueued.push(plaintext);
    return `${this.marker}${n}`;
  }

  override decrypt(environmentId: string, envelope: string): string {
    if (envelope.startsWith(this.marker)) {
      const n = Number(envelope.slice(this.marker.length));
      const text = this.plaintexts[n];
      if (text !== undefined && this.keyIds[n] === environmentId) return text;
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
      const text = d.json;
      let at = text.indexOf(marker);
      if (at < 0) {
        yield d;
        continue;
      }
      // One pass: each placeholder must be a whole JSON string value ("<marker><n>", not a key,
      // not inside another string); it is replaced by its envelope.
      let json = '';
      let from = 0;
      while (at >= 0) {
        const digits = at + marker.length;
        let end = digits;
        while (end < text.length && text.charCodeAt(end) >= 48 && text.charCodeAt(end) <= 57) end++;
        if (end === digits || !wholeStringValue(text, at - 1, end)) {
          throw new Error(`a document of ${d.collection} holds an encrypted value inside another value: a rebuild cannot write it`);
        }
        const envelope = this.envelopes[Number(text.slice(digits, end))];
        if (envelope === undefined) throw new Error('an encrypted field was not sealed before the rebuild wrote it');
        json += text.slice(from, at) + envelope;
        from = end;
        at = text.indexOf(marker, end);
      }
      yield { ...d, json: json + text.slice(from) };
    }
  }
}

/**
 * In JSON.stringify's output, the characters at `open` and `close` are the quotes of one whole
 * string that is a value (not a key): `open` is a quote no backslash escapes, `close` a quote
 * followed by no colon.
 */
function wholeStringValue(text: string, open: number, close: number): boolean {
  if (open < 0 || text.charCodeAt(open) !== 34 || text.charCodeAt(close) !== 34 || text.charCodeAt(close + 1) === 58) return false;
  let backslashes = 0;
  for (let i = open - 1; i >= 0 && text.charCodeAt(i) === 92; i--) backslashes++;
  return backslashes % 2 === 0;
}
