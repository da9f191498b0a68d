/**
 * Sign-in with the configured OIDC issuer: the authorization-code flow with PKCE (S256) for a
 * public client. The verifier, state and nonce wait in sessionStorage for the redirect back to
 * `{origin}/console/callback`; the code is exchanged at the token endpoint for the ID token, whose
 * nonce must be the one sent. Only the ID token is kept.
 */
import { claimsOf } from './session';

export interface OidcConfig {
  issuer: string;
  clientId: string;
  authorizationEndpoint: string;
  tokenEndpoint: string;
}

const PENDING = 'svc-console.oidc';

function random(bytes = 32): string {
  return base64url(crypto.getRandomValues(new Uint8Array(bytes)));
}

function base64url(b: Uint8Array): string {
  let s = '';
  for (const x of b) s += String.fromCharCode(x);
  return btoa(s).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
}

export async function challengeOf(verifier: string): Promise<string> {
  return base64url(new Uint8Array(await crypto.subtle.digest('SHA-256', new TextEncoder().encode(verifier))));
}

export const redirectUri = () => `${location.origin}/console/callback`;

/** Leaves for the issuer's sign-in page. */
export async function startSignIn(config: OidcConfig): Promise<void> {
  if (!crypto.subtle) throw new Error('Sign-in needs a secure page (https, or localhost).');
  const verifier = random(48);
  const state = random();
  const nonce = random();
  sessionStorage.setItem(PENDING, JSON.stringify({ verifier, state, nonce }));
  const url = new URL(config.authorizationEndpoint);
  url.searchParams.set('response_type', 'code');
  url.searchParams.set('client_id', config.clientId);
  url.searchParams.set('redirect_uri', redirectUri());
  url.searchParams.set('scope', 'openid email profile');
  url.searchParams.set('state', state);
  url.searchParams.set('nonce', nonce);
  url.searchParams.set('code_challenge', await challengeOf(verifier));
  url.searchParams.set('code_challenge_method', 'S256');
  location.assign(url.href);
}

/** On `/console/callback`: checks the state, exchanges the code, checks the nonce; answers the ID token. */
export async function finishSignIn(config: OidcConfig, params: URLSearchParams): Promise<string> {
  const pending = JSON.parse(sessionStorage.getItem(PENDING) ?? 'null') as { verifier: string; state: string; nonce: string } | null;
  sessionStorage.removeItem(PENDING);
  const error = params.get('error');
  if (error) throw new Error(`The sign-in provider refused: ${params.get('error_description') ?? error}`);
  if (!pending || params.get('state') !== pending.state) throw new Error('This sign-in answer was not started from this tab (state mismatch). Sign in again.');
  const code = params.get('code');
  if (!code) throw new Error('The sign-in provider sent no code.');
  const res = await fetch(config.tokenEndpoint, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded', accept: 'application/json' },
    body: new URLSearchParams({
      grant_type: 'authorization_code',
      code,
      redirect_uri: redirectUri(),
      client_id: config.clientId,
      code_verifier: pending.verifier,
    }).toString(),
    credentials: 'omit',
    referrerPolicy: 'no-referrer',
  });
  const body = (await res.json().catch(() => null)) as { id_token?: string; error?: string; error_description?: string } | null;
  if (!res.ok || !body?.id_token) throw new Error(`The token exchange failed: ${body?.error_description ?? body?.error ?? `status ${res.status}`}`);
  const claims = claimsOf(body.id_token) as { nonce?: string } | null;
  if (!claims || claims.nonce !== pending.nonce) throw new Error('The ID token does not carry this sign-in’s nonce.');
  return body.id_token;
}
