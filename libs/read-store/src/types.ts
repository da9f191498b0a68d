/**
 * Read-model port. Documents live in collections, keyed; a document may belong to a
 * `partition` (for listing, e.g. all cases of one environment) and carry a numeric `score`
 * (for ordered range reads, e.g. timers by due time). Projections write through `commit`,
 * which applies their writes and their checkpoint atomically.
 */
export type WriteOp =
  | { op: 'put'; collection: string; key: string; doc: unknown; partition?: string; score?: number }
  | { op: 'delete'; collection: string; key: string };

export interface ReadStore {
  get<T>(collection: string, key: string): Promise<T | null>;
  /** Documents of one partition, ordered by score then key. */
  list<T>(collection: string, partition: string, options?: { limit?: number }): Promise<T[]>;
  /** Documents of one partition with score <= maxScore, ordered by score. */
  range<T>(collection: string, partition: string, maxScore: number, limit: number): Promise<T[]>;
  /** Writes outside a projection (e.g. small operational state). */
  write(ops: WriteOp[]): Promise<void>;
  getCheckpoint(projection: string): Promise<number>;
  /** Apply `ops` and set the projection's checkpoint to `position`, atomically. */
  commit(projection: string, position: number, ops: WriteOp[]): Promise<void>;
  close(): Promise<void>;
}

export const READ_STORE = Symbol('READ_STORE');
