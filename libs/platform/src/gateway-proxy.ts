// Over 400 lines: the forwarding rules of one request (edge, body, failover across replicas) read as one path.
import { Agent, IncomingMessage, OutgoingHttpHeaders, request as httpRequest } from 'node:http';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import ipaddr from 'ipaddr.js';
import { getLogger, isUuid, toErrorResponse } from '@svc/http';
import type { ReadStore } from '@svc/read-store';
import { plainTransferEncoding } from './body-parsing';
import { onBodyBreak, passBodyOn } from './edge-answers';
import { Replica, ReplicaPool, ReplicaPoolOptions } from './replica-pool';
import { RouteMatch, RouteTable, UpstreamAnnouncement, readUpstreams, withdrawUpstreams } from './upstreams';
import { unavailablePageFor } from './web-pages';

/**
 * The gateway's reverse proxy in distributed mode (docs/decisions.md, "Distributed topology"):
 * one public address serves the whole contract. A request no route of the gateway takes is
 * forwarded to the app that announced its route (./upstreams.ts), through the gateway's HTTP edge
 * first (host and framing checks, security headers, CORS, request timeout, request log), so that
 * what a client meets is what standalone answers:
 *
 * - The request goes on as it came: method, path and query byte for byte, every end-to-end
 *   header (Host included) and the body's bytes. A JSON body is read here within the body limit
 *   (over it: the app's own 413) and sent on whole with its length (or chunked again under a
 *   transfer coding Node does not undo, `gzip, chunked`, which the app refuses); any other body
 *   is streamed as it arrives, its Content-Length held to, and when it breaks off the app's
 *   answer (given without reading it) is the client's, not the edge's 400 (see `forward`). The
 *   owning app reads it with the same edge as standalone: JSON rules, authentication first, rate
 *   limits, validation.
 *   Hop-by-hop headers are not forwarded; `X-Forwarded-For` is replaced by the client address the
 *   gateway saw and `X-Request-Id` by the gateway's request id (the apps take both from the
 *   gateway only, SVC_TRUST_PROXY), so the per-address limit counts clients and one request's log
 *   lines share their id.
 * - The answer comes back as the app wrote it (status, headers but hop-by-hop ones, body
 *   streamed); the gateway's security headers are the same values.
 * - An app may run as several replicas (./replica-pool.ts): each request goes to the live replica
 *   with the fewest requests in flight. A replica that refuses the connection or does not connect
 *   within `connectTimeoutMs` has received nothing: the request goes to another replica (when
 *   the whole request is at hand: no body, or a JSON body read here) and that one is tried last
 *   for a few seconds. No replica reachable, a streamed body, or no answer begun `timeoutMs` after
 *   the request was sent: 503 UNAVAILABLE with `Retry-After: 1`, never a hang and never a second
 *   send of a request that may have been applied (the contract's idempotency ids make the same
 *   request again safe).
 * - A route no app announced is 404 like any unknown route.
 */
export interface GatewayProxyOptions {
  readStore: ReadStore;
  /** The gateway's own name: its own announcement is not a route to forward. */
  self: string;
  /** Longest wait for an app's answer to begin once the request was sent (SVC_UPSTREAM_TIMEOUT_MS). */
  timeoutMs: number;
  /** Longest wait for a connection to an app (default 2 s). */
  connectTimeoutMs?: number;
  /** How often the route table is read again from the store (default 2 s). */
  refreshMs?: number;
  /** The apps' body limit (bytes): a JSON body over it is 413 here. */
  bodyLimit: number;
  /** Heartbeat and down-marking of replicas (defaults: REPLICA_DEFAULTS). */
  replicas?: ReplicaPoolOptions;
}

/** Headers of one hop (RFC 9110 section 7.6.1), never forwarded either way. */
const HOP_BY_HOP = new Set([
  'connection',
  'keep-alive',
  'proxy-connection',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
  'proxy-authenticate',
  'proxy-authorization',
]);
/** Request headers the gateway answers or replaces: Expect (its edge met it), the forwarding headers and the request id (set anew). */
const NOT_FORWARDED = new Set(['expect', 'forwarded', 'x-forwarded-for', 'x-forwarded-host', 'x-forwarded-proto', 'x-request-id']);

/**
 * The header that carries the gateway's request id to the app, which logs the request under the
 * same id when it comes from a proxy it trusts (`requestIdFrom`).
 */
