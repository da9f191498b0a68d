import { lastValueFrom, timeout } from 'rxjs';
import type { AnyClientProxy } from './bus';

export interface AskOptions {
  /** Longest wait for the reply; past it the request fails with rxjs's TimeoutError. */
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
  const request = () => lastValueFrom(bus.send<TReply>(pattern, payload).pipe(timeout(options.timeoutMs)));
  if (!options.onError) return request();
  try {
    return await request();
  } catch (err) {
    return options.onError(err);
  }
}
