import { Agent as HttpAgent, ClientRequest, request as httpRequest, IncomingMessage } from 'node:http';
import { Agent as HttpsAgent, request as httpsRequest } from 'node:https';
import { isIP } from 'node:net';
import { Resolver, guardedLookup, isBlockedAddress, signWebhook } from '@svc/security';
import type { SendInput, SendResult } from '../../application/webhook-sender.port';

export const DELIVERY_TIMEOUT_MS = 15_000;

const productionLookup = guardedLookup();

/** Sockets kept per origin (host:port) for the deliveries running at once; more wait for one. */
export const MAX_SOCKETS_PER_ORIGIN = 64;
/** An idle pooled socket is closed after this (below the common 5 s server keep-alive timeout). */
const IDLE_SOCKET_MS = 4_000;
/** A response body longer than this is not drained: its socket is destroyed instead of reused. */
const MAX_DRAINED_BODY = 64 * 1024;

/**
 * Connection pools: keep-alive, at most MAX_SOCKETS_PER_ORIGIN sockets per origin. The production
 * pools resolve through `guardedLookup` on the Agent, so every socket they open is checked at
 * connect time (a pooled socket stays connected to the address that was checked); the others
 * (standalone, development) resolve normally.
 */
const agentOptions = {
  keepAlive: true,
  maxSockets: MAX_SOCKETS_PER_ORIGIN,
  maxFreeSockets: MAX_SOCKETS_PER_ORIGIN,
  timeout: IDLE_SOCKET_MS,
  scheduling: 'lifo' as const,
};
const agents = {
  production: { http: new HttpAgent({ ...agentOptions, lookup: productionLookup }), https: new HttpsAgent({ ...agentOptions, lookup: productionLookup }) },
  open: { http: new HttpAgent(agentOptions), https: new HttpsAgent(agentOptions) },
};

class TimeoutError extends Error {
  override name = 'TimeoutError';
}

class NotSentError extends Error {
  override name = 'NotSentError';
}

/**
 * One POST through node:http(s). In production the socket resolves its host through
 * `guardedLookup`, which refuses blocked addresses at connect time (a check before the request and
 * a second resolution by the client would let a rebinding DNS answer through); an IP literal host
 * (not looked up) is checked here. No redirects are followed (node:http never does). The attempt
 * has one overall deadline, `timeoutMs` from the moment the request is created: the wait for a
 * pooled socket of a busy origin, the connection and the exchange up to the response head all
 * count (an attempt's lease must outlive the attempt, so nothing may run past the deadline). On
 * the deadline the promise fails at once, even for a request still queued for a socket (its
 * `error` event would only come once it got one). The answer is the response head; the body is
 * never read into memory: it is drained in the background (within the same deadline, at most
 * MAX_DRAINED_BODY bytes) so the socket goes back to the pool, else the socket is destroyed.
 * A pooled (reused) socket that fails with a reset before any response, the receiver having
 * closed it while it sat idle, is retried once on a fresh unpooled socket (same address guard,
 * same deadline). `resolve` (tests only) replaces the resolver on an unpooled socket.
 */
