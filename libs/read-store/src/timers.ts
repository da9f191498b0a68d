import type { Clock } from '@svc/clock';
import { ProjectionTx, ReadStore, ReadStoreLogger, defaultReadStoreLogger, errorName, validateCollection } from './types';

/**
 * Durable timers are stored with the state (architecture rule 6): a service's projection puts a
 * timer document when an event schedules it and deletes it when an event completes or cancels
 * it. Collection and partition are the service's choice (put tenancy in the partition or the id);
 * the score is the due time in ms, so `range(collection, partition, now)` yields the due ones.
 */
export interface TimerDoc {
  /** Unique within the collection (it is the document key). */
  id: string;
  /** Due time: epoch ms or an ISO 8601 string. */
  dueAt: number | string;
  [field: string]: unknown;
}

export function timerDueMs(dueAt: number | string): number {
  const ms = typeof dueAt === 'number' ? dueAt : Date.parse(dueAt);
  if (!Number.isFinite(ms)) throw new TypeError('timer dueAt must be epoch ms or an ISO 8601 time');
  return ms;
}

/** For projections: store (or move) a timer. */
export function scheduleTimer(tx: Pick<ProjectionTx, 'put'>, collection: string, partition: string, timer: TimerDoc): void {
  tx.put(collection, timer.id, timer, { partition, score: timerDueMs(timer.dueAt) });
}

/** For projections: the event that completes or cancels a timer removes it. */
export function cancelTimer(tx: Pick<ProjectionTx, 'delete'>, collection: string, id: string): void {
  tx.delete(collection, id);
}

export interface TimerSchedulerOptions<T extends TimerDoc = TimerDoc> {
  readStore: ReadStore;
  clock: Clock;
  collection: string;
  partition: string;
  /** Issues the (idempotent) command that fires the timer. A rejection keeps the timer for the next tick. */
  handler: (timer: T) => Promise<void>;
  /** Poll interval in ms (default 1000); a clock advance also ticks at once. */
  pollMs?: number;
  /** Most timers read per tick (default 100). */
  batchSize?: number;
  /**
   * After a handler succeeded, the same timer (same id and dueAt) is not fired again for this
   * long (clock ms, default 10 000) while its document waits for the resulting event to be
   * projected. Set 0 to fire on every tick until the document is gone.
   */
  refireAfterMs?: number;
  logger?: ReadStoreLogger;
}

/**
 * Fires due timers from the clock: every `pollMs` and at once on `clock.onAdvance`. At least
 * once: a timer fires again on a later tick if its handler failed (or, after `refireAfterMs`,
 * if its document is still there); the command's idempotency makes that once. A timer whose
 * handler is still running is never fired a second time in parallel.
 */
export class TimerScheduler<T extends TimerDoc = TimerDoc> {
  private readonly inFlight = new Map<string, Promise<void>>();
  /** `${id}\0${dueAt}` -> clock ms until which a succeeded timer is not fired again. */
  private readonly fired = new Map<string, number>();
  private interval: NodeJS.Timeout | null = null;
  private unsubscribe: (() => void) | null = null;
  private readonly logger: ReadStoreLogger;

  constructor(private readonly options: TimerSchedulerOptions<T>) {
    validateCollection(options.collection);
    this.logger = options.logger ?? defaultReadStoreLogger;
  }

  start(): void {
    if (this.interval) return;
    this.stopped = false;
    const trigger = () => {
      this.tick().catch((err) => this.logger.warn({ collection: this.options.collection, error: errorName(err) }, 'timer tick failed'));
    };
    this.interval = setInterval(trigger, this.options.pollMs ?? 1000);
    this.interval.unref?.();
    this.unsubscribe = this.options.clock.onAdvance(trigger);
    trigger();
  }

  /**
   * Stops ticking and waits for handlers already running. From then on tick() (and a refill
   * already scheduled) starts no handler, until start() again.
   */
  async stop(): Promise<void> {
    this.stopped = true;
    if (this.interval) clearInterval(this.interval);
    this.interval = null;
    this.unsubscribe?.();
    this.unsubscribe = null;
    await Promise.allSettled([...this.inFlight.values()]);
  }

  /** Number of handlers running now. */
  get inFlightCount(): number {
    return this.inFlight.size;
  }

  /**
   * Reads the due timers and starts the handler of each one not already running (at most
   * `batchSize` handlers run at once); resolves when the handlers started by this tick have
   * settled. Rejects only if the store read fails. While started, a tick that left due timers
   * waiting is followed by another as soon as a handler finishes (no wait for the next poll).
   */
  tick(): Promise<void> {
    if (this.stopped) return Promise.resolve();
    return this.scan(false);
  }

  /** stop() was called (and start() not since). */
  private stopped = false;

  private async scan(refilling: boolean): Promise<void> {
    if (this.stopped) return;
    const { readStore, clock, collection, partition } = this.options;
    const batchSize = this.options.batchSize ?? 100;
    const now = clock.now().getTime();
    for (const [k, until] of this.fired) if (until <= now) this.fired.delete(k);
    for (const [k, at] of this.failed) if (Date.now() - at >= (this.options.pollMs ?? 1000)) this.failed.delete(k);
    // Timers running or fired and still waiting for their document to go come first in due order:
    // read past them, so they do not hide the due timers behind them.
    const window = Math.min(batchSize + this.inFlight.size + this.fired.size, batchSize + 10_000);
    const due = await readStore.range<T>(collection, partition, now, window);
    // Stopped while reading: start nothing (the stores may be closing).
    if (this.stopped) return;
    const started: Promise<void>[] = [];
    let waiting = false;
    for (const timer of due) {
      if (!timer || typeof timer.id !== 'string') continue;
      if (this.inFlight.has(timer.id)) continue;
      const firedKey = `${timer.id}\u0000${String(timer.dueAt)}`;
      if (this.fired.has(firedKey)) continue;
      const failedAt = this.failed.get(timer.id);
      // A refill does not retry a failed timer at once: that waits for the next poll or advance.
      if (refilling && failedAt !== undefined && Date.now() - failedAt < (this.options.pollMs ?? 1000)) continue;
      if (this.inFlight.size >= batchSize) {
        waiting = true;
        break;
      }
      const run = this.fire(timer, firedKey);
      this.inFlight.set(timer.id, run);
      started.push(run);
    }
    if (due.length >= window) waiting = true;
    this.backlog = waiting;
    await Promise.all(started);
  }

  /** Timer id -> wall time of its last failure: a failed timer waits for the next poll, even when refilling. */
  private readonly failed = new Map<string, number>();
  /** Due timers were left waiting by the last tick. */
  private backlog = false;
  private refillScheduled = false;

  private refill(): void {
    if (!this.backlog || !this.interval || this.refillScheduled) return;
    this.refillScheduled = true;
    setImmediate(() => {
      this.refillScheduled = false;
      if (!this.interval || this.stopped) return;
      this.scan(true).catch((err) => this.logger.warn({ collection: this.options.collection, error: errorName(err) }, 'timer tick failed'));
    });
  }

  private async fire(timer: T, firedKey: string): Promise<void> {
    try {
      await this.options.handler(timer);
      const refire = this.options.refireAfterMs ?? 10_000;
      if (refire > 0) this.fired.set(firedKey, this.options.clock.now().getTime() + refire);
    } catch (err) {
      // Kept: the document is still there, the next tick fires it again. No timer content in logs.
      this.logger.warn({ collection: this.options.collection, error: errorName(err) }, 'timer handler failed; will retry');
      this.failed.set(timer.id, Date.now());
    } finally {
      this.inFlight.delete(timer.id);
      this.refill();
    }
  }
}
