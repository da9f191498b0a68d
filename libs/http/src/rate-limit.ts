import { Inject, Injectable } from '@nestjs/common';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { WALL_CLOCK, WallClock } from '@svc/clock';
import { ReadStore, TokenBucketLimit, TokenTake, takeToken } from '@svc/read-store';
import { KEYRING, Keyring } from '@svc/security';
import { ApiError } from './errors';
import { sendError } from './filter';
import { getLogger } from './logger';

/**
 * Rate limits (docs/decisions.md "Rate limits"): a token bucket per API key, per staff subject, and
 * per client address on the widget and check-in routes. Over it, 429 `RATE_LIMITED` with
 * `Retry-After` in whole seconds (at least 1).
 */
export type RateLimitKind = 'apiKey' | 'staff' | 'address';

export interface RateLimitSettings {
  /** False with `SVC_RATE_LIMITS=off` (load tests): nothing is counted. */
  enabled: boolean;
  apiKey: TokenBucketLimit;
  staff: TokenBucketLimit;
  address: TokenBucketLimit;
}

/**
 * The defaults: well above what an ordinary integration sends (decisions: at least 100 a second
 * per API key and staff subject, 20 per client address, bursts of at least 5 seconds' worth).
 */
export const RATE_LIMIT_DEFAULTS: RateLimitSettings = {
  enabled: true,
  apiKey: { ratePerS: 200, burst: 2000 },
  staff: { ratePerS: 100, burst: 1000 },
  address: { ratePerS: 50, burst: 500 },
};

export const RATE_LIMIT_SETTINGS = Symbol('RATE_LIMIT_SETTINGS');
export const TOKEN_BUCKETS = Symbol('TOKEN_BUCKETS');

/** Where the buckets live. A synchronous answer costs the request no promise. */
export interface TokenBuckets {
  /** True when the bucket names never leave this process's memory (then they need no hashing). */
  readonly inProcess?: boolean;
  take(bucket: string, limit: TokenBucketLimit, nowMs: number): TokenTake | Promise<TokenTake>;
}

/**
 * Buckets in this process's memory: for a process that is the only one serving its read store
 * (standalone), where no other process could share them. No I/O on the request's path. At most
 * `maxBuckets` are kept: past that, the full ones (which are the same as absent) are dropped, and
 * if a flood of distinct callers still leaves too many, the oldest entries go (such a caller then
 * starts again from a full bucket).
 */
export class MemoryTokenBuckets implements TokenBuckets {
  readonly inProcess = true;
  private readonly tats = new Map<string, number>();
  constructor(private readonly maxBuckets = 100_000) {}

  take(bucket: string, limit: TokenBucketLimit, nowMs: number): TokenTake {
    const taken = takeToken(this.tats.get(bucket) ?? null, limit, nowMs);
    if (!taken.allowed) return { allowed: false, retryAfterMs: taken.retryAfterMs };
    this.tats.set(bucket, taken.tat);
    if (this.tats.size > this.maxBuckets) this.prune(nowMs);
    return { allowed: true, retryAfterMs: 0 };
  }

  /** How many buckets are held (tests). */
  get size(): number {
    return this.tats.size;
  }

  private prune(nowMs: number): void {
    for (const [bucket, tat] of this.tats) if (tat <= nowMs) this.tats.delete(bucket);
    // Leave room, so that pruning runs once per tenth of the cap at most.
    const keep = Math.floor(this.maxBuckets * 0.9);
    for (const bucket of this.tats.keys()) {
      if (this.tats.size <= keep) break;
      this.tats.delete(bucket);
    }
  }
}

/** Buckets in the read store (`ReadStore.takeToken`): shared by every process on it (Redis; a SQLite file several processes open). */
export class ReadStoreTokenBuckets implements TokenBuckets {
  constructor(private readonly store: ReadStore & Required<Pick<ReadStore, 'takeToken'>>) {}
  take(bucket: string, limit: TokenBucketLimit, nowMs: number): Promise<TokenTake> {
    return this.store.takeToken(bucket, limit, nowMs);
  }
}

/** Shortest gap between two warnings about a failing bucket store (one per outage, not one per request). */
const STORE_WARNING_GAP_MS = 10_000;

