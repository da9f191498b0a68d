import { existsSync, linkSync, mkdirSync, readFileSync, unlinkSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import { randomBytes } from 'node:crypto';
import { JWK, JWTPayload, KeyLike, SignJWT, createRemoteJWKSet, exportJWK, generateKeyPair, importJWK, jwtVerify } from 'jose';

export const STAFF_AUDIENCE = 'svc-staff';
export const DEV_ISSUER = 'svc-dev-idp';

export interface StaffPrincipal {
  sub: string;
  email: string;
  permissions: string[];
  mfa: boolean;
  /** Unix seconds of the sign-in. */
  authTime: number | null;
}

export class InvalidStaffTokenError extends Error {}

/**
 * The dev identity provider of docs/decisions.md, "Dev tools and the dev clock": an RS256 key pair kept in the data dir,
 * so tokens minted before a restart still verify after it.
 */
export class DevIdentityProvider {
  private constructor(
    private readonly privateKey: KeyLike,
    readonly publicKey: KeyLike,
    private readonly kid: string,
  ) {}

  static async load(file: string): Promise<DevIdentityProvider> {
    if (!existsSync(file)) {
      const { privateKey } = await generateKeyPair('RS256', { extractable: true });
      const created: JWK = { ...(await exportJWK(privateKey)), kid: `dev-${Date.now().toString(36)}` };
      // The private key: owner-only, like everything in the data dir (docs/decisions.md, "Deployment safety"). Written whole
      // under a name of this process, then linked under its own: apps of distributed mode that
      // share the data dir and start together all end up with the first key linked.
      mkdirSync(dirname(file), { recursive: true, mode: 0o700 });
      const tmp = `${file}.${process.pid}-${randomBytes(6).toString('hex')}.tmp`;
      writeFileSync(tmp, JSON.stringify(created), { mode: 0o600 });
      try {
        linkSync(tmp, file);
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
      } finally {
        unlinkSync(tmp);
      }
    }
    const jwk = JSON.parse(readFileSync(file, 'utf8')) as JWK;
    const privateKey = (await importJWK(jwk, 'RS256')) as KeyLike;
    const { d: _d, p: _p, q: _q, dp: _dp, dq: _dq, qi: _qi, ...pub } = jwk;
    const publicKey = (await importJWK(pub, 'RS256')) as KeyLike;
    return new DevIdentityProvider(privateKey, publicKey, jwk.kid ?? 'dev');
  }

  async mint(claims: { sub: string; email: string; permissions: string[]; mfa: boolean }, now: Date): Promise<string> {
    const iat = Math.floor(now.getTime() / 1000);
    return new SignJWT({ email: claims.email, permissions: claims.permissions, amr: claims.mfa ? ['pwd', 'mfa'] : ['pwd'], auth_time: iat })
      .setProtectedHeader({ alg: 'RS256', kid: this.kid, typ: 'JWT' })
      .setIssuer(DEV_ISSUER)
      .setAudience(STAFF_AUDIENCE)
      .setSubject(claims.sub)
      .setIssuedAt(iat)
      .setExpirationTime(iat + 3600)
      .sign(this.privateKey);
  }
}

export interface StaffIssuer {
  issuer: string;
  audience: string;
  key: KeyLike | ReturnType<typeof createRemoteJWKSet>;
}

export function remoteIssuer(issuer: string, jwksUrl: string, audience: string): StaffIssuer {
  return { issuer, audience, key: createRemoteJWKSet(new URL(jwksUrl)) };
}

/**
 * Verifies staff ID tokens against the configured issuers; time comes from the service clock.
 * Besides signature, issuer, audience and expiry (docs/decisions.md, "Deployment safety", in every mode):
 * - a token for several audiences must name this service as its authorized party (`azp` equal to
 *   the configured audience, OIDC Core 3.1.3.7): otherwise it was issued to another client, which
 *   could replay it here; an `azp` naming another party is refused whatever the audiences;
 * - no token lives longer than MAX_LIFETIME_S (`exp - iat`): an ID token is a sign-in proof, and a
 *   ten-year one would outlive any revocation of the staff member.
 */
export class StaffTokenVerifier {
  /** Tolerated clock difference for `iat` and `auth_time` in the future (seconds). */
  static readonly CLOCK_SKEW_S = 60;
  /** Longest lifetime of a staff token, `exp - iat` (seconds): 24 hours. */
  static readonly MAX_LIFETIME_S = 86_400;

  constructor(
    private readonly issuers: StaffIssuer[],
    private readonly now: () => Date,
  ) {}

  async verify(token: string): Promise<StaffPrincipal> {
    let payload: JWTPayload | undefined;
    let audience = '';
    for (const issuer of this.issuers) {
      try {
        const result = await jwtVerify(token, issuer.key as KeyLike, {
          issuer: issuer.issuer,
          audience: issuer.audience,
          currentDate: this.now(),
          algorithms: ['RS256', 'ES256', 'PS256'],
          // An ID token always expires (docs/decisions.md, "Dev tools and the dev clock": exp, 1 hour); one without exp never would.
          requiredClaims: ['exp', 'iat', 'sub'],
        });
        payload = result.payload;
        audience = issuer.audience;
        break;
      } catch {
        // try the next issuer
      }
    }
    // OIDC Core 2: `sub` is a non-empty identifier of at most 255 ASCII characters. An empty one would be one identity shared by every such token.
    if (!payload || typeof payload.sub !== 'string' || payload.sub.length === 0 || payload.sub.length > 255)
      throw new InvalidStaffTokenError('invalid staff token');
    // Issued or signed in later than now (beyond a minute of clock skew): not a token of this
    // issuer's past, and a future auth_time would pass any "recent sign-in" test for as long as it lies ahead.
    const nowS = Math.floor(this.now().getTime() / 1000);
    for (const claim of ['iat', 'auth_time'] as const) {
      const v = payload[claim];
      if (v !== undefined && (typeof v !== 'number' || !Number.isFinite(v) || v > nowS + StaffTokenVerifier.CLOCK_SKEW_S))
        throw new InvalidStaffTokenError('invalid staff token');
    }
    const audiences = Array.isArray(payload.aud) ? payload.aud : [payload.aud];
    if (payload.azp !== undefined ? payload.azp !== audience : audiences.length > 1) throw new InvalidStaffTokenError('invalid staff token');
    // iat and exp are numbers here (jose checks both claims it was asked to require).
    if ((payload.exp as number) - (payload.iat as number) > StaffTokenVerifier.MAX_LIFETIME_S) throw new InvalidStaffTokenError('invalid staff token');
    const amr = Array.isArray(payload.amr) ? (payload.amr as unknown[]) : [];
    return {
      sub: payload.sub,
      email: typeof payload.email === 'string' ? payload.email : '',
      permissions: Array.isArray(payload.permissions) ? (payload.permissions as unknown[]).filter((p): p is string => typeof p === 'string') : [],
      mfa: amr.includes('mfa'),
      authTime: typeof payload.auth_time === 'number' ? payload.auth_time : null,
    };
  }
}

export const STAFF_TOKEN_VERIFIER = Symbol('STAFF_TOKEN_VERIFIER');
