import { Worker } from 'node:worker_threads';
import { BatchAppend, BatchOutcome, BatchResult, createBatchWriter } from './batch-writer';
import { stopWorker } from './stop-worker';

export interface WriterThreadOptions {
  busyTimeoutMs: number;
  /** wal_autocheckpoint of the writer's connection (the connection whose COMMITs cross it). */
  autocheckpoint: number;
}

/**
 * The event store's writer on a worker thread: its own connection to the file, running the same
 * group commit (`createBatchWriter`, from its source text) with synchronous=FULL. The calling
 * thread only hands a batch over and settles its appends when the COMMIT has returned, so the
 * INSERTs and the COMMIT's fsync do not hold the event loop: requests keep being served while
 * a batch is written, and the appends they make wait for the next batch (which the wait makes
 * larger). One batch at a time, in order.
 *
 * If the worker fails or exits unexpectedly, the batch in flight is rejected (whether it
 * committed is unknown to the caller, as with any lost connection; retries are recognised by the
 * streams) and `onExit` is called once, so the store can go on writing on its own connection.
 */
export class WriterThread {
  private worker: Worker | null;
  private inFlight: { id: number; resolve(r: BatchResult): void; reject(err: unknown): void } | null = null;
  private nextId = 1;
  private stopping = false;
  private exited = false;

  constructor(
    file: string,
    options: WriterThreadOptions,
    private readonly onExit: (err: Error) => void,
  ) {
    this.worker = new Worker(WORKER_SOURCE, {
      eval: true,
      workerData: { driver: require.resolve('better-sqlite3'), file, busyTimeoutMs: options.busyTimeoutMs, autocheckpoint: options.autocheckpoint },
    });
    // Idle, the writer does not keep the process alive; with a batch in flight it does.
    this.worker.unref();
    this.worker.on('message', (m: WireReply) => {
      const p = this.inFlight;
      if (!p || p.id !== m.id) return;
      this.inFlight = null;
      this.worker?.unref();
      if (m.outcomes) p.resolve(decodeResult(m));
      else p.reject(Object.assign(new Error(m.fatal?.message ?? 'event store write failed'), m.fatal?.code ? { code: m.fatal.code } : {}));
    });
    this.worker.on('error', (err) => this.gone(err));
    this.worker.on('exit', (code) => this.gone(new Error(`event store writer thread exited (${code})`)));
  }

  /** Writes one batch on the worker (never call again before the previous one settled). */
  write(batch: BatchAppend[]): Promise<BatchResult> {
    const w = this.worker;
    if (!w || this.stopping) return Promise.reject(new Error('event store writer thread is stopped'));
    if (this.inFlight) return Promise.reject(new Error('event store writer: one batch at a time'));
    return new Promise<BatchResult>((resolve, reject) => {
      const id = this.nextId++;
      this.inFlight = { id, resolve, reject };
      w.ref();
      w.postMessage({ type: 'write', id, batch: encodeBatch(batch) });
    });
  }

  setAutocheckpoint(pages: number): void {
    this.worker?.postMessage({ type: 'autocheckpoint', pages });
  }

  /** Closes the worker's connection and stops it (call once no batch is in flight). */
  async close(): Promise<void> {
    const w = this.worker;
    if (!w || this.stopping) return;
    this.stopping = true;
    await stopWorker(w, { type: 'stop' });
  }

  private gone(err: Error): void {
    if (this.exited) return;
    this.exited = true;
    this.worker = null;
    const p = this.inFlight;
    this.inFlight = null;
    p?.reject(err);
    if (!this.stopping) this.onExit(err);
  }
}

/**
 * What crosses the thread is kept flat: a structured clone of an array of objects costs about
 * twice as much as one flat array of strings and numbers (measured: a 64-append batch and its
 * outcomes, 230 µs against 90-115 µs a round trip). A batch is
 * [streamId, expected, rowCount, (eventId, type, data, metadata) x rowCount, ...]; the outcomes
 * come back as a transferred Float64Array of [a, b] per append: [nextExpectedRevision, position]
 * when written, [-2, actual revision] when refused by its expected revision, [-3, 0] when failed
 * alone (its error in `errors`, by index).
 */
