/**
 * The webhook sender's thread (see `WebhookSender`): runs `sendWebhook` off the service's event
 * loop, with its own keep-alive pools. Loaded only from the compiled build (a worker thread runs
 * JavaScript). It logs nothing and keeps nothing: each message is one attempt, answered with its
 * metadata (never the body).
 */
import { parentPort } from 'node:worker_threads';
import { SendInput, sendWebhook } from './sender';

type Request = { id: number; input: Omit<SendInput, 'resolve'> };

parentPort?.on('message', (m: Request) => {
  sendWebhook(m.input).then(
    (r) => parentPort!.postMessage({ id: m.id, attempt: r.attempt }),
    (err: unknown) => parentPort!.postMessage({ id: m.id, error: (err as Error)?.name ?? 'Error' }),
  );
});
