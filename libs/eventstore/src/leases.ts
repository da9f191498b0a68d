import { randomUUID } from 'node:crypto';

/**
 * Leases for the jobs that must run in one process of a cluster at a time (a relay, a projection,
 * a timer scheduler): docs/scaling.md.
 *
 * A lease is held by one holder (a `Leases` instance, one per process) until it expires; its holder
 * renews it well before. Each new acquisition raises the lease's **fencing token** by one, so a
 * later holder always writes with a higher token than any earlier one. The stores a job writes to
 * check the token at the write (a Redis commit, a relay position) and refuse a lower one than they
 * have seen: a holder that lost its lease without knowing it (paused, cut off) cannot overwrite
 * its successor's work. Token 0 means "unfenced" (one process owns the stores: standalone).
 */
export interface LeaseBackend {
  /**
   * For each name: renews it when `holder` holds it, takes it when it is free or has expired (its
   * token raised by one), else leaves it. Answers the names `holder` holds afterwards, with their
   * tokens. Expiry is decided by the backend's own clock (the database's), never the caller's.
   */
  claim(names: string[], holder: string, ttlMs: number): Promise<Map<string, number>>;
  /** Ends `holder`'s leases on these names at once: another holder may take them without waiting for the expiry. */
  release(names: string[], holder: string): Promise<void>;
  close(): Promise<void>;
}

/** A job that runs only while its process holds the job's lease. */
export interface LeasedJob {
  /** This process took the lease; `token` is its fencing token (0: unfenced). */
  start(token: number): Promise<void> | void;
  /** The lease was lost (or is being released): stop the work (resolves once it has stopped). */
  stop(): Promise<void> | void;
}

export interface LeaseOptions {
  /** How long a lease lasts after each renewal (default 5000 ms). */
  ttlMs?: number;
  /** How often held leases are renewed and free ones looked for (default 1000 ms). */
  renewMs?: number;
  /** This holder's id (default: a new uuid: each process, and each restart, is a new holder). */
  holder?: string;
  /** Lease changes and failed renewals (lease names and error names only). */
  logger?: { warn(meta: Record<string, unknown>, msg: string): void; info?(meta: Record<string, unknown>, msg: string): void };
}

/** The lease timings given by the settings: renewals at least twice per ttl. */
export function checkLeaseTimings(ttlMs: number, renewMs: number): void {
  if (!Number.isSafeInteger(ttlMs) || ttlMs < 100) throw new RangeError('lease ttl must be a whole number of ms >= 100');
  if (!Number.isSafeInteger(renewMs) || renewMs < 10 || renewMs * 2 > ttlMs)
    throw new RangeError('lease renewal interval must be a whole number of ms >= 10 and at most half the ttl');
}

/** One job's lease as this process sees it. */
export interface LeaseHandle {
  readonly name: string;
  /** True while this process holds the lease (and its job runs). */
  readonly held: boolean;
  /** The fencing token of the current holding, or null when not held. */
  readonly token: number | null;
}

interface Entry extends LeaseHandle {
  held: boolean;
  token: number | null;
  job: LeasedJob;
  /** Start and stop of the job, one after the other. */
  chain: Promise<void>;
  /** Monotonic ms until which the current holding is trusted locally (a renewal not answered by then: lost). */
  validUntil: number;
  watchdog: NodeJS.Timeout | null;
}

const monotonicMs = () => performance.now();

/**
 * This process's leases: every `renewMs` one `claim` of every job's lease (held ones renewed, free
 * ones taken); a job starts when its lease is taken and stops when a claim no longer answers it or
 * when no claim succeeded within the ttl (less a margin) of the last successful one's start: by
 * then another holder may take it. The job's writes carry the token, so a holder that is late to
 * notice is refused at the write.
 */
export class Leases {
  readonly holder: string;
  readonly ttlMs: number;
  readonly renewMs: number;
  private readonly entries = new Map<string, Entry>();
  private timer: NodeJS.Timeout | null = null;
  private claiming: Promise<void> | null = null;
  private claimAgain = false;
  private closed = false;
  private paused = false;

  constructor(
    private readonly backend: LeaseBackend,
    private readonly options: LeaseOptions = {},
  ) {
    this.ttlMs = options.ttlMs ?? 5000;
    this.renewMs = options.renewMs ?? 1000;
    checkLeaseTimings(this.ttlMs, this.renewMs);
    this.holder = options.holder ?? randomUUID();
  }

  /** Time a holding is trusted locally after the claim that confirmed it was sent. */
  private get trustMs(): number {
    return this.ttlMs - Math.min(1000, Math.floor(this.ttlMs / 5));
  }

  /** Runs `job` whenever this process holds the lease `name` (contends at once). */
  run(name: string, job: LeasedJob): LeaseHandle {
    if (this.closed) throw new Error('leases are closed');
    if (this.entries.has(name)) throw new Error(`lease ${name} is already run`);
    const entry: Entry = { name, held: false, token: null, job, chain: Promise.resolve(), validUntil: 0, watchdog: null };
    this.entries.set(name, entry);
    if (!this.timer && !this.paused) {
      this.timer = setInterval(() => this.claimNow(), this.renewMs);
      this.timer.unref?.();
    }
    this.claimNow();
    return entry;
  }

  /** Claims now (coalesced with a claim under way); resolves once that claim has been applied. */
  claimNow(): Promise<void> {
    if (this.closed || this.paused) return Promise.resolve();
    if (this.claiming) {
      this.claimAgain = true;
      return this.claiming;
    }
    this.claiming = (async () => {
      do {
        this.claimAgain = false;
        await this.claimOnce();
      } while (this.claimAgain && !this.closed && !this.paused);
    })().finally(() => {
      this.claiming = null;
    });
    return this.claiming;
  }

