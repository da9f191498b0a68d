import type { EnvironmentKind } from '@svc/decider';
import { randomToken, sha256Hex } from './crypto';

export type { EnvironmentKind };

export const API_KEY_PREFIX: Record<EnvironmentKind, string> = { sandbox: 'svc_sb_', production: 'svc_prod_' };

/** A new API key; only its hash is ever stored. */
export function generateApiKey(kind: EnvironmentKind): { key: string; hash: string; prefix: string } {
  const key = `${API_KEY_PREFIX[kind]}${randomToken(32)}`;
  return { key, hash: hashApiKey(key), prefix: key.slice(0, API_KEY_PREFIX[kind].length + 6) };
}

/**
 * API keys carry 256 bits of randomness, so a plain SHA-256 is a safe verifier; lookups are
 * by hash, so no comparison of secrets happens in application code.
 */
export function hashApiKey(key: string): string {
  return sha256Hex(`svc-api-key:${key}`);
}

export function looksLikeApiKey(token: string): boolean {
  return token.startsWith('svc_sb_') || token.startsWith('svc_prod_');
}
