// Over 400 lines: the PostgreSQL event store: group commit, watermark, notifications and reads belong together.
import { randomUUID } from 'node:crypto';
import { Client, Pool, escapeIdentifier } from 'pg';
import { DEFAULT_EVENT_SCHEMA, channelName, checkSchemaName, migrateEventSchema } from './postgres-schema';
import { EventStoreLogger, PollingSubscription, defaultEventStoreLogger } from './subscription-loop';
import { AppendResult, EventStore, ExpectedRevision, NewEvent, RecordedEvent, SubscribeOptions, Subscription, WrongExpectedRevisionError } from './types';

/** Where the store connects when no address is given: the local server's `postgres` database. */
export const DEFAULT_DATABASE_URL = 'postgres://postgres@127.0.0.1:5432/postgres';

export interface PostgresEventStoreOptions {
  /** `postgres://…` address (default `DEFAULT_DATABASE_URL`). */
  connectionString?: string;
  /** Schema holding the store's tables (default `svc_events`); created and migrated at open. */
  schema?: string;
  /** Most connections of the store's pool (default 10). The LISTEN connection comes on top. */
  poolSize?: number;
  /** Poll interval of live subscriptions, a safety net beside LISTEN/NOTIFY (default 500 ms). */
  pollIntervalMs?: number;
  /** Page size of catch-up reads (default 500). */
  pageSize?: number;
  /** First retry delay after a subscription handler failure (default 50 ms, doubling to 2 s). */
  retryDelayMs?: number;
  /** Most appends written by one transaction (default 256); more wait for the next one. */
  maxBatch?: number;
  /**
   * How long `readAll` and `headPosition` wait for committed events that an earlier, still open
   * transaction holds back (default 1000 ms); after that they answer without them.
   */
  settleWaitMs?: number;
  /**
   * LISTEN for other processes' commits (default true). A store that only writes (a benchmark, a
   * tool) can turn it off; it still announces its own commits.
   */
  listen?: boolean;
  logger?: EventStoreLogger;
}

interface PendingAppend {
  streamId: string;
  expected: ExpectedRevision;
  rows: { eventId: string; type: string; data: string; metadata: string }[];
  resolve(result: AppendResult): void;
  reject(err: unknown): void;
}

interface EventRow {
  position: string;
  stream_id: string;
  revision: number;
  type: string;
  data: string;
  metadata: string;
  settled?: boolean;
}

/** A page of the log in position order: the events that may be delivered, and whether more were held back. */
interface SettledPage {
  events: RecordedEvent[];
  heldBack: boolean;
}

/**
 * The EventStore port on PostgreSQL (`pg`): the event store of distributed mode, where several
 * processes append to and follow one log.
 *
 * **Global order never skips a commit.** Positions come from a sequence, and with concurrent
 * writers a lower position can commit after a higher one: a subscriber that had passed the higher
 * one would never see the lower. So every append transaction takes its transaction id and its
 * positions together under one short advisory lock (`allocate`, before it writes anything):
 * transaction ids and positions are then in the same order. A reader delivers only rows whose
 * transaction id is below the oldest transaction still running (`pg_snapshot_xmin` of the
 * statement's own snapshot): every transaction below that line has ended, so every position below
 * a delivered one is either visible in the same snapshot or was rolled back, and the rows a read
 * delivers are always a complete prefix of what follows its checkpoint. The checkpoint stays a
 * single position (the pair (xid, position) orders rows exactly as the position does).
 *
 * **Appends.** Appends made in the same tick are written by one transaction (group commit), one
 * transaction in flight per store, sent as ONE statement (`append_batch`, autocommit): it locks the
 * batch's streams (advisory transaction locks in key order, so writers of other processes on the
 * same streams wait instead of racing), reads their heads, checks each append's expected revision
 * against the stream as it stands including earlier appends of the batch, allocates and INSERTs
 * every accepted row; the statement's COMMIT follows on the server with no client round trip
 * while the transaction holds its id (which would hold every reader's watermark back). An append
 * that fails its check is rejected alone; each caller is answered after the COMMIT. If the
 * statement fails, every append of the batch is rejected and nothing of it is written.
 *
 * **Subscriptions** poll (`PollingSubscription`) and are woken at once by this store's own commits
 * and by other processes' through LISTEN/NOTIFY (one channel per schema; each store announces
 * its commits after COMMIT in a separate, non-durable transaction: a NOTIFY inside the append
 * transaction would hold PostgreSQL's notify lock across the commit's flush and serialize
 * writers). Subscribers at the same position share one read. Rows held back by an open
 * transaction are read again after a short, growing delay.
 *
 * A long-running transaction that has written anything, anywhere in the cluster (the watermark is
 * the cluster's oldest running transaction id), delays delivery for as long as it stays open; it
 * never causes a skip.
 */
