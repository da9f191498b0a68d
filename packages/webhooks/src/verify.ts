import { WEBHOOK_EVENT_TYPES, OrderLookupRequested, WebhookEvent } from './events';
import { DEFAULT_TOLERANCE_SECONDS, SIGNATURE_PATTERN, TIMESTAMP_PATTERN, signDestinationCall, signWebhook, signatureMatches } from './signing';

/**
 * Why a request was refused:
 * - `MISSING_HEADER`: `x-svc-timestamp` or `x-svc-signature` (and, on a webhook, `x-svc-event-id`) is absent or empty.
 * - `UNPARSEABLE`: a header is not in its form (`x-svc-timestamp` Unix seconds, `x-svc-signature` `v1=` and 64 hex
 *   digits), or the signed body is not the JSON it should be (a webhook: the envelope `{ id, type, createdAt, data }`
 *   of a known event type, its `id` equal to `x-svc-event-id`).
 * - `BAD_SIGNATURE`: the signature is not the one the secret (or any of the secrets) gives for these bytes.
 * - `STALE_TIMESTAMP`: `x-svc-timestamp` is further from the receiver's clock than the tolerance.
 */
export type VerificationReason = 'MISSING_HEADER' | 'UNPARSEABLE' | 'BAD_SIGNATURE' | 'STALE_TIMESTAMP';

export const VERIFICATION_REASONS: readonly VerificationReason[] = ['MISSING_HEADER', 'UNPARSEABLE', 'BAD_SIGNATURE', 'STALE_TIMESTAMP'];

/** A request that did not verify. Answer it 400 (the adapters do); never act on its body. */
export class WebhookVerificationError extends Error {
  override readonly name = 'WebhookVerificationError';
  /** The status to answer with: frameworks that read `statusCode` from a thrown error (Express, Fastify, NestJS) answer 400. */
  readonly statusCode = 400;

  constructor(
    readonly reason: VerificationReason,
    message: string,
  ) {
    super(message);
  }
}

/** Node's `IncomingHttpHeaders`, any plain object of headers (names in any case), or a Fetch `Headers`. */
export type HeadersLike = Record<string, string | string[] | number | undefined> | { get(name: string): string | null };

export interface VerifyOptions {
  /** Largest accepted distance, in seconds, between `x-svc-timestamp` and `now` (either way). Default 300. */
  toleranceSeconds?: number;
  /** The receiver's current time: a Date or milliseconds since the epoch. Default: the receiver's clock. */
  now?: Date | number;
}

/** A Destination call as the receiving order system saw it. */
export interface DestinationRequest {
  /** The request method (`POST`, `GET`, …). */
  method: string;
  /**
   * The request target exactly as received: path and query (`req.originalUrl` in Express, `request.url`
   * in Fastify and plain Node). An absolute URL is accepted; only its path and query count.
   */
  url: string;
  /** The body's bytes as received (empty or absent when the call has none). */
  rawBody?: Uint8Array | string | null;
  headers: HeadersLike;
}

/** A verified Destination call. */
export interface VerifiedDestinationCall<T = unknown> {
  method: string;
  /** The path and query that were signed. */
  pathAndQuery: string;
  /** `x-svc-timestamp`: Unix seconds of the call. */
  timestamp: number;
  /** The JSON body, parsed after the signature verified; undefined when the call had none. */
  body: T | undefined;
}

const fail = (reason: VerificationReason, message: string): never => {
  throw new WebhookVerificationError(reason, message);
};

/** One header's value; names are case-insensitive. A header sent twice is kept as one joined value (which then fails its form). */
export function headerValue(headers: HeadersLike, name: string): string | undefined {
  const lower = name.toLowerCase();
  if (typeof (headers as { get?: unknown }).get === 'function') return (headers as { get(name: string): string | null }).get(lower) ?? undefined;
  const record = headers as Record<string, string | string[] | number | undefined>;
  let value = record[lower];
  if (value === undefined) {
    const key = Object.keys(record).find((k) => k.toLowerCase() === lower);
    value = key === undefined ? undefined : record[key];
  }
  if (Array.isArray(value)) return value.join(', ');
  return value === undefined ? undefined : String(value);
}

