import type { RecordedEvent } from '@svc/eventstore';
import type { TokenBucketLimit, TokenTake } from './token-bucket';

/**
 * Read-model port. Documents live in collections, keyed; a document may belong to a
 * `partition` (for listing, e.g. all cases of one environment) and carry a numeric `score`
 * (for ordered range reads, e.g. timers by due time). Projections write through `commit`,
 * which applies their writes and their checkpoint atomically.
 *
 * Conventions every adapter keeps (the conformance suite checks them):
 * - a key is unique within its collection (across partitions); putting a document with another
 *   partition moves it, putting it without a partition takes it out of every partition;
 * - a missing score is 0; scores must be finite numbers; ties are ordered by key (byte order);
 * - collection names must not contain ':' (they are part of Redis key names);
 * - `commit` is a no-op when the stored checkpoint of that projection is already >= `position`
 *   (the checkpoint never goes backwards, and a stale runner cannot overwrite newer state).
 */
export type WriteOp =
  { op: 'put'; collection: string; key: string; doc: unknown; partition?: string; score?: number } | { op: 'delete'; collection: string; key: string };

/** A document with where it sits (for merging pending writes into a listing). */
export interface ReadEntry<T = unknown> {
  key: string;
  partition: string;
  score: number;
  doc: T;
}

/** Where a page starts and how long it is (`ReadStore.page`). */
export interface PageOptions {
  /** Most entries answered: an integer of at least 1. */
  limit: number;
  /** `asc` (the default): score, then key, ascending; `desc`: both descending. */
  order?: 'asc' | 'desc';
  /**
   * Exclusive start, in `order`: after the position `{ score, key }` (whether or not a document is
   * still there), or with no key after every document of that score.
   */
  after?: { score: number; key?: string };
}

export interface ReadPage<T> {
  entries: ReadEntry<T>[];
  /** More entries follow the last one answered. */
  hasMore: boolean;
}

/** Checks shared by the adapters' `page`. */
export function validatePageOptions(collection: string, options: PageOptions): void {
  validateCollection(collection);
  if (!Number.isSafeInteger(options.limit) || options.limit < 1) throw new RangeError('read-store page limit must be an integer >= 1');
  if (options.order !== undefined && options.order !== 'asc' && options.order !== 'desc') throw new TypeError("read-store page order must be 'asc' or 'desc'");
  const after = options.after;
  if (after !== undefined) {
    if (!Number.isFinite(after.score)) throw new TypeError('read-store page after.score must be a finite number');
    if (after.key !== undefined && typeof after.key !== 'string') throw new TypeError('read-store page after.key must be a string');
  }
}

