import { randomBytes } from 'node:crypto';
import { IV_BYTES, Keyring, decryptString, encryptString, generateApiKey, hashApiKey, hmacHex, randomIv, safeEqual } from '@svc/security';

describe('security primitives', () => {
  const keyring = new Keyring(randomBytes(32));

  it('round-trips AES-256-GCM and rejects tampering', () => {
    const key = keyring.encryptionKey('env-1');
    const env = encryptString(key, 'canary-4711');
    expect(env).not.toContain('canary');
    expect(decryptString(key, env)).toBe('canary-4711');
    const parts = env.split('.');
    parts[3] = Buffer.from('x' + Buffer.from(parts[3], 'base64url').toString('latin1')).toString('base64url');
    expect(() => decryptString(key, parts.join('.'))).toThrow();
    expect(() => decryptString(keyring.encryptionKey('env-2'), env)).toThrow();
  });

  it('refuses an envelope whose GCM tag was cut short (only the full 16-byte tag authenticates)', () => {
    const key = keyring.encryptionKey('env-1');
    const parts = encryptString(key, 'canary-4711').split('.');
    for (const bytes of [4, 8, 12, 15]) {
      const cut = [...parts];
      cut[2] = Buffer.from(parts[2], 'base64url').subarray(0, bytes).toString('base64url');
      expect(() => decryptString(key, cut.join('.'))).toThrow();
    }
  });

  it('hands out 96-bit nonces that never repeat, across refills of the pool, each its own copy', () => {
    const seen = new Set<string>();
    const ivs: Buffer[] = [];
    for (let i = 0; i < 2000; i++) {
      const iv = randomIv();
      expect(iv).toHaveLength(IV_BYTES);
      seen.add(iv.toString('hex'));
      ivs.push(iv);
    }
    expect(seen.size).toBe(2000);
    // A copy: changing one nonce leaves the others (and the pool) alone.
    const before = ivs[1].toString('hex');
    ivs[0].fill(0);
    expect(ivs[1].toString('hex')).toBe(before);
    expect(randomIv().equals(Buffer.alloc(IV_BYTES))).toBe(false);
    // Two envelopes of the same text under the same key differ in nonce and ciphertext.
    const key = keyring.encryptionKey('env-1');
    const [a, b] = [encryptString(key, 'same'), encryptString(key, 'same')];
    expect(a.split('.')[1]).not.toBe(b.split('.')[1]);
    expect(a.split('.')[3]).not.toBe(b.split('.')[3]);
  });

  it('derives different keyed hashes per environment', () => {
    expect(keyring.keyedHash('a', 'P1')).toBe(keyring.keyedHash('a', 'P1'));
    expect(keyring.keyedHash('a', 'P1')).not.toBe(keyring.keyedHash('b', 'P1'));
  });

  it('generates prefixed API keys and hashes them', () => {
    const sb = generateApiKey('sandbox');
    const prod = generateApiKey('production');
    expect(sb.key.startsWith('svc_sb_')).toBe(true);
    expect(prod.key.startsWith('svc_prod_')).toBe(true);
    expect(hashApiKey(sb.key)).toBe(sb.hash);
    expect(sb.hash).not.toContain(sb.key);
  });

  it('computes the v1 HMAC and compares in constant time', () => {
    expect(hmacHex('secret', '1.{}')).toMatch(/^[a-f0-9]{64}$/);
    expect(safeEqual('abc', 'abc')).toBe(true);
    expect(safeEqual('abc', 'abd')).toBe(false);
    expect(safeEqual('abc', 'abcd')).toBe(false);
  });
});
