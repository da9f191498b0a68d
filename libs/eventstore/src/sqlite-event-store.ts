// Over 400 lines: the SQLite event store: writer thread, reads and subscriptions belong together.
import Database from 'better-sqlite3';
import { randomUUID } from 'node:crypto';
import { BatchAppend, BatchResult, BatchWriter, createBatchWriter } from './batch-writer';
import { EventStoreLogger, PollingSubscription } from './subscription-loop';
import { WalCheckpointer } from './wal-checkpointer';
import { WriterThread } from './writer-thread';
import { AppendResult, EventStore, ExpectedRevision, NewEvent, RecordedEvent, SubscribeOptions, Subscription, WrongExpectedRevisionError } from './types';

export interface SqliteEventStoreOptions {
  /** How often a live subscription polls for appends made by other processes (default 250 ms). */
  pollIntervalMs?: number;
  /** Page size of catch-up reads (default 500). */
  pageSize?: number;
  /** First retry delay after a subscription handler failure (default 50 ms, doubling to 2 s). */
  retryDelayMs?: number;
  /** How long a writer waits for another process's write lock (default 5000 ms). */
  busyTimeoutMs?: number;
  logger?: EventStoreLogger;
  /**
   * WAL pages between automatic checkpoints (default 8192, i.e. 32 MiB at 4 KiB pages). Group
   * commits dirty many index pages; checkpointing less often lets repeated pages be written back
   * once (SQLite's own default of 1000 costs about a fifth of the append throughput).
   */
  walAutocheckpoint?: number;
  /**
   * Page size of a NEW database file (default 2048; an existing file keeps its own). An append
   * dirties the tail page of its stream in the (stream_id, revision) index, so a group commit
   * writes about one page per stream it touches: smaller pages make each of those WAL frames
   * cheaper. Measured: +12-15% appends/s at 64 writers against 4096-byte pages, while single-row
   * commits change by ~4% (bench/README.md).
   */
  dbPageSize?: number;
  /**
   * How many just-committed events this connection keeps in memory for its live subscriptions
   * (default 4096; 0 turns the tail off). See `CommittedTail`.
   */
  tailSize?: number;
  /**
   * Run WAL checkpoints on a worker thread (`WalCheckpointer`) instead of inside the COMMIT that
   * crosses `walAutocheckpoint` (default true for a file; never for `:memory:`).
   */
  backgroundCheckpoint?: boolean;
  /**
   * Write on a worker thread (`WriterThread`, its own connection) instead of the calling thread
   * (default true for a file; never for `:memory:`).
   */
  writerThread?: boolean;
}

interface PendingAppend {
  append: BatchAppend;
  resolve(result: AppendResult): void;
  reject(err: unknown): void;
}

interface EventRow {
  position: number;
  stream_id: string;
  revision: number;
  type: string;
  data: string;
  metadata: string;
}

const SCHEMA = `
CREATE TABLE IF NOT EXISTS events (
  position  INTEGER PRIMARY KEY,
  event_id  TEXT    NOT NULL,
  stream_id TEXT    NOT NULL,
  revision  INTEGER NOT NULL,
  type      TEXT    NOT NULL,
  data      TEXT    NOT NULL,
  metadata  TEXT    NOT NULL,
  UNIQUE (stream_id, revision)
);
`;
// No AUTOINCREMENT: rows are never deleted, so the rowid (max + 1) is already strictly increasing,
// and AUTOINCREMENT only added a sqlite_sequence update to every commit. No UNIQUE on event_id:
// event ids are minted by the services (randomUUID) and idempotency lives in the streams
// (architecture rule 2), so the index only cost a scattered B-tree page per appended event
// (docs/decisions.md, Performance). Files created with the older schema keep working as they are.

/**
 * The embedded event store of standalone mode: one SQLite file (WAL, synchronous=FULL).
 *
 * Group commit: every append made in the same tick is queued and written by ONE transaction
 * (one fsync) on setImmediate. Each append's expected revision is checked inside that
 * transaction against the stream as it stands, including earlier appends of the same batch; an
 * append that fails its check (or a constraint) is rejected alone while the others commit. Every
 * caller's promise settles only after the transaction has committed, so a resolved append is
 * durable. For a file, the transaction runs on a writer thread (`WriterThread`) while this thread
 * goes on serving; appends made meanwhile form the next batch. Reads use this thread's own
 * connection, which sees every commit the writer has returned from (read-your-writes).
 */
