import type { Worker } from 'node:worker_threads';

/**
 * Asks a store's worker thread to close its connection and exit (`stopMessage`), and resolves once
 * it has. The worker is ref'd meanwhile: idle store workers are unref'd, and without this a process
 * with nothing else to do would exit before the caller's `await close()` returned. A worker stuck
 * (say in a long checkpoint) is terminated after 5 s so that shutdown is never held up.
 */
export function stopWorker(w: Worker, stopMessage: unknown): Promise<void> {
  return new Promise<void>((resolve) => {
    w.once('exit', () => resolve());
    w.ref();
    w.postMessage(stopMessage);
    setTimeout(() => void w.terminate(), 5000).unref();
  });
}
