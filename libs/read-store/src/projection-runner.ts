import type { EventStore, Leases } from '@svc/eventstore';
import { Waiter } from './projection-checkpoint';
import { ProjectionWorker } from './projection-worker';
import { Projection, ReadStore, ReadStoreLogger, defaultReadStoreLogger, errorName } from './types';

export interface ProjectionRunnerOptions {
  eventStore: EventStore;
  readStore: ReadStore;
  /** Metadata-only warnings (projection, position, event type, error name). */
  logger?: ReadStoreLogger;
  /** First delay before re-applying an event whose apply threw (default 100 ms, doubling). */
  retryDelayMs?: number;
  /** Cap of the retry delay (default 5000 ms). */
  maxRetryDelayMs?: number;
  /** Most events folded into one commit (default 200). */
  maxBatchEvents?: number;
  /**
   * How often a checkpoint advanced only by events that wrote nothing is stored (default 1000 ms).
   * Losing it costs nothing but re-reading those events: they wrote nothing against the state
   * they saw, and that state is still what the store holds.
   */
  checkpointIntervalMs?: number;
  /**
   * With a store that `canLoseData`: how often (real time) each projection checks that its stored
   * checkpoint is still there (default 2000 ms). Its commits check it too; this finds a loss while
   * the projection has nothing to commit.
   */
  lossCheckIntervalMs?: number;
  /**
   * Replicas (docs/scaling.md): each projection runs only in the replica holding its lease
   * (`projection:<name>`), committing with the lease's fencing token; the others follow the
   * positions the holder shares through the store (`ReadStore.publishPositions`) and, while
   * something waits, poll its stored checkpoint. Absent: every projection runs here, unfenced.
   */
  leases?: Leases;
  /** Followers with waiters read the stored checkpoints this often (default 250 ms). */
  followPollMs?: number;
}

/** waitFor gave up: names the projections still behind (no event data). */
export class ProjectionWaitTimeoutError extends Error {
  constructor(
    readonly position: number,
    readonly lagging: { name: string; position: number }[],
    readonly timeoutMs: number,
  ) {
    super(`read models not at position ${position} after ${timeoutMs} ms: ` + lagging.map((l) => `${l.name}@${l.position}`).join(', '));
    this.name = 'ProjectionWaitTimeoutError';
  }
}

/**
 * Runs projections of the event log into a ReadStore. Each registered projection follows the
 * log from its own stored checkpoint; its writes and checkpoint are committed atomically, so a
 * restart continues exactly where the store says it stopped. `waitFor` gives read-your-writes
 * (architecture rule 5) from an in-memory waiter list. With `leases`, a projection runs only in
 * the replica holding its lease, and the others' waiters follow the position it shares
 * (docs/scaling.md).
 */
export class ProjectionRunner {
  private readonly workers = new Map<string, ProjectionWorker>();
  private readonly logger: ReadStoreLogger;
  private started = false;
  private startTasks: Promise<void>[] = [];
  private unwatch: (() => void) | null = null;
  private pollTimer: NodeJS.Timeout | null = null;
  /** Visible positions of the projections led here, not yet shared. */
  private toPublish: Record<string, number> | null = null;
  private unwatchConnection: (() => void) | null = null;
  /** The store's connection dropped and its read models are not checked again yet (`available` false). */
  private suspect = false;
  /** Connection drops seen: a check after one drop is void once another has happened. */
  private drops = 0;

  constructor(private readonly options: ProjectionRunnerOptions) {
    this.logger = options.logger ?? defaultReadStoreLogger;
  }

  /** Adds a projection; registered after start() it starts at once. */
  register(projection: Projection): this {
    if (!projection.name) throw new TypeError('projection needs a name');
    if (this.workers.has(projection.name)) throw new Error(`projection ${projection.name} is already registered`);
    const worker = new ProjectionWorker(projection, this.options, this.logger);
    this.workers.set(projection.name, worker);
    if (this.started) {
      const task = this.options.leases ? this.contend(worker) : worker.start();
      this.startTasks.push(task);
      task.catch((err) => this.logger.warn({ projection: projection.name, error: errorName(err) }, 'projection start failed'));
    }
    return this;
  }

