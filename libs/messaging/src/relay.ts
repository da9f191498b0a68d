import { Logger } from '@nestjs/common';
import type { EventStore, RecordedEvent, Subscription } from '@svc/eventstore';
import type { ReadStore } from '../../read-store/src/types';
import type { AnyClientProxy } from './bus';
import { IntegrationMessage } from './names';
import { BusHeaders } from './inproc/broker';
import { BusRecord, MetadataHeaders } from './record';
import { lastValueFrom } from 'rxjs';

export interface IntegrationEventRelayOptions {
  /** Relay name; also the name of its checkpoint in the read store. */
  name: string;
  store: EventStore;
  readStore: ReadStore;
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
  /** An emit not confirmed within this time counts as failed and is retried. Default 30000 ms. */
  emitTimeoutMs?: number;
  /** How many passed-over events may go by before the checkpoint is advanced past them. Default 100. */
  skipCommitEvery?: number;
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

/**
 * The outbox that cannot drift from the store (architecture rule 4): follows the service's own
 * streams from the checkpoint kept in the read store, emits each matching event as an
 * IntegrationMessage to `topic`, waits for the emit to be confirmed, then advances the
 * checkpoint. At least once: a crash between emit and checkpoint republishes on restart, and
 * consumers dedupe by `metadata.eventId` (see ProcessedEvents). A failed emit is retried with
 * backoff, never skipped.
 */
export class IntegrationEventRelay {
  private readonly logger: { warn(message: string): void };
  private subscription: Subscription | null = null;
  private running = false;
  private handled = 0;
  private committed = 0;
  private skippedSinceCommit = 0;
  private inFlight: Promise<void> | null = null;
  private waiters: Array<{ position: number; resolve: () => void }> = [];

  constructor(private readonly options: IntegrationEventRelayOptions) {
    this.logger = options.logger ?? new Logger(`IntegrationEventRelay:${options.name}`);
  }

  /** Position of the last event handled (published or passed over). */
  get position(): number {
    return this.handled;
  }

  async start(): Promise<void> {
    if (this.running) return;
    this.running = true;
    const from = await this.options.readStore.getCheckpoint(this.options.name);
    this.handled = this.committed = from;
    this.subscription = this.options.store.subscribeToAll(
      { fromPosition: from, streamPrefix: this.options.streamPrefixes },
      (e) => this.track(this.onEvent(e)),
    );
  }

  async stop(): Promise<void> {
    if (!this.running) return;
    this.running = false;
    const sub = this.subscription;
    this.subscription = null;
    await sub?.close();
    // An event being handled finishes (a retry loop gives up at its next attempt) before we go on.
    await this.inFlight?.catch(() => undefined);
    // Events passed over since the last commit: everything up to `handled` is done.
    if (this.handled > this.committed) {
      await this.options.readStore.commit(this.options.name, this.handled, []);
      this.committed = this.handled;
    }
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

  private track(p: Promise<void>): Promise<void> {
    this.inFlight = p;
    return p.finally(() => {
      if (this.inFlight === p) this.inFlight = null;
    });
  }

  private matches(e: RecordedEvent): boolean {
    const { streamPrefixes, eventTypes } = this.options;
    if (!streamPrefixes.some((p) => e.streamId.startsWith(p))) return false;
    return !eventTypes || eventTypes.includes(e.type);
  }

  private async onEvent(e: RecordedEvent): Promise<void> {
    if (!this.running || e.position <= this.handled) return;
    if (this.matches(e)) {
      const published = await this.publishWithRetry(e);
      if (!published) return; // stopped while retrying: not handled, not committed
      await this.options.readStore.commit(this.options.name, e.position, []);
      this.committed = e.position;
      this.skippedSinceCommit = 0;
    } else if (++this.skippedSinceCommit >= (this.options.skipCommitEvery ?? 100)) {
      await this.options.readStore.commit(this.options.name, e.position, []);
      this.committed = e.position;
      this.skippedSinceCommit = 0;
    }
    this.advance(e.position);
  }

  private advance(position: number): void {
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
    for (let attempt = 1; this.running; attempt++) {
      try {
        await this.emit(e);
        return true;
      } catch (err) {
        this.logger.warn(
          `emit of position ${e.position} to ${this.options.topic} failed (attempt ${attempt}): ${(err as Error)?.name ?? 'error'}; retrying in ${delay} ms`,
        );
        await new Promise((r) => setTimeout(r, delay));
        delay = Math.min(delay * 2, maxDelay);
      }
    }
    return false;
  }

  private async emit(e: RecordedEvent): Promise<void> {
    const timeoutMs = this.options.emitTimeoutMs ?? 30_000;
    let timer: NodeJS.Timeout | undefined;
    const timedOut = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(Object.assign(new Error('emit timed out'), { name: 'EmitTimeout' })), timeoutMs);
    });
    try {
      await Promise.race([lastValueFrom(this.options.client.emit(this.options.topic, toIntegrationRecord(e)), { defaultValue: undefined }), timedOut]);
    } finally {
      clearTimeout(timer);
    }
  }
}
