import { mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { JWK, KeyLike, SignJWT, importJWK } from 'jose';
import { DEV_ISSUER, DevIdentityProvider, STAFF_AUDIENCE, StaffTokenVerifier } from '@svc/security';

describe('StaffTokenVerifier: time claims', () => {
  const now = new Date('2026-11-25T10:00:00.000Z');
  const nowS = now.getTime() / 1000;
  let dir: string;
  let verifier: StaffTokenVerifier;
  let idp: DevIdentityProvider;
  let key: KeyLike;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'staff-tokens-'));
    const file = join(dir, 'dev-idp.json');
    idp = await DevIdentityProvider.load(file);
    key = (await importJWK(JSON.parse(readFileSync(file, 'utf8')) as JWK, 'RS256')) as KeyLike;
    verifier = new StaffTokenVerifier([{ issuer: DEV_ISSUER, audience: STAFF_AUDIENCE, key: idp.publicKey }], () => now);
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  /** A token of the dev issuer with exactly these time claims (undefined: left out). */
  const token = (claims: { iat?: number; exp?: number; auth_time?: unknown }) => {
    const jwt = new SignJWT({
      email: 'a@example.test',
      permissions: [],
      amr: ['pwd', 'mfa'],
      ...(claims.auth_time !== undefined ? { auth_time: claims.auth_time } : {}),
    })
      .setProtectedHeader({ alg: 'RS256' })
      .setIssuer(DEV_ISSUER)
      .setAudience(STAFF_AUDIENCE)
      .setSubject('u1');
    if (claims.iat !== undefined) jwt.setIssuedAt(claims.iat);
    if (claims.exp !== undefined) jwt.setExpirationTime(claims.exp);
    return jwt.sign(key);
  };

  it('accepts a token the dev issuer mints, and skew of up to a minute', async () => {
    expect(await verifier.verify(await idp.mint({ sub: 'u1', email: 'a@example.test', permissions: [], mfa: true }, now))).toMatchObject({
      sub: 'u1',
      mfa: true,
      authTime: nowS,
    });
    expect((await verifier.verify(await token({ iat: nowS + 30, exp: nowS + 3600, auth_time: nowS + 30 }))).authTime).toBe(nowS + 30);
  });

  it.each([
    ['no exp', { iat: nowS }],
    ['no iat', { exp: nowS + 3600 }],
    ['iat in the future', { iat: nowS + 120, exp: nowS + 3600 }],
    ['auth_time in the future', { iat: nowS, exp: nowS + 3600, auth_time: nowS + 100_000 }],
    ['auth_time not a number', { iat: nowS, exp: nowS + 3600, auth_time: 'yesterday' }],
    ['expired', { iat: nowS - 7200, exp: nowS - 3600 }],
  ])('refuses a token with %s', async (_name, claims) => {
    await expect(verifier.verify(await token(claims))).rejects.toThrow('invalid staff token');
  });
});

describe('StaffTokenVerifier: subject', () => {
  const now = new Date('2026-11-25T10:00:00.000Z');
  let dir: string;
  let verifier: StaffTokenVerifier;
  let idp: DevIdentityProvider;
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'staff-sub-'));
    idp = await DevIdentityProvider.load(join(dir, 'dev-idp.json'));
    verifier = new StaffTokenVerifier([{ issuer: DEV_ISSUER, audience: STAFF_AUDIENCE, key: idp.publicKey }], () => now);
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  const mint = (sub: string) => idp.mint({ sub, email: 'a@example.test', permissions: [], mfa: true }, now);

  it('refuses an empty sub (one identity every such token would share) and one over 255 characters (OIDC Core 2)', async () => {
    await expect(verifier.verify(await mint(''))).rejects.toThrow('invalid staff token');
    await expect(verifier.verify(await mint('x'.repeat(256)))).rejects.toThrow('invalid staff token');
    expect((await verifier.verify(await mint('x'.repeat(255)))).sub).toHaveLength(255);
  });
});

/**
 * docs/decisions.md, "Deployment safety": a token for several audiences names this service as its authorized party (`azp`,
 * OIDC Core 3.1.3.7), and no staff token lives longer than 24 hours (`exp - iat`). Applied in every
 * mode: the dev issuer mints one-audience, one-hour tokens.
 */