export class PostgresEventStore implements EventStore {
  readonly schema: string;
  /** Counters for benchmarks and diagnostics: committed transactions, the appends they carried, log reads. */
  readonly stats = { commits: 0, appends: 0, reads: 0, sharedReads: 0, notifies: 0 };
  private readonly pool: Pool;
  private readonly options: PostgresEventStoreOptions;
  private readonly logger: EventStoreLogger;
  private readonly instanceId = randomUUID();
  private readonly channel: string;
  private readonly sql: ReturnType<typeof statements>;
  private readonly ready: Promise<void>;
  private queue: PendingAppend[] = [];
  private flushScheduled = false;
  private inFlight: Promise<void> | null = null;
  private closed = false;
  private closing = false;
  private readonly subscriptions = new Set<PollingSubscription>();
  private listener: Client | null = null;
  private listenerRetry: NodeJS.Timeout | null = null;
  private listenerDelay = 100;
  private notifying: Promise<void> | null = null;
  private announcePending = false;
  private announceTimer: NodeJS.Timeout | null = null;
  private lastAnnounce = 0;
  private heldBackTimer: NodeJS.Timeout | null = null;
  private heldBackDelay = HELD_BACK_FIRST_MS;
  private readonly pageReads = new Map<string, Promise<SettledPage>>();

  /** Opens the store: connects, creates or migrates its schema, and starts listening. */
  static async open(options: PostgresEventStoreOptions = {}): Promise<PostgresEventStore> {
    const store = new PostgresEventStore(options);
    try {
      await store.ready;
    } catch (err) {
      await store.close().catch(() => undefined);
      throw err;
    }
    return store;
  }

  /** Prefer `open()`; a store made here migrates in the background, and every call waits for it. */
  constructor(options: PostgresEventStoreOptions = {}) {
    this.options = options;
    this.schema = checkSchemaName(options.schema ?? DEFAULT_EVENT_SCHEMA);
    this.channel = channelName(this.schema);
    this.logger = options.logger ?? defaultEventStoreLogger;
    this.sql = statements(this.schema);
    this.pool = new Pool({
      connectionString: options.connectionString ?? DEFAULT_DATABASE_URL,
      max: Math.max(1, Math.floor(options.poolSize ?? 10)),
      // A server that cannot be reached fails a call within 10 s instead of holding it (and the
      // appends queued behind it) forever; TCP keepalives find connections to a vanished server.
      connectionTimeoutMillis: CONNECT_TIMEOUT_MS,
      keepAlive: true,
    });
    // An idle connection that fails (server restart) is dropped by the pool; without a listener the error would end the process.
    this.pool.on('error', (err) => this.logger.warn('eventstore postgres idle connection failed', { error: errName(err) }));
    this.ready = this.init();
    this.ready.catch(() => undefined);
  }

  private async init(): Promise<void> {
    const client = await this.pool.connect();
    try {
      await migrateEventSchema(client, this.schema);
    } finally {
      client.release();
    }
    if (this.options.listen !== false) await this.listen();
  }

