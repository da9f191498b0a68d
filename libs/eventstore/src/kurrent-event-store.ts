import {
  ANY,
  AllStreamResolvedEvent,
  BACKWARDS,
  END,
  ErrorType,
  FORWARDS,
  KurrentDBClient,
  NO_STREAM,
  Position,
  ReadPosition,
  START,
  StreamNotFoundError,
  WrongExpectedVersionError,
  excludeSystemEvents,
  jsonEvent,
  streamNameFilter,
} from '@kurrent/kurrentdb-client';
import type { AllStreamSubscription, AppendStreamState, Filter, ResolvedEvent } from '@kurrent/kurrentdb-client';
import { randomUUID } from 'node:crypto';
import { defaultEventStoreLogger, EventStoreLogger, handOffUntilHandled, matchesPrefix } from './subscription-loop';
import {
  AppendResult,
  EventMetadata,
  EventStore,
  ExpectedRevision,
  NewEvent,
  RecordedEvent,
  SubscribeOptions,
  Subscription,
  WrongExpectedRevisionError,
} from './types';

export interface KurrentEventStoreOptions {
  /** First retry delay after a subscription handler failure or a dropped subscription (default 100 ms, doubling to 5 s). */
  retryDelayMs?: number;
  logger?: EventStoreLogger;
}

/**
 * The EventStore port over KurrentDB (EventStoreDB) for distributed mode.
 *
 * Global positions: the port's `position` is `Number(commitPosition)` of the event in `$all`.
 * KurrentDB writes every event of an append as its own log record whose commit position equals
 * its prepare position, so commit positions are unique per event and strictly increasing along
 * `$all`. They are byte offsets in the transaction log (not consecutive integers) and stay far
 * below 2^53 for any realistic log. A port position is turned back into a `$all` read position as
 * `{ commit: p, prepare: p }`.
 *
 * `$all` also holds system events (`$`-prefixed event types and streams): they are never
 * returned by readAll, headPosition or subscriptions.
 *
 * Event data and metadata are stored as JSON; `metadata.eventId` becomes the event's id.
 */
export class KurrentEventStore implements EventStore {
  readonly client: KurrentDBClient;
  private readonly subscriptions = new Set<KurrentSubscription>();
  private closed = false;

  constructor(
    connectionString: string,
    private readonly options: KurrentEventStoreOptions = {},
  ) {
    this.client = KurrentDBClient.connectionString(connectionString);
  }

  async append(streamId: string, events: NewEvent[], expectedRevision: ExpectedRevision): Promise<AppendResult> {
    this.assertOpen();
    const streamState = toStreamState(expectedRevision);
    if (events.length === 0) {
      // Nothing to write: still honour the expected revision, as the other adapters do.
      const last = await this.lastOfStream(streamId);
      const current = last ? last.revision : -1;
      const ok = expectedRevision === 'any' || (expectedRevision === 'no_stream' ? current === -1 : current === expectedRevision);
      if (!ok) throw new WrongExpectedRevisionError(streamId, expectedRevision, current < 0 ? 'no_stream' : current);
      return { nextExpectedRevision: current, position: last ? last.position : 0 };
    }
    const data = events.map((e) =>
      jsonEvent({
        id: e.metadata?.eventId ?? randomUUID(),
        type: e.type,
        // The client expects a JSON object, array or string; anything else is wrapped by JSON itself.
        data: (e.data ?? null) as never,
        metadata: (e.metadata ?? {}) as unknown as Record<string, unknown>,
      }),
    );
    let result;
    try {
      result = await this.client.appendToStream(streamId, data, { streamState });
    } catch (err) {
      if (err instanceof WrongExpectedVersionError || (err as { type?: string })?.type === ErrorType.WRONG_EXPECTED_VERSION) {
        const actual = (err as WrongExpectedVersionError).actualState;
        throw new WrongExpectedRevisionError(
          streamId,
          expectedRevision,
          actual === undefined || actual === NO_STREAM || typeof actual !== 'bigint' || actual < BigInt(0) ? 'no_stream' : Number(actual),
        );
      }
      throw err;
    }
    const nextExpectedRevision = Number(result.nextExpectedRevision);
    let position: number | undefined;
    if (events.length === 1 && result.position) position = Number(result.position.commit);
    if (position === undefined) {
      // The append result carries one position for the whole write; read the last event's own.
      const [last] = await collect(this.client.readStream(streamId, { fromRevision: BigInt(nextExpectedRevision), maxCount: 1, direction: FORWARDS }));
      position = last ? eventPosition(last) : Number(result.position?.commit ?? 0);
    }
    return { nextExpectedRevision, position };
  }

