import { ProjectionTx, PutOptions, ReadEntry, ReadStore, ReadStoreLogger, WriteOp, errorName, validateOps } from './types';

const docId = (collection: string, key: string) => `${collection}\u0000${key}`;

/** Orders keys the way SQLite (BINARY on UTF-8) and Redis (bytes) do: by code point. */
export function compareKeys(a: string, b: string): number {
  if (a === b) return 0;
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n;) {
    const ca = a.codePointAt(i) as number;
    const cb = b.codePointAt(i) as number;
    if (ca !== cb) return ca < cb ? -1 : 1;
    i += ca > 0xffff ? 2 : 1;
  }
  return a.length - b.length;
}

/** How a commit is tried (see ProjectionBatch.commit). */
export interface CommitTries {
  /** One try only (the worker is stopping: whatever was applied is still worth one commit). */
  once: boolean;
  /** The checkpoint the commit builds on (the stored one), read again for each try. */
  from(): number;
  /** True once the worker stops following the log: no further try. */
  stopping(): boolean;
  /** Waits before the next try; rejects if the worker stops meanwhile. */
  sleep(ms: number): Promise<void>;
  /** First delay between tries (doubling), and its cap. */
  retryDelayMs: number;
  maxRetryDelayMs: number;
  /** The writer's fencing token (CommitOptions.fence; absent: unfenced). */
  fence?: number;
}

/**
 * `committed`: the batch and its checkpoint are in the store (or a runner ahead of this one had
 * stored a later checkpoint); `lost`: nothing written, the store lost the read model the batch
 * builds on; `not-committed`: the tries ended (stopping) with the batch kept; `fenced`: nothing
 * written, a later lease holder has committed this projection (docs/scaling.md).
 */
export type CommitResult = 'committed' | 'lost' | 'not-committed' | 'fenced';

/**
 * One projection's writes of consecutive events, held in memory and committed together with the
 * checkpoint of the last of them; the transaction view `apply` reads and writes through; and the
 * documents committed last, which that view answers from while the store shows nothing newer.
 */
export class ProjectionBatch {
  private static readonly MAX_RECENT = 10_000;
  /** The latest write of each document, in the order of last write. */
  private ops = new Map<string, WriteOp>();
  /** The position the batch brings the projection to: the checkpoint committed with it. */
  position = 0;
  /** Events whose writes are in the batch. */
  events = 0;
  /**
   * Documents this worker committed last (least recently written first), each tagged with the
   * generation its commit gave them (CommitOutcome): `tx.get` answers from here while the store's
   * `documentGeneration` still equals the tag (no write to that document since, by this process or
   * another connection), and reads the store otherwise. Cleared when a commit was not applied.
   * Only with a store that has `documentGeneration` (SQLite).
   */
  private readonly recent = new Map<string, { gen: number; doc: unknown }>();

  constructor(
    private readonly name: string,
    private readonly store: ReadStore,
    private readonly logger: ReadStoreLogger,
  ) {}

  /** Documents with a write in the batch (0: nothing to write). */
  get size(): number {
    return this.ops.size;
  }

  /** Drops the writes and what was remembered (the worker starts following the log again). */
  reset(): void {
    this.ops = new Map();
    this.recent.clear();
    this.events = 0;
  }

  /** Adds one event's writes (`scratch`, filled through its tx) at its position. */
  add(scratch: Map<string, WriteOp>, position: number): void {
    for (const [id, op] of scratch) {
      this.ops.delete(id); // keep the latest op per document, in the order of last write
      this.ops.set(id, op);
    }
    this.position = position;
    this.events++;
  }

  /**
   * Commits the batch (or, empty, a checkpoint-only advance) with its checkpoint at `position`,
   * trying again after a failure (doubling delays) unless `tries.once` or stopping. Emptied once
   * committed. Call inside the worker's serialized tasks.
   */
  async commit(tries: CommitTries): Promise<CommitResult> {
    const position = this.position;
    const ops = [...this.ops.values()];
    let delay = tries.retryDelayMs;
    for (let attempt = 1; ; attempt++) {
      try {
        const outcome = await this.store.commit(this.name, position, ops, { from: tries.from(), ...(tries.fence ? { fence: tries.fence } : {}) });
        // Nothing written: the store lost the read model this batch builds on, or a later lease holder committed.
        if (outcome && outcome.lost) return 'lost';
        if (outcome && outcome.fenced) return 'fenced';
        // Written: remembered with the generation they got inside the commit. Not written (a
        // runner ahead of this one stored a later checkpoint): nothing remembered is trusted.
        if (outcome && outcome.applied) this.remember(ops, outcome.generation);
        else this.recent.clear();
        break;
      } catch (err) {
        this.logger.warn({ projection: this.name, position, attempt, error: errorName(err) }, 'projection commit failed; retrying');
        if (tries.once || tries.stopping()) return 'not-committed';
        try {
          await tries.sleep(delay);
        } catch {
          return 'not-committed';
        }
        delay = Math.min(delay * 2, tries.maxRetryDelayMs);
      }
    }
    this.ops = new Map();
    this.events = 0;
    return 'committed';
  }