  append(streamId: string, events: NewEvent[], expectedRevision: ExpectedRevision): Promise<AppendResult> {
    if (this.closed || this.closing) return Promise.reject(new Error('event store is closed'));
    let rows: PendingAppend['rows'];
    try {
      checkExpected(expectedRevision);
      checkText(streamId, 'stream id');
      if (streamId === '') throw new RangeError('stream id must not be empty');
      rows = events.map((e) => {
        const eventId = e.metadata?.eventId ?? randomUUID();
        checkText(e.type, 'event type');
        checkText(eventId, 'event id');
        return { eventId, type: e.type, data: JSON.stringify(e.data ?? null), metadata: JSON.stringify(e.metadata ?? {}) };
      });
    } catch (err) {
      return Promise.reject(err);
    }
    return new Promise<AppendResult>((resolve, reject) => {
      this.queue.push({ streamId, expected: expectedRevision, rows, resolve, reject });
      if (!this.flushScheduled) {
        this.flushScheduled = true;
        setImmediate(() => this.flush());
      }
    });
  }

  /** Sends the queued appends (up to `maxBatch`) as one transaction, unless one is in flight. */
  private flush(): void {
    this.flushScheduled = false;
    if (this.inFlight || this.queue.length === 0) return;
    const max = Math.max(1, Math.floor(this.options.maxBatch ?? 256));
    const batch = this.queue.length <= max ? this.queue : this.queue.slice(0, max);
    this.queue = this.queue.length <= max ? [] : this.queue.slice(max);
    this.inFlight = this.write(batch).finally(() => {
      this.inFlight = null;
      this.flush();
    });
  }

  /** One group commit: one statement (`append_batch`), one transaction. Settles every append of the batch; never rejects. */
  private async write(batch: PendingAppend[]): Promise<void> {
    try {
      await this.ready;
      const ids: string[] = [];
      const index = new Map<string, number>();
      const appStream: number[] = [];
      const appExpected: number[] = [];
      const appCount: number[] = [];
      const ev = { id: [] as string[], type: [] as string[], data: [] as string[], metadata: [] as string[] };
      for (const p of batch) {
        let i = index.get(p.streamId);
        if (i === undefined) {
          ids.push(p.streamId);
          i = ids.length;
          index.set(p.streamId, i);
        }
        appStream.push(i);
        // -2 any, -1 no stream; a revision beyond PostgreSQL's integer no stream can have is sent as -3 (matches nothing).
        appExpected.push(p.expected === 'any' ? -2 : p.expected === 'no_stream' ? -1 : p.expected > MAX_REVISION ? -3 : p.expected);
        appCount.push(p.rows.length);
        for (const r of p.rows) {
          ev.id.push(r.eventId);
          ev.type.push(r.type);
          ev.data.push(r.data);
          ev.metadata.push(r.metadata);
        }
      }
      const result = await this.pool.query<{ out_ok: boolean; out_revision: number; out_position: string | null }>({
        name: this.sql.appendBatch.name,
        text: this.sql.appendBatch.text,
        values: [ids, appStream, appExpected, appCount, ev.id, ev.type, ev.data, ev.metadata],
      });
      this.stats.commits++;
      this.stats.appends += batch.length;
      for (let i = 0; i < batch.length; i++) {
        const o = result.rows[i];
        const p = batch[i];
        if (!o.out_ok) p.reject(new WrongExpectedRevisionError(p.streamId, p.expected, o.out_revision < 0 ? 'no_stream' : o.out_revision));
        else p.resolve({ nextExpectedRevision: o.out_revision, position: Number(o.out_position) });
      }
      if (ev.id.length > 0) {
        this.wakeSubscriptions();
        this.announce();
      }
    } catch (err) {
      // Nothing of the batch was written (or, if the connection was lost during the COMMIT, the
      // outcome is unknown to the caller, as with any lost connection; a retry is recognised by the streams).
      for (const p of batch) p.reject(err);
    }
  }

  async readStream(streamId: string, fromRevision = 0): Promise<RecordedEvent[]> {
    this.assertOpen();
    await this.ready;
    const from = Math.max(0, Math.floor(fromRevision));
    if (from > MAX_REVISION) return [];
    const r = await this.pool.query<EventRow>({ name: this.sql.readStream.name, text: this.sql.readStream.text, values: [streamId, from] });
    return r.rows.map(toRecorded);
  }

