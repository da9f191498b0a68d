import { WebhookEvent } from '../events';
import { HeadersLike, VerifiedDestinationCall, VerifyOptions, WebhookVerificationError, verifyDestinationCall, verifyWebhook } from '../verify';

/** What every adapter takes: the secret (or the old and new during a rotation) and the verify options. */
export interface AdapterOptions extends VerifyOptions {
  /** The endpoint's signing secret (webhooks) or the environment's widget signing secret (Destination calls); a list while rotating. */
  secret: string | readonly string[];
  /**
   * Told of every refused request (after it was answered 400), for your logs: `error.reason` and
   * `error.message` say why and hold no body content.
   */
  onRejected?: (error: WebhookVerificationError) => void;
}

/** Longest body an adapter reads itself from an unread request stream (the service's are far smaller). */
export const MAX_BODY_BYTES = 1024 * 1024;

const events = new WeakMap<object, WebhookEvent>();
const calls = new WeakMap<object, VerifiedDestinationCall>();

/** The webhook event an adapter verified for this request; throws if none did (the adapter is not on this route). */
export function webhookEventOf(req: object): WebhookEvent {
  const event = events.get(req);
  if (!event) throw new Error('no verified webhook on this request: put the webhook adapter on its route');
  return event;
}

/** The Destination call an adapter verified for this request; throws if none did. */
export function destinationCallOf<T = unknown>(req: object): VerifiedDestinationCall<T> {
  const call = calls.get(req);
  if (!call) throw new Error('no verified Destination call on this request: put the Destination call adapter on its route');
  return call as VerifiedDestinationCall<T>;
}

/** The parts of a request the adapters read (Express, Fastify and NestJS requests all have them). */
export interface RequestLike {
  method?: string;
  url?: string;
  originalUrl?: string;
  headers: HeadersLike;
  body?: unknown;
  rawBody?: unknown;
}

const isBytes = (x: unknown): x is Uint8Array => x instanceof Uint8Array;

/**
 * The raw body of a request, in this order: `rawBody` (NestJS with `rawBody: true`, or a raw-body
 * plugin), a byte `body` (Express `express.raw()`, the Fastify adapter's parser), or the request
 * stream itself when nothing has read it (a plain Node or Express request without a body parser).
 * A body already parsed into an object has lost its bytes: that is a set-up error, said plainly.
 */
export async function rawBodyOf(req: RequestLike, options: { emptyWhenNone?: boolean } = {}): Promise<Uint8Array | string> {
  if (isBytes(req.rawBody) || typeof req.rawBody === 'string') return req.rawBody;
  if (isBytes(req.body)) return req.body;
  const stream = req as unknown as { on?: unknown; readableEnded?: boolean; readable?: boolean };
  if (req.body === undefined && typeof stream.on === 'function' && stream.readableEnded === false) return readStream(req as unknown as NodeJS.ReadableStream);
  if ((req.body === undefined || req.body === null) && options.emptyWhenNone) return '';
  throw new Error(
    'the raw request body is not available: the signature covers the exact bytes, so read them before any JSON parser ' +
      '(Express: express.raw({ type: "application/json" }) on this route; NestJS: NestFactory.create(AppModule, { rawBody: true }); ' +
      "Fastify: register the fastifyWebhook/fastifyDestinationCall plugin in the route's scope)",
  );
}

function readStream(stream: NodeJS.ReadableStream): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    stream.on('data', (chunk: Buffer | string) => {
      const b = typeof chunk === 'string' ? Buffer.from(chunk, 'utf8') : chunk;
      size += b.length;
      if (size > MAX_BODY_BYTES) {
        reject(Object.assign(new Error('request body too large'), { statusCode: 413 }));
        (stream as unknown as { destroy?: () => void }).destroy?.();
        return;
      }
      chunks.push(b);
    });
    stream.on('end', () => resolve(Buffer.concat(chunks)));
    stream.on('error', reject);
  });
}

/** The request target as received: Express keeps it in `originalUrl` (its `url` loses a router's mount path). */
export const targetOf = (req: RequestLike): string => req.originalUrl ?? req.url ?? '/';

/** Verifies a webhook request and records its event for `webhookEventOf`. */
export async function verifyWebhookRequest(req: RequestLike, options: AdapterOptions): Promise<WebhookEvent> {
  const event = verifyWebhook(await rawBodyOf(req), req.headers, options.secret, options);
  events.set(req, event);
  return event;
}

/** Verifies a Destination call and records it for `destinationCallOf`. */
export async function verifyDestinationRequest(req: RequestLike, options: AdapterOptions): Promise<VerifiedDestinationCall> {
  const rawBody = await rawBodyOf(req, { emptyWhenNone: true });
  const call = verifyDestinationCall({ method: req.method ?? '', url: targetOf(req), rawBody, headers: req.headers }, options.secret, options);
  calls.set(req, call);
  return call;
}

/** The 400 answer of a refused request: the service's error shape, `{ code, message }`. */
export const rejectionBody = (error: WebhookVerificationError) => ({ code: error.reason, message: error.message });