  async readStream(streamId: string, fromRevision = 0): Promise<RecordedEvent[]> {
    this.assertOpen();
    try {
      const resolved = await collect(this.client.readStream(streamId, { fromRevision: BigInt(Math.max(0, fromRevision)), direction: FORWARDS }));
      return resolved.filter((r) => r.event && !r.event.type.startsWith('$')).map(toRecorded);
    } catch (err) {
      if (isStreamNotFound(err)) return [];
      throw err;
    }
  }

  async readAll(fromPosition: number, limit: number): Promise<RecordedEvent[]> {
    this.assertOpen();
    const max = Math.max(0, Math.floor(limit));
    if (max === 0) return [];
    const out: RecordedEvent[] = [];
    // Reading $all is inclusive of the start position: read one more and drop what is <= it.
    for await (const r of this.client.readAll({
      fromPosition: toReadPosition(fromPosition),
      maxCount: max + 1,
      direction: FORWARDS,
      filter: excludeSystemEvents(),
    })) {
      if (!isUserEvent(r)) continue;
      const e = toRecorded(r);
      if (e.position <= fromPosition) continue;
      out.push(e);
      if (out.length >= max) break;
    }
    return out;
  }

  async headPosition(): Promise<number> {
    this.assertOpen();
    for await (const r of this.client.readAll({
      fromPosition: END,
      direction: BACKWARDS,
      maxCount: 1,
      filter: excludeSystemEvents(),
    })) {
      if (isUserEvent(r)) return eventPosition(r);
    }
    return 0;
  }

  /** One read from the server (the newest record of `$all`, whatever it is). */
  async ping(): Promise<void> {
    this.assertOpen();
    for await (const _record of this.client.readAll({ fromPosition: END, direction: BACKWARDS, maxCount: 1 })) break;
  }

  subscribeToAll(options: SubscribeOptions, handler: (event: RecordedEvent) => Promise<void>): Subscription {
    this.assertOpen();
    const sub = new KurrentSubscription(this.client, options, handler, this.options, (s) => this.subscriptions.delete(s));
    this.subscriptions.add(sub);
    return sub;
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await Promise.all([...this.subscriptions].map((s) => s.close()));
    await this.client.dispose();
  }

  private async lastOfStream(streamId: string): Promise<RecordedEvent | undefined> {
    try {
      const [last] = await collect(this.client.readStream(streamId, { fromRevision: END, direction: BACKWARDS, maxCount: 1 }));
      return last?.event ? toRecorded(last) : undefined;
    } catch (err) {
      if (isStreamNotFound(err)) return undefined;
      throw err;
    }
  }

  private assertOpen(): void {
    if (this.closed) throw new Error('event store is closed');
  }
}

/**
 * A catch-up subscription to `$all` from a checkpoint: the server sends history then live
 * events; each is handed to the handler one at a time (the async iterator applies back-pressure).
 * A failing handler is retried on the same event after a growing delay; a dropped subscription is
 * re-opened from the last handled position.
 */
class KurrentSubscription implements Subscription {
  private closed = false;
  private current: AllStreamSubscription | null = null;
  private inHandler = false;
  private wake: (() => void) | null = null;
  private readonly done: Promise<void>;

  constructor(
    private readonly client: KurrentDBClient,
    private readonly options: SubscribeOptions,
    private readonly handler: (event: RecordedEvent) => Promise<void>,
    private readonly settings: KurrentEventStoreOptions,
    private readonly onClosed: (s: KurrentSubscription) => void,
  ) {
    this.done = this.run().finally(() => this.onClosed(this));
  }

  async close(): Promise<void> {
    if (!this.closed) {
      this.closed = true;
      const w = this.wake;
      this.wake = null;
      if (w) w();
      const s = this.current;
      this.current = null;
      if (s) await s.unsubscribe().catch(() => undefined);
    }
    if (this.inHandler) return;
    await this.done;
  }

