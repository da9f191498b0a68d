/**
 * The webhook sender's thread (see `WebhookSender`): runs `sendWebhook` off the service's event
 * loop, with its own keep-alive pools. Loaded only from the compiled build (a worker thread runs
 * JavaScript). It logs nothing and keeps nothing: each message is one attempt, answered with its
 * metadata (never the body), or the abort of an attempt it is running (`{ abort: id }`, see
 * `sendWebhook`'s signal: only an attempt not yet on the wire ends; it answers `notSent`).
 */
import { parentPort } from 'node:worker_threads';
import type { SendInput } from '../../application/webhook-sender.port';
import { sendWebhook } from './send-webhook';

type Request = { id: number; input: Omit<SendInput, 'resolve'> } | { abort: number };

/** The attempts running, by id: their abort controllers. */
const running = new Map<number, AbortController>();

parentPort?.on('message', (m: Request) => {
  if ('abort' in m) {
    running.get(m.abort)?.abort();
    return;
  }
  const controller = new AbortController();
  running.set(m.id, controller);
  sendWebhook(m.input, controller.signal)
    .then(
      (r) => parentPort!.postMessage({ id: m.id, attempt: r.attempt, ...(r.notSent ? { notSent: true } : {}) }),
      (err: unknown) => parentPort!.postMessage({ id: m.id, error: (err as Error)?.name ?? 'Error' }),
    )
    .finally(() => running.delete(m.id));
});
