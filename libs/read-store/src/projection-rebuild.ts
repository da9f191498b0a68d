import { ProjectionCheckpoint } from './projection-checkpoint';
import { ReadStore, ReadStoreLogger, errorName } from './types';

/** What a rebuild needs of the projection worker it restarts. */
export interface Rebuildable {
  readonly name: string;
  readonly checkpoint: ProjectionCheckpoint;
  /** stop() was called: nothing is checked or rebuilt any more. */
  readonly closed: boolean;
  /** The worker is not following the log (stopping, or a rebuild under way): its events are not applied. */
  stopping: boolean;
  /** Stops applying at once: queued tasks return and a retry's wait ends. */
  halt(): void;
  /** Closes the subscription, waits for the task running, and shows nothing as visible any more. */
  detach(): Promise<void>;
  /** Follows the log from the stored checkpoint. */
  open(): Promise<void>;
}

export interface RebuildOptions {
  /** How often (real time) the stored checkpoint is checked. */
  lossCheckIntervalMs: number;
  /** First delay before opening again after a failed start (doubling), and its cap. */
  retryDelayMs: number;
  maxRetryDelayMs: number;
}

/**
 * The rebuild of one projection whose store lost its content (a store that `canLoseData`, such as
 * Redis without persistence): found by a commit (its outcome says `lost`) or by the periodic check
 * that the stored checkpoint is still there while the projection has nothing to commit; the
 * projection then starts again from the beginning of the log.
 */
export class ProjectionRebuild {
  private rebuilding: Promise<void> | null = null;
  /** Rebuilds begun: a loss check that read the store before one began must not start another. */
  private rebuilds = 0;
  private timer: NodeJS.Timeout | null = null;

  constructor(
    private readonly worker: Rebuildable,
    private readonly store: ReadStore,
    private readonly logger: ReadStoreLogger,
    private readonly options: RebuildOptions,
  ) {}

  /** The rebuild under way (stop waits for it), or null. */
  get running(): Promise<void> | null {
    return this.rebuilding;
  }

  /** With a store that can lose its content: now and then, is the stored checkpoint still there? */
  watch(): void {
    if (!this.store.canLoseData || this.timer || this.worker.closed) return;
    this.timer = setTimeout(() => {
      this.timer = null;
      void (async () => {
        try {
          await this.check();
        } catch (err) {
          this.logger.warn({ projection: this.worker.name, error: errorName(err) }, 'projection checkpoint check failed');
        }
        this.watch();
      })();
    }, this.options.lossCheckIntervalMs);
    this.timer.unref?.();
  }

  /**
   * Is the stored checkpoint still there? If not (one was stored), the store lost the read model:
   * rebuild it. Nothing is checked while stopping (a rebuild under way). Throws what the store threw.
   */
  async check(): Promise<void> {
    if (this.worker.stopping || this.worker.closed) return;
    const [stored, rebuilds] = [this.worker.checkpoint.stored, this.rebuilds];
    if (stored > 0 && (await this.store.getCheckpoint(this.worker.name)) === 0 && !this.worker.stopping && rebuilds === this.rebuilds) this.lost();
  }

  /** Stops the checks (the worker stops). */
  unwatch(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
  }

  /**
   * The store lost its content (its checkpoint of this projection is gone although one was
   * stored): start again from the beginning of the log. Until the rebuild has passed a position,
   * waitFor for it waits (visible goes back to 0), so a write is still answered only once its
   * read model has it. Called with the worker's chain possibly running: halting makes every
   * queued task return at once; the rebuild runs outside the chain.
   */
  lost(): void {
    const worker = this.worker;
    if (this.rebuilding || worker.closed) return;
    this.rebuilds++;
    this.logger.warn({ projection: worker.name, position: worker.checkpoint.stored }, 'read model lost by the store; rebuilding it from the start of the log');
    // Nothing is stored any more: a loss check running while the rebuild opens must not see the
    // old checkpoint and start a second rebuild. Nothing is visible either, and the model is
    // behind (reads of it held back) until the rebuild reaches what it had reached.
    worker.checkpoint.stored = 0;
    worker.checkpoint.lose();
    worker.halt();
    this.rebuilding = (async () => {
      await worker.detach();
      // A store that just lost its content may still be coming back: start again until it works.
      let delay = this.options.retryDelayMs;
      while (!worker.closed) {
        try {
          // The marker first, before the rebuild writes anything: other replicas (and a holder
          // taking over mid-rebuild) then know the model is incomplete up to the target.
          await this.store.markRebuild?.(worker.name, worker.checkpoint.rebuildTarget);
          await worker.open();
          return;
        } catch (err) {
          worker.stopping = true;
          this.logger.warn({ projection: worker.name, error: errorName(err) }, 'projection rebuild failed to start; retrying');
          await new Promise((r) => setTimeout(r, delay));
          delay = Math.min(delay * 2, this.options.maxRetryDelayMs);
        }
      }
    })().finally(() => {
      this.rebuilding = null;
    });
  }
}
