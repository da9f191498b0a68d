import { createHmac, timingSafeEqual } from 'node:crypto';

/**
 * The service's two signing schemes, in one place: the service signs with these functions and the
 * verifiers of this package check with them, so both sides stay byte for byte the same.
 *
 * Secrets are HMAC keys as their UTF-8 string, whole (`whsec_…` included). The signature header is
 * `v1=` followed by the lowercase hexadecimal HMAC-SHA256.
 */

/** What `x-svc-signature` looks like: the scheme label and 64 lowercase hex digits. */
export const SIGNATURE_PATTERN = /^v1=[a-f0-9]{64}$/;
/** What `x-svc-timestamp` looks like: Unix seconds. */
export const TIMESTAMP_PATTERN = /^[0-9]+$/;
/** The largest accepted distance between `x-svc-timestamp` and the receiver's clock, by default (5 minutes). */
export const DEFAULT_TOLERANCE_SECONDS = 300;

/** A webhook delivery: `v1=` + hex HMAC-SHA256 of `<x-svc-timestamp>.<raw body>`, keyed with the endpoint's signing secret. */
export function signWebhook(secret: string, timestamp: number | string, rawBody: Uint8Array | string): string {
  return `v1=${createHmac('sha256', secret).update(`${timestamp}.`).update(rawBody).digest('hex')}`;
}

/**
 * A Destination call: `v1=` + hex HMAC-SHA256 of `<x-svc-timestamp>.<METHOD> <path and query>\n<raw body>`
 * (the raw body empty when there is none), keyed with the environment's widget signing secret.
 * `pathAndQuery` is the request target as sent, the Destination's own base path included
 * (`/api/orders/lookup?x=1`).
 */
export function signDestinationCall(secret: string, timestamp: number | string, method: string, pathAndQuery: string, rawBody: Uint8Array | string): string {
  return `v1=${createHmac('sha256', secret).update(`${timestamp}.${method} ${pathAndQuery}\n`).update(rawBody).digest('hex')}`;
}

/**
 * True when `given` equals one of `expected` (all `v1=<hex>` strings), compared in constant time:
 * every expected value is compared, whichever matches.
 */
export function signatureMatches(given: string, expected: readonly string[]): boolean {
  const a = Buffer.from(given, 'utf8');
  let match = false;
  for (const e of expected) {
    const b = Buffer.from(e, 'utf8');
    if (a.length === b.length && timingSafeEqual(a, b)) match = true;
  }
  return match;
}