  /**
   * Keeps the committed documents (see `recent`) under the generation the commit gave them; a
   * deleted one is remembered as absent. Only with a store that can tell (documentGeneration).
   */
  private remember(ops: WriteOp[], generation: number): void {
    if (!this.store.documentGeneration) return;
    for (const op of ops) {
      const id = docId(op.collection, op.key);
      this.recent.delete(id); // re-inserted last: the map stays in order of last write
      this.recent.set(id, { gen: generation, doc: op.op === 'put' ? op.doc : null });
    }
    while (this.recent.size > ProjectionBatch.MAX_RECENT) this.recent.delete(this.recent.keys().next().value as string);
  }

  /** A transaction view: this event's writes (`scratch`), then the batch's, then the store. */
  tx(scratch: Map<string, WriteOp>): ProjectionTx {
    const pending = (id: string): WriteOp | undefined => scratch.get(id) ?? this.ops.get(id);
    return {
      get: async <T>(collection: string, key: string): Promise<T | null> => {
        const id = docId(collection, key);
        const op = pending(id);
        if (op) return op.op === 'put' ? (structuredClone(op.doc) as T) : null;
        const hit = this.recent.get(id);
        if (hit) {
          if (this.store.documentGeneration && this.store.documentGeneration(collection, key) === hit.gen) {
            return hit.doc === null ? null : (structuredClone(hit.doc) as T);
          }
          this.recent.delete(id);
        }
        return this.store.get<T>(collection, key);
      },
      list: async <T>(collection: string, partition: string, options?: { limit?: number }): Promise<T[]> => {
        const ops = new Map<string, WriteOp>();
        for (const source of [this.ops, scratch]) {
          for (const op of source.values()) if (op.collection === collection) ops.set(op.key, op);
        }
        if (ops.size === 0) return this.store.list<T>(collection, partition, options);
        if (!this.store.entries) {
          throw new Error('tx.list after writes to the same collection needs a ReadStore with entries()');
        }
        const limit = options?.limit;
        const stored = await this.store.entries<T>(collection, partition, limit === undefined ? undefined : { limit: limit + ops.size });
        const merged = new Map<string, ReadEntry<T>>();
        for (const e of stored) merged.set(e.key, e);
        for (const op of ops.values()) {
          merged.delete(op.key);
          if (op.op === 'put' && op.partition === partition) {
            merged.set(op.key, { key: op.key, partition, score: op.score ?? 0, doc: structuredClone(op.doc) as T });
          }
        }
        const sorted = [...merged.values()].sort((a, b) => a.score - b.score || compareKeys(a.key, b.key));
        return (limit === undefined ? sorted : sorted.slice(0, limit)).map((e) => e.doc);
      },
      put: (collection: string, key: string, doc: unknown, options?: PutOptions): void => {
        if (doc === undefined) throw new TypeError('read-store doc must not be undefined');
        // JSON round trip: a later tx.get sees exactly what the store would return, and a
        // document that cannot be stored fails here, in apply, not in every commit retry.
        const op: WriteOp = { op: 'put', collection, key, doc: JSON.parse(JSON.stringify(doc)) };
        if (options?.partition !== undefined) op.partition = options.partition;
        if (options?.score !== undefined) op.score = options.score;
        validateOps([op]);
        const id = docId(collection, key);
        scratch.delete(id);
        scratch.set(id, op);
      },
      delete: (collection: string, key: string): void => {
        const op: WriteOp = { op: 'delete', collection, key };
        validateOps([op]);
        const id = docId(collection, key);
        scratch.delete(id);
        scratch.set(id, op);
      },
    };
  }
}
