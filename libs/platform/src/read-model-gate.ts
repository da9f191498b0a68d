import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { unavailablePageFor } from './web-pages';

/** What the gate asks of the app's projections (ProjectionRunner). */
export interface ReadModelState {
  readonly available: boolean;
  readonly readEpoch: number;
}

const EPOCH = Symbol('readEpoch');
type GatedRequest = FastifyRequest & { [EPOCH]?: number };

export const READ_MODELS_UNAVAILABLE_BODY = JSON.stringify({
  code: 'UNAVAILABLE',
  message: 'The read models are being checked or rebuilt from the event log; retry shortly',
});

/** Sets the 503's status and headers on `reply`; answers the body to send: a page for a browser opening one (a patient's check-in link), else the JSON. */
function unavailable(req: FastifyRequest, reply: FastifyReply): string {
  reply.code(503).header('retry-after', '1');
  const page = unavailablePageFor(req.method, req.headers);
  if (page) {
    reply.headers(page.headers);
    return page.body;
  }
  reply.header('content-type', 'application/json; charset=utf-8');
  return READ_MODELS_UNAVAILABLE_BODY;
}

/**
 * Reads are never answered from read models the store lost (docs/scaling.md, "Read store loss"):
 * while the app's projections say their models are not available (the store's connection dropped
 * and they have not checked them since, or they rebuild a model the store lost), every request
 * under `prefix` but `exempt` (health and readiness) is 503 UNAVAILABLE with `Retry-After: 1`
 * before anything reads the store (a browser opening a page gets a page saying so instead). A
 * request that began while they were available and that is answered after a drop or a loss (a
 * read already on its way to the store when it went away) gets the same 503 instead of what it
 * read: its answer may come from the emptied store. A write
 * keeps a success (it was done; a retry of a write without an idempotency id would do it twice)
 * and gets the 503 for a refusal (nothing was written: a 404 or 401 may come from the emptied
 * store). Streamed answers (a body already flowing) are left as they are.
 */
export function registerReadModelGate(fastify: FastifyInstance, state: ReadModelState, prefix: string, exempt: readonly string[]): void {
  const gated = (url: string) => {
    if (!url.startsWith(prefix)) return false;
    const path = url.split('?', 1)[0];
    return !exempt.includes(path);
  };
  fastify.addHook('onRequest', (req, reply, done) => {
    if (!gated(req.url)) return done();
    if (!state.available) {
      void reply.send(unavailable(req, reply));
      return;
    }
    (req as GatedRequest)[EPOCH] = state.readEpoch;
    done();
  });
  fastify.addHook('onSend', (req, reply, payload, done) => {
    const epoch = (req as GatedRequest)[EPOCH];
    if (epoch === undefined || reply.statusCode >= 500 || (epoch === state.readEpoch && state.available)) return done(null, payload);
    // A write that succeeded stands (its answer comes from what it wrote, and a write without an
    // idempotency id would be done twice by a retry); a refusal may come from the emptied store.
    if (reply.statusCode < 400 && req.method !== 'GET' && req.method !== 'HEAD') return done(null, payload);
    if (payload !== null && typeof payload === 'object' && typeof (payload as { pipe?: unknown }).pipe === 'function') return done(null, payload);
    for (const name of ['location', 'etag', 'last-modified', 'content-length', 'content-encoding']) reply.removeHeader(name);
    done(null, unavailable(req, reply));
  });
}
