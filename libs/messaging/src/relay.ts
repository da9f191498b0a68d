import { Logger } from '@nestjs/common';
import type { EventStore, PositionStore, RecordedEvent, Subscription } from '@svc/eventstore';
import type { ReadStore } from '@svc/read-store';
import type { AnyClientProxy } from './bus';
import { IntegrationMessage } from './names';
import { BusHeaders } from './inproc/broker';
import { BusRecord, MetadataHeaders } from './record';
import { lastValueFrom } from 'rxjs';

export interface IntegrationEventRelayOptions {
  /** Relay name; also the name of its position (in `positions`, else its checkpoint in the read store). */
  name: string;
  store: EventStore;
  readStore: ReadStore;
  /**
   * Where the position is kept, durable next to the event store (docs/scaling.md). When it holds
   * none yet, the read store's checkpoint of the same name is where the relay starts (once).
   * Absent: the read store's checkpoint.
   */
  positions?: PositionStore;
  client: AnyClientProxy;
  /** Topic (event pattern) the integration events are emitted to. */
  topic: string;
  /** The service's own streams: only events of streams starting with one of these are published. */
  streamPrefixes: string[];
  /** When given, only events of these types are published (others are passed over). */
  eventTypes?: string[];
  /** First retry delay after a failed emit (doubles up to maxRetryDelayMs). Default 100 ms. */
  retryDelayMs?: number;
  /** Default 5000 ms. */
  maxRetryDelayMs?: number;
  /**
   * An emit not confirmed within this time is reported (warn). It is not emitted again while that
   * emit may still be running (an in-process subscriber still at work): the relay waits for it to
   * settle, and re-emits only if it failed. Default 30000 ms.
   */
  emitTimeoutMs?: number;
  /** How many passed-over events may go by before the checkpoint is advanced past them. Default 100. */
  skipCommitEvery?: number;
  /**
   * How many published events may be outstanding (emitted and not yet confirmed, or confirmed
   * while an earlier one is not) at once. Events of one stream (one bus key) are still emitted one
   * after the other, each after the previous one was confirmed; events of different streams
   * overlap. The checkpoint only moves to the highest position below which every event is done.
   * Default 128; 1 publishes strictly one event at a time.
   */
  maxInFlight?: number;
  /** Where emit failures are reported (position, topic and error name only). Default: Nest Logger. */
  logger?: { warn(message: string): void };
}

/** The integration message of a recorded event (what consumers get as payload). */
export function toIntegrationMessage(e: RecordedEvent): IntegrationMessage {
  return { type: e.type, data: e.data, metadata: { ...e.metadata }, streamId: e.streamId, position: e.position };
}

/** Kafka-style headers carrying the event metadata (null fields are left out). */
export function metadataHeaders(e: RecordedEvent): BusHeaders {
  const m = e.metadata;
  const h: BusHeaders = {
    [MetadataHeaders.eventId]: m.eventId,
    [MetadataHeaders.eventType]: e.type,
    [MetadataHeaders.correlationId]: m.correlationId,
    [MetadataHeaders.actor]: m.actor,
    [MetadataHeaders.recordedAt]: m.recordedAt,
    [MetadataHeaders.streamId]: e.streamId,
    [MetadataHeaders.position]: String(e.position),
  };
  if (m.causationId != null) h[MetadataHeaders.causationId] = m.causationId;
  if (m.organizationId != null) h[MetadataHeaders.organizationId] = m.organizationId;
  if (m.environmentId != null) h[MetadataHeaders.environmentId] = m.environmentId;
  return h;
}

/** The bus record of a recorded event: keyed by stream (aggregate) id, metadata in headers. */
export function toIntegrationRecord(e: RecordedEvent): BusRecord<IntegrationMessage> {
  return new BusRecord(e.streamId, toIntegrationMessage(e), metadataHeaders(e));
}

/** A published event not yet below the checkpoint watermark. */
interface Slot {
  position: number;
  /** Passed-over events right after this one: released together with it. */
  coversTo: number;
  done: boolean;
}

/**
 * The outbox that cannot drift from the store (architecture rule 4): follows the service's own
 * streams from its stored position (`positions`, next to the event store; else the read store's
 * checkpoint), emits each matching event as an
 * IntegrationMessage to `topic`, and advances the checkpoint once the emit is confirmed. Up to
 * `maxInFlight` events are outstanding at once, but events of the same stream (the bus key) are
 * emitted in order, each only after the previous one was confirmed, and the checkpoint only
 * moves to the highest position below which every event was confirmed. At least once: a crash
 * republishes whatever is above the checkpoint on restart (possibly events that were already
 * confirmed after a gap), and consumers dedupe by `metadata.eventId` (see ProcessedEvents). A
 * failed emit is retried with backoff, never skipped.
 */