  private async claimOnce(): Promise<void> {
    const names = [...this.entries.keys()];
    if (names.length === 0) return;
    const sentAt = monotonicMs();
    let held: Map<string, number>;
    try {
      held = await this.backend.claim(names, this.holder, this.ttlMs);
    } catch (err) {
      // Nothing known: holdings stay trusted until their watchdogs end them.
      this.options.logger?.warn({ leases: names.length, error: (err as Error)?.name ?? 'error' }, 'lease renewal failed');
      return;
    }
    if (this.closed || this.paused) return;
    for (const entry of this.entries.values()) {
      const token = held.get(entry.name);
      if (token === undefined) {
        if (entry.held) this.lose(entry, 'taken by another holder');
        continue;
      }
      if (entry.held && entry.token !== token) this.lose(entry, 'taken again with another token');
      entry.validUntil = sentAt + this.trustMs;
      this.arm(entry);
      if (!entry.held) this.take(entry, token);
    }
  }

  /** Ends the holding when no renewal confirmed it in time. */
  private arm(entry: Entry): void {
    if (entry.watchdog) clearTimeout(entry.watchdog);
    entry.watchdog = setTimeout(
      () => {
        entry.watchdog = null;
        if (entry.held && monotonicMs() >= entry.validUntil) this.lose(entry, 'not renewed within its ttl');
        else if (entry.held) this.arm(entry);
      },
      Math.max(0, entry.validUntil - monotonicMs()),
    );
    entry.watchdog.unref?.();
  }

  private take(entry: Entry, token: number): void {
    entry.held = true;
    entry.token = token;
    this.options.logger?.info?.({ lease: entry.name, token }, 'lease taken');
    entry.chain = entry.chain.then(async () => {
      if (!entry.held || entry.token !== token) return;
      try {
        await entry.job.start(token);
      } catch (err) {
        this.options.logger?.warn({ lease: entry.name, error: (err as Error)?.name ?? 'error' }, 'leased job failed to start; the lease is given up');
        this.lose(entry, 'job failed to start');
        await this.backend.release([entry.name], this.holder).catch(() => undefined);
      }
    });
  }

  private lose(entry: Entry, why: string): Promise<void> {
    if (!entry.held) return entry.chain;
    entry.held = false;
    entry.token = null;
    if (entry.watchdog) clearTimeout(entry.watchdog);
    entry.watchdog = null;
    this.options.logger?.warn({ lease: entry.name, reason: why }, 'lease lost; its job stops');
    entry.chain = entry.chain.then(async () => {
      try {
        await entry.job.stop();
      } catch (err) {
        this.options.logger?.warn({ lease: entry.name, error: (err as Error)?.name ?? 'error' }, 'leased job failed to stop');
      }
    });
    return entry.chain;
  }

  /** Resolves once every job start or stop decided so far has run (start-up waits for its first claim's jobs). */
  async settled(): Promise<void> {
    await Promise.all([...this.entries.values()].map((e) => e.chain));
  }

  /** The jobs whose leases this process holds now (names). */
  heldNames(): string[] {
    return [...this.entries.values()].filter((e) => e.held).map((e) => e.name);
  }

  /**
   * Tests only: stops renewing and claiming without stopping the jobs or releasing anything, as a
   * process that froze (or was cut off) would. The watchdogs still end the holdings locally
   * unless `watchdogs: false` (a holder that does not even notice: its writes must be fenced).
   */
  pauseForTest(options: { watchdogs?: boolean } = {}): void {
    this.paused = true;
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    if (options.watchdogs === false) {
      for (const e of this.entries.values()) {
        if (e.watchdog) clearTimeout(e.watchdog);
        e.watchdog = null;
      }
    }
  }

  /** Stops every job, releases the leases held (so others take them at once) and closes the backend. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    await this.claiming?.catch(() => undefined);
    const held = [...this.entries.values()].filter((e) => e.held).map((e) => e.name);
    await Promise.all([...this.entries.values()].map((e) => this.lose(e, 'closing')));
    await Promise.all([...this.entries.values()].map((e) => e.chain));
    if (held.length)
      await this.backend
        .release(held, this.holder)
        .catch((err) => this.options.logger?.warn({ error: (err as Error)?.name ?? 'error' }, 'lease release failed'));
    await this.backend.close();
  }
}

/**
 * Leases inside one process (standalone, tests): a lease is free or held by one holder until it
 * expires (real time). Tokens are always 0 (unfenced): one process owns its stores.
 */
export class InProcessLeaseBackend implements LeaseBackend {
  private readonly leases = new Map<string, { holder: string; expiresAt: number }>();

  async claim(names: string[], holder: string, ttlMs: number): Promise<Map<string, number>> {
    const now = monotonicMs();
    const out = new Map<string, number>();
    for (const name of names) {
      const l = this.leases.get(name);
      if (!l || l.holder === holder || l.expiresAt <= now) {
        this.leases.set(name, { holder, expiresAt: now + ttlMs });
        out.set(name, 0);
      }
    }
    return out;
  }

  async release(names: string[], holder: string): Promise<void> {
    for (const name of names) if (this.leases.get(name)?.holder === holder) this.leases.delete(name);
  }

  async close(): Promise<void> {}
}

/**
 * Where a relay keeps its position (the last event it published, with everything before it),
 * durable next to the event store: a read-store loss does not republish history. `save` carries
 * the writer's fencing token and is refused (false) when a higher token was stored.
 */
export interface PositionStore {
  /** The stored position of `name`, or null when none was ever stored here. */
  get(name: string): Promise<number | null>;
  /** Stores `position` unless a higher fence than `fence` is stored (0: unfenced, never refused). */
  save(name: string, position: number, fence: number): Promise<boolean>;
}