export class SqliteEventStore implements EventStore {
  private readonly db: Database.Database;
  private queue: PendingAppend[] = [];
  private flushScheduled = false;
  private closed = false;
  private readonly subscriptions = new Set<PollingSubscription>();
  /** The group commit on a worker thread, or (null) on this thread's connection through `writer`. */
  private thread: WriterThread | null = null;
  private writer: BatchWriter | null = null;
  /** The batch the writer thread is committing (settles, never rejects). */
  private inFlight: Promise<void> | null = null;
  private autocheckpoint: number;
  /** Counters for benchmarks and diagnostics: committed transactions and the appends they carried. */
  readonly stats = { commits: 0, appends: 0, tailReads: 0, sqlReads: 0 };
  private readonly tail: CommittedTail;
  private readonly checkpointer: WalCheckpointer | null = null;

  private readonly stmt: {
    readStream: Database.Statement<[string, number], EventRow>;
    readAll: Database.Statement<[number, number], EventRow>;
    head: Database.Statement<[], { head: number | null }>;
  };

  constructor(
    readonly filename: string,
    private readonly options: SqliteEventStoreOptions = {},
  ) {
    this.db = new Database(filename);
    // Takes effect only while the file is empty (before WAL and the schema).
    this.db.pragma(`page_size = ${Math.floor(options.dbPageSize ?? 2048)}`);
    this.db.pragma('journal_mode = WAL');
    this.db.pragma('synchronous = FULL');
    this.db.pragma(`busy_timeout = ${Math.max(0, Math.floor(options.busyTimeoutMs ?? 5000))}`);
    const autocheckpoint = Math.max(0, Math.floor(options.walAutocheckpoint ?? 8192));
    this.autocheckpoint = autocheckpoint;
    this.db.pragma(`wal_autocheckpoint = ${autocheckpoint}`);
    // After a checkpoint, truncate a WAL that grew past 64 MiB.
    this.db.pragma('journal_size_limit = 67108864');
    this.db.exec(SCHEMA);
    if (options.backgroundCheckpoint !== false && isFile(filename)) {
      // The worker checkpoints every second; the COMMIT path only does it as a backstop (8x further).
      this.autocheckpoint = autocheckpoint * 8;
      this.checkpointer = new WalCheckpointer(filename, () => this.setAutocheckpoint(autocheckpoint));
    }
    this.db.pragma(`wal_autocheckpoint = ${this.autocheckpoint}`);
    if (options.writerThread !== false && isFile(filename)) {
      this.thread = new WriterThread(
        filename,
        { busyTimeoutMs: Math.max(0, Math.floor(options.busyTimeoutMs ?? 5000)), autocheckpoint: this.autocheckpoint },
        () => {
          // The writer thread is gone: write on this thread's connection from now on.
          this.thread = null;
          options.logger?.warn('event store writer thread stopped; writing on the main thread', {});
        },
      );
    }
    this.tail = new CommittedTail(Math.max(0, Math.floor(options.tailSize ?? 4096)));
    this.stmt = {
      readStream: this.db.prepare(
        'SELECT position, stream_id, revision, type, data, metadata FROM events WHERE stream_id = ? AND revision >= ? ORDER BY revision',
      ),
      readAll: this.db.prepare('SELECT position, stream_id, revision, type, data, metadata FROM events WHERE position > ? ORDER BY position LIMIT ?'),
      head: this.db.prepare('SELECT MAX(position) AS head FROM events'),
    };
  }

  private setAutocheckpoint(pages: number): void {
    this.autocheckpoint = pages;
    if (this.db.open) this.db.pragma(`wal_autocheckpoint = ${pages}`);
    this.thread?.setAutocheckpoint(pages);
  }

  append(streamId: string, events: NewEvent[], expectedRevision: ExpectedRevision): Promise<AppendResult> {
    if (this.closed) return Promise.reject(new Error('event store is closed'));
    let rows: BatchAppend['rows'];
    try {
      checkExpected(expectedRevision);
      rows = events.map((e) => ({
        eventId: e.metadata?.eventId ?? randomUUID(),
        type: e.type,
        data: JSON.stringify(e.data ?? null),
        metadata: JSON.stringify(e.metadata ?? {}),
      }));
    } catch (err) {
      return Promise.reject(err);
    }
    return new Promise<AppendResult>((resolve, reject) => {
      this.queue.push({ append: { streamId, expected: expectedRevision, rows }, resolve, reject });
      if (!this.flushScheduled) {
        this.flushScheduled = true;
        setImmediate(() => this.flush());
      }
    });
  }

