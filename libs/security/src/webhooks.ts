import { signDestinationCall, signWebhook, signatureMatches } from '@svc/webhooks-receiver';

/**
 * The service's signing schemes (webhooks, Destination calls) are those of the receiver package
 * (packages/webhooks): the service signs with the very functions callers verify with.
 */
export { signDestinationCall, signWebhook };

/**
 * Receiver-side verification of the service's endpoint webhooks (spec "Verification rules"), as the
 * tests' receivers use it: signature over the raw bytes before parsing, constant-time compare, stale
 * timestamps refused, dedupe by `x-svc-event-id`. Callers use the receiver package instead.
 */

export interface WebhookEnvelope<T = Record<string, unknown>> {
  id: string;
  type: string;
  createdAt: string;
  data: T;
}

/** Where seen event ids are remembered (use a durable store in production: a DB unique key). */
export interface SeenStore {
  /** Returns true when `eventId` was already recorded; records it otherwise. */
  checkAndAdd(eventId: string): boolean | Promise<boolean>;
}

/** In-memory seen-store with a bound (oldest ids forgotten first). */
export class MemorySeenStore implements SeenStore {
  private readonly ids = new Set<string>();
  constructor(private readonly max = 100_000) {}
  checkAndAdd(eventId: string): boolean {
    if (this.ids.has(eventId)) return true;
    this.ids.add(eventId);
    if (this.ids.size > this.max) this.ids.delete(this.ids.values().next().value as string);
    return false;
  }
}

export type WebhookVerificationCode = 'MISSING_HEADER' | 'BAD_SIGNATURE' | 'STALE_TIMESTAMP' | 'DUPLICATE_EVENT' | 'BAD_PAYLOAD';

export class WebhookVerificationError extends Error {
  constructor(
    readonly code: WebhookVerificationCode,
    message: string,
    /** On DUPLICATE_EVENT: the (verified) envelope, so the receiver can answer 200 again. */
    readonly envelope?: WebhookEnvelope<unknown>,
  ) {
    super(message);
    this.name = 'WebhookVerificationError';
  }
}

export interface VerifyWebhookInput {
  /** The request body exactly as received (Buffer or string), before any JSON parsing. */
  rawBody: Buffer | string;
  /** Request headers (node's IncomingHttpHeaders, a Fetch Headers, or a plain object; names case-insensitive). */
  headers: Record<string, string | string[] | undefined> | Headers;
  /** The endpoint signing secret, used as its UTF-8 string. */
  secret: string | string[];
  /** Current time (default: now). */
  now?: Date;
  /** Largest accepted age (and future skew) of `x-svc-timestamp`, seconds. Default 300. */
  toleranceSec?: number;
  /** Dedupe store; default: a process-wide in-memory one. Pass `null` to skip dedupe. */
  seen?: SeenStore | null;
}

const defaultSeen = new MemorySeenStore();

function header(headers: VerifyWebhookInput['headers'], name: string): string | undefined {
  if (typeof (headers as Headers).get === 'function') return (headers as Headers).get(name) ?? undefined;
  const h = headers as Record<string, string | string[] | undefined>;
  const key = Object.keys(h).find((k) => k.toLowerCase() === name);
  const v = key === undefined ? undefined : h[key];
  return Array.isArray(v) ? v[0] : v;
}

/** RFC 3339 date-time (what `createdAt` is: the service sends `toISOString()`). */
const DATE_TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/i;

/** The spec's envelope: `id` (equal to x-svc-event-id), `type`, `createdAt` (date-time) and `data` (object), all required. */
function envelopeProblem(e: unknown, eventId: string): string | null {
  if (!e || typeof e !== 'object' || Array.isArray(e)) return 'envelope is not an object';
  const { id, type, createdAt, data } = e as Record<string, unknown>;
  if (id !== eventId) return 'envelope id does not match x-svc-event-id';
  if (typeof type !== 'string' || type.length === 0) return 'envelope type is required';
  if (typeof createdAt !== 'string' || !DATE_TIME.test(createdAt) || !Number.isFinite(Date.parse(createdAt))) return 'envelope createdAt must be a date-time';
  if (!data || typeof data !== 'object' || Array.isArray(data)) return 'envelope data must be an object';
  return null;
}

/**
 * Verifies a webhook and returns its envelope; throws WebhookVerificationError otherwise.
 * `secret` may be a list (old and new secret during a rotation).
 */
export async function verifyWebhook<T = Record<string, unknown>>(input: VerifyWebhookInput): Promise<WebhookEnvelope<T>> {
  const { rawBody, headers } = input;
  const eventId = header(headers, 'x-svc-event-id');
  const timestamp = header(headers, 'x-svc-timestamp');
  const signature = header(headers, 'x-svc-signature');
  if (!eventId || !timestamp || !signature)
    throw new WebhookVerificationError('MISSING_HEADER', 'x-svc-event-id, x-svc-timestamp and x-svc-signature are required');
  if (!/^[0-9]+$/.test(timestamp)) throw new WebhookVerificationError('STALE_TIMESTAMP', 'x-svc-timestamp is not Unix seconds');
  if (!/^v1=[a-f0-9]{64}$/.test(signature)) throw new WebhookVerificationError('BAD_SIGNATURE', 'x-svc-signature is malformed');

  const secrets = Array.isArray(input.secret) ? input.secret : [input.secret];
  if (
    !signatureMatches(
      signature,
      secrets.map((s) => signWebhook(s, timestamp, rawBody)),
    )
  )
    throw new WebhookVerificationError('BAD_SIGNATURE', 'signature does not match');

  const nowSec = Math.floor((input.now ?? new Date()).getTime() / 1000);
  const tolerance = input.toleranceSec ?? 300;
  if (Math.abs(nowSec - Number(timestamp)) > tolerance) throw new WebhookVerificationError('STALE_TIMESTAMP', 'x-svc-timestamp is outside the tolerance');

  let envelope: WebhookEnvelope<T>;
  try {
    envelope = JSON.parse(Buffer.isBuffer(rawBody) ? rawBody.toString('utf8') : rawBody) as WebhookEnvelope<T>;
  } catch {
    throw new WebhookVerificationError('BAD_PAYLOAD', 'body is not JSON');
  }
  const problem = envelopeProblem(envelope, eventId);
  if (problem) throw new WebhookVerificationError('BAD_PAYLOAD', problem);
  const seen = input.seen === undefined ? defaultSeen : input.seen;
  if (seen && (await seen.checkAndAdd(eventId)))
    throw new WebhookVerificationError('DUPLICATE_EVENT', 'event already received', envelope as WebhookEnvelope<unknown>);
  return envelope;
}
