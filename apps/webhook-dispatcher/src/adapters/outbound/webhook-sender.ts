import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { Worker } from 'node:worker_threads';
import { getLogger } from '@svc/http';
import type { SendInput, SendResult, WebhookSenderPort } from '../../application/webhook-sender.port';
import { sendWebhook } from './send-webhook';

/** The compiled sender thread, next to this file in the build (absent when running from source). */
export const SENDER_WORKER_FILE = join(__dirname, 'sender-worker.js');

/**
 * Sends webhook attempts on a worker thread of their own (`sender-worker.js`): the HTTP client,
 * the signature and the socket writes of every attempt run beside the service's event loop
 * instead of on it, and their keep-alive pools live there. Same `sendWebhook`, same results
 * (a signed attempt's metadata, never the body).
 *
 * Falls back to sending on the calling thread: when the compiled worker file is not there (tests
 * from TypeScript source), for an input with a test resolver (a function cannot cross threads),
 * and for good once the thread has failed. Attempts that were out on a thread that failed are
 * rejected (not known to be sent): the caller leaves them to the lease's expiry, which sends
 * them again (at least once, as after a crash).
 */
export class WebhookSender implements WebhookSenderPort {
  private worker: Worker | null = null;
  private readonly pending = new Map<number, { resolve: (r: SendResult) => void; reject: (err: Error) => void }>();
  private nextId = 0;

  constructor(options: { workerFile?: string | null } = {}) {
    const file = options.workerFile === undefined ? SENDER_WORKER_FILE : options.workerFile;
    if (file && existsSync(file)) this.start(file);
  }

  /** True while attempts go to the sender thread. */
  get threaded(): boolean {
    return this.worker !== null;
  }

  private start(file: string): void {
    const w = new Worker(file);
    w.unref(); // idle, it keeps nothing alive; ref'd while an attempt is out
    w.on('message', (m: { id: number; attempt?: SendResult['attempt']; notSent?: true; error?: string }) => {
      const p = this.pending.get(m.id);
      if (!p) return;
      this.pending.delete(m.id);
      if (this.pending.size === 0) w.unref();
      if (m.attempt) p.resolve({ attempt: m.attempt, ...(m.notSent ? { notSent: true as const } : {}) });
      else p.reject(new Error(`webhook sender thread: ${m.error ?? 'failed'}`));
    });
    const failed = (err: Error) => {
      if (this.worker !== w) return;
      this.worker = null;
      // Metadata only: the error's name, never its message (it could quote a request).
      getLogger().warn({ error: err?.name ?? 'Error', attemptsOut: this.pending.size }, 'webhook sender thread failed; attempts now run on the event loop');
      this.rejectPending(err);
      void w.terminate();
    };
    w.on('error', (err) => failed(err));
    // A reply that cannot be read: which attempt it answered is unknown, so none can be settled.
    w.on('messageerror', () => failed(new Error('webhook sender thread: unreadable reply')));
    w.on('exit', () => failed(new Error('webhook sender thread exited')));
    this.worker = w;
  }

  /**
   * One attempt. `signal` (optional): aborting it ends the attempt if it is not yet on the wire
   * (the result then says `notSent`); one already written runs to its answer or deadline.
   */
  send(input: SendInput, signal?: AbortSignal): Promise<SendResult> {
    const w = this.worker;
    if (!w || input.resolve) return sendWebhook(input, signal);
    return new Promise<SendResult>((resolve, reject) => {
      const id = ++this.nextId;
      try {
        w.postMessage({ id, input });
      } catch {
        // Nothing was handed over: this attempt goes out on the calling thread instead.
        sendWebhook(input, signal).then(resolve, reject);
        return;
      }
      const onAbort = () => {
        // The thread decides (it knows whether the request is on the wire); a thread gone meanwhile has rejected it already.
        if (this.worker === w && this.pending.has(id)) w.postMessage({ abort: id });
      };
      signal?.addEventListener('abort', onAbort, { once: true });
      const unlisten = () => signal?.removeEventListener('abort', onAbort);
      this.pending.set(id, {
        resolve: (r) => {
          unlisten();
          resolve(r);
        },
        reject: (err) => {
          unlisten();
          reject(err);
        },
      });
      if (this.pending.size === 1) w.ref();
      if (signal?.aborted) onAbort();
    });
  }

  private rejectPending(err: Error): void {
    const out = [...this.pending.values()];
    this.pending.clear();
    for (const p of out) p.reject(err);
  }

  /**
   * Stops the thread; later sends run on the calling thread. Meant for after the caller's attempts
   * have ended: any still out are rejected (not known to be sent).
   */
  async close(): Promise<void> {
    const w = this.worker;
    this.worker = null;
    this.rejectPending(new Error('webhook sender thread closed'));
    if (w) await w.terminate();
  }
}