export const REQUEST_ID_HEADER = 'x-request-id';

const PROXIED = Symbol('svc.proxied');

/** The gateway's route for everything it forwards. */
export const GATEWAY_CATCH_ALL = '/*';

/** The owning app and route of a request the gateway forwarded (for its request log), if it did. */
export function proxiedRoute(req: object): RouteMatch | undefined {
  return (req as { [PROXIED]?: RouteMatch })[PROXIED];
}

const UNAVAILABLE_BODY = JSON.stringify({
  code: 'UNAVAILABLE',
  message: 'This part of the service is not reachable right now; retry the same request shortly',
});

/** The client closed its connection before its answer: nothing to answer. */
class ClientGone extends Error {
  constructor() {
    super('client gone');
    this.name = 'ClientGone';
  }
}

/** A streamed body broke off and the app gave no answer: the edge answers (`answerHere`). */
class BodyBroken extends Error {
  constructor(
    readonly answerHere: () => void,
    readonly upstreamError: unknown,
  ) {
    super('body broken off');
    this.name = 'BodyBroken';
  }
}

/** Errors of a connection to an app that say it is not there (or went away): answered 503. */
class UpstreamUnavailable extends Error {
  constructor(readonly reason: string) {
    super(reason);
    this.name = 'UpstreamUnavailable';
  }
}

export class GatewayProxy {
  private table = new RouteTable([]);
  /** Each app's routes: the union of what its replicas announced. */
  private readonly upstreams = new Map<string, UpstreamAnnouncement>();
  private readonly pool: ReplicaPool;
  private readonly agent = new Agent({ keepAlive: true, maxSockets: 512, maxFreeSockets: 64, scheduling: 'lifo' });
  private timer: NodeJS.Timeout | undefined;
  private closed = false;
  /** The gateway's own routes (`METHOD url`): never forwarded, so never in the table; null until it listens. */
  private own: Set<string> | null = null;

  constructor(private readonly options: GatewayProxyOptions) {
    this.pool = new ReplicaPool(options.replicas);
  }

  /** Reads the table once (the apps that announced before the gateway started), then keeps reading it. */
  async start(): Promise<void> {
    await this.refresh().catch((err) => getLogger().warn({ error: (err as Error)?.name }, 'gateway: route table not read; retrying'));
    this.timer = setInterval(() => {
      this.refresh().catch((err) => getLogger().warn({ error: (err as Error)?.name }, 'gateway: route table not read; retrying'));
    }, this.options.refreshMs ?? 2000);
    this.timer.unref();
  }

  /**
   * Takes the replicas' latest announcements. An app whose announcements are gone from the store
   * (a read store that lost its content) keeps its last ones here: its routes stay routed.
   */
  async refresh(): Promise<void> {
    const announced = (await readUpstreams(this.options.readStore)).filter((a) => a.app !== this.options.self);
    const forgotten = this.pool.update(announced);
    if (forgotten.length) {
      getLogger().info({ replicas: forgotten }, 'gateway: replicas that stopped announcing forgotten');
      await withdrawUpstreams(this.options.readStore, forgotten);
    }
    let changed = false;
    const byApp = new Map<string, UpstreamAnnouncement[]>();
    for (const a of announced) byApp.set(a.app, [...(byApp.get(a.app) ?? []), a]);
    for (const [app, list] of byApp) {
      const seen = new Set<string>();
      const routes = list.flatMap((a) => a.routes).filter((r) => !seen.has(`${r.method} ${r.url}`) && !!seen.add(`${r.method} ${r.url}`));
      routes.sort((x, y) => `${x.method} ${x.url}`.localeCompare(`${y.method} ${y.url}`));
      const known = this.upstreams.get(app);
      if (known && JSON.stringify(known.routes) === JSON.stringify(routes)) continue;
      this.upstreams.set(app, { app, origin: list[0].origin, routes, announcedAt: list[0].announcedAt });
      changed = true;
    }
    if (changed) this.rebuild();
  }

  /**
   * The routes the gateway serves itself, once it listens (Fastify matches them before the
   * catch-all): left out of the table, with every app's own operations routes (/healthz, /readyz).
   */
  setOwnRoutes(routes: { method: string; url: string }[]): void {
    this.own = new Set(routes.map((r) => `${r.method.toUpperCase()} ${r.url}`));
    this.rebuild();
  }

