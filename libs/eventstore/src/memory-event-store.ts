import { randomUUID } from 'node:crypto';
import { EventStoreLogger, PollingSubscription } from './subscription-loop';
import { AppendResult, EventStore, ExpectedRevision, NewEvent, RecordedEvent, SubscribeOptions, Subscription, WrongExpectedRevisionError } from './types';

export interface InMemoryEventStoreOptions {
  pageSize?: number;
  retryDelayMs?: number;
  logger?: EventStoreLogger;
}

/**
 * The EventStore port in memory, with the semantics of the SQLite store (expected revisions,
 * unique event ids, global positions from 1, subscriptions that catch up then follow live), for
 * fast decider and handler tests. Events are stored as JSON text, so callers never share objects
 * with the store and data round-trips exactly as it does through a real store.
 */
export class InMemoryEventStore implements EventStore {
  private readonly log: { streamId: string; revision: number; position: number; type: string; data: string; metadata: string }[] = [];
  private readonly streams = new Map<string, number[]>();
  private readonly eventIds = new Set<string>();
  private readonly subscriptions = new Set<PollingSubscription>();
  private closed = false;

  constructor(private readonly options: InMemoryEventStoreOptions = {}) {}

  async append(streamId: string, events: NewEvent[], expectedRevision: ExpectedRevision): Promise<AppendResult> {
    this.assertOpen();
    if (expectedRevision !== 'any' && expectedRevision !== 'no_stream') {
      if (typeof expectedRevision !== 'number' || !Number.isSafeInteger(expectedRevision) || expectedRevision < 0) {
        throw new RangeError(`invalid expected revision: ${String(expectedRevision)} (use 'any', 'no_stream' or a revision >= 0)`);
      }
    }
    const rows = events.map((e) => ({
      eventId: e.metadata?.eventId ?? randomUUID(),
      type: e.type,
      data: JSON.stringify(e.data ?? null),
      metadata: JSON.stringify(e.metadata ?? {}),
    }));
    // Answer on a later tick, like a store that commits: callers must not rely on synchronous effects.
    await new Promise<void>((r) => setImmediate(r));
    this.assertOpen();
    const positions = this.streams.get(streamId) ?? [];
    const current = positions.length - 1;
    const ok = expectedRevision === 'any' || (expectedRevision === 'no_stream' ? current === -1 : current === expectedRevision);
    if (!ok) throw new WrongExpectedRevisionError(streamId, expectedRevision, current < 0 ? 'no_stream' : current);
    const seen = new Set<string>();
    for (const r of rows) {
      if (this.eventIds.has(r.eventId) || seen.has(r.eventId)) throw new Error(`duplicate event id ${r.eventId}`);
      seen.add(r.eventId);
    }
    if (rows.length === 0) {
      return { nextExpectedRevision: current, position: current < 0 ? 0 : positions[current] };
    }
    let revision = current;
    let position = 0;
    for (const r of rows) {
      revision++;
      position = this.log.length + 1;
      this.log.push({ streamId, revision, position, type: r.type, data: r.data, metadata: r.metadata });
      positions.push(position);
      this.eventIds.add(r.eventId);
    }
    this.streams.set(streamId, positions);
    for (const s of this.subscriptions) s.notify();
    return { nextExpectedRevision: revision, position };
  }

  async readStream(streamId: string, fromRevision = 0): Promise<RecordedEvent[]> {
    this.assertOpen();
    const positions = this.streams.get(streamId) ?? [];
    return positions.slice(Math.max(0, fromRevision)).map((p) => this.recorded(p));
  }

  async readAll(fromPosition: number, limit: number): Promise<RecordedEvent[]> {
    this.assertOpen();
    return this.readAllSync(fromPosition, limit);
  }

  private readAllSync(fromPosition: number, limit: number): RecordedEvent[] {
    const start = Math.max(0, Math.floor(fromPosition));
    return this.log.slice(start, start + Math.max(0, Math.floor(limit))).map((r) => this.recorded(r.position));
  }

  async headPosition(): Promise<number> {
    this.assertOpen();
    return this.log.length;
  }

  subscribeToAll(options: SubscribeOptions, handler: (event: RecordedEvent) => Promise<void>): Subscription {
    this.assertOpen();
    const sub = new PollingSubscription(
      options,
      handler,
      {
        readPage: async (position, limit) => (this.closed ? [] : this.readAllSync(position, limit)),
        pageSize: this.options.pageSize,
        // Every append notifies, so polling is only a safety net here.
        pollIntervalMs: 1000,
        retryDelayMs: this.options.retryDelayMs,
        logger: this.options.logger,
      },
      (s) => this.subscriptions.delete(s),
    );
    this.subscriptions.add(sub);
    return sub;
  }

  /** Answers while the store is open (it lives in this process). */
  async ping(): Promise<void> {
    this.assertOpen();
  }

  async close(): Promise<void> {
    if (this.closed) return;
    await Promise.all([...this.subscriptions].map((s) => s.close()));
    this.closed = true;
  }

  private recorded(position: number): RecordedEvent {
    const r = this.log[position - 1];
    return {
      streamId: r.streamId,
      revision: r.revision,
      position: r.position,
      type: r.type,
      data: JSON.parse(r.data),
      metadata: JSON.parse(r.metadata),
    };
  }

  private assertOpen(): void {
    if (this.closed) throw new Error('event store is closed');
  }
}