export class IntegrationEventRelay {
  private readonly logger: { warn(message: string): void };
  private subscription: Subscription | null = null;
  private running = false;
  /** Watermark: every event up to here is handled (published or passed over). */
  private handled = 0;
  /** Highest position stored as the checkpoint. */
  private committed = 0;
  /** Highest position the subscription handed over. */
  private seen = 0;
  private skippedSinceCommit = 0;
  private pending: Slot[] = [];
  /** Last emit chain of each stream with an event outstanding (per-key order). */
  private readonly tails = new Map<string, Promise<boolean>>();
  private readonly active = new Set<Promise<unknown>>();
  private slotWaiters: Array<() => void> = [];
  private committing: Promise<void> | null = null;
  private commitAgain = false;
  private waiters: Array<{ position: number; resolve: () => void }> = [];
  /** Resolves when stop() is called (ends a wait for a timed-out emit to settle). */
  private stopped: { promise: Promise<void>; resolve: () => void } = IntegrationEventRelay.signal();
  /** The fencing token of the lease this run holds (0: unfenced), carried by every position write. */
  private fence = 0;
  /** A position write was refused (a later lease holder wrote one): this run stops, storing nothing more. */
  private fenced = false;

  private static signal(): { promise: Promise<void>; resolve: () => void } {
    let resolve!: () => void;
    const promise = new Promise<void>((r) => (resolve = r));
    return { promise, resolve };
  }

  constructor(private readonly options: IntegrationEventRelayOptions) {
    this.logger = options.logger ?? new Logger(`IntegrationEventRelay:${options.name}`);
  }

  /** Position of the last event handled (published or passed over), with everything before it. */
  get position(): number {
    return this.handled;
  }

  private get maxInFlight(): number {
    return Math.max(1, Math.floor(this.options.maxInFlight ?? 128));
  }

  /** Starts publishing from the stored position; `fence` is the run's lease token (docs/scaling.md). */
  async start(fence = 0): Promise<void> {
    if (this.running) return;
    this.running = true;
    this.fence = fence;
    this.fenced = false;
    this.stopped = IntegrationEventRelay.signal();
    let from: number;
    try {
      from = await this.loadPosition();
    } catch (err) {
      this.running = false;
      throw err;
    }
    this.handled = this.committed = this.seen = from;
    this.pending = [];
    this.tails.clear();
    this.skippedSinceCommit = 0;
    this.subscription = this.options.store.subscribeToAll({ fromPosition: from, streamPrefix: this.options.streamPrefixes }, (e) => this.onEvent(e));
  }

  async stop(): Promise<void> {
    if (!this.running) return;
    this.running = false;
    this.stopped.resolve();
    this.wakeSlotWaiters();
    const sub = this.subscription;
    this.subscription = null;
    await sub?.close();
    // Events being emitted finish (a retry loop gives up at its next attempt) before we go on.
    while (this.active.size) await Promise.allSettled([...this.active]);
    while (this.committing) await this.committing;
    // Everything up to the watermark is done (published or passed over): store it.
    if (this.handled > this.committed && !this.fenced) {
      await this.savePosition(this.handled);
      this.committed = this.handled;
    }
  }

  private async loadPosition(): Promise<number> {
    const { positions, readStore, name } = this.options;
    const stored = positions ? await positions.get(name) : null;
    return stored ?? (await readStore.getCheckpoint(name));
  }

  /** Stores the position with this run's token; a refusal (a later holder wrote) stops the run. */
  private async savePosition(position: number): Promise<void> {
    const { positions, readStore, name } = this.options;
    let accepted: boolean;
    if (positions) accepted = await positions.save(name, position, this.fence);
    else {
      const outcome = await readStore.commit(name, position, [], this.fence ? { fence: this.fence } : undefined);
      accepted = !(outcome && outcome.fenced);
    }
    if (accepted || this.fenced) return;
    this.fenced = true;
    this.logger.warn(`position write at ${position} refused: a later lease holder wrote one; this run stops`);
    setImmediate(() => void this.stop());
  }