  private rebuild(): void {
    const own = this.own;
    const upstreams = [...this.upstreams.values()].map((u) =>
      own ? { ...u, routes: u.routes.filter((r) => !own.has(`${r.method.toUpperCase()} ${r.url}`)) } : u,
    );
    const table = new RouteTable(upstreams);
    // Said once the gateway's own routes are known (before, every app's /healthz would be a conflict).
    if (own)
      for (const c of table.conflicts)
        getLogger().warn({ method: c.method, route: c.url, apps: c.apps }, 'gateway: two apps announced the same route; the first keeps it');
    this.table = table;
    getLogger().info({ apps: [...this.upstreams.keys()].sort() }, 'gateway: route table');
  }

  /** The replicas the gateway forwards to and their internal origins (the dev clock is pushed to them). */
  origins(): { app: string; instance: string; origin: string }[] {
    return this.pool.all().map((r) => ({ app: r.app, instance: r.instance, origin: r.origin }));
  }

  /** The replicas of `app` that keep announcing. */
  liveReplicas(app: string): { instance: string; origin: string; inFlight: number }[] {
    return this.pool.live(app).map((r) => ({ instance: r.instance, origin: r.origin, inFlight: r.inFlight }));
  }

  /** The app serving a method and path, or null. */
  match(method: string, path: string): RouteMatch | null {
    return this.table.match(method, path);
  }

  /**
   * The catch-all route, in a context of its own whose body parser reads nothing (the body is
   * streamed to the app). The gateway's own routes match first (Fastify prefers any route to a
   * wildcard); every other request comes here.
   */
  register(fastify: FastifyInstance): void {
    // A body that will be streamed is marked as Node emits its request, before any of it is parsed
    // (the edge then leaves the answer to a body that breaks off to the app: see `forward`).
    fastify.server.prependListener('request', (req: IncomingMessage) => {
      if (hasBody(req) && !isJsonMedia(req.headers['content-type']) && this.table.match(req.method ?? 'GET', req.url ?? '/')) passBodyOn(req);
    });
    void fastify.register(async (child) => {
      child.removeAllContentTypeParsers();
      child.addContentTypeParser('*', (_req, _payload, done) => done(null, undefined));
      child.route({
        method: ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'],
        url: GATEWAY_CATCH_ALL,
        handler: (req, reply) => this.handle(req, reply),
      });
    });
  }

  async close(): Promise<void> {
    this.closed = true;
    if (this.timer) clearInterval(this.timer);
    this.agent.destroy();
  }

  private handle(req: FastifyRequest, reply: FastifyReply): Promise<unknown> | FastifyReply {
    const raw = req.raw;
    const url = raw.url ?? '/';
    const match = this.table.match(raw.method ?? 'GET', url);
    if (!match) {
      reply.callNotFound();
      return reply;
    }
    (req as unknown as { [PROXIED]?: RouteMatch })[PROXIED] = match;
    return this.forward(req, reply, match.app).catch((err: unknown) => {
      // The client went away, or the edge answered the request itself (408 for a body that stopped coming).
      if (err instanceof ClientGone || reply.raw.headersSent || raw.socket.destroyed) {
        if (!reply.sent) reply.hijack();
        if (!reply.raw.writableEnded && !reply.raw.headersSent) reply.raw.destroy();
        return reply;
      }
      const cause = err instanceof BodyBroken ? err.upstreamError : err;
      const reason = cause instanceof UpstreamUnavailable ? cause.reason : ((cause as NodeJS.ErrnoException)?.code ?? (cause as Error)?.name ?? 'error');
      getLogger().warn({ reqId: req.id, upstream: match.app, reason }, 'gateway: app unavailable');
      if (err instanceof BodyBroken) {
        // No answer from the app to a body that broke off: the edge's own.
        reply.hijack();
        err.answerHere();
        return reply;
      }
      // What is left of a body not read is not read: the connection closes after the answer.
      if (!raw.complete) reply.header('connection', 'close');
      reply.code(503).header('retry-after', '1');
      // A browser opening a page (a patient's check-in link) gets a page, in its language.
      const page = unavailablePageFor(raw.method, raw.headers);
      if (page) return reply.headers(page.headers).send(page.body);
      return reply.header('content-type', 'application/json; charset=utf-8').send(UNAVAILABLE_BODY);
    });
  }