/**
 * Counts a request against its caller's bucket. Real time (WALL_CLOCK), never the service clock:
 * the buckets protect the process, and moving the dev clock must neither refill nor drain them.
 * Bucket names hold no credential: `k:<API key id>`, `s:<staff sub>`, `a:<client address>`, the
 * sub and the address as a keyed hash wherever the buckets leave the process (a read store), so no
 * caller identity is stored in clear; in memory they stay as they are (a hash would cost a few
 * microseconds a request, and they are never written anywhere).
 */
@Injectable()
export class RateLimiter {
  private lastStoreWarning = 0;

  constructor(
    @Inject(RATE_LIMIT_SETTINGS) readonly settings: RateLimitSettings,
    @Inject(TOKEN_BUCKETS) private readonly buckets: TokenBuckets,
    @Inject(WALL_CLOCK) private readonly clock: WallClock,
    @Inject(KEYRING) private readonly keyring: Keyring,
  ) {}

  /**
   * Nothing when the request may go on (synchronously with in-memory buckets); else throws (or
   * rejects with) 429 `RATE_LIMITED`. `id`: the API key's id, the staff `sub`, the client address.
   * A bucket store that fails lets the request through (logged): the limit protects the service,
   * and an outage of its store must not refuse every caller.
   */
  check(kind: RateLimitKind, id: string): void | Promise<void> {
    if (!this.settings.enabled) return;
    const nowMs = this.clock.now().getTime();
    let taken: TokenTake | Promise<TokenTake>;
    try {
      taken = this.buckets.take(this.bucketName(kind, id), this.settings[kind], nowMs);
    } catch (err) {
      return this.storeFailed(err);
    }
    if (!(taken instanceof Promise)) return refuseUnlessAllowed(taken);
    return taken.then(refuseUnlessAllowed, (err: unknown) => this.storeFailed(err));
  }

  private bucketName(kind: RateLimitKind, id: string): string {
    if (kind === 'apiKey') return `k:${id}`;
    const prefix = kind === 'staff' ? 's:' : 'a:';
    return this.buckets.inProcess ? prefix + id : prefix + this.keyring.purposeHash('rate-limit', 'global', id).slice(0, 32);
  }

  private storeFailed(err: unknown): void {
    const now = this.clock.now().getTime();
    if (now - this.lastStoreWarning < STORE_WARNING_GAP_MS) return;
    this.lastStoreWarning = now;
    getLogger().warn({ error: err instanceof Error ? err.name : typeof err }, 'rate-limit buckets unavailable; requests are let through meanwhile');
  }
}

function refuseUnlessAllowed(taken: TokenTake): void {
  if (taken.allowed) return;
  const seconds = Math.max(1, Math.ceil(taken.retryAfterMs / 1000));
  throw new ApiError(429, 'RATE_LIMITED', `Too many requests; retry after ${seconds} s (Retry-After)`, undefined, { 'retry-after': String(seconds) });
}

/** Route prefixes (with the app's `/api` prefix) counted per client address: the widget's and the check-in pages. */
export const ADDRESS_LIMITED_ROUTES = ['/api/widget/v1/', '/api/check-ins/'] as const;

/**
 * The Fastify `onRequest` hook of the per-address limit: for a route under ADDRESS_LIMITED_ROUTES,
 * the client's address (`req.ip`, which follows the app's trusted proxies) takes a token before
 * anything else of the request is done (its body is not even read); over the limit, the 429 in the
 * form of docs/decisions.md, "Errors and the HTTP edge". Other routes pass untouched (API-key and staff routes count per credential).
 */
export function addressRateLimitHook(limiter: RateLimiter) {
  return (req: FastifyRequest, reply: FastifyReply, done: (err?: Error) => void): void => {
    if (!limiter.settings.enabled) return done();
    const route = req.routeOptions?.url;
    if (route === undefined || !ADDRESS_LIMITED_ROUTES.some((p) => route.startsWith(p))) return done();
    let pending: void | Promise<void>;
    try {
      pending = limiter.check('address', req.ip);
    } catch (err) {
      sendError(err, reply);
      return;
    }
    if (!pending) return done();
    pending.then(
      () => done(),
      (err: unknown) => sendError(err, reply),
    );
  };
}