  private sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const t = setTimeout(() => {
        this.wake = null;
        resolve();
      }, ms);
      this.wake = () => {
        clearTimeout(t);
        resolve();
      };
    });
  }

  private filter(): Filter {
    const prefixes = this.options.streamPrefix;
    if (prefixes && prefixes.length > 0) return streamNameFilter({ prefixes });
    return excludeSystemEvents();
  }

  private async run(): Promise<void> {
    const logger = this.settings.logger ?? defaultEventStoreLogger;
    const baseDelay = this.settings.retryDelayMs ?? 100;
    let checkpoint = this.options.fromPosition;
    let reconnectDelay = baseDelay;
    await Promise.resolve();
    while (!this.closed) {
      const sub = this.client.subscribeToAll({ fromPosition: toReadPosition(checkpoint), filter: this.filter() });
      this.current = sub;
      try {
        for await (const r of sub) {
          if (this.closed) break;
          if (!isUserEvent(r)) continue;
          const event = toRecorded(r);
          if (event.position <= checkpoint) continue;
          if (!matchesPrefix(event.streamId, this.options.streamPrefix)) {
            checkpoint = event.position;
            continue;
          }
          const handled = await handOffUntilHandled(event, {
            handler: this.handler,
            logger,
            firstDelayMs: baseDelay,
            maxDelayMs: 5000,
            isClosed: () => this.closed,
            sleep: (ms) => this.sleep(ms),
            inHandler: (running) => (this.inHandler = running),
          });
          if (!handled || this.closed) break;
          checkpoint = event.position;
          reconnectDelay = baseDelay;
        }
      } catch (err) {
        if (this.closed) break;
        logger.warn('eventstore subscription dropped; resubscribing', {
          position: checkpoint,
          error: err instanceof Error ? err.name : typeof err,
        });
      }
      if (this.current === sub) this.current = null;
      await sub.unsubscribe().catch(() => undefined);
      if (this.closed) break;
      await this.sleep(reconnectDelay);
      reconnectDelay = Math.min(reconnectDelay * 2, 5000);
    }
  }
}

function toStreamState(e: ExpectedRevision): AppendStreamState {
  if (e === 'any') return ANY;
  if (e === 'no_stream') return NO_STREAM;
  if (typeof e !== 'number' || !Number.isSafeInteger(e) || e < 0) {
    throw new RangeError(`invalid expected revision: ${String(e)} (use 'any', 'no_stream' or a revision >= 0)`);
  }
  return BigInt(e);
}

function toReadPosition(position: number): ReadPosition {
  if (!position || position <= 0) return START;
  const p = BigInt(Math.floor(position));
  const pos: Position = { commit: p, prepare: p };
  return pos;
}

function isUserEvent(r: AllStreamResolvedEvent | ResolvedEvent): boolean {
  const e = r.event;
  return !!e && !e.type.startsWith('$') && !e.streamId.startsWith('$');
}

function eventPosition(r: AllStreamResolvedEvent | ResolvedEvent): number {
  const commit = r.event?.position?.commit ?? r.commitPosition;
  return commit === undefined ? 0 : Number(commit);
}

function toRecorded(r: AllStreamResolvedEvent | ResolvedEvent): RecordedEvent {
  const e = r.event!;
  return {
    streamId: e.streamId,
    revision: Number(e.revision),
    position: eventPosition(r),
    type: e.type,
    data: e.isJson ? e.data : Buffer.from(e.data as Uint8Array).toString('utf8'),
    metadata: parseMetadata(e.metadata),
  };
}

function parseMetadata(m: unknown): EventMetadata {
  if (m instanceof Uint8Array) {
    const text = Buffer.from(m).toString('utf8');
    return (text ? JSON.parse(text) : {}) as EventMetadata;
  }
  return (m ?? {}) as EventMetadata;
}

function isStreamNotFound(err: unknown): boolean {
  return err instanceof StreamNotFoundError || (err as { type?: string })?.type === ErrorType.STREAM_NOT_FOUND;
}

async function collect<T>(it: AsyncIterable<T>): Promise<T[]> {
  const out: T[] = [];
  for await (const x of it) out.push(x);
  return out;
}