  /**
   * Sends the request to the app and its answer back; rejects (nothing sent to the client yet)
   * when the app is not reachable. A JSON body, the only kind an operation reads, is read first,
   * within the body limit (over it: 413 here, as the app's own edge answers it): the app then gets
   * it whole, so it never answers (and closes) while the body is still on its way, and a request
   * can be sent again on a new connection. Any other body is streamed: the app answers it without
   * reading it (415, or 401 first) and reads what is left off the connection; if the body breaks
   * off first, the app still answers it (the edge leaves that request to it, edge-answers.ts
   * passBodyOn), and its connection is closed after the answer.
   */
  private async forward(req: FastifyRequest, reply: FastifyReply, app: string): Promise<unknown> {
    const raw = req.raw;
    const withBody = hasBody(raw);
    const headers = forwardedHeaders(raw, req.ip, req.id);
    let body: Buffer | null = null;
    if (withBody && isJsonMedia(raw.headers['content-type'])) {
      const declared = raw.headers['content-length'];
      const read = declared !== undefined && Number(declared) > this.options.bodyLimit ? null : await readBody(raw, this.options.bodyLimit);
      if (read === null) return this.tooLarge(reply);
      body = read;
      for (const name of Object.keys(headers)) if (name.toLowerCase() === 'content-length') delete headers[name];
      // Node undid the chunking only: a transfer coding under it (`gzip, chunked`) is still on the
      // bytes, and goes on with them (chunked again), so that the app's JSON parser answers it
      // as standalone does (415 after authentication, ./body-parsing.ts). Else sent with its length.
      const transferCoding = raw.headers['transfer-encoding'];
      if (!plainTransferEncoding(transferCoding)) headers['transfer-encoding'] = transferCoding;
      else headers['content-length'] = String(body.length);
    }
    // The whole request is at hand (no body, or one read here): it can be sent again.
    const replayable = !withBody || body !== null;
    // A streamed body that breaks off (a FIN, a bad chunk): the edge leaves the answer to the app,
    // which answers such a body without reading it (415, or 401 first), as standalone does; it
    // gets what came, and `timeoutMs` to answer, else the edge's own answer (`answerHere`, 400).
    let broken: (() => void) | undefined;
    let awaitAnswer: (() => void) | undefined;
    if (withBody && body === null)
      onBodyBreak(raw, (answerHere) => {
        broken = answerHere;
        reply.header('connection', 'close');
        awaitAnswer?.();
      });
    return new Promise((resolve, reject) => {
      const tried = new Set<string>();
      let reusedRetry = false;
      let lastError: Error | undefined;
      let clientGone = false;
      let current: ReturnType<typeof httpRequest> | undefined;
      // The body broke off: nothing more is sent to the app, whose connection is closed after its answer.
      reply.raw.once('finish', () => {
        if (broken) current?.destroy();
      });
      const send = (same?: Replica): void => {
        const replica = same ?? this.pool.pick(app, tried);
        if (!replica) {
          reject(lastError ?? new UpstreamUnavailable('no replica'));
          return;
        }
        tried.add(replica.instance);
        const target = new URL(replica.origin);
        replica.inFlight++;
        let counted = true;
        const done = () => {
          if (counted) replica.inFlight--;
          counted = false;
        };
        // Connected: from here on the app may have the request (never sent twice).
        let connected = false;
        let settled = false;
        let connectTimer: NodeJS.Timeout | undefined;
        let answerTimer: NodeJS.Timeout | undefined;
        const clear = () => {
          clearTimeout(connectTimer);
          clearTimeout(answerTimer);
        };
        const out = httpRequest({
          protocol: target.protocol,
          hostname: target.hostname,
          port: target.port,
          method: raw.method,
          path: raw.url,
          headers,
          agent: this.agent,
        });
        current = out;
        // A streamed body is passed on as it arrives; Node checks it against the Content-Length sent
        // on (ClientRequest.strictContentLength, Node 18.12; not in this @types/node).
        (out as typeof out & { strictContentLength: boolean }).strictContentLength = true;
        const fail = (err: Error) => {
          if (settled) return;
          settled = true;
          clear();
          done();
          out.destroy();
          if (clientGone) return;
          // A kept-alive connection the app closed as it was reused: once more on a new one.
          if (replayable && !reusedRetry && out.reusedSocket && !this.closed && ['ECONNRESET', 'EPIPE'].includes((err as NodeJS.ErrnoException).code ?? '')) {
            reusedRetry = true;
            return send(replica);
          }
          if (!connected) {
            // Refused or no connection: the replica got nothing. Another one, if any is left.
            this.pool.markDown(replica);
            getLogger().warn(
              {
                reqId: req.id,
                upstream: app,
                replica: replica.instance,
                reason: (err as NodeJS.ErrnoException).code ?? (err instanceof UpstreamUnavailable ? err.reason : err.name),
              },
              'gateway: replica not reachable',
            );
            lastError = err;
            if (replayable && !this.closed) return send();
          }
          reject(err);
        };
        out.on('socket', (socket) => {
          if (!(socket as { connecting?: boolean }).connecting) {
            connected = true;
            return;
          }
          connectTimer = setTimeout(() => fail(new UpstreamUnavailable('connect timeout')), this.options.connectTimeoutMs ?? 2000);
          socket.once('connect', () => {
            connected = true;
            clearTimeout(connectTimer);
          });
        });
        // Once the whole request is sent (or all of it that will come), the app has `timeoutMs` to begin its answer.
        const startAnswerTimer = () => {
          if (settled || answerTimer) return;
          answerTimer = setTimeout(() => fail(new UpstreamUnavailable('answer timeout')), this.options.timeoutMs);
        };
        awaitAnswer = startAnswerTimer;
        out.on('finish', startAnswerTimer);
        out.on('error', fail);
        out.on('response', (res: IncomingMessage) => {
          if (settled) {
            res.resume();
            return;
          }
          settled = true;
          clear();
          res.once('close', done);
          resolve(this.answer(reply, res, raw.method === 'HEAD'));
        });
        if (body !== null) out.end(body);
        else if (withBody) {
          raw.pipe(out);
          if (broken) startAnswerTimer();
        } else out.end();
      };
      // The client went away: so does the request to the app.
      reply.raw.once('close', () => {
        if (reply.raw.writableFinished) return;
        clientGone = true;
        current?.destroy();
        reject(new ClientGone());
      });
      send();
    }).catch((err: unknown) => {
      throw broken && !(err instanceof ClientGone) ? new BodyBroken(broken, err) : err;
    });
  }

