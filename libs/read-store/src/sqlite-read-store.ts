import Database from 'better-sqlite3';
import { mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import { WalCheckpointer, isFile } from '@svc/eventstore';
import { TokenBucketLimit, TokenTake, takeToken, validateTokenBucketLimit } from './token-bucket';
import { CommitOutcome, PageOptions, ReadEntry, ReadPage, ReadStore, RebuiltReadModel, WriteOp, validateOps, validatePageOptions } from './types';

/** The read-store file is open elsewhere (a running service): it cannot be taken for exclusive use. */
export class ReadStoreInUseError extends Error {
  constructor(readonly path: string) {
    super(`the read store ${path} is open in another process (a running service?)`);
    this.name = 'ReadStoreInUseError';
  }
}

/** The index of partition reads (list, range, page), as created with the table. */
const PARTITION_INDEX = 'docs_by_partition ON docs (collection, partition, score, key)';

interface DocRow {
  key: string;
  partition: string;
  score: number;
  doc: string;
}

/**
 * Read store on one SQLite file (better-sqlite3, synchronous under the async port).
 *
 * Durability: WAL with synchronous=NORMAL. A power loss may lose the last few commits, but never
 * tears one: the documents a projection writes and its checkpoint go into the same transaction,
 * so after a crash either both are there or neither is, and the projection simply re-applies the
 * lost events from its (older) checkpoint. Read models are rebuildable from the event store, so
 * the fsync per commit that synchronous=FULL would buy is not worth its cost here.
 */
export class SqliteReadStore implements ReadStore {
  private readonly db: Database.Database;
  private readonly stmts: {
    get: Database.Statement;
    put: Database.Statement;
    putDoc: Database.Statement;
    del: Database.Statement;
    list: Database.Statement;
    listLimit: Database.Statement;
    range: Database.Statement;
    /** `page`: by order ('asc' | 'desc') and start ('first' | 'score' | 'key'). */
    page: Record<'asc' | 'desc', Record<'first' | 'score' | 'key', Database.Statement>>;
    getCheckpoint: Database.Statement;
    setCheckpoint: Database.Statement;
    dataVersion: Database.Statement;
  };
  /** generation(): last counter value per collection written through this store, and for foreign commits. */
  private counter = 0;
  private readonly written = new Map<string, number>();
  /**
   * documentGeneration(): counter of the last write per `collection\0key`, least recently written
   * first. Bounded: an evicted entry raises `evictedFloor`, which every document missing from the
   * map reports, so a cache entry can never outlive a write it did not see.
   */
  private readonly writtenDocs = new Map<string, number>();
  private evictedFloor = 0;
  private static readonly MAX_TRACKED_DOCS = 50_000;
  private foreign = 0;
  private dataVersion = -1;
  private foreignCheckedThisTurn = false;
  private readonly commitTx: Database.Transaction<(projection: string | null, position: number, ops: WriteOp[]) => boolean>;

  /** Checkpoints on a worker thread (see `WalCheckpointer`); null for `:memory:` or when turned off. */
  private readonly checkpointer: WalCheckpointer | null = null;
  /** Opened with `exclusive`: this connection has the file to itself until close. */
  private readonly exclusive: boolean;

  constructor(
    readonly path: string,
    options: { backgroundCheckpoint?: boolean; exclusive?: boolean } = {},
  ) {
    if (isFile(path)) mkdirSync(dirname(path), { recursive: true });
    this.db = new Database(path, options.exclusive ? { timeout: 1000 } : undefined);
    this.exclusive = options.exclusive === true && isFile(path);
    // 2 KiB pages for a new file (an existing one keeps its own): a projection's commit rewrites a
    // page or two per document it touches, and smaller pages make each WAL frame cheaper. Set
    // first: the exclusive lock below writes the header of a new file, fixing its page size.
    this.db.pragma('page_size = 2048');
    if (options.exclusive) {
      // Taken before anything else is read, and kept until close (locking_mode EXCLUSIVE keeps
      // the lock after each transaction): fails while any other connection has the file open (a
      // running service holds its read store open all its life), and while it is held nothing
      // else can open the file.
      this.db.pragma('locking_mode = EXCLUSIVE');
      try {
        this.db.exec('BEGIN EXCLUSIVE');
        this.db.exec('COMMIT');
      } catch (err) {
        this.db.close();
        if ((err as { code?: string }).code === 'SQLITE_BUSY') throw new ReadStoreInUseError(path);
        throw err;
      }
    }
    this.db.pragma('journal_mode = WAL');
    this.db.pragma('synchronous = NORMAL');
    // Cells a write replaces or deletes are zeroed in their page (FAST: only where that costs no
    // extra I/O), so an old document's bytes do not linger in the file after it changes.
    this.db.pragma('secure_delete = FAST');
    this.db.pragma('busy_timeout = 5000');
    // A tool that has the file to itself (svc rebuild) writes whole read models: a large page cache.
    if (options.exclusive) this.db.pragma('cache_size = -262144');
    // After a checkpoint, truncate a WAL that grew past 64 MiB.
    this.db.pragma('journal_size_limit = 67108864');
    this.db.exec(`
      CREATE TABLE IF NOT EXISTS docs (
        collection TEXT NOT NULL,
        key        TEXT NOT NULL,
        partition  TEXT,
        score      REAL NOT NULL DEFAULT 0,
        doc        TEXT NOT NULL,
        PRIMARY KEY (collection, key)
      ) WITHOUT ROWID;
      CREATE INDEX IF NOT EXISTS ${PARTITION_INDEX};
      CREATE TABLE IF NOT EXISTS checkpoints (
        projection TEXT PRIMARY KEY,
        position   INTEGER NOT NULL
      ) WITHOUT ROWID;
    `);
    if (options.backgroundCheckpoint !== false && !options.exclusive && isFile(path)) {
      // SQLite's default threshold (1000 pages) stays as a backstop at 8x; the worker checkpoints every second.
      this.db.pragma('wal_autocheckpoint = 8000');
      this.checkpointer = new WalCheckpointer(path, () => {
        if (this.db.open) this.db.pragma('wal_autocheckpoint = 1000');
      });
    }
    const cols = 'key, partition, score, doc';
    this.stmts = {
      get: this.db.prepare('SELECT doc FROM docs WHERE collection = ? AND key = ?'),
      put: this.db.prepare(
        `INSERT INTO docs (collection, key, partition, score, doc) VALUES (?, ?, ?, ?, ?)
         ON CONFLICT (collection, key) DO UPDATE SET partition = excluded.partition, score = excluded.score, doc = excluded.doc`,
      ),
      // A document rewritten in the same partition with the same score (most updates): only its
      // row changes, not its entry in docs_by_partition (one page less in the commit).
      putDoc: this.db.prepare('UPDATE docs SET doc = ? WHERE collection = ? AND key = ? AND partition IS ? AND score = ?'),
      del: this.db.prepare('DELETE FROM docs WHERE collection = ? AND key = ?'),
      list: this.db.prepare(`SELECT ${cols} FROM docs WHERE collection = ? AND partition = ? ORDER BY score, key`),
      listLimit: this.db.prepare(`SELECT ${cols} FROM docs WHERE collection = ? AND partition = ? ORDER BY score, key LIMIT ?`),
      range: this.db.prepare(`SELECT ${cols} FROM docs WHERE collection = ? AND partition = ? AND score <= ? ORDER BY score, key LIMIT ?`),
      // Range reads on docs_by_partition (the row-value comparison is an index range, and the
      // order is the index's own, so no page sorts or skips rows).
      page: {
        asc: {
          first: this.db.prepare(`SELECT ${cols} FROM docs WHERE collection = ? AND partition = ? ORDER BY score, key LIMIT ?`),
          score: this.db.prepare(`SELECT ${cols} FROM docs WHERE collection = ? AND partition = ? AND score > ? ORDER BY score, key LIMIT ?`),
          key: this.db.prepare(`SELECT ${cols} FROM docs WHERE collection = ? AND partition = ? AND (score, key) > (?, ?) ORDER BY score, key LIMIT ?`),
        },
        desc: {
          first: this.db.prepare(`SELECT ${cols} FROM docs WHERE collection = ? AND partition = ? ORDER BY score DESC, key DESC LIMIT ?`),
          score: this.db.prepare(`SELECT ${cols} FROM docs WHERE collection = ? AND partition = ? AND score < ? ORDER BY score DESC, key DESC LIMIT ?`),
          key: this.db.prepare(
            `SELECT ${cols} FROM docs WHERE collection = ? AND partition = ? AND (score, key) < (?, ?) ORDER BY score DESC, key DESC LIMIT ?`,
          ),
        },
      },
      getCheckpoint: this.db.prepare('SELECT position FROM checkpoints WHERE projection = ?'),
      setCheckpoint: this.db.prepare(
        'INSERT INTO checkpoints (projection, position) VALUES (?, ?) ON CONFLICT (projection) DO UPDATE SET position = excluded.position',
      ),
      dataVersion: this.db.prepare('PRAGMA data_version').pluck(),
    };
    this.dataVersion = this.stmts.dataVersion.get() as number;
    this.commitTx = this.db.transaction((projection: string | null, position: number, ops: WriteOp[]) => {
      // Run as BEGIN IMMEDIATE: with the write lock held, a commit by another connection is either
      // before this check (and counted now, before this commit's own documents are) or after this
      // commit; never folded into the generation this commit's documents get.
      this.noteForeignCommit();
      if (projection !== null) {
        const row = this.stmts.getCheckpoint.get(projection) as { position: number } | undefined;
        // Never backwards: a runner behind the stored checkpoint must not overwrite newer state.
        if (row && row.position >= position) return false;
        this.stmts.setCheckpoint.run(projection, position);
      }
      for (const op of ops) {
        if (op.op === 'put') {
          const doc = JSON.stringify(op.doc);
          const partition = op.partition ?? null;
          const score = op.score ?? 0;
          if (this.stmts.putDoc.run(doc, op.collection, op.key, partition, score).changes === 0) {
            this.stmts.put.run(op.collection, op.key, partition, score, doc);
          }
        } else {
          this.stmts.del.run(op.collection, op.key);
        }
      }
      return true;
    });
  }

  async get<T>(collection: string, key: string): Promise<T | null> {
    const row = this.stmts.get.get(collection, key) as { doc: string } | undefined;
    return row ? (JSON.parse(row.doc) as T) : null;
  }

  async list<T>(collection: string, partition: string, options?: { limit?: number }): Promise<T[]> {
    return (await this.entries<T>(collection, partition, options)).map((e) => e.doc);
  }

  async range<T>(collection: string, partition: string, maxScore: number, limit: number): Promise<T[]> {
    return (await this.entries<T>(collection, partition, { maxScore, limit })).map((e) => e.doc);
  }

  async entries<T>(collection: string, partition: string, options?: { limit?: number; maxScore?: number }): Promise<ReadEntry<T>[]> {
    const limit = options?.limit;
    let rows: DocRow[];
    if (options?.maxScore !== undefined) {
      rows = this.stmts.range.all(collection, partition, options.maxScore, limit ?? -1) as DocRow[];
    } else if (limit !== undefined) {
      rows = this.stmts.listLimit.all(collection, partition, limit) as DocRow[];
    } else {
      rows = this.stmts.list.all(collection, partition) as DocRow[];
    }
    return rows.map((r) => ({ key: r.key, partition: r.partition, score: r.score, doc: JSON.parse(r.doc) as T }));
  }

  async page<T>(collection: string, partition: string, options: PageOptions): Promise<ReadPage<T>> {
    validatePageOptions(collection, options);
    const stmts = this.stmts.page[options.order ?? 'asc'];
    const after = options.after;
    // One row past the page tells whether more follow.
    const n = options.limit + 1;
    const rows = (
      after === undefined
        ? stmts.first.all(collection, partition, n)
        : after.key === undefined
          ? stmts.score.all(collection, partition, after.score, n)
          : stmts.key.all(collection, partition, after.score, after.key, n)
    ) as DocRow[];
    const hasMore = rows.length > options.limit;
    if (hasMore) rows.length = options.limit;
    return { entries: rows.map((r) => ({ key: r.key, partition: r.partition, score: r.score, doc: JSON.parse(r.doc) as T })), hasMore };
  }

  async write(ops: WriteOp[]): Promise<void> {
    validateOps(ops);
    try {
      this.commitTx.immediate(null, 0, ops);
    } finally {
      this.touched(ops);
    }
  }

  /**
   * Changes whenever a document of one of `collections` may have changed: after every write through this
   * store that touched the collection (bumped right after the transaction, before any caller is
   * answered), and after any commit by another connection to the file (PRAGMA data_version).
   */
  generation(...collections: string[]): number {
    this.checkForeignCommits();
    let g = this.foreign;
    for (const c of collections) g = Math.max(g, this.written.get(c) ?? 0);
    return g;
  }

  /** Changes whenever the document `collection`/`key` may have changed (see `generation`). */
  documentGeneration(collection: string, key: string): number {
    this.checkForeignCommits();
    return Math.max(this.foreign, this.writtenDocs.get(`${collection}\0${key}`) ?? this.evictedFloor);
  }

  private checkForeignCommits(): void {
    // Another connection's commits are looked for once per event-loop turn: this process's own
    // writes bump `written` synchronously (so read-your-writes never waits on this), and a foreign
    // commit is seen from the next turn on.
    if (this.db.open && !this.foreignCheckedThisTurn) {
      this.foreignCheckedThisTurn = true;
      setImmediate(() => {
        this.foreignCheckedThisTurn = false;
      });
      this.noteForeignCommit();
    }
  }

  /** Reads PRAGMA data_version now: a change since the last read is another connection's commit. */
  private noteForeignCommit(): void {
    const v = this.stmts.dataVersion.get() as number;
    if (v !== this.dataVersion) {
      this.dataVersion = v;
      this.foreign = ++this.counter;
    }
  }

  /** Bumps the generation of what `ops` touched; answers the generation they got. */
  private touched(ops: WriteOp[]): number {
    if (ops.length === 0) return this.counter;
    const n = ++this.counter;
    for (const op of ops) {
      this.written.set(op.collection, n);
      const doc = `${op.collection}\0${op.key}`;
      this.writtenDocs.delete(doc); // re-inserted last: the map stays in order of last write
      this.writtenDocs.set(doc, n);
    }
    while (this.writtenDocs.size > SqliteReadStore.MAX_TRACKED_DOCS) {
      const [oldest, gen] = this.writtenDocs.entries().next().value as [string, number];
      this.writtenDocs.delete(oldest);
      if (gen > this.evictedFloor) this.evictedFloor = gen;
    }
    return n;
  }

  async getCheckpoint(projection: string): Promise<number> {
    const row = this.stmts.getCheckpoint.get(projection) as { position: number } | undefined;
    return row ? row.position : 0;
  }

  async commit(projection: string, position: number, ops: WriteOp[]): Promise<CommitOutcome> {
    if (!Number.isSafeInteger(position) || position < 0) throw new RangeError('checkpoint position must be an integer >= 0');
    validateOps(ops);
    let applied = false;
    let generation = 0;
    try {
      applied = this.commitTx.immediate(projection, position, ops);
    } finally {
      // Bumped even for a commit that failed or wrote nothing: a cache only ever drops too much.
      generation = this.touched(ops);
    }
    return { applied, generation };
  }

  /**
   * `takeToken` on a table of its own (`token_buckets`, made on first use), in one IMMEDIATE
   * transaction, so that processes sharing this file share the buckets. A process that is the only
   * one on its read store keeps its buckets in memory instead (the rate limiter of libs/http): this
   * is for read-store files that several processes open. Full buckets are swept now and then.
   */
  private takeTx: Database.Transaction<(bucket: string, limit: TokenBucketLimit, nowMs: number) => TokenTake> | null = null;
  private takes = 0;

  async takeToken(bucket: string, limit: TokenBucketLimit, nowMs: number): Promise<TokenTake> {
    validateTokenBucketLimit(limit);
    if (typeof bucket !== 'string' || bucket.length === 0) throw new TypeError('token bucket name must be a non-empty string');
    if (!this.takeTx) {
      this.db.exec('CREATE TABLE IF NOT EXISTS token_buckets (bucket TEXT PRIMARY KEY, tat REAL NOT NULL) WITHOUT ROWID');
      const get = this.db.prepare('SELECT tat FROM token_buckets WHERE bucket = ?').pluck();
      const put = this.db.prepare('INSERT INTO token_buckets (bucket, tat) VALUES (?, ?) ON CONFLICT (bucket) DO UPDATE SET tat = excluded.tat');
      const sweep = this.db.prepare('DELETE FROM token_buckets WHERE tat < ?');
      this.takeTx = this.db.transaction((name: string, lim: TokenBucketLimit, now: number) => {
        const taken = takeToken((get.get(name) as number | undefined) ?? null, lim, now);
        if (taken.allowed) put.run(name, taken.tat);
        if (++this.takes % 1000 === 0) sweep.run(now);
        return { allowed: taken.allowed, retryAfterMs: taken.retryAfterMs };
      });
    }
    return this.takeTx.immediate(bucket, limit, nowMs);
  }

  /**
   * `ReadStore.replaceReadModels` in one IMMEDIATE transaction: readers on other connections see
   * the old models or the new ones, never a mix. A store opened `exclusive` (svc rebuild: no other
   * connection can exist) runs it with a rollback journal (journal_mode TRUNCATE, synchronous FULL)
   * instead of the WAL: the rebuilt pages are written once, to the file, instead of to the WAL and
   * again by the checkpoint (about half the swap's time for a whole read store). It is as atomic
   * and crash-safe: a process killed during the swap leaves a hot journal that the next opener of
   * the file rolls back (the old models, whole), before anything reads it. The WAL is checkpointed
   * before and the file goes back to WAL (synchronous NORMAL) after, success or not.
   */
  async replaceReadModels(models: RebuiltReadModel[]): Promise<void> {
    const delCollection = this.db.prepare('DELETE FROM docs WHERE collection = ?');
    const insert = this.db.prepare('INSERT INTO docs (collection, key, partition, score, doc) VALUES (?, ?, ?, ?, ?)');
    const count = this.db.prepare('SELECT count(*) FROM docs').pluck();
    const countCollection = this.db.prepare('SELECT count(*) FROM docs WHERE collection = ?').pluck();
    const replace = this.db.transaction(() => {
      this.noteForeignCommit();
      // When the swap rewrites most of the table (svc rebuild --all), the partition index is
      // dropped and built again after the inserts, from sorted rows, in the same transaction:
      // cheaper than keeping it up to date row by row. Not when other documents outnumber those
      // replaced and written: building it again would cost more than it saves.
      let replaced = 0;
      for (const m of models) for (const c of m.collections) replaced += countCollection.get(c) as number;
      const written = models.reduce((n, m) => n + (m.documents ?? 0), 0);
      const others = (count.get() as number) - replaced;
      const rebuildIndex = others <= Math.max(replaced, written);
      if (rebuildIndex) this.db.exec('DROP INDEX docs_by_partition');
      for (const m of models) {
        if (!Number.isSafeInteger(m.position) || m.position < 0) throw new RangeError('checkpoint position must be an integer >= 0');
        for (const c of m.collections) delCollection.run(c);
        for (const d of m.docs()) {
          if (!m.collections.includes(d.collection))
            throw new Error(`rebuilt document of ${m.projection} in collection ${d.collection}, which the model does not own`);
          insert.run(d.collection, d.key, d.partition, d.score, d.json);
        }
        this.stmts.setCheckpoint.run(m.projection, m.position);
      }
      if (rebuildIndex) this.db.exec(`CREATE INDEX ${PARTITION_INDEX}`);
    });
    const rollbackJournal = this.exclusive;
    try {
      if (rollbackJournal) {
        this.db.pragma('wal_checkpoint(TRUNCATE)');
        this.db.pragma('journal_mode = TRUNCATE');
        this.db.pragma('synchronous = FULL');
      }
      replace.immediate();
    } finally {
      // Every cached document of these collections is dropped (generation and documentGeneration).
      this.foreign = ++this.counter;
      if (rollbackJournal && this.db.open) {
        this.db.pragma('journal_mode = WAL');
        this.db.pragma('synchronous = NORMAL');
      }
    }
  }

  /** A read on this store's connection (the file answers); fails once the store is closed. */
  async ping(): Promise<void> {
    if (!this.db.open) throw new Error('read store is closed');
    this.stmts.getCheckpoint.get('');
  }

  async close(): Promise<void> {
    await this.checkpointer?.close();
    if (this.db.open) this.db.close();
  }
}
