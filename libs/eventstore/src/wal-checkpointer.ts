import { Worker } from 'node:worker_threads';
import { stopWorker } from './stop-worker';

/**
 * Runs SQLite's WAL checkpoints for one database file on a worker thread, off the event loop.
 *
 * With the default automatic checkpoint, the COMMIT that pushes the WAL past its threshold copies
 * the WAL's pages into the database file and fsyncs it, synchronously, on the event loop: measured
 * under the cases bench, the read store's commits then took up to ~20 ms (44 such stalls in 30 s)
 * and the event store's up to ~28 ms, every request of the process waiting behind them. Here a
 * second connection on a worker thread runs `PRAGMA wal_checkpoint(PASSIVE)` every `intervalMs`
 * (PASSIVE never blocks readers or writers; it copies what it can), and the owner raises its own
 * automatic checkpoint to a backstop (`backstopPages`) that only matters if the worker falls far
 * behind. If the worker fails or exits unexpectedly, `onFailure` is called once (the owner puts
 * its normal automatic checkpoint back) and nothing else changes: checkpoints are housekeeping,
 * never part of a commit's durability.
 *
 * A checkpoint does not change `PRAGMA data_version` for other connections (it commits nothing), so
 * the stores' foreign-write detection is unaffected (tested).
 */
export class WalCheckpointer {
  private worker: Worker | null;
  private failed = false;
  private stopping = false;
  /** Checkpoints the worker completed, and the last one's [busy, walFrames, checkpointedFrames]. */
  readonly stats = { checkpoints: 0, last: [0, 0, 0] as [number, number, number] };

  constructor(
    file: string,
    private readonly onFailure: () => void,
    options: { intervalMs?: number } = {},
  ) {
    // Plain JavaScript evaluated in the worker (no build step, same under ts-node/jest and dist).
    this.worker = new Worker(WORKER_SOURCE, {
      eval: true,
      workerData: { driver: require.resolve('better-sqlite3'), file, intervalMs: Math.max(50, Math.floor(options.intervalMs ?? 1000)) },
    });
    this.worker.unref();
    this.worker.on('message', (m: { checkpointed?: [number, number, number]; error?: string }) => {
      if (m.checkpointed) {
        this.stats.checkpoints++;
        this.stats.last = m.checkpointed;
      }
    });
    this.worker.on('error', () => this.fail());
    this.worker.on('exit', () => {
      this.worker = null;
      if (!this.stopping) this.fail();
    });
  }

  /** Stops the worker after one last checkpoint; the owner may close its connection afterwards. */
  async close(): Promise<void> {
    const w = this.worker;
    if (!w || this.stopping) return;
    this.stopping = true;
    await stopWorker(w, 'stop');
  }

  private fail(): void {
    if (this.failed || this.stopping) return;
    this.failed = true;
    this.onFailure();
  }
}

const WORKER_SOURCE = `
const { parentPort, workerData } = require('node:worker_threads');
const Database = require(workerData.driver);
const db = new Database(workerData.file, { fileMustExist: true });
db.pragma('busy_timeout = 1000');
const checkpoint = () => {
  try {
    const r = db.pragma('wal_checkpoint(PASSIVE)')[0];
    parentPort.postMessage({ checkpointed: [r.busy, r.log, r.checkpointed] });
  } catch (e) {
    parentPort.postMessage({ error: (e && e.code) || 'error' });
  }
};
const timer = setInterval(checkpoint, workerData.intervalMs);
parentPort.on('message', (m) => {
  if (m !== 'stop') return;
  clearInterval(timer);
  checkpoint();
  db.close();
  parentPort.close();
});
`;