export interface ReadStore {
  get<T>(collection: string, key: string): Promise<T | null>;
  /** Documents of one partition, ordered by score then key. */
  list<T>(collection: string, partition: string, options?: { limit?: number }): Promise<T[]>;
  /** Documents of one partition with score <= maxScore, ordered by score (then key). */
  range<T>(collection: string, partition: string, maxScore: number, limit: number): Promise<T[]>;
  /**
   * Like `list` (or `range` when `maxScore` is given) with each document's key and score.
   * Optional so older implementations still fit the port; both shipped adapters have it.
   */
  entries?<T>(collection: string, partition: string, options?: { limit?: number; maxScore?: number }): Promise<ReadEntry<T>[]>;
  /**
   * One page of a partition, read as a range in the store (never the whole partition): at most
   * `limit` entries in `order`, starting strictly after `after`, and whether more follow. Paging by
   * the last entry's `{ score, key }` sees every document that stays in place exactly once, also
   * when documents share a score (the key breaks the tie).
   */
  page<T>(collection: string, partition: string, options: PageOptions): Promise<ReadPage<T>>;
  /** Writes outside a projection (e.g. small operational state). */
  write(ops: WriteOp[]): Promise<void>;
  /** The projection's stored checkpoint; 0 when it has none. */
  getCheckpoint(projection: string): Promise<number>;
  /**
   * Apply `ops` and set the projection's checkpoint to `position`, atomically. When the stored
   * checkpoint is already >= `position` nothing is written (two runners racing cannot move it back).
   */
  commit(projection: string, position: number, ops: WriteOp[], options?: CommitOptions): Promise<void | CommitOutcome>;
  /**
   * Optional: true when the store's content can vanish while the process runs (a Redis that keeps
   * nothing on disk restarts, or is flushed). Projection runners then look for their checkpoint
   * now and then, and commit with `CommitOptions.from`, so that a loss rebuilds the read models
   * from the event log instead of leaving them empty under a new checkpoint.
   */
  readonly canLoseData?: boolean;
  /**
   * Readiness (GET /readyz): resolves when the store answers (a trivial read on its own connection);
   * rejects once it is closed or its server refuses. It may stay pending while a server is silent:
   * the caller bounds it with its own timeout.
   */
  ping(): Promise<void>;
  close(): Promise<void>;
  /**
   * Optional, synchronous: a number that changes whenever a document of any of `collections` may have
   * changed (a write through this store, or a commit by anything else). Lets callers keep small
   * in-memory caches that are dropped at once by the next write. Adapters that cannot see every
   * writer (Redis: other processes) leave it out, and callers then do not cache.
   */
  generation?(...collections: string[]): number;
  /**
   * Optional, synchronous, like `generation` for ONE document: changes whenever that document may
   * have changed (a write through this store that touched it, or a commit by anything else), so a
   * cache of one document survives writes to the rest of its collection. Same adapters as `generation`.
   */
  documentGeneration?(collection: string, key: string): number;
  /**
   * Optional: one take from the token bucket named `bucket` (rate limits), decided and stored in one
   * atomic step in the store, so that every process on the store shares the bucket. `nowMs` is real
   * time (ms since the epoch). A bucket is forgotten once full again (see `takeToken`). Not part of
   * the read models: nothing lists, commits or checkpoints it. Both shipped adapters have it.
   */
  takeToken?(bucket: string, limit: TokenBucketLimit, nowMs: number): Promise<TokenTake>;
  /**
   * Optional: read models rebuilt whole from the log (ProjectionReplay) put in place of the stored
   * ones in one atomic step: every document of each model's collections removed, the rebuilt
   * documents written, each projection's checkpoint set to the model's position (also backwards).
   * For a store that no running service uses (`svc rebuild` makes sure of it). Both shipped adapters have it.
   */
  replaceReadModels?(models: RebuiltReadModel[]): Promise<void>;
  /**
   * Optional, with `watchPositions`: for a store several processes share (Redis). The holder of a
   * projection's lease tells the others how far its read model is visible (projection name ->
   * position: every effect up to it is in the store), so that a replica that does not run the
   * projection still gives read-your-writes (ProjectionRunner, docs/scaling.md). Best effort.
   */
  publishPositions?(positions: Record<string, number>): Promise<void>;
  /** Listens to the positions any process publishes on this store; answers the unsubscribe. */
  watchPositions?(listener: (positions: Record<string, number>) => void): () => void;
  /**
   * Optional, with `canLoseData`: listens to this store's connection, `down` when it drops (the
   * server may come back without its content) and `up` when it answers again; answers the
   * unsubscribe. ProjectionRunner holds reads back from `down` until it has checked, after `up`,
   * that its read models are still there (docs/scaling.md, "Read store loss").
   */
  watchConnection?(listener: (state: 'down' | 'up') => void): () => void;
  /**
   * Optional, with `canLoseData`: the rebuild marker of a projection whose read model the store
   * lost, i.e. the position the model had reached before the loss (0: no rebuild under way).
   * Set by the projection's lease holder before its rebuild writes anything, cleared once the
   * rebuild has passed it, so that every replica (and a holder taking over mid-rebuild) knows the
   * model is incomplete until then. `getCheckpointState` reads it with the checkpoint in one step.
   */
  getCheckpointState?(projection: string): Promise<{ checkpoint: number; rebuildTarget: number }>;
  /** Raises the projection's rebuild marker to `target` (never lowers it). */
  markRebuild?(projection: string, target: number): Promise<void>;
  /** Clears the projection's rebuild marker when it is at most `reached`. */
  clearRebuild?(projection: string, reached: number): Promise<void>;
}

/** One document of a rebuilt read model, its JSON already serialized. */
export interface RebuiltDoc {
  collection: string;
  key: string;
  /** null: in no partition. */
  partition: string | null;
  score: number;
  json: string;
}

