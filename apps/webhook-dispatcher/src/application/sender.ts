import { request as httpRequest, IncomingMessage } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { isIP } from 'node:net';
import { signWebhook } from '@svc/security';
import { Attempt } from '../domain/delivery';
import { Resolver, guardedLookup, isBlockedAddress } from './url-policy';

export const DELIVERY_TIMEOUT_MS = 15_000;

const productionLookup = guardedLookup();

export interface SendInput {
  url: string;
  /** The serialized envelope: sent byte for byte as signed. */
  payload: string;
  secret: string;
  eventId: string;
  eventType: string;
  /** Attempt time from the service clock. */
  at: Date;
  production: boolean;
  /** Tests only: the DNS answer the production guard checks (default: the system resolver). */
  resolve?: Resolver;
  /** Tests only: default DELIVERY_TIMEOUT_MS. */
  timeoutMs?: number;
}

export interface SendResult {
  attempt: Attempt;
  retryAfterMs: number | null;
}

function retryAfterMs(value: string | null, at: Date): number | null {
  if (!value) return null;
  if (/^\d+$/.test(value.trim())) return Number(value.trim()) * 1000;
  const t = Date.parse(value);
  return Number.isFinite(t) ? Math.max(0, t - at.getTime()) : null;
}

class TimeoutError extends Error {
  override name = 'TimeoutError';
}

/**
 * One POST through node:http(s). In production the socket resolves its host through
 * `guardedLookup`, which refuses blocked addresses at connect time (a check before the request and
 * a second resolution by the client would let a rebinding DNS answer through); an IP literal host
 * (not looked up) is checked here. No redirects are followed (node:http never does). The whole
 * exchange up to the response head has `timeoutMs`; the response body is discarded unread (the
 * socket is destroyed, so no connection is reused: agent false).
 */
function post(url: URL, headers: Record<string, string>, body: Buffer, production: boolean, resolve: Resolver | undefined, timeoutMs: number): Promise<IncomingMessage> {
  return new Promise((done, fail) => {
    const requester = url.protocol === 'https:' ? httpsRequest : httpRequest;
    const req = requester(url, { method: 'POST', headers, agent: false, ...(production ? { lookup: resolve ? guardedLookup(resolve) : productionLookup } : {}) }, (res) => {
      clearTimeout(timer);
      res.destroy();
      done(res);
    });
    const timer = setTimeout(() => req.destroy(new TimeoutError('webhook attempt timed out')), timeoutMs);
    req.on('error', (err) => {
      clearTimeout(timer);
      fail(err);
    });
    req.end(body);
  });
}

function errorOf(err: unknown, production: boolean): string {
  const e = err as NodeJS.ErrnoException;
  if (e?.name === 'TimeoutError') return 'timeout';
  if (e?.code === 'ESVCBLOCKED') return 'address_refused';
  if (production && (e?.code === 'ENOTFOUND' || e?.code === 'EAI_NONAME' || e?.code === 'EAI_NODATA')) return 'unresolvable';
  return 'network_error';
}

/**
 * One delivery attempt: a fresh timestamp and signature, 15 s timeout, no redirects followed,
 * response body discarded unread. Only metadata is returned (never the body).
 */
export async function sendWebhook(input: SendInput): Promise<SendResult> {
  const ts = Math.floor(input.at.getTime() / 1000);
  const body = Buffer.from(input.payload, 'utf8');
  const headers = {
    'content-type': 'application/json',
    'content-length': String(body.length),
    'user-agent': 'svc-webhooks/1.0',
    'x-svc-event-id': input.eventId,
    'x-svc-event-type': input.eventType,
    'x-svc-timestamp': String(ts),
    'x-svc-signature': signWebhook(input.secret, ts, input.payload),
    'idempotency-key': input.eventId,
  };
  const started = performance.now();
  const duration = () => Math.round(performance.now() - started);
  const at = input.at.toISOString();
  const failed = (error: string): SendResult => ({ attempt: { at, statusCode: null, durationMs: duration(), error }, retryAfterMs: null });
  let url: URL;
  try {
    url = new URL(input.url);
  } catch {
    return failed('network_error');
  }
  if (input.production) {
    const host = url.hostname.replace(/^\[|\]$/g, '');
    if (isIP(host) ? isBlockedAddress(host) : host === 'localhost' || host.endsWith('.localhost')) return failed('address_refused');
  }
  try {
    const res = await post(url, headers, body, input.production, input.resolve, input.timeoutMs ?? DELIVERY_TIMEOUT_MS);
    const status = res.statusCode ?? 0;
    const ok = status >= 200 && status < 300;
    const retryAfter = res.headers['retry-after'];
    return {
      attempt: { at, statusCode: status, durationMs: duration(), error: ok ? null : `http_${status}` },
      retryAfterMs: status === 429 || status === 503 ? retryAfterMs(Array.isArray(retryAfter) ? retryAfter[0] : (retryAfter ?? null), input.at) : null,
    };
  } catch (err) {
    return failed(errorOf(err, input.production));
  }
}