function secretsOf(secret: string | readonly string[]): readonly string[] {
  const list = typeof secret === 'string' ? [secret] : secret;
  if (!Array.isArray(list) || list.length === 0 || list.some((s) => typeof s !== 'string' || s.length === 0)) {
    throw new TypeError('secret must be a non-empty string or a non-empty list of them');
  }
  return list;
}

function nowSecondsOf(options: VerifyOptions): number {
  const now = options.now === undefined ? Date.now() : typeof options.now === 'number' ? options.now : options.now.getTime();
  return Math.floor(now / 1000);
}

function toleranceOf(options: VerifyOptions): number {
  const t = options.toleranceSeconds ?? DEFAULT_TOLERANCE_SECONDS;
  if (!Number.isFinite(t) || t < 0) throw new TypeError('toleranceSeconds must be a number of seconds, 0 or more');
  return t;
}

/** The timestamp and signature headers, present and in form. */
function signedHeaders(headers: HeadersLike, required: string[]): { timestamp: string; signature: string; values: Record<string, string> } {
  const values: Record<string, string> = {};
  const missing = required.filter((name) => {
    const v = headerValue(headers, name);
    if (v === undefined || v.trim() === '') return true;
    values[name] = v.trim();
    return false;
  });
  if (missing.length > 0) fail('MISSING_HEADER', `missing header${missing.length > 1 ? 's' : ''}: ${missing.join(', ')}`);
  const timestamp = values['x-svc-timestamp'];
  const signature = values['x-svc-signature'];
  if (!TIMESTAMP_PATTERN.test(timestamp)) fail('UNPARSEABLE', 'x-svc-timestamp is not Unix seconds');
  if (!SIGNATURE_PATTERN.test(signature)) fail('UNPARSEABLE', 'x-svc-signature is not v1= and 64 lowercase hex digits');
  return { timestamp, signature, values };
}

function checkTimestamp(timestamp: string, options: VerifyOptions): number {
  const ts = Number(timestamp);
  const skew = nowSecondsOf(options) - ts;
  const tolerance = toleranceOf(options);
  if (!Number.isSafeInteger(ts) || Math.abs(skew) > tolerance)
    fail('STALE_TIMESTAMP', `x-svc-timestamp is ${skew} s from this receiver's clock (tolerance ${tolerance} s)`);
  return ts;
}

const text = (raw: Uint8Array | string): string => (typeof raw === 'string' ? raw : Buffer.from(raw.buffer, raw.byteOffset, raw.byteLength).toString('utf8'));

/** RFC 3339 date-time, as the service writes `createdAt`. */
const DATE_TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/i;
const KNOWN_TYPES: ReadonlySet<string> = new Set(WEBHOOK_EVENT_TYPES);

/**
 * Verifies one webhook delivery and returns its event, typed by `type`. Throws WebhookVerificationError
 * (with its `reason`) otherwise. In this order: the headers are there and in form, the signature over
 * the raw bytes matches (constant-time), the timestamp is within the tolerance of the receiver's clock,
 * then, only then, the body is parsed and must be the envelope of a known event whose `id` is
 * `x-svc-event-id`.
 *
 * `rawBody` must be the bytes as received (a Buffer, or a string of them): JSON parsed and serialized
 * again is not the same bytes. `secret` may be a list (the old and the new secret while rotating).
 * Deduplicate by `event.id` yourself (the same event comes again on a retry), in the same transaction
 * that stores it.
 */