  /** Writes every queued append in one transaction, then answers each caller. */
  private flush(): void {
    this.flushScheduled = false;
    // With a batch on the writer thread, the queue waits for it (and then goes as one batch).
    if (this.inFlight || this.queue.length === 0) return;
    const batch = this.queue;
    this.queue = [];
    const appends = batch.map((p) => p.append);
    const thread = this.thread;
    if (thread) {
      this.inFlight = thread
        .write(appends)
        .then(
          (result) => this.settle(batch, result),
          (err) => this.fail(batch, err),
        )
        .finally(() => {
          this.inFlight = null;
          this.flush();
        });
      return;
    }
    let result: BatchResult;
    try {
      this.writer ??= createBatchWriter(this.db);
      result = this.writer.write(appends);
    } catch (err) {
      this.fail(batch, err);
      return;
    }
    this.settle(batch, result);
  }

  /** The batch committed: the committed tail first, then each caller, then the subscriptions. */
  private settle(batch: PendingAppend[], result: BatchResult): void {
    this.stats.commits++;
    this.stats.appends += batch.length;
    // The rows this transaction inserted, in position order (each written append's rows took
    // consecutive positions ending at its `position`).
    const written: TailRow[] = [];
    for (let i = 0; i < batch.length; i++) {
      const o = result.outcomes[i];
      const { streamId, rows } = batch[i].append;
      if (!('nextExpectedRevision' in o) || rows.length === 0) continue;
      let revision = o.nextExpectedRevision - rows.length;
      let position = o.position - rows.length;
      for (const row of rows) written.push({ streamId, revision: ++revision, position: ++position, row, event: null });
    }
    this.tail.committed(written, result.foreignWrite);
    for (let i = 0; i < batch.length; i++) {
      const o = result.outcomes[i];
      const p = batch[i];
      if ('wrong' in o) p.reject(new WrongExpectedRevisionError(p.append.streamId, p.append.expected, o.wrong < 0 ? 'no_stream' : o.wrong));
      else if ('error' in o) p.reject(Object.assign(new Error(o.error.message), o.error.code ? { code: o.error.code } : {}));
      else p.resolve({ nextExpectedRevision: o.nextExpectedRevision, position: o.position });
    }
    for (const s of this.subscriptions) s.notify();
  }

  /**
   * The transaction itself failed (lock timeout, I/O), or an INSERT error made SQLite roll it back
   * (SQLITE_FULL, IOERR, NOMEM): nothing of the batch was written.
   */
  private fail(batch: PendingAppend[], err: unknown): void {
    this.tail.reset();
    for (const p of batch) p.reject(err);
  }

  async readStream(streamId: string, fromRevision = 0): Promise<RecordedEvent[]> {
    this.assertOpen();
    return this.stmt.readStream.all(streamId, fromRevision).map(toRecorded);
  }

  async readAll(fromPosition: number, limit: number): Promise<RecordedEvent[]> {
    this.assertOpen();
    return this.readAllSync(fromPosition, limit);
  }

  private readAllSync(fromPosition: number, limit: number): RecordedEvent[] {
    return this.stmt.readAll.all(fromPosition, Math.max(0, Math.floor(limit))).map(toRecorded);
  }

  async headPosition(): Promise<number> {
    this.assertOpen();
    return this.stmt.head.get()?.head ?? 0;
  }

  /** A read of the log's head on this thread's connection (the file answers). */
  async ping(): Promise<void> {
    this.assertOpen();
    this.stmt.head.get();
  }

  subscribeToAll(options: SubscribeOptions, handler: (event: RecordedEvent) => Promise<void>): Subscription {
    this.assertOpen();
    const sub = new PollingSubscription(
      options,
      handler,
      {
        readPage: async (position, limit) => {
          if (this.closed) return [];
          const fromTail = this.tail.after(position, limit);
          if (fromTail) {
            this.stats.tailReads++;
            return fromTail;
          }
          this.stats.sqlReads++;
          return this.readAllSync(position, limit);
        },
        pageSize: this.options.pageSize,
        pollIntervalMs: this.options.pollIntervalMs ?? 250,
        retryDelayMs: this.options.retryDelayMs,
        logger: this.options.logger,
      },
      (s) => this.subscriptions.delete(s),
    );
    this.subscriptions.add(sub);
    return sub;
  }

