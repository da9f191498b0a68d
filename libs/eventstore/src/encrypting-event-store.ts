import { createCipheriv, createDecipheriv } from 'node:crypto';
import { randomIv } from '@svc/security';
import { AppendResult, EventStore, ExpectedRevision, NewEvent, RecordedEvent, SubscribeOptions, Subscription } from './types';

/** The stored form of an encrypted event's data (all fields base64). */
export interface EncryptedData {
  enc: 'v1';
  iv: string;
  tag: string;
  ct: string;
}

/** Key id used when an event carries no `metadata.environmentId`. */
export const GLOBAL_KEY_ID = 'global';

export function isEncryptedData(data: unknown): data is EncryptedData {
  if (!data || typeof data !== 'object') return false;
  const d = data as Record<string, unknown>;
  return d.enc === 'v1' && typeof d.iv === 'string' && typeof d.tag === 'string' && typeof d.ct === 'string';
}

/**
 * Encryption at rest of event data (docs/decisions.md, "Encryption at rest"): a decorator over any EventStore that
 * seals each event's `data` with AES-256-GCM under the key of its environment
 * (`keyFor(metadata.environmentId)`, or `keyFor('global')` when the event has none) and opens it
 * again on every read and subscription path. Metadata (ids, tenant, actor, time) stays in clear so
 * the key can be found and the log routed; it must never hold PHI.
 *
 * The additional authenticated data binds the ciphertext to its stream, event type and key id,
 * so a sealed payload cannot be replayed into another stream or environment.
 * Data that is not in the sealed form (written before encryption was enabled) is passed through.
 */
export class EncryptingEventStore implements EventStore {
  /**
   * What this process sealed last, by nonce: the stream, type and key id of the AAD, the sealed
   * form and the JSON that was sealed. `open` answers an event whose nonce, AAD inputs, ciphertext
   * and tag are all exactly these with `JSON.parse` of that JSON instead of decrypting: AES-GCM
   * under the same key, nonce and AAD opens the same ciphertext and tag to the same plaintext, so
   * the answer is the one decryption would give (the keys of `keyFor` do not change while the
   * process runs). It spares one AES-GCM decryption per event that a subscriber or a stream read
   * opens right after this process wrote it (every command's own event, on its projections).
   * Bounded by count and by size (oldest first out), and an event larger than MAX_SEALED_MEMO_CHARS
   * is not kept at all; a sealed event that was never written only takes a slot.
   */
  private readonly recentlySealed = new Map<string, { streamId: string; type: string; keyId: string; tag: string; ct: string; json: string }>();
  private recentlySealedChars = 0;
  static readonly MAX_RECENTLY_SEALED = 4096;
  /** Largest event data (JSON characters) kept, and the most characters (JSON + ciphertext) kept in all. */
  static readonly MAX_SEALED_MEMO_CHARS = 16 * 1024;
  static readonly MAX_SEALED_MEMO_TOTAL_CHARS = 8 * 1024 * 1024;

  constructor(
    private readonly inner: EventStore,
    private readonly keyFor: (environmentId: string) => Buffer,
  ) {}

  append(streamId: string, events: NewEvent[], expectedRevision: ExpectedRevision): Promise<AppendResult> {
    let sealed: NewEvent[];
    try {
      sealed = events.map((e) => ({ ...e, data: this.seal(streamId, e) }));
    } catch (err) {
      return Promise.reject(err);
    }
    return this.inner.append(streamId, sealed, expectedRevision);
  }

  async readStream(streamId: string, fromRevision?: number): Promise<RecordedEvent[]> {
    return (await this.inner.readStream(streamId, fromRevision)).map((e) => this.open(e));
  }

  async readAll(fromPosition: number, limit: number): Promise<RecordedEvent[]> {
    return (await this.inner.readAll(fromPosition, limit)).map((e) => this.open(e));
  }

  subscribeToAll(options: SubscribeOptions, handler: (event: RecordedEvent) => Promise<void>): Subscription {
    // Opened lazily, on the handler's first read of `data`: most subscribers (every projection
    // follows the whole log) pass over most events by stream id, and decrypting every event for
    // each of them was most of the CPU under load. A decryption failure still throws inside the
    // handler path, so the store retries the event rather than skipping it.
    return this.inner.subscribeToAll(options, (e) => handler(this.openLazily(e)));
  }

  private openLazily(e: RecordedEvent): RecordedEvent {
    if (!isEncryptedData(e.data)) return e;
    let opened: { data: unknown } | null = null;
    const out = { streamId: e.streamId, revision: e.revision, position: e.position, type: e.type, metadata: e.metadata } as RecordedEvent;
    Object.defineProperty(out, 'data', {
      enumerable: true,
      configurable: true,
      get: () => (opened ??= { data: this.open(e).data }).data,
      set: (value: unknown) => {
        opened = { data: value };
      },
    });
    return out;
  }

  headPosition(): Promise<number> {
    return this.inner.headPosition();
  }

  ping(): Promise<void> {
    return this.inner.ping();
  }

  close(): Promise<void> {
    return this.inner.close();
  }