  get projectionNames(): string[] {
    return [...this.workers.keys()];
  }

  /** Position up to which the projection's writes are visible in the store. */
  position(name: string): number {
    return this.worker(name).visible;
  }

  /**
   * Whether the read models can be read now: false from the moment the store's connection drops
   * until each projection has checked, once it answers again, that its model is still there, and
   * while a projection rebuilds a model the store lost (until the rebuild reaches what the model
   * had reached). Reads meanwhile would answer from an empty or partial model: wrong data, where
   * the service answers 503 instead (libs/platform read-model-gate.ts, docs/scaling.md).
   */
  get available(): boolean {
    if (this.suspect) return false;
    for (const w of this.workers.values()) if (w.checkpoint.behind) return false;
    return true;
  }

  /** Changes whenever `available` may have been false since it was last read: a drop, a loss. */
  get readEpoch(): number {
    let n = this.drops;
    for (const w of this.workers.values()) n += w.checkpoint.losses;
    return n;
  }

  private connectionDown(): void {
    this.drops++;
    this.suspect = true;
  }

  /** The store answers again: every projection checks its model (retried until a check gets through). */
  private async connectionUp(): Promise<void> {
    const drops = this.drops;
    let delay = this.options.retryDelayMs ?? 100;
    while (this.started && drops === this.drops) {
      try {
        await Promise.all([...this.workers.values()].map((w) => w.verify()));
        if (drops === this.drops) this.suspect = false;
        return;
      } catch (err) {
        this.logger.warn({ error: errorName(err) }, 'read models not checked after the store came back; retrying');
        await new Promise((r) => setTimeout(r, delay).unref?.());
        delay = Math.min(delay * 2, this.options.maxRetryDelayMs ?? 5000);
      }
    }
  }

  async start(): Promise<void> {
    if (this.started) return;
    this.started = true;
    this.unwatchConnection = this.options.readStore.watchConnection?.((state) => (state === 'down' ? this.connectionDown() : void this.connectionUp())) ?? null;
    if (this.options.leases) {
      const store = this.options.readStore;
      this.unwatch =
        store.watchPositions?.((positions) => {
          for (const [name, position] of Object.entries(positions)) if (typeof position === 'number') this.workers.get(name)?.observe(position);
        }) ?? null;
      this.pollTimer = setInterval(() => void this.pollFollowed(), this.options.followPollMs ?? 250);
      this.pollTimer.unref?.();
    }
    this.startTasks = [...this.workers.values()].map((w) => (this.options.leases ? this.contend(w) : w.start()));
    await Promise.all(this.startTasks);
  }

  /**
   * Starts following the stored checkpoint (visible from the start, so that this replica serves
   * what the store holds) and contends for the projection's lease; leads while it holds it.
   */
  private async contend(worker: ProjectionWorker): Promise<void> {
    const leases = this.options.leases as Leases;
    const stored = await this.options.readStore.getCheckpoint(worker.name);
    if (stored > 0) worker.observe(stored);
    worker.onFenced = () => void worker.follow();
    // A rebuild (the store lost the read model) is shared at once: followers' writes wait for it too.
    worker.onRebuild = () => {
      if (this.toPublish) delete this.toPublish[worker.name];
      void this.options.readStore
        .publishPositions?.({ [worker.name]: 0 })
        .catch((err) => this.logger.warn({ error: errorName(err) }, 'projection positions not shared'));
    };
    worker.checkpoint.onVisible = (position) => {
      if (!worker.leading || !this.options.readStore.publishPositions) return;
      if (!this.toPublish) {
        this.toPublish = {};
        setImmediate(() => this.publish());
      }
      this.toPublish[worker.name] = position;
    };
    leases.run(`projection:${worker.name}`, {
      start: (token) => (this.started ? worker.lead(token) : undefined),
      stop: () => worker.follow(),
    });
  }

