import { signWebhook } from '@svc/security';
import { Attempt } from '../domain/delivery';
import { addressProblem } from './url-policy';

export const DELIVERY_TIMEOUT_MS = 15_000;

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

/**
 * One delivery attempt: a fresh timestamp and signature, 15 s timeout, no redirects followed,
 * response body discarded unread. Only metadata is returned (never the body).
 */
export async function sendWebhook(input: SendInput): Promise<SendResult> {
  const ts = Math.floor(input.at.getTime() / 1000);
  const headers = {
    'content-type': 'application/json',
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
  try {
    const problem = await addressProblem(input.url, input.production);
    if (problem) return { attempt: { at, statusCode: null, durationMs: duration(), error: problem }, retryAfterMs: null };
    const res = await fetch(input.url, { method: 'POST', headers, body: input.payload, redirect: 'manual', signal: AbortSignal.timeout(DELIVERY_TIMEOUT_MS) });
    await res.body?.cancel().catch(() => undefined);
    const ok = res.status >= 200 && res.status < 300;
    return {
      attempt: { at, statusCode: res.status, durationMs: duration(), error: ok ? null : `http_${res.status}` },
      retryAfterMs: res.status === 429 || res.status === 503 ? retryAfterMs(res.headers.get('retry-after'), input.at) : null,
    };
  } catch (err) {
    const name = (err as Error)?.name;
    const error = name === 'TimeoutError' || name === 'AbortError' ? 'timeout' : 'network_error';
    return { attempt: { at, statusCode: null, durationMs: duration(), error }, retryAfterMs: null };
  }
}
