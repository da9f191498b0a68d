import { catchError, lastValueFrom, throwError, timeout, TimeoutError } from 'rxjs';
import type { AnyClientProxy } from './bus';

/**
 * No reply to a bus request within its wait: the other app is slow, or the reply was lost (a
 * broker away when it was produced). The request may have been carried out; sending it again is
 * safe (queries, and commands idempotent by their id). The HTTP edge answers it 503 UNAVAILABLE
 * with Retry-After.
 */
export class BusReplyTimeoutError extends Error {
  override readonly name = 'BusReplyTimeoutError';
  readonly status = 503;
  readonly code = 'UNAVAILABLE';

  constructor(
    readonly pattern: string,
    readonly timeoutMs: number,
  ) {
    super(`no reply to bus request ${pattern} within ${timeoutMs} ms`);
  }
}

export interface AskOptions {
  /** Longest wait for the reply; past it the request fails with BusReplyTimeoutError. */
  timeoutMs: number;
}

export interface AskOptionsWithFallback<TFallback> extends AskOptions {
  /**
   * What a failed request becomes: a timeout, no handler for the pattern, a refusal from the
   * handler (its BusError), a BusUnavailableError, an empty reply stream. Return a fallback, or
   * throw the caller's own error (e.g. a 503 UNAVAILABLE ApiError).
   */
  onError: (err: unknown) => TFallback;
}

/**
 * One request/reply over the bus: sends `payload` on `pattern` and resolves with the first reply
 * within `timeoutMs`. Without `onError` a failure rejects with the error as the bus gave it; with
 * it, the failure is what `onError` returns or throws.
 */
export function ask<TReply>(bus: AnyClientProxy, pattern: string, payload: unknown, options: AskOptions): Promise<TReply>;
export function ask<TReply, TFallback>(
  bus: AnyClientProxy,
  pattern: string,
  payload: unknown,
  options: AskOptionsWithFallback<TFallback>,
): Promise<TReply | TFallback>;
export async function ask<TReply, TFallback>(
  bus: AnyClientProxy,
  pattern: string,
  payload: unknown,
  options: AskOptions & Partial<AskOptionsWithFallback<TFallback>>,
): Promise<TReply | TFallback> {
  const request = () =>
    lastValueFrom(
      bus.send<TReply>(pattern, payload).pipe(
        timeout(options.timeoutMs),
        catchError((err: unknown) => throwError(() => (err instanceof TimeoutError ? new BusReplyTimeoutError(pattern, options.timeoutMs) : err))),
      ),
    );
  if (!options.onError) return request();
  try {
    return await request();
  } catch (err) {
    return options.onError(err);
  }
}