  /** Shares the positions led here (one message per event-loop turn at most). */
  private publish(): void {
    const positions = this.toPublish;
    this.toPublish = null;
    if (!positions) return;
    this.options.readStore.publishPositions?.(positions).catch((err) => this.logger.warn({ error: errorName(err) }, 'projection positions not shared'));
  }

  /**
   * Followers that something waits for, or whose model is behind (the holder rebuilds it), read
   * their stored checkpoints (in case a shared position was missed).
   */
  private async pollFollowed(): Promise<void> {
    for (const w of this.workers.values()) {
      if (w.leading || (w.waiters.size === 0 && !w.checkpoint.behind)) continue;
      try {
        const stored = await this.options.readStore.getCheckpoint(w.name);
        if (stored > 0) w.observe(stored);
      } catch (err) {
        this.logger.warn({ projection: w.name, error: errorName(err) }, 'projection checkpoint read failed');
      }
    }
  }

  /** Names of the projections this replica runs now (all of them without leases). */
  get leading(): string[] {
    return [...this.workers.values()].filter((w) => w.leading).map((w) => w.name);
  }

  async stop(): Promise<void> {
    if (!this.started) return;
    this.started = false;
    this.unwatch?.();
    this.unwatch = null;
    this.unwatchConnection?.();
    this.unwatchConnection = null;
    if (this.pollTimer) clearInterval(this.pollTimer);
    this.pollTimer = null;
    await Promise.allSettled(this.startTasks);
    await Promise.all([...this.workers.values()].map((w) => w.stop()));
    const stopped = new Error('projection runner stopped');
    for (const w of this.workers.values()) {
      for (const waiter of [...w.waiters]) this.settle(waiter, stopped);
    }
  }

  /**
   * Resolves once every named projection has applied (and made visible) everything up to
   * `position`; rejects with ProjectionWaitTimeoutError after `timeoutMs`.
   */
  waitFor(names: string[], position: number, timeoutMs = 5000): Promise<void> {
    let workers: ProjectionWorker[];
    try {
      workers = names.map((n) => this.worker(n));
    } catch (err) {
      return Promise.reject(err);
    }
    const behind = workers.filter((w) => w.visible < position);
    if (behind.length === 0) return Promise.resolve();
    return new Promise<void>((resolve, reject) => {
      const waiter: Waiter = { position, remaining: behind.length, resolve, reject, timer: null, workers: behind };
      for (const w of behind) w.waiters.add(waiter);
      waiter.timer = setTimeout(() => {
        const lagging = workers.filter((w) => w.visible < position).map((w) => ({ name: w.name, position: w.visible }));
        this.settle(waiter, new ProjectionWaitTimeoutError(position, lagging, timeoutMs));
      }, timeoutMs);
    });
  }

  /**
   * Resolves once every projection has reached `position` (at start-up: the log's head, so that
   * nothing is served from a read model still being built). Never gives up: every `reportEveryMs`
   * it logs which projections are still behind (names and positions only) and keeps waiting.
   */
  async caughtUp(position: number, reportEveryMs = 10_000): Promise<void> {
    for (;;) {
      try {
        return await this.waitFor(this.projectionNames, position, reportEveryMs);
      } catch (err) {
        if (!(err instanceof ProjectionWaitTimeoutError) || !this.started) throw err;
        this.logger.warn({ position, lagging: err.lagging }, 'read models still catching up with the event log');
      }
    }
  }

  private settle(waiter: Waiter, err: Error): void {
    if (waiter.timer) clearTimeout(waiter.timer);
    waiter.timer = null;
    for (const w of waiter.workers) w.waiters.delete(waiter);
    waiter.reject(err);
  }

  private worker(name: string): ProjectionWorker {
    const w = this.workers.get(name);
    if (!w) throw new Error(`unknown projection ${name}`);
    return w;
  }
}
