import type { RecordedEvent, Subscription } from '@svc/eventstore';
import { ProjectionBatch } from './projection-batch';
import { ProjectionCheckpoint, Waiter } from './projection-checkpoint';
import { ProjectionRebuild, Rebuildable } from './projection-rebuild';
import type { ProjectionRunnerOptions } from './projection-runner';
import { Projection, ReadStore, ReadStoreLogger, WriteOp, errorName } from './types';

class Cancelled extends Error {}

const DONE: Promise<void> = Promise.resolve();

/**
 * One projection's loop, catching up and then live: its own subscription from its own stored
 * checkpoint, events applied one at a time in log order (a failing apply is retried, never
 * skipped), the writes of consecutive events batched (ProjectionBatch) and committed together
 * with the checkpoint when the subscription has nothing more ready (or the batch is full).
 * Events that write nothing move the visible position at once and the stored checkpoint now and
 * then (ProjectionCheckpoint); a store that lost its content is rebuilt from the start of the
 * log (ProjectionRebuild).
 */
export class ProjectionWorker implements Rebuildable {
  readonly checkpoint = new ProjectionCheckpoint();
  private readonly batch: ProjectionBatch;
  private readonly rebuild: ProjectionRebuild;
  /** Highest position handed to this worker (guards against re-delivery). */
  private seen = 0;
  private chain: Promise<void> = Promise.resolve();
  /** Serialized tasks queued or running (0: the chain is idle). */
  private queued = 0;
  private flushScheduled = false;
  private subscription: Subscription | null = null;
  /** Not following the log (stopped, or a rebuild under way): events are not applied. */
  stopping = false;
  /** stop() was called: a rebuild in progress must not subscribe again. */
  private isClosed = false;
  private cancelSleep: (() => void) | null = null;
  /**
   * With leases (docs/scaling.md): the fencing token of the lease this worker holds, undefined
   * while it follows (another replica runs the projection; `visible` then follows the positions
   * that replica shares). Without leases the worker always leads, unfenced.
   */
  private token: number | undefined = undefined;
  leading = false;
  /** A commit was refused because a later lease holder committed: the worker must stop leading. */
  onFenced: (() => void) | null = null;
  /** The read model is rebuilt from the start of the log (the store lost it): nothing of it is visible any more. */
  onRebuild: (() => void) | null = null;

  constructor(
    readonly projection: Projection,
    private readonly options: ProjectionRunnerOptions,
    private readonly logger: ReadStoreLogger,
  ) {
    this.batch = new ProjectionBatch(projection.name, options.readStore, logger);
    this.rebuild = new ProjectionRebuild(this, options.readStore, logger, {
      lossCheckIntervalMs: options.lossCheckIntervalMs ?? 2000,
      retryDelayMs: options.retryDelayMs ?? 100,
      maxRetryDelayMs: options.maxRetryDelayMs ?? 5000,
    });
    // The holder that rebuilt the model past its target clears the store's marker (best effort: a
    // marker left behind is cleared by the next replica that reads it under a later checkpoint).
    this.checkpoint.onRebuilt = (target) => {
      if (!this.leading || !this.store.clearRebuild) return;
      this.logger.warn({ projection: this.name, position: target }, 'read model rebuilt up to where it was before the loss');
      this.store
        .clearRebuild(this.name, target)
        .catch((err) => this.logger.warn({ projection: this.name, error: errorName(err) }, 'rebuild marker not cleared'));
    };
  }

  get name(): string {
    return this.projection.name;
  }

  get closed(): boolean {
    return this.isClosed;
  }

  /** Highest position whose effects are all in the store (what waitFor compares against). */
  get visible(): number {
    return this.checkpoint.visible;
  }

  /** The waitFor calls waiting for this projection. */
  get waiters(): Set<Waiter> {
    return this.checkpoint.waiters;
  }

  private get store(): ReadStore {
    return this.options.readStore;
  }

  async start(): Promise<void> {
    this.isClosed = false;
    this.leading = true;
    await this.open();
  }

  /** This replica took the projection's lease: follows the log from the stored checkpoint, writing with `token`. */
  async lead(token: number): Promise<void> {
    this.token = token;
    await this.start();
  }

  /**
   * The lease is gone: stop applying and committing at once (what is not committed is another
   * holder's to do again). The visible position stays: everything up to it is in the store.
   */
  async follow(): Promise<void> {
    if (!this.leading) return;
    this.leading = false;
    this.isClosed = true;
    this.halt();
    this.checkpoint.cancel();
    this.rebuild.unwatch();
    await this.rebuild.running;
    const sub = this.subscription;
    this.subscription = null;
    if (sub) await sub.close().catch(() => undefined);
    await this.chain;
    this.batch.reset();
    this.token = undefined;
  }

  /**
   * A position another replica (the lease holder) made visible in the shared store; 0: the holder
   * rebuilds the read model (the store lost it), so nothing is visible until the rebuild passes it.
   */
  observe(position: number): void {
    if (this.leading) return;
    if (position === 0) this.checkpoint.lose();
    else this.checkpoint.advance(position);
  }

