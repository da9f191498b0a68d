import { createServer, Server } from 'node:http';
import { exportJWK, generateKeyPair, KeyLike, SignJWT } from 'jose';

/**
 * A staff identity provider for tests of production mode (where the dev issuer never exists): an
 * RS256 key pair whose public half is served as a JWKS on 127.0.0.1, and ID tokens minted with the
 * claims decisions section 3 reads. Start the service with `STAFF_OIDC_ISSUER=issuer.issuer`
 * (the JWKS is at the default `<issuer>/.well-known/jwks.json`).
 */
export class OidcIssuer {
  private server: Server | undefined;
  private privateKey!: KeyLike;
  issuer = '';
  /** JWKS requests served (the service fetches and caches the key set). */
  jwksRequests = 0;

  async start(): Promise<this> {
    const { publicKey, privateKey } = await generateKeyPair('RS256');
    this.privateKey = privateKey;
    const jwks = JSON.stringify({ keys: [{ ...(await exportJWK(publicKey)), kid: 'test-1', alg: 'RS256', use: 'sig' }] });
    this.server = createServer((req, res) => {
      if (req.url !== '/.well-known/jwks.json') return void res.writeHead(404).end();
      this.jwksRequests++;
      res.writeHead(200, { 'content-type': 'application/json' }).end(jwks);
    });
    await new Promise<void>((r) => this.server!.listen(0, '127.0.0.1', () => r()));
    this.issuer = `http://127.0.0.1:${(this.server.address() as { port: number }).port}`;
    return this;
  }

  /** An ID token for staff member `sub` (defaults: integrations.manage, signed in with MFA now, 1 hour). */
  token(claims: { sub: string; email?: string; permissions?: string[]; mfa?: boolean; audience?: string }): Promise<string> {
    const now = Math.floor(Date.now() / 1000);
    return new SignJWT({
      email: claims.email ?? `${claims.sub}@example.test`,
      permissions: claims.permissions ?? ['integrations.manage'],
      amr: claims.mfa === false ? ['pwd'] : ['pwd', 'mfa'],
      auth_time: now,
    })
      .setProtectedHeader({ alg: 'RS256', kid: 'test-1' })
      .setIssuer(this.issuer)
      .setAudience(claims.audience ?? 'svc-staff')
      .setSubject(claims.sub)
      .setIssuedAt(now)
      .setExpirationTime(now + 3600)
      .sign(this.privateKey);
  }

  stop(): Promise<void> {
    return new Promise((r) => (this.server ? this.server.close(() => r()) : r()));
  }
}
