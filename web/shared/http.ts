/**
 * Calls to the service's own API from the pages. No cookies, no referrer, nothing cached.
 *
 * Retries: a 429, a 503, or a 409 that carries Retry-After (a message still being answered) is
 * sent again after the Retry-After the service gave (capped); a network failure is sent again
 * after a short backoff with jitter, but only for a request that is safe to repeat (a GET, or a
 * write with an Idempotency-Key: the same key on every attempt, so the service answers the first
 * one again rather than doing the work twice).
 */

export interface Answer<T = unknown> {
  /** 0 when no answer came at all (network failure). */
  status: number;
  body: T | null;
  /** The `code` of an error body. */
  code: string | null;
}

export interface CallOptions {
  method?: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';
  body?: unknown;
  /** Bearer token (a widget session). */
  token?: string;
  /** Sent as Idempotency-Key on every attempt. */
  idempotencyKey?: string;
  /** Most attempts in all (default 4). */
  attempts?: number;
  /** Longest single wait between attempts, in seconds (default 20). */
  maxWaitS?: number;
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** Seconds from a Retry-After header (whole seconds or an HTTP date), or null. */
export function retryAfterSeconds(value: string | null): number | null {
  if (value === null || value.trim() === '') return null;
  if (/^\d+$/.test(value.trim())) return Number(value.trim());
  const at = Date.parse(value);
  return Number.isNaN(at) ? null : Math.max(0, Math.ceil((at - Date.now()) / 1000));
}

/** A random uuid for Idempotency-Key (crypto.randomUUID needs a secure context; getRandomValues does not). */
export function newKey(): string {
  const c = globalThis.crypto as unknown as { randomUUID?: () => string; getRandomValues(a: Uint8Array): Uint8Array };
  if (typeof c.randomUUID === 'function') return c.randomUUID();
  const b = c.getRandomValues(new Uint8Array(16));
  b[6] = (b[6] & 0x0f) | 0x40;
  b[8] = (b[8] & 0x3f) | 0x80;
  const h = Array.from(b, (x: number) => x.toString(16).padStart(2, '0')).join('');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}

export async function call<T = unknown>(url: string, options: CallOptions = {}): Promise<Answer<T>> {
  const method = options.method ?? (options.body === undefined ? 'GET' : 'POST');
  const attempts = options.attempts ?? 4;
  const maxWaitS = options.maxWaitS ?? 20;
  const repeatable = method === 'GET' || options.idempotencyKey !== undefined;
  const headers: Record<string, string> = { accept: 'application/json' };
  if (options.body !== undefined) headers['content-type'] = 'application/json';
  if (options.token) headers.authorization = `Bearer ${options.token}`;
  if (options.idempotencyKey) headers['idempotency-key'] = options.idempotencyKey;
  let last: Answer<T> = { status: 0, body: null, code: null };
  for (let attempt = 1; attempt <= attempts; attempt++) {
    let res: Response;
    try {
      res = await fetch(url, {
        method,
        headers,
        body: options.body === undefined ? undefined : JSON.stringify(options.body),
        credentials: 'omit',
        cache: 'no-store',
        referrerPolicy: 'no-referrer',
        mode: 'cors',
      } as RequestInit);
    } catch {
      last = { status: 0, body: null, code: null };
      if (!repeatable || attempt === attempts) return last;
      await sleep(Math.min(maxWaitS * 1000, 500 * 2 ** (attempt - 1)) * (0.8 + Math.random() * 0.4));
      continue;
    }
    let body: unknown = null;
    try {
      const text = await res.text();
      body = text ? JSON.parse(text) : null;
    } catch {
      body = null;
    }
    const code = body && typeof body === 'object' && typeof (body as { code?: unknown }).code === 'string' ? (body as { code: string }).code : null;
    last = { status: res.status, body: body as T, code };
    const wait = retryAfterSeconds(res.headers.get('retry-after'));
    const retryable = res.status === 429 || res.status === 503 || (res.status === 409 && wait !== null);
    if (!retryable || attempt === attempts) return last;
    await sleep(Math.min(maxWaitS, wait ?? 1) * 1000);
  }
  return last;
}
