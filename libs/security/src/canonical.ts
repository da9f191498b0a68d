import { createHash } from 'node:crypto';
import { canonicalJson } from '@svc/decider';

/** Canonical JSON is defined in the dependency-free core (domain code uses it too). */
export { canonicalJson };

/**
 * The idempotency fingerprint of a validated request body (the "idempotency lives in the streams" rule): SHA-256 hex of
 * its canonical JSON, so key order and omitted optional members do not change it.
 */
export function bodyHash(body: unknown): string {
  return createHash('sha256')
    .update(canonicalJson(JSON.parse(JSON.stringify(body ?? null))))
    .digest('hex');
}