  /** The stored checkpoint and rebuild marker (a store without markers: none). */
  private async storedState(): Promise<{ checkpoint: number; rebuildTarget: number }> {
    if (this.store.getCheckpointState) return this.store.getCheckpointState(this.name);
    return { checkpoint: await this.store.getCheckpoint(this.name), rebuildTarget: 0 };
  }

  /**
   * After the store's connection came back (it may have come back empty): the holder checks its
   * stored checkpoint (gone: rebuild); a follower looks for the checkpoint and the rebuild marker,
   * and holds the model back as behind while the holder rebuilds it. Throws what the store threw.
   */
  async verify(): Promise<void> {
    if (this.leading) return this.rebuild.check();
    const state = await this.storedState();
    if (this.leading) return; // took the lease meanwhile: its open() read the state
    if ((state.checkpoint === 0 && this.checkpoint.highest > 0) || state.rebuildTarget > this.checkpoint.visible) {
      this.checkpoint.lose(state.rebuildTarget);
      if (state.checkpoint > 0) this.checkpoint.advance(state.checkpoint);
    }
  }

  /** Starts following the log from the stored checkpoint (start, and a rebuild after a loss). */
  async open(): Promise<void> {
    this.stopping = false;
    this.batch.reset();
    const { checkpoint, rebuildTarget } = await this.storedState();
    if (this.isClosed) return; // stopped meanwhile (during a rebuild): no subscription
    this.checkpoint.stored = this.seen = this.batch.position = checkpoint;
    // A rebuild under way (this replica takes over from a holder that was rebuilding): behind
    // until it reaches the marker's target.
    if (rebuildTarget > checkpoint) this.checkpoint.lose(rebuildTarget);
    else if (rebuildTarget > 0) void this.store.clearRebuild?.(this.name, rebuildTarget).catch(() => undefined);
    this.checkpoint.advance(checkpoint);
    // No server-side stream filter: every event reaches the worker, so events of other streams
    // still move the position that waitFor compares against (and, periodically, the checkpoint).
    this.subscription = this.options.eventStore.subscribeToAll({ fromPosition: checkpoint, passOver: (e) => this.tryPassOver(e) }, (e) => this.handle(e));
    this.rebuild.watch();
  }

  async stop(): Promise<void> {
    if (!this.leading) return;
    this.leading = false;
    this.isClosed = true;
    this.halt();
    this.checkpoint.cancel();
    this.rebuild.unwatch();
    await this.rebuild.running;
    const sub = this.subscription;
    this.subscription = null;
    if (sub) await sub.close();
    // Whatever was fully applied is still worth committing (one attempt: stopping).
    await this.serialize(() => this.flushNow(true));
  }

  /** Stops applying at once: every queued task returns, a retry's wait ends. */
  halt(): void {
    this.stopping = true;
    this.cancelSleep?.();
  }

  /** For a rebuild: closes the subscription, waits for the task running, and shows nothing as visible. */
  async detach(): Promise<void> {
    this.checkpoint.cancel();
    const sub = this.subscription;
    this.subscription = null;
    if (sub) await sub.close().catch(() => undefined);
    await this.chain;
    this.checkpoint.lose();
    this.onRebuild?.();
  }

  private serialize(fn: () => Promise<void>): Promise<void> {
    this.queued++;
    const run = this.chain.then(fn).finally(() => {
      this.queued--;
    });
    this.chain = run.catch(() => undefined);
    return run;
  }

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
   * log and most pass over most of them, each without an async step).
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
            await this.projection.apply(event, this.batch.tx(scratch));
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
      this.batch.add(scratch, event.position);
      if (this.batch.events >= (this.options.maxBatchEvents ?? 200)) {
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
    this.batch.position = position;
    this.checkpoint.advance(position);
    this.scheduleCheckpoint();
  }

  private scheduleCheckpoint(): void {
    if (this.stopping) return;
    this.checkpoint.schedule(this.options.checkpointIntervalMs ?? 1000, () => void this.serialize(() => this.flushNow(false)));
  }

  /** Commits the batch (or a checkpoint-only advance) with its checkpoint. Call inside serialize. */
  private async flushNow(once: boolean): Promise<void> {
    if (this.batch.size === 0 && this.batch.position <= this.checkpoint.stored) return;
    const position = this.batch.position;
    const result = await this.batch.commit({
      once,
      from: () => this.checkpoint.stored,
      stopping: () => this.stopping,
      sleep: (ms) => this.sleep(ms),
      retryDelayMs: this.options.retryDelayMs ?? 100,
      maxRetryDelayMs: this.options.maxRetryDelayMs ?? 5000,
      fence: this.token,
    });
    if (result === 'lost') this.rebuild.lost();
    if (result === 'fenced') {
      this.logger.warn({ projection: this.name, position }, 'projection commit refused: a later lease holder committed; this replica stops running it');
      this.halt();
      this.onFenced?.();
    }
    if (result !== 'committed') return;
    this.checkpoint.stored = Math.max(this.checkpoint.stored, position);
    this.checkpoint.advance(position);
  }
}