function post(
  url: URL,
  headers: Record<string, string>,
  body: Buffer,
  production: boolean,
  resolve: Resolver | undefined,
  timeoutMs: number,
  signal?: AbortSignal,
): Promise<IncomingMessage> {
  return new Promise((done, fail) => {
    const https = url.protocol === 'https:';
    const requester = https ? httpsRequest : httpRequest;
    const pool = production ? agents.production : agents.open;
    const pooled = resolve ? { agent: false as const, ...(production ? { lookup: guardedLookup(resolve) } : {}) } : { agent: https ? pool.https : pool.http };
    // A fresh socket (the retry of a reused one that was reset): unpooled, same address guard.
    const fresh = { agent: false as const, ...(production ? { lookup: resolve ? guardedLookup(resolve) : productionLookup } : {}) };
    let settled = false;
    let retried = false;
    let req: ClientRequest;
    const send = (connection: typeof pooled | typeof fresh) => {
      const r = requester(url, { method: 'POST', headers, ...connection }, (res) => {
        settled = true;
        done(res);
        let drained = 0;
        res.on('data', (chunk: Buffer) => {
          drained += chunk.length;
          if (drained > MAX_DRAINED_BODY) r.destroy();
        });
        res.on('end', () => clearTimeout(timer));
        res.on('error', () => undefined);
        res.on('close', () => clearTimeout(timer));
      });
      req = r;
      r.on('error', (err: NodeJS.ErrnoException) => {
        if (settled) return; // the head has answered, or the deadline already failed the attempt
        // A kept-alive socket the receiver closed while it sat idle: reset before any response.
        // Retried once, on a fresh socket, within the same deadline.
        if (!retried && r.reusedSocket && RESET_CODES.has(err.code ?? '')) {
          retried = true;
          send(fresh);
          return;
        }
        clearTimeout(timer);
        settled = true;
        fail(err);
      });
      r.end(body);
    };
    // The overall deadline, from creation (queue wait included).
    const timer = setTimeout(() => {
      const err = new TimeoutError('webhook attempt timed out');
      if (!settled) {
        settled = true;
        fail(err);
      }
      req.destroy(err);
    }, timeoutMs);
    // An abort (the endpoint was deleted) ends the attempt only while nothing of it can have left:
    // queued for a pooled socket (no socket yet) or on a socket still connecting (node buffers
    // the writes until connected). Node hands a request to its socket and writes it in the same
    // tick, so once `req.socket` is a connected socket the request may be on the wire: it then
    // runs to its answer or its deadline as usual (the deletion waits for that).
    const onAbort = () => {
      if (settled) return;
      if (req.socket && !req.socket.connecting) return;
      settled = true;
      clearTimeout(timer);
      fail(new NotSentError('webhook attempt aborted before it was sent'));
      req.destroy();
    };
    // (The signal is the attempt's own: a listener left after the attempt settled does nothing.)
    signal?.addEventListener('abort', onAbort, { once: true });
    send(pooled);
  });
}

/** A reused socket failing with one of these before any response was closed by the peer meanwhile. */
const RESET_CODES = new Set(['ECONNRESET', 'EPIPE', 'ECONNABORTED']);

function errorOf(err: unknown, production: boolean): string {
  const e = err as NodeJS.ErrnoException;
  if (e?.name === 'TimeoutError') return 'timeout';
  if (e?.code === 'ESVCBLOCKED') return 'address_refused';
  if (production && (e?.code === 'ENOTFOUND' || e?.code === 'EAI_NONAME' || e?.code === 'EAI_NODATA')) return 'unresolvable';
  return 'network_error';
}

/**
 * One delivery attempt: a fresh timestamp (`signedAt`, real time) and signature, one 15 s deadline from the request's
 * creation (waiting for a pooled socket included), no redirects followed, response body drained
 * unseen (never kept). Only metadata is returned (never the body); `durationMs` is measured from
 * the request's creation too (so it includes any wait for a pooled socket).
 */
export async function sendWebhook(input: SendInput, signal?: AbortSignal): Promise<SendResult> {
  const ts = Math.floor(input.signedAt.getTime() / 1000);
  const body = Buffer.from(input.payload, 'utf8');
  const headers = {
    'content-type': 'application/json',
    'content-length': String(body.length),
    'user-agent': 'svc-webhooks/1.0',
    'x-svc-event-id': input.eventId,
    'x-svc-event-type': input.eventType,
    'x-svc-timestamp': String(ts),
    'x-svc-signature': signWebhook(input.secret, ts, input.payload),
    'idempotency-key': input.eventId,
  };
  let started = performance.now();
  const duration = () => Math.round(performance.now() - started);
  const at = input.at.toISOString();
  const failed = (error: string): SendResult => ({ attempt: { at, statusCode: null, durationMs: duration(), error } });
  const notSent = (): SendResult => ({ attempt: { at, statusCode: null, durationMs: duration(), error: 'not_sent' }, notSent: true });
  if (signal?.aborted) return notSent();
  let url: URL;
  try {
    url = new URL(input.url);
  } catch {
    return failed('network_error');
  }
  if (input.production) {
    const host = url.hostname.replace(/^\[|\]$/g, '');
    if (isIP(host) ? isBlockedAddress(host) : host === 'localhost' || host.endsWith('.localhost')) return failed('address_refused');
  }
  try {
    started = performance.now();
    const res = await post(url, headers, body, input.production, input.resolve, input.timeoutMs ?? DELIVERY_TIMEOUT_MS, signal);
    const status = res.statusCode ?? 0;
    const ok = status >= 200 && status < 300;
    return { attempt: { at, statusCode: status, durationMs: duration(), error: ok ? null : `http_${status}` } };
  } catch (err) {
    if ((err as Error)?.name === 'NotSentError') return notSent();
    return failed(errorOf(err, input.production));
  }
}
