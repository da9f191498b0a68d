import { createHash } from 'node:crypto';

/** Canonical JSON: keys sorted at every level, undefined members left out (undefined in arrays is null). */
export function canonicalJson(value: unknown): string {
  if (value === null || typeof value !== 'object') return JSON.stringify(value) ?? 'null';
  if (Array.isArray(value)) return `[${value.map((v) => canonicalJson(v === undefined ? null : v)).join(',')}]`;
  const obj = value as Record<string, unknown>;
  const keys = Object.keys(obj)
    .filter((k) => obj[k] !== undefined)
    .sort();
  return `{${keys.map((k) => `${JSON.stringify(k)}:${canonicalJson(obj[k])}`).join(',')}}`;
}

/**
 * The idempotency fingerprint of a validated request body (architecture rule 2): SHA-256 hex of
 * its canonical JSON, so key order and omitted optional members do not change it.
 */
export function bodyHash(body: unknown): string {
  return createHash('sha256').update(canonicalJson(JSON.parse(JSON.stringify(body ?? null)))).digest('hex');
}
