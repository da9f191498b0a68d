import * as nodeCrypto from 'node:crypto';
import { createCipheriv, createDecipheriv, createHash, createHmac, hkdfSync, randomBytes, randomFillSync, timingSafeEqual } from 'node:crypto';

/** Node's one-shot digest (20.12+; about 3x cheaper than a Hash object for short inputs), if present. */
const oneShotHash = (nodeCrypto as { hash?: (algorithm: string, data: string | Buffer, encoding: 'hex') => string }).hash;

/** Bytes of one AES-GCM nonce (96 bits, random per encryption). */
export const IV_BYTES = 12;
const IV_POOL_SIZE = IV_BYTES * 256;
let ivPool = Buffer.alloc(0);
let ivOffset = IV_POOL_SIZE;

/**
 * A fresh random 96-bit AES-GCM nonce. The CSPRNG fills 256 nonces' worth of bytes at a time
 * (one `randomFillSync` per 256 encryptions instead of one each, as `randomUUID` does); every
 * nonce is a distinct slice of that output, handed out once, in its own copy.
 */
export function randomIv(): Buffer {
  if (ivOffset >= IV_POOL_SIZE) {
    ivPool = randomFillSync(Buffer.allocUnsafeSlow(IV_POOL_SIZE));
    ivOffset = 0;
  }
  const iv = Buffer.from(ivPool.subarray(ivOffset, ivOffset + IV_BYTES));
  ivOffset += IV_BYTES;
  return iv;
}

/** AES-256-GCM envelope, as stored: `v1.<iv>.<tag>.<ciphertext>` in base64url. */
export function encryptString(key: Buffer, plaintext: string): string {
  const iv = randomIv();
  const cipher = createCipheriv('aes-256-gcm', key, iv);
  const ct = cipher.update(plaintext, 'utf8');
  // GCM is a stream mode: final() gives no bytes (only the tag); nothing to concatenate.
  const rest = cipher.final();
  const body = rest.length ? Buffer.concat([ct, rest]) : ct;
  return `v1.${iv.toString('base64url')}.${cipher.getAuthTag().toString('base64url')}.${body.toString('base64url')}`;
}

export function decryptString(key: Buffer, envelope: string): string {
  const [v, iv, tag, ct] = envelope.split('.');
  if (v !== 'v1' || !iv || !tag || ct === undefined) throw new Error('not an encrypted envelope');
  const decipher = createDecipheriv('aes-256-gcm', key, Buffer.from(iv, 'base64url'), { authTagLength: 16 });
  decipher.setAuthTag(Buffer.from(tag, 'base64url'));
  return Buffer.concat([decipher.update(Buffer.from(ct, 'base64url')), decipher.final()]).toString('utf8');
}

/** Lowercase hex HMAC-SHA256. Secrets are used as their UTF-8 string, whole (docs/webhooks.md). */
export function hmacHex(secret: string | Buffer, payload: string | Buffer): string {
  return createHmac('sha256', secret).update(payload).digest('hex');
}

export function sha256Hex(value: string | Buffer): string {
  return oneShotHash ? oneShotHash('sha256', value, 'hex') : createHash('sha256').update(value).digest('hex');
}

/** Constant-time string comparison (the "secrets compare in constant time" rule). */
export function safeEqual(a: string, b: string): boolean {
  const ab = Buffer.from(a, 'utf8');
  const bb = Buffer.from(b, 'utf8');
  if (ab.length !== bb.length) {
    timingSafeEqual(ab, ab);
    return false;
  }
  return timingSafeEqual(ab, bb);
}

export function randomToken(bytes = 32): string {
  return randomBytes(bytes).toString('base64url');
}

/**
 * Per-environment keys derived from one master key with HKDF-SHA256: an encryption key
 * (AES-256-GCM at rest) and a hashing key (keyed hash of external patient IDs).
 */
export class Keyring {
  private readonly cache = new Map<string, Buffer>();
  constructor(private readonly masterKey: Buffer) {
    if (masterKey.length < 32) throw new Error('master key must be at least 32 bytes');
  }

  private derive(purpose: string, scope: string): Buffer {
    const id = `${purpose}:${scope}`;
    let key = this.cache.get(id);
    if (!key) {
      key = Buffer.from(hkdfSync('sha256', this.masterKey, Buffer.alloc(0), Buffer.from(id, 'utf8'), 32));
      this.cache.set(id, key);
    }
    return key;
  }

  /** AES-256 key for data at rest of one environment (`global` for tenant-less data). */
  encryptionKey(environmentId: string): Buffer {
    return this.derive('enc', environmentId);
  }

  /** A service-wide key for one purpose (e.g. `widget-session` token encryption). */
  serviceKey(purpose: string): Buffer {
    return this.derive('svc', purpose);
  }

  /** HMAC key for keyed hashes (external patient IDs) of one environment. */
  hashKey(environmentId: string): Buffer {
    return this.derive('hash', environmentId);
  }

  encrypt(environmentId: string, plaintext: string): string {
    return encryptString(this.encryptionKey(environmentId), plaintext);
  }

  decrypt(environmentId: string, envelope: string): string {
    return decryptString(this.encryptionKey(environmentId), envelope);
  }

  /** Keyed hash of an external ID, HMAC-SHA256 with the environment's key (docs/decisions.md, "Patient pathway"). */
  keyedHash(environmentId: string, value: string): string {
    return hmacHex(this.hashKey(environmentId), value);
  }

  /**
   * HMAC-SHA256 of `value` under a key of its own for `purpose` in one environment. Never the
   * external-ID key: keyed hashes of external IDs sit in stream names, so a value derived with
   * that key (a check-in token) could be read off a stream name by choosing the external ID.
   */
  purposeHash(purpose: string, environmentId: string, value: string): string {
    return hmacHex(this.derive(`hash:${purpose}`, environmentId), value);
  }
}

export const KEYRING = Symbol('KEYRING');
