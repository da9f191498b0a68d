import type Database from 'better-sqlite3';
import type { ExpectedRevision } from './types';

/** One append of a group-commit batch, as plain data (it crosses to the writer thread). */
export interface BatchAppend {
  streamId: string;
  expected: ExpectedRevision;
  rows: { eventId: string; type: string; data: string; metadata: string }[];
}

/**
 * Outcome of one append, as plain data: written (its rows took the consecutive positions
 * `position - rows.length + 1 .. position`), refused by its expected revision (`wrong` is the
 * stream's actual revision, -1 for no stream), or failed alone by SQLite (nothing of it written).
 */
export type BatchOutcome = { nextExpectedRevision: number; position: number } | { wrong: number } | { error: { message: string; code?: string } };

/**
 * The batch committed: one outcome per append, in order. `foreignWrite`: another connection had
 * written since this writer's previous commit (seen while holding the write lock).
 */
export interface BatchResult {
  outcomes: BatchOutcome[];
  foreignWrite: boolean;
}

export interface BatchWriter {
  /**
   * Writes the batch in ONE transaction and returns after its COMMIT. Throws (nothing of the
   * batch written) when the transaction itself failed, or when an INSERT error made SQLite roll
   * it back (SQLITE_FULL, IOERR, NOMEM).
   */
  write(batch: BatchAppend[]): BatchResult;
}

/**
 * The event store's group commit on one connection. Each append's expected revision is checked
 * inside the transaction against the stream as it stands, including earlier appends of the same
 * batch; an append that fails its check or an INSERT is refused alone while the others commit.
 *
 * SELF-CONTAINED ON PURPOSE: no imports, no outer references, no classes. `SqliteEventStore` runs
 * it on its writer thread from its source text (`createBatchWriter.toString()`), and on the
 * calling thread for `:memory:` (or with the writer thread off): one copy of the logic for both.
 */
export function createBatchWriter(db: Database.Database): BatchWriter {
  const stmt = {
    begin: db.prepare('BEGIN IMMEDIATE'),
    commit: db.prepare('COMMIT'),
    rollback: db.prepare('ROLLBACK'),
    savepoint: db.prepare('SAVEPOINT append_one'),
    release: db.prepare('RELEASE append_one'),
    rollbackTo: db.prepare('ROLLBACK TO append_one'),
    last: db.prepare<[string], { revision: number; position: number }>(
      'SELECT revision, position FROM events WHERE stream_id = ? ORDER BY revision DESC LIMIT 1',
    ),
    insert: db.prepare<[string, string, number, string, string, string]>(
      'INSERT INTO events (event_id, stream_id, revision, type, data, metadata) VALUES (?, ?, ?, ?, ?, ?)',
    ),
    dataVersion: db.prepare<[], number>('PRAGMA data_version').pluck(),
  };
  // Last revision and position of recently appended streams, valid while no other connection has
  // written (checked with PRAGMA data_version inside each write transaction).
  const known = new Map<string, { revision: number; position: number }>();
  let dataVersion = -1;
  // Another connection wrote since this writer's last COMMIT (kept across a rolled-back attempt).
  let foreignSinceCommit = false;
  const plainError = (err: unknown) => {
    const e = err as { message?: unknown; code?: unknown };
    return { message: String(e?.message ?? err), ...(typeof e?.code === 'string' ? { code: e.code } : {}) };
  };

  /** One transaction; null (after rolling back) when `safe` is false and an INSERT of a several-event append failed. */
  const attempt = (batch: BatchAppend[], safe: boolean): BatchResult | null => {
    const outcomes: BatchOutcome[] = new Array(batch.length);
    // Stream state as of this transaction, including earlier appends of the same batch.
    const streams = new Map<string, { revision: number; position: number }>();
    stmt.begin.run();
    try {
      // Holding the write lock: if another connection wrote since our last commit, forget the cache.
      const version = stmt.dataVersion.get() as number;
      if (version !== dataVersion) {
        foreignSinceCommit = true;
        known.clear();
      } else if (known.size > 100_000) known.clear();
      dataVersion = version;
      for (let i = 0; i < batch.length; i++) {
        const p = batch[i];
        let current = streams.get(p.streamId);
        if (!current) {
          current = known.get(p.streamId) ?? stmt.last.get(p.streamId) ?? { revision: -1, position: 0 };
          streams.set(p.streamId, current);
        }
        const e = p.expected;
        const ok = e === 'any' || (e === 'no_stream' ? current.revision === -1 : current.revision === e);
        if (!ok) {
          outcomes[i] = { wrong: current.revision };
          continue;
        }
        if (p.rows.length === 0) {
          outcomes[i] = { nextExpectedRevision: current.revision, position: current.position };
          continue;
        }
        // A single INSERT that fails is undone by SQLite on its own; several need a savepoint.
        const multi = p.rows.length > 1;
        if (multi && safe) stmt.savepoint.run();
        try {
          let revision = current.revision;
          let position = 0;
          for (const r of p.rows) {
            revision++;
            position = Number(stmt.insert.run(r.eventId, p.streamId, revision, r.type, r.data, r.metadata).lastInsertRowid);
          }
          if (multi && safe) stmt.release.run();
          current = { revision, position };
          streams.set(p.streamId, current);
          outcomes[i] = { nextExpectedRevision: revision, position };
        } catch (err) {
          if (!db.inTransaction) {
            // SQLite rolled the whole transaction back on this error (SQLITE_FULL, IOERR, NOMEM...):
            // the earlier appends of the batch are gone too, and any further INSERT would run as
            // its own autocommit write. Fail the whole batch, writing nothing more.
            throw err;
          }
          if (multi && !safe) {
            // Part of this append may be written: undo the transaction, redo with savepoints.
            known.clear();
            stmt.rollback.run();
            return null;
          }
          if (multi) {
            stmt.rollbackTo.run();
            stmt.release.run();
          }
          outcomes[i] = { error: plainError(err) };
        }
      }
      stmt.commit.run();
      for (const [id, state] of streams) known.set(id, state);
    } catch (err) {
      known.clear();
      if (db.inTransaction) stmt.rollback.run();
      throw err;
    }
    const foreignWrite = foreignSinceCommit;
    foreignSinceCommit = false;
    return { outcomes, foreignWrite };
  };

  return {
    // Fast path: no savepoints. Each append's expected revision is checked against the stream
    // head as it stands in this transaction, so its INSERTs cannot hit UNIQUE(stream_id,
    // revision); if an INSERT of a several-event append fails anyway (a bad value), the whole
    // transaction is rolled back and the batch is written again with a savepoint around each.
    write: (batch) => attempt(batch, false) ?? (attempt(batch, true) as BatchResult),
  };
}