  async readAll(fromPosition: number, limit: number): Promise<RecordedEvent[]> {
    this.assertOpen();
    await this.ready;
    const max = Math.max(0, Math.floor(limit));
    if (max === 0) return [];
    const until = Date.now() + this.settleWaitMs();
    let delay = HELD_BACK_FIRST_MS;
    for (;;) {
      const page = await this.readSettled(fromPosition, max);
      if (!page.heldBack || page.events.length >= max || Date.now() >= until || this.closed) return page.events;
      await sleep(delay);
      delay = Math.min(delay * 2, HELD_BACK_MAX_MS);
    }
  }

  async headPosition(): Promise<number> {
    this.assertOpen();
    await this.ready;
    const until = Date.now() + this.settleWaitMs();
    let delay = HELD_BACK_FIRST_MS;
    for (;;) {
      const r = await this.pool.query<{ top: string | null; settled: string | null }>({ name: this.sql.head.name, text: this.sql.head.text });
      const { top, settled } = r.rows[0];
      if (top === settled || Date.now() >= until || this.closed) return settled === null ? 0 : Number(settled);
      await sleep(delay);
      delay = Math.min(delay * 2, HELD_BACK_MAX_MS);
    }
  }

  /** `SELECT 1` on a pooled connection (the server answers; a new connection when none is idle). */
  async ping(): Promise<void> {
    this.assertOpen();
    await this.ready;
    await this.pool.query('SELECT 1');
  }

  subscribeToAll(options: SubscribeOptions, handler: (event: RecordedEvent) => Promise<void>): Subscription {
    this.assertOpen();
    const sub = new PollingSubscription(
      options,
      handler,
      {
        readPage: async (position, limit) => {
          if (this.closed) return [];
          await this.ready;
          return this.sharedPage(position, limit);
        },
        pageSize: this.options.pageSize,
        pollIntervalMs: this.options.pollIntervalMs ?? 500,
        retryDelayMs: this.options.retryDelayMs,
        logger: this.options.logger,
      },
      (s) => this.subscriptions.delete(s),
    );
    this.subscriptions.add(sub);
    return sub;
  }

  async close(): Promise<void> {
    if (this.closed || this.closing) return;
    this.closing = true;
    await Promise.all([...this.subscriptions].map((s) => s.close()));
    // Appends already accepted are written (and answered) before the pool closes.
    while (this.inFlight || this.queue.length) {
      if (this.inFlight) await this.inFlight;
      else this.flush();
    }
    this.closed = true;
    if (this.heldBackTimer) clearTimeout(this.heldBackTimer);
    if (this.listenerRetry) clearTimeout(this.listenerRetry);
    // The last commits are announced before the pool closes (closed: no more waiting for the spacing).
    if (this.announceTimer) {
      clearTimeout(this.announceTimer);
      this.announceTimer = null;
    }
    while (this.notifying || this.announcePending) {
      if (this.notifying) await this.notifying;
      else this.announce();
    }
    const listener = this.listener;
    this.listener = null;
    await listener?.end().catch(() => undefined);
    await this.pool.end();
  }

  /**
   * A page for a subscription: subscribers asking for the same page at the same time (a commit
   * wakes them all at the position they reached) share one query and one decoding. The events are
   * shared, so they are frozen: a handler that tried to change one fails loudly instead of
   * changing what the next subscriber sees.
   */
  private async sharedPage(position: number, limit: number): Promise<RecordedEvent[]> {
    const key = `${position}:${limit}`;
    let read = this.pageReads.get(key);
    if (read) this.stats.sharedReads++;
    else {
      read = this.readSettled(position, limit).then((page) => {
        for (const e of page.events) deepFreeze(e);
        return page;
      });
      this.pageReads.set(key, read);
      const forget = () => {
        if (this.pageReads.get(key) === read) this.pageReads.delete(key);
      };
      read.then(forget, forget);
    }
    const page = await read;
    if (page.heldBack) this.retryHeldBack();
    else this.heldBackDelay = HELD_BACK_FIRST_MS;
    return page.events;
  }

