import type { EventStore, RecordedEvent, Subscription } from '@svc/eventstore';
import {
  Projection,
  ProjectionTx,
  PutOptions,
  ReadEntry,
  ReadStore,
  ReadStoreLogger,
  WriteOp,
  defaultReadStoreLogger,
  errorName,
  validateOps,
} from './types';

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
}

/** waitFor gave up: names the projections still behind (no event data). */
export class ProjectionWaitTimeoutError extends Error {
  constructor(
    readonly position: number,
    readonly lagging: { name: string; position: number }[],
    readonly timeoutMs: number,
  ) {
    super(
      `read models not at position ${position} after ${timeoutMs} ms: ` +
        lagging.map((l) => `${l.name}@${l.position}`).join(', '),
    );
    this.name = 'ProjectionWaitTimeoutError';
  }
}

interface Waiter {
  position: number;
  remaining: number;
  resolve(): void;
  reject(err: Error): void;
  timer: NodeJS.Timeout | null;
  workers: ProjectionWorker[];
}

const docId = (collection: string, key: string) => `${collection}\u0000${key}`;

/** Orders keys the way SQLite (BINARY on UTF-8) and Redis (bytes) do: by code point. */
function compareKeys(a: string, b: string): number {
  if (a === b) return 0;
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; ) {
    const ca = a.codePointAt(i) as number;
    const cb = b.codePointAt(i) as number;
    if (ca !== cb) return ca < cb ? -1 : 1;
    i += ca > 0xffff ? 2 : 1;
  }
  return a.length - b.length;
}

class Cancelled extends Error {}

const DONE: Promise<void> = Promise.resolve();

/**
 * One projection's loop: its own subscription from its own checkpoint, events applied one at a
 * time in log order, writes of consecutive events batched in memory and committed together with
 * the checkpoint when the subscription has nothing more ready (or the batch is full).
 */
class ProjectionWorker {
  /** Highest position whose effects are all in the store (what waitFor compares against). */
  visible = 0;
  /** Highest checkpoint known to be stored. */
  private stored = 0;
  /** Highest position handed to this worker (guards against re-delivery). */
  private seen = 0;
  private batch = new Map<string, WriteOp>();
  /**
   * Documents this worker committed last (least recently written first), each tagged with the
   * generation its commit gave them (CommitOutcome): `tx.get` answers from here while the store's
   * `documentGeneration` still equals the tag (no write to that document since, by this process or
   * another connection), and reads the store otherwise. Cleared when a commit was not applied.
   * Only with a store that has `documentGeneration` (SQLite).
   */
  private readonly recent = new Map<string, { gen: number; doc: unknown }>();
  private static readonly MAX_RECENT = 10_000;
  private batchPosition = 0;
  private batchEvents = 0;
  private chain: Promise<void> = Promise.resolve();
  private flushScheduled = false;
  private checkpointTimer: NodeJS.Timeout | null = null;
  private subscription: Subscription | null = null;
  private stopping = false;
  /** stop() was called: a rebuild in progress must not subscribe again. */
  private closed = false;
  private rebuilding: Promise<void> | null = null;
  /** Rebuilds begun: a loss check that read the store before one began must not start another. */
  private rebuilds = 0;
  private lossTimer: NodeJS.Timeout | null = null;
  private cancelSleep: (() => void) | null = null;
  readonly waiters = new Set<Waiter>();

  constructor(
    readonly projection: Projection,
    private readonly options: ProjectionRunnerOptions,
    private readonly logger: ReadStoreLogger,
  ) {}

  get name(): string {
    return this.projection.name;
  }

  private get store(): ReadStore {
    return this.options.readStore;
  }

  async start(): Promise<void> {
    this.closed = false;
    await this.open();
  }

  /** Starts following the log from the stored checkpoint (start, and a rebuild after a loss). */
  private async open(): Promise<void> {
    this.stopping = false;
    this.batch = new Map();
    this.recent.clear();
    this.batchEvents = 0;
    const checkpoint = await this.store.getCheckpoint(this.name);
    if (this.closed) return; // stopped meanwhile (during a rebuild): no subscription
    this.stored = this.seen = this.batchPosition = checkpoint;
    this.advance(checkpoint);
    // No server-side stream filter: every event reaches the worker, so events of other streams
    // still move the position that waitFor compares against (and, periodically, the checkpoint).
    this.subscription = this.options.eventStore.subscribeToAll({ fromPosition: checkpoint, passOver: (e) => this.tryPassOver(e) }, (e) => this.handle(e));
    this.scheduleLossCheck();
  }

