// A real OpenID provider for the console's sign-in test: oidc-provider (panva) on 127.0.0.1, run as a
// child process (it is an ES module). One public client, the console: client id `svc-staff` (the
// service's STAFF_OIDC_AUDIENCE), the authorization-code flow with PKCE S256 required, its redirect
// URI `${CONSOLE_ORIGIN}/console/callback`, CORS for that origin on the token endpoint. RS256 ID
// tokens carry the claims the service reads: email, permissions, amr (with mfa), auth_time.
//
// The sign-in page is this script's own (GET /interaction/:uid, a form with one button); it signs the
// subject STAFF_SUB in with `amr: ['pwd', 'mfa']`, and the grant is pre-established (a first-party
// console: no consent screen). Prints one JSON line `{ "issuer": … }` once it listens.
import { generateKeyPairSync } from 'node:crypto';
import { createServer } from 'node:http';
import Provider from 'oidc-provider';

const consoleOrigin = process.env.CONSOLE_ORIGIN;
const sub = process.env.STAFF_SUB ?? 'oidc-staff-1';
if (!consoleOrigin) throw new Error('CONSOLE_ORIGIN is required');

const server = createServer();
await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
const issuer = `http://127.0.0.1:${server.address().port}`;

const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
const scopes = 'openid email profile';

const provider = new Provider(issuer, {
  clients: [
    {
      client_id: 'svc-staff',
      token_endpoint_auth_method: 'none',
      redirect_uris: [`${consoleOrigin}/console/callback`],
      grant_types: ['authorization_code'],
      response_types: ['code'],
      require_auth_time: true,
    },
  ],
  jwks: { keys: [{ ...privateKey.export({ format: 'jwk' }), kid: 'oidc-test-1', alg: 'RS256', use: 'sig' }] },
  pkce: { required: () => true },
  clientBasedCORS: (_ctx, origin) => origin === consoleOrigin,
  // Scope claims in the ID token itself (the console keeps only the ID token).
  conformIdTokenClaims: false,
  claims: {
    acr: null,
    sid: null,
    auth_time: null,
    iss: null,
    amr: null,
    openid: ['sub', 'amr', 'auth_time', 'permissions'],
    email: ['email', 'email_verified'],
    profile: ['name'],
  },
  findAccount: (_ctx, accountId) => ({
    accountId,
    claims: () => ({ sub: accountId, email: `${accountId}@example.test`, email_verified: true, name: 'Olivia Staff', permissions: ['integrations.manage'] }),
  }),
  loadExistingGrant: async (ctx) => {
    const existing = ctx.oidc.session.grantIdFor(ctx.oidc.client.clientId);
    if (existing) return ctx.oidc.provider.Grant.find(existing);
    const grant = new ctx.oidc.provider.Grant({ clientId: ctx.oidc.client.clientId, accountId: ctx.oidc.session.accountId });
    grant.addOIDCScope(scopes);
    await grant.save();
    return grant;
  },
  features: { devInteractions: { enabled: false } },
  interactions: { url: (_ctx, interaction) => `/interaction/${interaction.uid}` },
  cookies: { keys: ['console-oidc-test'] },
  ttl: { IdToken: 3600, AccessToken: 3600, AuthorizationCode: 60, Session: 3600, Interaction: 600, Grant: 3600 },
});
const callback = provider.callback();

server.on('request', async (req, res) => {
  const m = /^\/interaction\/([^/?]+)(\/login)?$/.exec(req.url ?? '');
  if (!m) return callback(req, res);
  try {
    const details = await provider.interactionDetails(req, res);
    if (req.method === 'POST' && m[2]) {
      return await provider.interactionFinished(req, res, { login: { accountId: sub, amr: ['pwd', 'mfa'] } }, { mergeWithLastSubmission: false });
    }
    res
      .writeHead(200, { 'content-type': 'text/html; charset=utf-8', 'cache-control': 'no-store' })
      .end(
        `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Test identity provider</title></head><body><main>` +
          `<h1>Test identity provider</h1><p>Sign in to ${details.params.client_id} as ${sub} (password and second factor).</p>` +
          `<form method="post" action="/interaction/${details.uid}/login"><button type="submit">Sign in</button></form></main></body></html>`,
      );
  } catch (err) {
    res.writeHead(400, { 'content-type': 'text/plain' }).end(String(err.message));
  }
});

process.stdout.write(`${JSON.stringify({ issuer })}\n`);