  async close(): Promise<void> {
    if (this.closed) return;
    await Promise.all([...this.subscriptions].map((s) => s.close()));
    // Appends already accepted are written (and answered) before the file is closed.
    while (this.inFlight || this.queue.length) {
      if (this.inFlight) await this.inFlight;
      else this.flush();
    }
    this.closed = true;
    await this.thread?.close();
    await this.checkpointer?.close();
    this.db.close();
  }

  private assertOpen(): void {
    if (this.closed) throw new Error('event store is closed');
  }
}

/** A database file on disk (not `:memory:`, not a temporary or in-memory URI). */
export function isFile(filename: string): boolean {
  return filename !== '' && filename !== ':memory:' && !filename.startsWith('file:');
}

function checkExpected(e: ExpectedRevision): void {
  if (e === 'any' || e === 'no_stream') return;
  if (typeof e !== 'number' || !Number.isSafeInteger(e) || e < 0) {
    throw new RangeError(`invalid expected revision: ${String(e)} (use 'any', 'no_stream' or a revision >= 0)`);
  }
}

/**
 * The events this connection committed last, kept in memory so that live subscriptions (a dozen
 * projections and relays in standalone mode, each following the whole log) do not each read and
 * decode the same new rows back from SQLite after every commit.
 *
 * Invariant: the tail holds EVERY event of the log with a position in (from, to], in order. Rows
 * are added only after their COMMIT returned. A commit extends the range when nothing else was
 * written since this connection's previous commit (`PRAGMA data_version` unchanged, checked while
 * holding the write lock) and its first row follows `to`; otherwise the tail restarts at this
 * commit (another process's events before it are read from SQLite). Another process writing
 * AFTER our last commit does not break the invariant: its rows lie beyond `to`, and a read at or
 * beyond `to` always goes to SQLite (which is how the poll finds them). Events are shared between
 * subscribers, so they are frozen: a handler that tried to change one would fail loudly.
 */
class CommittedTail {
  private events: TailRow[] = [];
  private start = 0; // index of the oldest kept event in `events`
  private from = 0; // position before the oldest kept event
  private to = 0; // position of the newest kept event
  private valid = false;

  constructor(private readonly capacity: number) {}

  committed(written: TailRow[], foreignWrite: boolean): void {
    if (this.capacity === 0 || written.length === 0) return;
    const first = written[0].position;
    if (!this.valid || foreignWrite || first !== this.to + 1) {
      this.events = [];
      this.start = 0;
      this.from = first - 1;
      this.valid = true;
    }
    for (const e of written) this.events.push(e);
    this.to = written[written.length - 1].position;
    const kept = this.events.length - this.start;
    if (kept > this.capacity) {
      this.start += kept - this.capacity;
      this.from = this.events[this.start].position - 1;
      if (this.start > this.capacity) {
        this.events = this.events.slice(this.start);
        this.start = 0;
      }
    }
  }

  reset(): void {
    this.events = [];
    this.start = 0;
    this.valid = false;
  }

  /** The events after `position` (at most `limit`), or null when the tail cannot answer for them. */
  after(position: number, limit: number): RecordedEvent[] | null {
    if (!this.valid || position < this.from || position >= this.to || limit <= 0) return null;
    // Binary search for the first kept event with a position above `position`.
    let lo = this.start;
    let hi = this.events.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (this.events[mid].position <= position) lo = mid + 1;
      else hi = mid;
    }
    const out: RecordedEvent[] = [];
    for (let i = lo; i < this.events.length && out.length < limit; i++) out.push(materialize(this.events[i]));
    return out;
  }
}

/** A committed row kept by the tail; decoded (once, then shared) when a subscriber first reads it. */
interface TailRow {
  streamId: string;
  revision: number;
  position: number;
  row: BatchAppend['rows'][number];
  event: RecordedEvent | null;
}

function materialize(t: TailRow): RecordedEvent {
  // The same values a read from SQLite would give (JSON round trip of the stored text), frozen.
  t.event ??= deepFreeze({
    streamId: t.streamId,
    revision: t.revision,
    position: t.position,
    type: t.row.type,
    data: JSON.parse(t.row.data),
    metadata: JSON.parse(t.row.metadata),
  });
  return t.event;
}

function deepFreeze<T>(value: T): T {
  if (value && typeof value === 'object' && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const v of Object.values(value as Record<string, unknown>)) deepFreeze(v);
  }
  return value;
}

function toRecorded(row: EventRow): RecordedEvent {
  return {
    streamId: row.stream_id,
    revision: row.revision,
    position: row.position,
    type: row.type,
    data: JSON.parse(row.data),
    metadata: JSON.parse(row.metadata),
  };
}