describe('StaffTokenVerifier: audiences and lifetime', () => {
  const now = new Date('2026-11-25T10:00:00.000Z');
  const nowS = now.getTime() / 1000;
  let dir: string;
  let verifier: StaffTokenVerifier;
  let key: KeyLike;
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'staff-aud-'));
    const file = join(dir, 'dev-idp.json');
    const idp = await DevIdentityProvider.load(file);
    key = (await importJWK(JSON.parse(readFileSync(file, 'utf8')) as JWK, 'RS256')) as KeyLike;
    verifier = new StaffTokenVerifier([{ issuer: DEV_ISSUER, audience: STAFF_AUDIENCE, key: idp.publicKey }], () => now);
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  const token = (o: { aud: string | string[]; azp?: string; iat?: number; exp?: number }) =>
    new SignJWT({ email: 'a@example.test', permissions: [], amr: ['pwd', 'mfa'], auth_time: nowS, ...(o.azp !== undefined ? { azp: o.azp } : {}) })
      .setProtectedHeader({ alg: 'RS256' })
      .setIssuer(DEV_ISSUER)
      .setAudience(o.aud)
      .setSubject('u1')
      .setIssuedAt(o.iat ?? nowS)
      .setExpirationTime(o.exp ?? nowS + 3600)
      .sign(key);

  it('refuses a token for several audiences without azp, or with an azp other than this service', async () => {
    await expect(verifier.verify(await token({ aud: [STAFF_AUDIENCE, 'other-app'] }))).rejects.toThrow('invalid staff token');
    await expect(verifier.verify(await token({ aud: [STAFF_AUDIENCE, 'other-app'], azp: 'other-app' }))).rejects.toThrow('invalid staff token');
    expect((await verifier.verify(await token({ aud: [STAFF_AUDIENCE, 'other-app'], azp: STAFF_AUDIENCE }))).sub).toBe('u1');
  });

  it('accepts one audience with or without azp, but not an azp naming another party', async () => {
    expect((await verifier.verify(await token({ aud: STAFF_AUDIENCE }))).sub).toBe('u1');
    expect((await verifier.verify(await token({ aud: [STAFF_AUDIENCE] }))).sub).toBe('u1');
    expect((await verifier.verify(await token({ aud: STAFF_AUDIENCE, azp: STAFF_AUDIENCE }))).sub).toBe('u1');
    await expect(verifier.verify(await token({ aud: STAFF_AUDIENCE, azp: 'other-app' }))).rejects.toThrow('invalid staff token');
  });

  it('refuses a token that lives longer than 24 hours (ten years was accepted), accepts exactly 24 hours', async () => {
    await expect(verifier.verify(await token({ aud: STAFF_AUDIENCE, exp: nowS + 10 * 365 * 86_400 }))).rejects.toThrow('invalid staff token');
    await expect(verifier.verify(await token({ aud: STAFF_AUDIENCE, iat: nowS - 3600, exp: nowS + 86_400 - 3600 + 1 }))).rejects.toThrow('invalid staff token');
    expect((await verifier.verify(await token({ aud: STAFF_AUDIENCE, iat: nowS - 3600, exp: nowS + 86_400 - 3600 }))).sub).toBe('u1');
  });
});

describe('DevIdentityProvider.load on a data dir shared by several apps (distributed mode)', () => {
  it('gives every loader the same key pair when they create it at the same time', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'staff-shared-'));
    try {
      const file = join(dir, 'dev-idp.json');
      const idps = await Promise.all(Array.from({ length: 6 }, () => DevIdentityProvider.load(file)));
      const now = new Date();
      const token = await idps[0].mint({ sub: 'u1', email: 'u1@example.test', permissions: [], mfa: true }, now);
      for (const idp of idps) {
        const verifier = new StaffTokenVerifier([{ issuer: DEV_ISSUER, audience: STAFF_AUDIENCE, key: idp.publicKey }], () => now);
        expect((await verifier.verify(token)).sub).toBe('u1');
      }
      // Nothing left behind but the key file.
      expect(readdirSync(dir)).toEqual(['dev-idp.json']);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