  /** 413 as the app's own edge answers a JSON body over the limit (before authentication); the rest of the body is not read. */
  private tooLarge(reply: FastifyReply): FastifyReply {
    const { status, body } = toErrorResponse({ code: 'FST_ERR_CTP_BODY_TOO_LARGE' });
    return reply.code(status).header('connection', 'close').header('content-type', 'application/json; charset=utf-8').send(JSON.stringify(body));
  }

  /** The app's answer, as it wrote it, minus its hop-by-hop headers. */
  private answer(reply: FastifyReply, res: IncomingMessage, head: boolean): FastifyReply {
    const status = res.statusCode ?? 502;
    reply.code(status);
    const connectionTokens = new Set(
      String(res.headers.connection ?? '')
        .toLowerCase()
        .split(',')
        .map((s) => s.trim())
        .filter(Boolean),
    );
    const raw = res.rawHeaders;
    const seen = new Map<string, string[]>();
    for (let i = 0; i < raw.length; i += 2) {
      const name = raw[i].toLowerCase();
      if (HOP_BY_HOP.has(name) || connectionTokens.has(name)) continue;
      const list = seen.get(name);
      if (list) list.push(raw[i + 1]);
      else seen.set(name, [raw[i + 1]]);
    }
    for (const [name, values] of seen) reply.header(name, values.length === 1 ? values[0] : values);
    if (head || status === 204 || status === 304) {
      res.resume();
      return reply.send();
    }
    return reply.send(res);
  }
}