export function verifyWebhook(
  rawBody: Uint8Array | string,
  headers: HeadersLike,
  secret: string | readonly string[],
  options: VerifyOptions = {},
): WebhookEvent {
  const secrets = secretsOf(secret);
  if (rawBody === undefined || rawBody === null || (typeof rawBody !== 'string' && !(rawBody instanceof Uint8Array))) {
    throw new TypeError('rawBody must be the request body as received (a Buffer, a Uint8Array or a string), before any JSON parsing');
  }
  const { timestamp, signature, values } = signedHeaders(headers, ['x-svc-event-id', 'x-svc-timestamp', 'x-svc-signature']);
  if (
    !signatureMatches(
      signature,
      secrets.map((s) => signWebhook(s, timestamp, rawBody)),
    )
  )
    fail('BAD_SIGNATURE', 'x-svc-signature does not match this body and secret');
  checkTimestamp(timestamp, options);
  let event: unknown;
  try {
    event = JSON.parse(text(rawBody));
  } catch {
    return fail('UNPARSEABLE', 'the body is not JSON');
  }
  if (!event || typeof event !== 'object' || Array.isArray(event)) return fail('UNPARSEABLE', 'the body is not an event envelope');
  const { id, type, createdAt, data } = event as Record<string, unknown>;
  if (id !== values['x-svc-event-id']) fail('UNPARSEABLE', 'the envelope id is not x-svc-event-id');
  if (typeof type !== 'string' || !KNOWN_TYPES.has(type))
    fail('UNPARSEABLE', `unknown event type${typeof type === 'string' ? ` ${JSON.stringify(type.slice(0, 80))}` : ''}`);
  if (typeof createdAt !== 'string' || !DATE_TIME.test(createdAt) || !Number.isFinite(Date.parse(createdAt)))
    fail('UNPARSEABLE', 'the envelope createdAt is not a date-time');
  if (!data || typeof data !== 'object' || Array.isArray(data)) fail('UNPARSEABLE', 'the envelope data is not an object');
  return event as WebhookEvent;
}

/** The path and query of a request target (an absolute URL's origin dropped, nothing else changed). */
export function pathAndQueryOf(url: string): string {
  if (url.startsWith('/')) return url;
  const m = /^[a-z][a-z0-9+.-]*:\/\/[^/?#]*/i.exec(url);
  if (!m) throw new TypeError('url must be the request target (path and query) or an absolute URL');
  const rest = url.slice(m[0].length);
  return rest.startsWith('/') ? rest : `/${rest}`;
}

/**
 * Verifies a call from a conversation workflow to your system (a Destination, for example an order
 * system answering `order_lookup.requested`): the signature over `<timestamp>.<METHOD> <path and query>\n<raw body>`
 * with the environment's widget signing secret, and the timestamp within the tolerance. Returns the
 * call with its JSON body parsed (after the signature verified); throws WebhookVerificationError otherwise.
 * Use `isOrderLookupRequested(call.body)` to tell an order lookup.
 */
export function verifyDestinationCall<T = unknown>(
  request: DestinationRequest,
  secret: string | readonly string[],
  options: VerifyOptions = {},
): VerifiedDestinationCall<T> {
  const secrets = secretsOf(secret);
  const rawBody = request.rawBody ?? '';
  if (typeof rawBody !== 'string' && !(rawBody instanceof Uint8Array))
    throw new TypeError('rawBody must be the request body as received (a Buffer, a Uint8Array or a string)');
  const method = String(request.method ?? '').toUpperCase();
  const pathAndQuery = pathAndQueryOf(String(request.url ?? ''));
  const { timestamp, signature } = signedHeaders(request.headers, ['x-svc-timestamp', 'x-svc-signature']);
  if (
    !signatureMatches(
      signature,
      secrets.map((s) => signDestinationCall(s, timestamp, method, pathAndQuery, rawBody)),
    )
  ) {
    fail('BAD_SIGNATURE', 'x-svc-signature does not match this method, path and query, body and secret');
  }
  const ts = checkTimestamp(timestamp, options);
  const body = text(rawBody);
  let parsed: T | undefined;
  if (body.length > 0) {
    try {
      parsed = JSON.parse(body) as T;
    } catch {
      fail('UNPARSEABLE', 'the body is not JSON');
    }
  }
  return { method, pathAndQuery, timestamp: ts, body: parsed };
}

/** True when a (verified) Destination call's body is `order_lookup.requested`. */
export function isOrderLookupRequested(body: unknown): body is OrderLookupRequested {
  if (!body || typeof body !== 'object') return false;
  const b = body as Record<string, unknown>;
  const patient = b.patient as Record<string, unknown> | null | undefined;
  return (
    b.version === 1 &&
    b.type === 'order_lookup.requested' &&
    typeof b.requestId === 'string' &&
    b.requestId.length > 0 &&
    !!patient &&
    typeof patient === 'object' &&
    typeof patient.externalId === 'string'
  );
}