  async stop(): Promise<void> {
    this.closed = true;
    this.stopping = true;
    this.cancelSleep?.();
    if (this.checkpointTimer) clearTimeout(this.checkpointTimer);
    this.checkpointTimer = null;
    if (this.lossTimer) clearTimeout(this.lossTimer);
    this.lossTimer = null;
    await this.rebuilding;
    const sub = this.subscription;
    this.subscription = null;
    if (sub) await sub.close();
    // Whatever was fully applied is still worth committing (one attempt: stopping).
    await this.serialize(() => this.flushNow(true));
  }

  /** With a store that can lose its content: now and then, is the stored checkpoint still there? */
  private scheduleLossCheck(): void {
    if (!this.store.canLoseData || this.lossTimer || this.closed) return;
    this.lossTimer = setTimeout(() => {
      this.lossTimer = null;
      void (async () => {
        // While stopping (a rebuild under way) nothing is checked, but the checks go on.
        if (!this.stopping) {
          try {
            const [stored, rebuilds] = [this.stored, this.rebuilds];
            if (stored > 0 && (await this.store.getCheckpoint(this.name)) === 0 && !this.stopping && rebuilds === this.rebuilds) this.lost();
          } catch (err) {
            this.logger.warn({ projection: this.name, error: errorName(err) }, 'projection checkpoint check failed');
          }
        }
        this.scheduleLossCheck();
      })();
    }, this.options.lossCheckIntervalMs ?? 2000);
    this.lossTimer.unref?.();
  }

  /**
   * The store lost its content (its checkpoint of this projection is gone although one was
   * stored): start again from the beginning of the log. Until the rebuild has passed a position,
   * waitFor for it waits (visible goes back to 0), so a write is still answered only once its
   * read model has it. Called with the worker's chain possibly running: stopping makes every
   * queued task return at once; the rebuild runs outside the chain.
   */
  private lost(): void {
    if (this.rebuilding || this.closed) return;
    this.rebuilds++;
    this.logger.warn({ projection: this.name, position: this.stored }, 'read model lost by the store; rebuilding it from the start of the log');
    // Nothing is stored any more: a loss check running while the rebuild opens must not see the
    // old checkpoint and start a second rebuild.
    this.stored = 0;
    this.stopping = true;
    this.cancelSleep?.();
    this.rebuilding = (async () => {
      if (this.checkpointTimer) clearTimeout(this.checkpointTimer);
      this.checkpointTimer = null;
      const sub = this.subscription;
      this.subscription = null;
      if (sub) await sub.close().catch(() => undefined);
      await this.chain;
      this.visible = 0;
      // A store that just lost its content may still be coming back: start again until it works.
      let delay = this.options.retryDelayMs ?? 100;
      while (!this.closed) {
        try {
          await this.open();
          return;
        } catch (err) {
          this.stopping = true;
          this.logger.warn({ projection: this.name, error: errorName(err) }, 'projection rebuild failed to start; retrying');
          await new Promise((r) => setTimeout(r, delay));
          delay = Math.min(delay * 2, this.options.maxRetryDelayMs ?? 5000);
        }
      }
    })().finally(() => {
      this.rebuilding = null;
    });
  }

  private serialize(fn: () => Promise<void>): Promise<void> {
    this.queued++;
    const run = this.chain.then(fn).finally(() => {
      this.queued--;
    });
    this.chain = run.catch(() => undefined);
    return run;
  }

  /** Serialized tasks queued or running (0: the chain is idle). */
  private queued = 0;

  private relevant(event: RecordedEvent): boolean {
    const prefixes = this.projection.streamPrefixes;
    return !prefixes || prefixes.length === 0 || prefixes.some((p) => event.streamId.startsWith(p));
  }