  /** Rows after `position` in position order, cut at the first row whose transaction may still have lower positions open. */
  private async readSettled(position: number, limit: number): Promise<SettledPage> {
    this.stats.reads++;
    const from = Math.max(0, Math.floor(position));
    const r = await this.pool.query<EventRow>({ name: this.sql.readAll.name, text: this.sql.readAll.text, values: [from, limit] });
    const events: RecordedEvent[] = [];
    for (const row of r.rows) {
      if (!row.settled) return { events, heldBack: true };
      events.push(toRecorded(row));
    }
    return { events, heldBack: false };
  }

  /** Committed rows are held back by an open transaction: wake the subscriptions again shortly, then less and less often. */
  private retryHeldBack(): void {
    if (this.heldBackTimer || this.closed) return;
    const delay = this.heldBackDelay;
    this.heldBackDelay = Math.min(delay * 2, HELD_BACK_MAX_MS);
    this.heldBackTimer = setTimeout(() => {
      this.heldBackTimer = null;
      this.wakeSubscriptions();
    }, delay);
    this.heldBackTimer.unref();
  }

  private wakeSubscriptions(): void {
    for (const s of this.subscriptions) s.notify();
  }

  /**
   * Tells other processes' stores that this one committed: NOTIFY in a transaction of its own,
   * after the COMMIT, without waiting for a flush (a lost notification costs one poll interval).
   * One in flight at a time, and at most one per `ANNOUNCE_SPACING_MS`: the first commit after a
   * quiet spell is announced at once, the commits of a burst by one NOTIFY at the end of each
   * spacing (a NOTIFY per commit cost a third of a single writer's appends per second).
   */
  private announce(): void {
    this.announcePending = true;
    if (this.notifying || this.announceTimer) return;
    const wait = this.lastAnnounce + ANNOUNCE_SPACING_MS - Date.now();
    if (wait > 0 && !this.closed) {
      this.announceTimer = setTimeout(() => {
        this.announceTimer = null;
        this.sendAnnounce();
      }, wait);
      return;
    }
    this.sendAnnounce();
  }

  private sendAnnounce(): void {
    if (!this.announcePending) return;
    this.announcePending = false;
    this.lastAnnounce = Date.now();
    this.notifying = this.pool
      .query(this.sql.notify(this.instanceId))
      .then(
        () => {
          this.stats.notifies++;
        },
        (err) => {
          if (!this.closed) this.logger.warn('eventstore postgres notify failed', { error: errName(err) });
        },
      )
      .finally(() => {
        this.notifying = null;
        if (this.announcePending) this.announce();
      });
  }

  /** The LISTEN connection: wakes the subscriptions on another store's commit; reconnects after a failure. */
  private async listen(): Promise<void> {
    const client = new Client({
      connectionString: this.options.connectionString ?? DEFAULT_DATABASE_URL,
      connectionTimeoutMillis: CONNECT_TIMEOUT_MS,
      keepAlive: true,
    });
    client.on('notification', (msg) => {
      if (msg.payload !== this.instanceId) this.wakeSubscriptions();
    });
    const lost = (err?: unknown) => {
      if (this.closed || this.listener !== client) return;
      this.logger.warn('eventstore postgres listener lost; reconnecting', { error: err === undefined ? 'ended' : errName(err) });
      this.listener = null;
      void client.end().catch(() => undefined);
      this.relisten();
    };
    client.on('error', lost);
    // A connection the server closed without an error event (a terminated backend, a restart).
    client.on('end', () => lost());
    await client.connect();
    try {
      await client.query(`LISTEN ${escapeIdentifier(this.channel)}`);
    } catch (err) {
      await client.end().catch(() => undefined);
      throw err;
    }
    if (this.closed) {
      await client.end().catch(() => undefined);
      return;
    }
    this.listener = client;
    this.listenerDelay = 100;
    // Commits announced while nobody listened: read once.
    this.wakeSubscriptions();
  }

