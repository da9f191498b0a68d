import { Worker } from 'node:worker_threads';
import { BatchAppend, BatchResult, createBatchWriter } from './batch-writer';

export interface WriterThreadOptions {
  busyTimeoutMs: number;
  /** wal_autocheckpoint of the writer's connection (the connection whose COMMITs cross it). */
  autocheckpoint: number;
}

/**
 * The event store's writer on a worker thread: its own connection to the file, running the same
 * group commit (`createBatchWriter`, from its source text) with synchronous=FULL. The calling
 * thread only hands a batch over and settles its appends when the COMMIT has returned, so the
 * INSERTs and the COMMIT's fsync no longer hold the event loop: requests keep being served while
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
    this.worker.on('message', (m: { id: number; result?: BatchResult; fatal?: { message: string; code?: string } }) => {
      const p = this.inFlight;
      if (!p || p.id !== m.id) return;
      this.inFlight = null;
      this.worker?.unref();
      if (m.result) p.resolve(m.result);
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
      w.postMessage({ type: 'write', id, batch });
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
    await new Promise<void>((resolve) => {
      w.once('exit', () => resolve());
      // Keep the process alive until the worker has closed its connection (the caller awaits it).
      w.ref();
      w.postMessage({ type: 'stop' });
      setTimeout(() => void w.terminate(), 5000).unref();
    });
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

const WORKER_SOURCE = `
const { parentPort, workerData } = require('node:worker_threads');
const Database = require(workerData.driver);
const createBatchWriter = (${createBatchWriter.toString()});
const db = new Database(workerData.file, { fileMustExist: true });
db.pragma('synchronous = FULL');
db.pragma('busy_timeout = ' + workerData.busyTimeoutMs);
db.pragma('wal_autocheckpoint = ' + workerData.autocheckpoint);
db.pragma('journal_size_limit = 67108864');
const writer = createBatchWriter(db);
parentPort.on('message', (m) => {
  if (m.type === 'write') {
    let reply;
    try {
      reply = { id: m.id, result: writer.write(m.batch) };
    } catch (e) {
      reply = { id: m.id, fatal: { message: String((e && e.message) || e), code: e && typeof e.code === 'string' ? e.code : undefined } };
    }
    parentPort.postMessage(reply);
  } else if (m.type === 'autocheckpoint') {
    db.pragma('wal_autocheckpoint = ' + Math.max(0, Math.floor(m.pages)));
  } else if (m.type === 'stop') {
    db.close();
    parentPort.close();
  }
});
`;