  private sleep(ms: number): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      if (this.stopping) return reject(new Cancelled());
      const timer = setTimeout(() => {
        this.cancelSleep = null;
        resolve();
      }, ms);
      this.cancelSleep = () => {
        clearTimeout(timer);
        this.cancelSleep = null;
        reject(new Cancelled());
      };
    });
  }

  /**
   * Taken synchronously, without the handler (SubscribeOptions.passOver): an event handed over
   * again, or another context's event while nothing is queued or pending. Such an event writes
   * nothing, so the store already shows its position (every projection sees every event of the
   * log; most pass over most of them, now without an async step each).
   */
  private tryPassOver(event: RecordedEvent): boolean {
    if (this.stopping) return false;
    if (event.position <= this.seen) return true;
    if (this.queued !== 0 || this.batch.size !== 0 || this.relevant(event)) return false;
    this.passOver(event.position);
    return true;
  }

  /** Subscription handler. Never throws: a failing apply is retried here, so nothing is skipped. */
  private handle(event: RecordedEvent): Promise<void> {
    if (this.stopping || event.position <= this.seen) return DONE;
    // A store that does not ask tryPassOver first (KurrentDB) still gets the same fast path here.
    if (this.tryPassOver(event)) return DONE;
    return this.serialize(async () => {
      if (this.stopping || event.position <= this.seen) return;
      const relevant = this.relevant(event);
      let scratch = new Map<string, WriteOp>();
      if (relevant) {
        let delay = this.options.retryDelayMs ?? 100;
        for (let attempt = 1; ; attempt++) {
          scratch = new Map();
          try {
            await this.projection.apply(event, this.tx(scratch));
            break;
          } catch (err) {
            if (this.stopping) return;
            this.logger.warn(
              { projection: this.name, position: event.position, type: event.type, attempt, error: errorName(err) },
              'projection apply failed; retrying the same event',
            );
          }
          try {
            await this.sleep(delay);
          } catch {
            return; // stopping: the event is not applied, the next run starts from it again
          }
          delay = Math.min(delay * 2, this.options.maxRetryDelayMs ?? 5000);
        }
      }
      if (scratch.size === 0 && this.batch.size === 0) {
        // Nothing to write and nothing pending: the store already shows this position.
        this.passOver(event.position);
        return;
      }
      this.seen = event.position;
      for (const [id, op] of scratch) {
        this.batch.delete(id); // keep the latest op per document, in the order of last write
        this.batch.set(id, op);
      }
      this.batchPosition = event.position;
      this.batchEvents++;
      if (this.batchEvents >= (this.options.maxBatchEvents ?? 200)) {
        await this.flushNow(false);
      } else if (!this.flushScheduled) {
        // Runs after the subscription has handed over every event it already had in memory.
        this.flushScheduled = true;
        setImmediate(() => {
          this.flushScheduled = false;
          void this.serialize(() => this.flushNow(false));
        });
      }
    });
  }

  /** An event that wrote nothing, with nothing pending: its position is visible at once. */
  private passOver(position: number): void {
    this.seen = position;
    this.batchPosition = position;
    this.advance(position);
    this.scheduleCheckpoint();
  }

  private scheduleCheckpoint(): void {
    if (this.checkpointTimer || this.stopping) return;
    this.checkpointTimer = setTimeout(() => {
      this.checkpointTimer = null;
      void this.serialize(() => this.flushNow(false));
    }, this.options.checkpointIntervalMs ?? 1000);
    this.checkpointTimer.unref?.();
  }

  /** Commits the batch (or a checkpoint-only advance) with its checkpoint. Call inside serialize. */
  private async flushNow(once: boolean): Promise<void> {
    if (this.batch.size === 0 && this.batchPosition <= this.stored) return;
    const position = this.batchPosition;
    const ops = [...this.batch.values()];
    let delay = this.options.retryDelayMs ?? 100;
    for (let attempt = 1; ; attempt++) {
      try {
        const outcome = await this.store.commit(this.name, position, ops, { from: this.stored });
        if (outcome && outcome.lost) {
          // Nothing written: the store lost the read model this batch builds on.
          this.lost();
          return;
        }
        // Written: remembered with the generation they got inside the commit. Not written (a
        // runner ahead of this one stored a later checkpoint): nothing remembered is trusted.
        if (outcome && outcome.applied) this.remember(ops, outcome.generation);
        else this.recent.clear();
        break;
      } catch (err) {
        this.logger.warn({ projection: this.name, position, attempt, error: errorName(err) }, 'projection commit failed; retrying');
        if (once || this.stopping) return;
        try {
          await this.sleep(delay);
        } catch {
          return;
        }
        delay = Math.min(delay * 2, this.options.maxRetryDelayMs ?? 5000);
      }
    }
    this.batch = new Map();
    this.batchEvents = 0;
    this.stored = Math.max(this.stored, position);
    this.advance(position);
  }

  /**
   * Keeps the committed documents (see `recent`) under the generation the commit gave them; a
   * deleted one is remembered as absent. Only with a store that can tell (documentGeneration).
   */
  private remember(ops: WriteOp[], generation: number): void {
    if (!this.store.documentGeneration) return;
    for (const op of ops) {
      const id = docId(op.collection, op.key);
      this.recent.delete(id); // re-inserted last: the map stays in order of last write
      this.recent.set(id, { gen: generation, doc: op.op === 'put' ? op.doc : null });
    }
    while (this.recent.size > ProjectionWorker.MAX_RECENT) this.recent.delete(this.recent.keys().next().value as string);
  }

  private advance(position: number): void {
    if (position > this.visible) this.visible = position;
    for (const w of this.waiters) {
      if (w.position <= this.visible) {
        this.waiters.delete(w);
        if (--w.remaining === 0) {
          if (w.timer) clearTimeout(w.timer);
          w.resolve();
        }
      }
    }
  }

  /** A transaction view: this event's writes, then the batch's, then the store. */
  private tx(scratch: Map<string, WriteOp>): ProjectionTx {
    const pending = (id: string): WriteOp | undefined => scratch.get(id) ?? this.batch.get(id);
    return {
      get: async <T>(collection: string, key: string): Promise<T | null> => {
        const id = docId(collection, key);
        const op = pending(id);
        if (op) return op.op === 'put' ? (structuredClone(op.doc) as T) : null;
        const hit = this.recent.get(id);
        if (hit) {
          if (this.store.documentGeneration && this.store.documentGeneration(collection, key) === hit.gen) {
            return hit.doc === null ? null : (structuredClone(hit.doc) as T);
          }
          this.recent.delete(id);
        }
        return this.store.get<T>(collection, key);
      },
      list: async <T>(collection: string, partition: string, options?: { limit?: number }): Promise<T[]> => {
        const ops = new Map<string, WriteOp>();
        for (const source of [this.batch, scratch]) {
          for (const op of source.values()) if (op.collection === collection) ops.set(op.key, op);
        }
        if (ops.size === 0) return this.store.list<T>(collection, partition, options);
        if (!this.store.entries) {
          throw new Error('tx.list after writes to the same collection needs a ReadStore with entries()');
        }
        const limit = options?.limit;
        const stored = await this.store.entries<T>(collection, partition, limit === undefined ? undefined : { limit: limit + ops.size });
        const merged = new Map<string, ReadEntry<T>>();
        for (const e of stored) merged.set(e.key, e);
        for (const op of ops.values()) {
          merged.delete(op.key);
          if (op.op === 'put' && op.partition === partition) {
            merged.set(op.key, { key: op.key, partition, score: op.score ?? 0, doc: structuredClone(op.doc) as T });
          }
        }
        const sorted = [...merged.values()].sort((a, b) => a.score - b.score || compareKeys(a.key, b.key));
        return (limit === undefined ? sorted : sorted.slice(0, limit)).map((e) => e.doc);
      },
      put: (collection: string, key: string, doc: unknown, options?: PutOptions): void => {
        if (doc === undefined) throw new TypeError('read-store doc must not be undefined');
        // JSON round trip: a later tx.get sees exactly what the store would return, and a
        // document that cannot be stored fails here, in apply, not in every commit retry.
        const op: WriteOp = { op: 'put', collection, key, doc: JSON.parse(JSON.stringify(doc)) };
        if (options?.partition !== undefined) op.partition = options.partition;
        if (options?.score !== undefined) op.score = options.score;
        validateOps([op]);
        const id = docId(collection, key);
        scratch.delete(id);
        scratch.set(id, op);
      },
      delete: (collection: string, key: string): void => {
        const op: WriteOp = { op: 'delete', collection, key };
        validateOps([op]);
        const id = docId(collection, key);
        scratch.delete(id);
        scratch.set(id, op);
      },
    };
  }
}

/**
 * Runs projections of the event log into a ReadStore. Each registered projection follows the
 * log from its own stored checkpoint; its writes and checkpoint are committed atomically, so a
 * restart continues exactly where the store says it stopped. `waitFor` gives read-your-writes
 * (architecture rule 5) from an in-memory waiter list.
 */
export class ProjectionRunner {
  private readonly workers = new Map<string, ProjectionWorker>();
  private readonly logger: ReadStoreLogger;
  private started = false;
  private startTasks: Promise<void>[] = [];

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
      const task = worker.start();
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

  async start(): Promise<void> {
    if (this.started) return;
    this.started = true;
    this.startTasks = [...this.workers.values()].map((w) => w.start());
    await Promise.all(this.startTasks);
  }

  async stop(): Promise<void> {
    if (!this.started) return;
    this.started = false;
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