  /** Resolves once every event up to `position` has been handled (published or passed over). */
  waitFor(position: number, timeoutMs = 10_000): Promise<void> {
    if (this.handled >= position) return Promise.resolve();
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.waiters = this.waiters.filter((w) => w !== waiter);
        reject(new Error(`relay ${this.options.name} did not reach position ${position} within ${timeoutMs} ms (at ${this.handled})`));
      }, timeoutMs);
      const waiter = {
        position,
        resolve: () => {
          clearTimeout(timer);
          resolve();
        },
      };
      this.waiters.push(waiter);
    });
  }

  private matches(e: RecordedEvent): boolean {
    const { streamPrefixes, eventTypes } = this.options;
    if (!streamPrefixes.some((p) => e.streamId.startsWith(p))) return false;
    return !eventTypes || eventTypes.includes(e.type);
  }

  /**
   * Subscription handler: hands the event to its stream's emit chain and returns at once, unless
   * `maxInFlight` events are outstanding (then it waits for the oldest to be done: back pressure
   * on the subscription, which reads nothing more meanwhile).
   */
  private async onEvent(e: RecordedEvent): Promise<void> {
    if (!this.running || e.position <= this.seen) return;
    if (!this.matches(e)) {
      this.seen = e.position;
      const last = this.pending[this.pending.length - 1];
      if (last) {
        last.coversTo = e.position; // done when everything before it is
      } else {
        this.advance(e.position);
        if (++this.skippedSinceCommit >= (this.options.skipCommitEvery ?? 100)) this.scheduleCommit();
      }
      return;
    }
    while (this.pending.length >= this.maxInFlight && this.running) {
      await new Promise<void>((resolve) => this.slotWaiters.push(resolve));
    }
    if (!this.running) return; // not handed over: the next run starts at or before it
    this.seen = e.position;
    const slot: Slot = { position: e.position, coversTo: e.position, done: false };
    this.pending.push(slot);
    const previous = this.tails.get(e.streamId);
    const run = (async (): Promise<boolean> => {
      if (previous && !(await previous)) return false; // stopped before the earlier one was confirmed
      const published = await this.publishWithRetry(e);
      if (published) {
        slot.done = true;
        this.release();
      }
      return published; // stopped while retrying: not done, the checkpoint stays below it
    })();
    this.tails.set(e.streamId, run);
    this.active.add(run);
    void run.finally(() => {
      this.active.delete(run);
      if (this.tails.get(e.streamId) === run) this.tails.delete(e.streamId);
    });
  }

  /** Moves the watermark over the done events at the head of the pending list. */
  private release(): void {
    let to = 0;
    while (this.pending.length && this.pending[0].done) to = (this.pending.shift() as Slot).coversTo;
    if (to === 0) return;
    this.skippedSinceCommit = 0;
    this.advance(to);
    this.scheduleCommit();
    this.wakeSlotWaiters();
  }

  private wakeSlotWaiters(): void {
    const ws = this.slotWaiters;
    this.slotWaiters = [];
    for (const w of ws) w();
  }

  /** Stores the watermark as the checkpoint; one write at a time, coalescing the moves made meanwhile. */
  private scheduleCommit(): void {
    if (this.committing) {
      this.commitAgain = true;
      return;
    }
    this.committing = (async () => {
      do {
        this.commitAgain = false;
        const position = this.handled;
        if (position <= this.committed) break;
        if (this.fenced) break;
        try {
          await this.savePosition(position);
          this.committed = position;
          this.skippedSinceCommit = 0;
        } catch (err) {
          // Kept in memory; the next move (or stop) stores it. At worst a restart republishes.
          this.logger.warn(`checkpoint commit at ${position} failed: ${(err as Error)?.name ?? 'error'}`);
          break;
        }
      } while (this.commitAgain);
    })().finally(() => {
      this.committing = null;
      if (this.commitAgain && this.handled > this.committed) this.scheduleCommit();
    });
  }

  private advance(position: number): void {
    if (position <= this.handled) return;
    this.handled = position;
    const ready = this.waiters.filter((w) => w.position <= position);
    if (ready.length) {
      this.waiters = this.waiters.filter((w) => w.position > position);
      for (const w of ready) w.resolve();
    }
  }

  private async publishWithRetry(e: RecordedEvent): Promise<boolean> {
    let delay = this.options.retryDelayMs ?? 100;
    const maxDelay = this.options.maxRetryDelayMs ?? 5000;
    const timeoutMs = this.options.emitTimeoutMs ?? 30_000;
    for (let attempt = 1; this.running; attempt++) {
      // Started once per attempt; a new attempt only after this one settled (failed).
      const emitted = lastValueFrom(this.options.client.emit(this.options.topic, toIntegrationRecord(e)), { defaultValue: undefined }).then(
        () => ({ ok: true as const }),
        (err: unknown) => ({ ok: false as const, err }),
      );
      let outcome = await this.within(emitted, timeoutMs);
      if (outcome === 'timeout') {
        this.logger.warn(
          `emit of position ${e.position} to ${this.options.topic} not confirmed within ${timeoutMs} ms (attempt ${attempt}); waiting for it to settle before any retry`,
        );
        // Never a second emit of the event while the first may still be delivering it.
        const settled = await Promise.race([emitted, this.stopped.promise.then(() => 'stopped' as const)]);
        if (settled === 'stopped') return false; // not confirmed: the checkpoint stays below it
        outcome = settled;
      }
      if (outcome.ok) return true;
      this.logger.warn(
        `emit of position ${e.position} to ${this.options.topic} failed (attempt ${attempt}): ${(outcome.err as Error)?.name ?? 'error'}; retrying in ${delay} ms`,
      );
      await new Promise((r) => setTimeout(r, delay));
      delay = Math.min(delay * 2, maxDelay);
    }
    return false;
  }

  /** The emit's outcome, or 'timeout' when it has not settled within `timeoutMs` (it goes on). */
  private async within<T>(p: Promise<T>, timeoutMs: number): Promise<T | 'timeout'> {
    let timer: NodeJS.Timeout | undefined;
    const timedOut = new Promise<'timeout'>((resolve) => {
      timer = setTimeout(() => resolve('timeout'), timeoutMs);
    });
    try {
      return await Promise.race([p, timedOut]);
    } finally {
      clearTimeout(timer);
    }
  }
}