/** The request's end-to-end headers as they came (repeated ones kept), and the client address for the app. */
function forwardedHeaders(raw: IncomingMessage, clientIp: string, requestId: string): OutgoingHttpHeaders {
  const connectionTokens = new Set(
    String(raw.headers.connection ?? '')
      .toLowerCase()
      .split(',')
      .map((s) => s.trim())
      .filter(Boolean),
  );
  const out: Record<string, string | string[]> = {};
  const names = new Map<string, string>();
  const rh = raw.rawHeaders;
  for (let i = 0; i < rh.length; i += 2) {
    const lower = rh[i].toLowerCase();
    if (HOP_BY_HOP.has(lower) || NOT_FORWARDED.has(lower) || connectionTokens.has(lower)) continue;
    const name = names.get(lower) ?? rh[i];
    names.set(lower, name);
    const prev = out[name];
    out[name] = prev === undefined ? rh[i + 1] : [...(Array.isArray(prev) ? prev : [prev]), rh[i + 1]];
  }
  // A chunked body is passed on chunked (Node chunks a body sent without Content-Length).
  out['x-forwarded-for'] = clientIp;
  out[REQUEST_ID_HEADER] = requestId;
  return out;
}

/** Whether a request has a body: chunked, or a Content-Length but 0. */
function hasBody(raw: IncomingMessage): boolean {
  return raw.headers['transfer-encoding'] !== undefined || (raw.headers['content-length'] !== undefined && raw.headers['content-length'] !== '0');
}

/** The media type Fastify hands to the JSON parser (`application/json`, any parameters). */
function isJsonMedia(contentType: string | undefined): boolean {
  if (contentType === undefined) return false;
  const semi = contentType.indexOf(';');
  return (semi === -1 ? contentType : contentType.slice(0, semi)).trim().toLowerCase() === 'application/json';
}

/**
 * The request body, whole, or null once it passes `limit` bytes (what is left is not read).
 * Rejects when the client goes away first.
 */
function readBody(raw: IncomingMessage, limit: number): Promise<Buffer | null> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const done = (value: Buffer | null | Error) => {
      raw.off('data', onData);
      raw.off('end', onEnd);
      raw.off('close', onClose);
      if (value instanceof Error) reject(value);
      else resolve(value);
    };
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size > limit) {
        raw.pause();
        done(null);
      } else chunks.push(chunk);
    };
    const onEnd = () => done(Buffer.concat(chunks, size));
    const onClose = () => done(new ClientGone());
    raw.on('data', onData);
    raw.on('end', onEnd);
    raw.on('close', onClose);
  });
}

/** Address ranges SVC_TRUST_PROXY names, as ipaddr.js calls them. */
const RANGE_NAMES: Record<string, string[]> = { loopback: ['loopback'], linklocal: ['linkLocal'], uniquelocal: ['private', 'uniqueLocal'] };

/**
 * Whether a peer address is one of the proxies SVC_TRUST_PROXY trusts (the same forms Fastify's
 * `trustProxy` takes: a hop count trusts whatever is in front, else addresses, CIDRs and range
 * names). Compiled once.
 */
export function trustedPeer(trust: false | number | string[]): (address: string | undefined) => boolean {
  if (trust === false) return () => false;
  if (typeof trust === 'number') return () => trust > 0;
  const ranges = new Set<string>();
  const cidrs: [ipaddr.IPv4 | ipaddr.IPv6, number][] = [];
  for (const entry of trust) {
    if (RANGE_NAMES[entry]) for (const r of RANGE_NAMES[entry]) ranges.add(r);
    else if (entry.includes('/')) cidrs.push(ipaddr.parseCIDR(entry));
    else {
      const a = ipaddr.process(entry);
      cidrs.push([a, a.kind() === 'ipv4' ? 32 : 128]);
    }
  }
  return (address) => {
    if (!address || !ipaddr.isValid(address)) return false;
    const a = ipaddr.process(address);
    if (ranges.has(a.range())) return true;
    return cidrs.some(([net, bits]) => net.kind() === a.kind() && a.match(net, bits));
  };
}

/**
 * The request id a trusted proxy (the gateway) sent, so that the app logs the request under the
 * gateway's id: a uuid in `X-Request-Id` from a peer `trusted` accepts; otherwise undefined (the
 * app makes its own). A client cannot choose the id an app logs under.
 */
export function requestIdFrom(req: IncomingMessage, trusted: (address: string | undefined) => boolean): string | undefined {
  const id = req.headers[REQUEST_ID_HEADER];
  if (typeof id !== 'string' || id.length !== 36 || !isUuid(id)) return undefined;
  return trusted(req.socket.remoteAddress) ? id.toLowerCase() : undefined;
}