  private relisten(): void {
    if (this.closed || this.listenerRetry) return;
    const delay = this.listenerDelay;
    this.listenerDelay = Math.min(delay * 2, 5000);
    this.listenerRetry = setTimeout(() => {
      this.listenerRetry = null;
      this.listen().catch((err) => {
        if (this.closed) return;
        this.logger.warn('eventstore postgres listener reconnect failed; retrying', { error: errName(err) });
        this.relisten();
      });
    }, delay);
    this.listenerRetry.unref();
  }

  private settleWaitMs(): number {
    return Math.max(0, this.options.settleWaitMs ?? 1000);
  }

  private assertOpen(): void {
    if (this.closed) throw new Error('event store is closed');
  }
}

const ANNOUNCE_SPACING_MS = 5;
const CONNECT_TIMEOUT_MS = 10_000;
/** Revisions are PostgreSQL integers. */
const MAX_REVISION = 2_147_483_647;
const HELD_BACK_FIRST_MS = 2;
const HELD_BACK_MAX_MS = 100;

/** The store's SQL for one schema (named statements: each connection parses and plans them once). */
function statements(schema: string) {
  const s = escapeIdentifier(schema);
  const cols = 'position, stream_id, revision, type, data, metadata';
  // The watermark: a row may be delivered once its transaction is below every running one.
  const settled = 'tx < pg_snapshot_xmin(pg_current_snapshot())';
  return {
    appendBatch: {
      name: `${schema}:append`,
      text: `SELECT out_ok, out_revision, out_position FROM ${s}.append_batch($1::text[], $2::integer[], $3::integer[], $4::integer[], $5::text[], $6::text[], $7::text[], $8::text[])`,
    },
    readStream: { name: `${schema}:stream`, text: `SELECT ${cols} FROM ${s}.events WHERE stream_id = $1 AND revision >= $2 ORDER BY revision` },
    readAll: { name: `${schema}:all`, text: `SELECT ${cols}, ${settled} AS settled FROM ${s}.events WHERE position > $1 ORDER BY position LIMIT $2` },
    head: {
      name: `${schema}:head`,
      text: `SELECT (SELECT position FROM ${s}.events ORDER BY position DESC LIMIT 1) AS top,
  (SELECT position FROM ${s}.events WHERE ${settled} ORDER BY position DESC LIMIT 1) AS settled`,
    },
    // Simple-query text (no parameters): the channel is a checked schema name, the payload a uuid.
    notify: (payload: string) => `BEGIN; SET LOCAL synchronous_commit TO off; NOTIFY ${escapeIdentifier(channelName(schema))}, '${payload}'; COMMIT`,
  };
}

function checkExpected(e: ExpectedRevision): void {
  if (e === 'any' || e === 'no_stream') return;
  if (typeof e !== 'number' || !Number.isSafeInteger(e) || e < 0) {
    throw new RangeError(`invalid expected revision: ${String(e)} (use 'any', 'no_stream' or a revision >= 0)`);
  }
}

/** PostgreSQL text holds neither NUL nor (once encoded as UTF-8) lone surrogates: refuse them instead of failing the batch or changing the text. */
function checkText(value: unknown, what: string): void {
  if (typeof value !== 'string') throw new TypeError(`${what} must be a string`);
  if (/\u0000|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/.test(value)) {
    throw new RangeError(`${what} holds a NUL or an unpaired surrogate`);
  }
}

function toRecorded(row: EventRow): RecordedEvent {
  return {
    streamId: row.stream_id,
    revision: row.revision,
    position: Number(row.position),
    type: row.type,
    data: JSON.parse(row.data),
    metadata: JSON.parse(row.metadata),
  };
}

function deepFreeze<T>(value: T): T {
  if (value && typeof value === 'object' && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const v of Object.values(value as Record<string, unknown>)) deepFreeze(v);
  }
  return value;
}

function errName(err: unknown): string {
  return err instanceof Error ? err.name : typeof err;
}

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}
