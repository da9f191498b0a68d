/**
 * A token bucket: it holds at most `burst` tokens and gains `ratePerS` a second; a request takes
 * one, and is refused while the bucket is empty.
 *
 * Kept in its GCRA form (generic cell rate algorithm, the same bucket written as one number): the
 * "theoretical arrival time" `tat`, the moment the bucket is full again. A bucket that has no stored
 * `tat`, or one in the past, is full, so a bucket can be forgotten once its `tat` has passed (Redis
 * lets the key expire then; the other stores sweep such entries). Times are milliseconds of real
 * time; the caller passes `nowMs`.
 */
export interface TokenBucketLimit {
  /** Tokens gained per second (> 0). */
  ratePerS: number;
  /** Most tokens held (>= 1): how many requests may come at once after a quiet spell. */
  burst: number;
}

export interface TokenTake {
  allowed: boolean;
  /** When refused: milliseconds until a token is there (> 0); 0 when allowed. */
  retryAfterMs: number;
}

/** One take from the bucket whose stored `tat` is given (null: none stored, a full bucket). */
export function takeToken(tat: number | null, limit: TokenBucketLimit, nowMs: number): TokenTake & { tat: number } {
  const interval = 1000 / limit.ratePerS;
  const start = tat === null || tat < nowMs ? nowMs : tat;
  const next = start + interval;
  const earliest = next - limit.burst * interval;
  if (nowMs < earliest) return { allowed: false, retryAfterMs: earliest - nowMs, tat: start };
  return { allowed: true, retryAfterMs: 0, tat: next };
}

/** Checks a limit before it reaches a store (a bad one would refuse or admit everything). */
export function validateTokenBucketLimit(limit: TokenBucketLimit): void {
  if (!(Number.isFinite(limit.ratePerS) && limit.ratePerS > 0)) throw new RangeError('token bucket ratePerS must be a number > 0');
  if (!(Number.isFinite(limit.burst) && limit.burst >= 1)) throw new RangeError('token bucket burst must be a number >= 1');
}