  private key(keyId: string): Buffer {
    const key = this.keyFor(keyId);
    if (!Buffer.isBuffer(key) || key.length !== 32) {
      throw new Error(`encryption key for "${keyId}" must be a 32-byte Buffer`);
    }
    return key;
  }

  private seal(streamId: string, e: NewEvent): EncryptedData {
    const keyId = e.metadata?.environmentId || GLOBAL_KEY_ID;
    const iv = randomIv();
    const cipher = createCipheriv('aes-256-gcm', this.key(keyId), iv);
    cipher.setAAD(aad(streamId, e.type, keyId));
    const json = JSON.stringify(e.data ?? null);
    const ct = Buffer.concat([cipher.update(json, 'utf8'), cipher.final()]);
    const sealed: EncryptedData = { enc: 'v1', iv: iv.toString('base64'), tag: cipher.getAuthTag().toString('base64'), ct: ct.toString('base64') };
    if (json.length <= EncryptingEventStore.MAX_SEALED_MEMO_CHARS)
      this.rememberSealed(sealed.iv, { streamId, type: e.type, keyId, tag: sealed.tag, ct: sealed.ct, json });
    return sealed;
  }

  private rememberSealed(iv: string, entry: { streamId: string; type: string; keyId: string; tag: string; ct: string; json: string }): void {
    const recent = this.recentlySealed;
    recent.set(iv, entry);
    this.recentlySealedChars += entry.json.length + entry.ct.length;
    while (recent.size > EncryptingEventStore.MAX_RECENTLY_SEALED || this.recentlySealedChars > EncryptingEventStore.MAX_SEALED_MEMO_TOTAL_CHARS) {
      const oldest = recent.keys().next().value as string;
      const gone = recent.get(oldest)!;
      recent.delete(oldest);
      this.recentlySealedChars -= gone.json.length + gone.ct.length;
    }
  }

  private open(e: RecordedEvent): RecordedEvent {
    if (!isEncryptedData(e.data)) return e;
    const keyId = e.metadata?.environmentId || GLOBAL_KEY_ID;
    const mine = this.recentlySealed.get(e.data.iv);
    if (mine && mine.streamId === e.streamId && mine.type === e.type && mine.keyId === keyId && mine.tag === e.data.tag && mine.ct === e.data.ct) {
      return { ...e, data: JSON.parse(mine.json) };
    }
    return { ...e, data: openSealedData(e, (id) => this.key(id)) };
  }
}

/**
 * The data of one stored event opened with the key of its environment (`keyFor`), as the store's
 * read paths open it; data that is not sealed is returned as it is. Throws, without any detail of
 * the payload, when the ciphertext does not authenticate (another key, stream, type or environment,
 * or altered bytes). For tools that read the raw log and open events one by one (the audit CLI).
 */
export function openSealedData(e: RecordedEvent, keyFor: (keyId: string) => Buffer): unknown {
  if (!isEncryptedData(e.data)) return e.data;
  return JSON.parse(openSealedText(e as RecordedEvent & { data: EncryptedData }, keyFor));
}

/** The key id a sealed event's data is sealed under: its environment, or `global`. */
export function sealedKeyId(e: Pick<RecordedEvent, 'metadata'>): string {
  return e.metadata?.environmentId || GLOBAL_KEY_ID;
}

/**
 * The JSON text a sealed event's data holds (what `openSealedData` parses), for a reader that
 * parses it elsewhere (`svc rebuild` opens payloads on worker threads). Throws as `openSealedData`.
 */
export function openSealedText(
  e: Pick<RecordedEvent, 'streamId' | 'revision' | 'type' | 'metadata'> & { data: EncryptedData },
  keyFor: (keyId: string) => Buffer,
): string {
  const keyId = sealedKeyId(e);
  const decipher = createDecipheriv('aes-256-gcm', keyFor(keyId), Buffer.from(e.data.iv, 'base64'), { authTagLength: 16 });
  decipher.setAAD(aad(e.streamId, e.type, keyId));
  decipher.setAuthTag(Buffer.from(e.data.tag, 'base64'));
  try {
    // The ciphertext decoded into a scratch buffer (update copies out of it); final() authenticates
    // and gives no bytes (GCM is a stream mode).
    const ct = decodeBase64(e.data.ct);
    const text = decipher.update(ct);
    const rest = decipher.final();
    return (rest.length ? Buffer.concat([text, rest]) : text).toString('utf8');
  } catch {
    // No detail: the message must not echo anything of the payload.
    throw new Error(`event data of ${e.streamId}@${e.revision} failed authentication`);
  }
}

const scratch = Buffer.allocUnsafe(64 * 1024);

/** `text` (base64) decoded into a buffer reused from call to call: valid until the next call. */
function decodeBase64(text: string): Buffer {
  // Base64 decodes to at most 3 bytes per 4 characters.
  const most = Math.ceil((text.length * 3) / 4);
  if (most > scratch.length) return Buffer.from(text, 'base64');
  const n = scratch.write(text, 'base64');
  return scratch.subarray(0, n);
}

function aad(streamId: string, type: string, keyId: string): Buffer {
  return Buffer.from(`eventstore:v1\n${keyId}\n${streamId}\n${type}`, 'utf8');
}