/** A projection's read model built from the log up to `position` (ReadStore.replaceReadModels). */
export interface RebuiltReadModel {
  projection: string;
  /** Every collection the model owns: their stored documents are all replaced. */
  collections: readonly string[];
  position: number;
  docs(): Iterable<RebuiltDoc>;
  /** How many documents `docs()` gives, where known (a store may plan the swap with it). */
  documents?: number;
}

/**
 * What a commit did, from an adapter that can tell (SQLite): `applied` is false when the stored
 * checkpoint was already >= `position` and nothing was written; `generation` is the
 * `documentGeneration` the written documents got, taken inside the commit (so a commit by another
 * connection after it is never folded into it).
 */
export interface CommitOutcome {
  applied: boolean;
  generation: number;
  /**
   * Nothing was written because the store no longer holds the projection's checkpoint although
   * the caller had stored one (`CommitOptions.from` > 0): the store lost its content. Only from a
   * store that `canLoseData`.
   */
  lost?: boolean;
  /**
   * Nothing was written because a writer with a higher fencing token (`CommitOptions.fence`) has
   * committed this projection: the caller lost its lease. Only from a store that checks fences (Redis).
   */
  fenced?: boolean;
}

export interface CommitOptions {
  /**
   * The checkpoint the caller last stored for this projection (0: none). A store that
   * `canLoseData` refuses the commit (`lost: true`) when it holds no checkpoint while `from` > 0.
   */
  from?: number;
  /**
   * The writer's fencing token (its lease's, docs/scaling.md; 0 or absent: unfenced). A store that
   * checks fences (Redis) refuses the commit (`fenced: true`) when a higher token has committed the
   * projection, and otherwise records this one, in the same atomic step as the write.
   */
  fence?: number;
}

export const READ_STORE = Symbol('READ_STORE');

export interface PutOptions {
  partition?: string;
  score?: number;
}

/**
 * What a projection's `apply` writes through. Reads see the writes of the batch being applied
 * (this event's and the earlier uncommitted events') before the store's content.
 */
export interface ProjectionTx {
  get<T>(collection: string, key: string): Promise<T | null>;
  list<T>(collection: string, partition: string, options?: { limit?: number }): Promise<T[]>;
  put(collection: string, key: string, doc: unknown, options?: PutOptions): void;
  delete(collection: string, key: string): void;
}

export interface Projection {
  /** Unique name; the checkpoint is stored under it. Changing it rebuilds the read model. */
  name: string;
  /** Only events of streams starting with one of these are applied (all when absent). */
  streamPrefixes?: string[];
  /**
   * The collections this projection alone writes (no other projection, no `ReadStore.write`):
   * a rebuild from the log (`svc rebuild`, ProjectionReplay) replaces them whole, and refuses a
   * projection that writes outside them or declares none.
   */
  collections?: readonly string[];
  /** Must be deterministic given the event and what `tx` reads (it is re-run after a crash). */
  apply(event: RecordedEvent, tx: ProjectionTx): Promise<void> | void;
}

/** Pino-compatible subset: `logger.warn({ ...meta }, 'message')`. Metadata only, never event data. */
export interface ReadStoreLogger {
  warn(meta: Record<string, unknown>, msg: string): void;
}

export const defaultReadStoreLogger: ReadStoreLogger = {
  warn(meta, msg) {
    console.warn(JSON.stringify({ level: 'warn', msg, ...meta }));
  },
};

/** Error name only: messages may quote data (architecture rule 7). */
export function errorName(err: unknown): string {
  return err instanceof Error ? err.name : typeof err;
}

/** Checks shared by the adapters. */
export function validateOps(ops: WriteOp[]): void {
  for (const op of ops) {
    validateCollection(op.collection);
    if (typeof op.key !== 'string' || op.key.length === 0) throw new TypeError('read-store key must be a non-empty string');
    if (op.op === 'put') {
      if (op.score !== undefined && !Number.isFinite(op.score)) throw new TypeError('read-store score must be a finite number');
      if (op.partition !== undefined && typeof op.partition !== 'string') throw new TypeError('read-store partition must be a string');
      if (op.doc === undefined) throw new TypeError('read-store doc must not be undefined');
    }
  }
}

export function validateCollection(collection: string): void {
  if (typeof collection !== 'string' || collection.length === 0 || collection.includes(':')) {
    throw new TypeError('read-store collection must be a non-empty string without ":"');
  }
}
