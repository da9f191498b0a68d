import { performance } from 'node:perf_hooks';
import type { UpstreamAnnouncement } from './upstreams';

/**
 * The gateway's view of each app's replicas (docs/decisions.md, "Replicas"): every replica
 * announces itself (app + instance id, ./upstreams.ts) every few seconds; the gateway sends each
 * request to the live replica with the fewest requests in flight (ties in turn), and a replica
 * whose connection failed is "down" for `downMs`: it is tried again only once no other replica
 * is left for that request, or after the pause.
 *
 * Liveness is seen by the gateway on its own monotonic clock (no wall-clock comparison across
 * machines): a replica is fresh while its announcement changed within `staleMs`. A stale replica
 * (it stopped announcing: died, or scaled away) is tried only after every fresh one; one stale
 * for `forgetMs` is dropped once its app has another replica. An app's last replica is never
 * dropped, so that its routes answer 503 while it is down, not 404.
 */
export interface ReplicaPoolOptions {
  /** No new announcement within this: the replica is stale. Default 10 s (five missed beats). */
  staleMs?: number;
  /** A replica whose connection failed is tried last for this long. Default 3 s. */
  downMs?: number;
  /** A stale replica is forgotten after this (when its app has another). Default 10 min. */
  forgetMs?: number;
  /** Monotonic milliseconds (tests pass their own). */
  now?: () => number;
}

export interface Replica {
  readonly app: string;
  readonly instance: string;
  origin: string;
  /** Requests sent to it whose answer has not ended. */
  inFlight: number;
  /** Until then (monotonic ms) it is tried last: its connection failed. */
  downUntil: number;
  /** When the gateway last saw its announcement change (monotonic ms). */
  lastBeat: number;
  announcedAt: string;
}

export const REPLICA_DEFAULTS = { staleMs: 10_000, downMs: 3_000, forgetMs: 600_000 } as const;

export class ReplicaPool {
  private readonly apps = new Map<string, Map<string, Replica>>();
  /** Round-robin start per app, so that replicas with equal load take turns. */
  private readonly turn = new Map<string, number>();
  private readonly staleMs: number;
  private readonly downMs: number;
  private readonly forgetMs: number;
  private readonly now: () => number;

  constructor(options: ReplicaPoolOptions = {}) {
    this.staleMs = options.staleMs ?? REPLICA_DEFAULTS.staleMs;
    this.downMs = options.downMs ?? REPLICA_DEFAULTS.downMs;
    this.forgetMs = options.forgetMs ?? REPLICA_DEFAULTS.forgetMs;
    this.now = options.now ?? (() => performance.now());
  }

  /**
   * Takes the announcements read from the store. A replica seen for the first time counts as
   * fresh; one whose `announcedAt` changed has beaten. Returns the keys (`app/instance`) of
   * replicas forgotten now (the caller may delete their announcements).
   */
  update(announcements: Iterable<UpstreamAnnouncement>): string[] {
    const now = this.now();
    for (const a of announcements) {
      const instance = a.instance ?? a.app;
      let replicas = this.apps.get(a.app);
      if (!replicas) this.apps.set(a.app, (replicas = new Map()));
      const known = replicas.get(instance);
      if (!known) {
        replicas.set(instance, { app: a.app, instance, origin: a.origin, inFlight: 0, downUntil: 0, lastBeat: now, announcedAt: a.announcedAt });
        continue;
      }
      if (known.announcedAt !== a.announcedAt || known.origin !== a.origin) {
        known.lastBeat = now;
        known.announcedAt = a.announcedAt;
        if (known.origin !== a.origin) {
          known.origin = a.origin;
          known.downUntil = 0;
        }
      }
    }
    const forgotten: string[] = [];
    for (const [app, replicas] of this.apps) {
      for (const r of replicas.values()) {
        if (replicas.size > 1 && now - r.lastBeat > this.forgetMs) {
          replicas.delete(r.instance);
          forgotten.push(`${app}/${r.instance}`);
        }
      }
    }
    return forgotten;
  }

  /** Every replica of every app (the dev clock is pushed to each). */
  all(): Replica[] {
    return [...this.apps.values()].flatMap((m) => [...m.values()]);
  }

  /** The replicas of `app` announcing now (fresh). */
  live(app: string): Replica[] {
    const now = this.now();
    return [...(this.apps.get(app)?.values() ?? [])].filter((r) => now - r.lastBeat <= this.staleMs);
  }

  /**
   * The replica of `app` to send a request to, none of `tried`: fresh and up before stale or
   * down, then the fewest in flight, ties in turn. Null when every replica was tried.
   */
  pick(app: string, tried: ReadonlySet<string>): Replica | null {
    const replicas = this.apps.get(app);
    if (!replicas) return null;
    const now = this.now();
    const list = [...replicas.values()];
    const start = (this.turn.get(app) ?? 0) % Math.max(1, list.length);
    this.turn.set(app, start + 1);
    // Rank: 0 fresh and up, 1 stale and up, 2 down (by when it comes back up).
    const rank = (r: Replica) => (r.downUntil > now ? 2 : now - r.lastBeat > this.staleMs ? 1 : 0);
    let best: Replica | null = null;
    for (let i = 0; i < list.length; i++) {
      const r = list[(start + i) % list.length];
      if (tried.has(r.instance)) continue;
      if (!best) {
        best = r;
        continue;
      }
      const dr = rank(r) - rank(best);
      if (dr < 0 || (dr === 0 && (rank(r) === 2 ? r.downUntil < best.downUntil : r.inFlight < best.inFlight))) best = r;
    }
    return best;
  }

  /** The replica's connection failed: tried last for a while. */
  markDown(replica: Replica): void {
    replica.downUntil = this.now() + this.downMs;
  }
}
