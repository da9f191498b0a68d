/**
 * The event store port. Every adapter (SQLite, PostgreSQL, KurrentDB, in-memory) implements it and
 * passes the same conformance suite (libs/eventstore/test/conformance.ts).
 */

/** Metadata carried by every event (the "every event carries metadata" rule). */
export interface EventMetadata {
  /** Unique id of this event (uuid). */
  eventId: string;
  /** Id shared by everything caused by one incoming request. */
  correlationId: string;
  /** Id of the event or request that caused this event. */
  causationId: string | null;
  organizationId: string | null;
  environmentId: string | null;
  /** Who did it: `staff:<sub>`, `api-key:<id>`, `patient:<id>`, `system`. */
  actor: string;
  /** Service-clock time of the append (ISO 8601). */
  recordedAt: string;
  /**
   * The per-stream hash chain (`HashChainingEventStore`, docs/audit.md), set by the store at
   * append over whatever a caller put here: the previous event's hash (null for the first chained
   * event of a stream) and this event's. Absent on events written before the chain existed.
   */
  prevHash?: string | null;
  hash?: string;
}

export interface NewEvent<T = unknown> {
  type: string;
  data: T;
  metadata: EventMetadata;
}

export interface RecordedEvent<T = unknown> extends NewEvent<T> {
  streamId: string;
  /** 0-based revision of the event within its stream. */
  revision: number;
  /** Global, strictly increasing position in the `$all` log (> 0). */
  position: number;
}

/** `any`: no check; `no_stream`: the stream must not exist; a number: the stream's current last revision. */
export type ExpectedRevision = 'any' | 'no_stream' | number;

export interface AppendResult {
  /** Revision of the last appended event. */
  nextExpectedRevision: number;
  /** Global position of the last appended event. */
  position: number;
}

export interface Subscription {
  close(): Promise<void>;
}

export interface SubscribeOptions {
  /** Deliver events with position strictly greater than this (0 = from the start). */
  fromPosition: number;
  /** Optional prefix filter on stream ids. */
  streamPrefix?: string[];
  /**
   * Optional, an optimization a store may ignore: asked first for each event; `true` means the
   * subscriber has taken the event as it is, synchronously (the handler is then not called).
   * It sees the event as stored (data possibly still sealed): it may decide from position, stream
   * and type only. The polling stores (SQLite, PostgreSQL, in-memory) use it; KurrentDB calls the handler.
   */
  passOver?: (event: RecordedEvent) => boolean;
}

export interface EventStore {
  append(streamId: string, events: NewEvent[], expectedRevision: ExpectedRevision): Promise<AppendResult>;
  /** Events of one stream, oldest first; [] when the stream does not exist. */
  readStream(streamId: string, fromRevision?: number): Promise<RecordedEvent[]>;
  /** Events of all streams with position > fromPosition, oldest first, at most `limit`. */
  readAll(fromPosition: number, limit: number): Promise<RecordedEvent[]>;
  /** Catch up from the checkpoint, then follow live appends, in order, one at a time. */
  subscribeToAll(options: SubscribeOptions, handler: (event: RecordedEvent) => Promise<void>): Subscription;
  /** Position of the last event in the log (0 when empty). */
  headPosition(): Promise<number>;
  /**
   * Readiness (GET /readyz): resolves when the store answers a trivial read on its own connection;
   * rejects once it is closed or its server refuses. It may stay pending while a server is silent:
   * the caller bounds it with its own timeout.
   */
  ping(): Promise<void>;
  close(): Promise<void>;
}

export class WrongExpectedRevisionError extends Error {
  constructor(
    readonly streamId: string,
    readonly expected: ExpectedRevision,
    readonly actual: number | 'no_stream',
  ) {
    super(`wrong expected revision on ${streamId}: expected ${expected}, actual ${actual}`);
    this.name = 'WrongExpectedRevisionError';
  }
}

export const EVENT_STORE = Symbol('EVENT_STORE');