type WireBatch = (string | number)[];
interface WireReply {
  id: number;
  outcomes?: Float64Array;
  errors?: Record<number, { message: string; code?: string }>;
  foreignWrite?: boolean;
  fatal?: { message: string; code?: string };
}

function encodeBatch(batch: BatchAppend[]): WireBatch {
  const out: WireBatch = [];
  for (const a of batch) {
    out.push(a.streamId, a.expected, a.rows.length);
    for (const r of a.rows) out.push(r.eventId, r.type, r.data, r.metadata);
  }
  return out;
}

function decodeResult(m: WireReply): BatchResult {
  const o = m.outcomes!;
  const outcomes: BatchOutcome[] = new Array(o.length / 2);
  for (let i = 0; i < outcomes.length; i++) {
    const a = o[2 * i];
    const b = o[2 * i + 1];
    outcomes[i] = a === -2 ? { wrong: b } : a === -3 ? { error: m.errors![i] } : { nextExpectedRevision: a, position: b };
  }
  return { outcomes, foreignWrite: m.foreignWrite === true };
}

/** The worker's side of the wire format above (self-contained: it runs from its source text). */
function workerCodec() {
  return {
    decodeBatch(flat: (string | number)[]): BatchAppend[] {
      const batch: BatchAppend[] = [];
      let i = 0;
      while (i < flat.length) {
        const streamId = flat[i++] as string;
        const expected = flat[i++] as BatchAppend['expected'];
        const n = flat[i++] as number;
        const rows: BatchAppend['rows'] = new Array(n);
        for (let k = 0; k < n; k++)
          rows[k] = { eventId: flat[i++] as string, type: flat[i++] as string, data: flat[i++] as string, metadata: flat[i++] as string };
        batch.push({ streamId, expected, rows });
      }
      return batch;
    },
    encodeResult(id: number, result: BatchResult) {
      const outcomes = new Float64Array(result.outcomes.length * 2);
      let errors: Record<number, { message: string; code?: string }> | undefined;
      result.outcomes.forEach((o, i) => {
        if ('wrong' in o) {
          outcomes[2 * i] = -2;
          outcomes[2 * i + 1] = o.wrong;
        } else if ('error' in o) {
          outcomes[2 * i] = -3;
          (errors ??= {})[i] = o.error;
        } else {
          outcomes[2 * i] = o.nextExpectedRevision;
          outcomes[2 * i + 1] = o.position;
        }
      });
      return { message: { id, outcomes, errors, foreignWrite: result.foreignWrite }, transfer: [outcomes.buffer] };
    },
  };
}

const WORKER_SOURCE = `
const { parentPort, workerData } = require('node:worker_threads');
const Database = require(workerData.driver);
const createBatchWriter = (${createBatchWriter.toString()});
const codec = (${workerCodec.toString()})();
const db = new Database(workerData.file, { fileMustExist: true });
db.pragma('synchronous = FULL');
db.pragma('busy_timeout = ' + workerData.busyTimeoutMs);
db.pragma('wal_autocheckpoint = ' + workerData.autocheckpoint);
db.pragma('journal_size_limit = 67108864');
const writer = createBatchWriter(db);
parentPort.on('message', (m) => {
  if (m.type === 'write') {
    let result;
    try {
      result = writer.write(codec.decodeBatch(m.batch));
    } catch (e) {
      parentPort.postMessage({ id: m.id, fatal: { message: String((e && e.message) || e), code: e && typeof e.code === 'string' ? e.code : undefined } });
      return;
    }
    const reply = codec.encodeResult(m.id, result);
    parentPort.postMessage(reply.message, reply.transfer);
  } else if (m.type === 'autocheckpoint') {
    db.pragma('wal_autocheckpoint = ' + Math.max(0, Math.floor(m.pages)));
  } else if (m.type === 'stop') {
    db.close();
    parentPort.close();
  }
});
`;
