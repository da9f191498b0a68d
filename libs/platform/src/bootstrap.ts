import { randomUUID } from 'node:crypto';
import { isUtf8 } from 'node:buffer';
import { STATUS_CODES } from 'node:http';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Server, Socket } from 'node:net';
import { INestApplication } from '@nestjs/common';
import { ModuleRef, NestFactory, Reflector } from '@nestjs/core';
import { FastifyAdapter, NestFastifyApplication } from '@nestjs/platform-fastify';
import { BodyProblemGuard, ErrorFilter, createValidationPipe, deferBodyProblem, getLogger, lowercaseUuidParams, toErrorResponse } from '@svc/http';
import { RateLimiter, addressRateLimitHook } from '@svc/http';
import { BusExceptionFilter, busServerStrategy } from '@svc/messaging';
import { ArgumentsHost, Catch, ExceptionFilter } from '@nestjs/common';
import { DynamicModule } from '@nestjs/common';
import { ServiceConfig, loadConfig } from './config';
import { corsHook } from './cors';
import { IN_PROCESS_BROKER, PlatformModule } from './platform.module';
import { PRIVATE_UMASK } from './private-files';
import { BackgroundWork } from './background';
import { hostname } from 'node:os';
import { CLOCK, DevClock } from '@svc/clock';
import { READ_STORE, ReadStore } from '@svc/read-store';
import { DEV_CLOCK_PUSH_PATH } from './dev-clock-sync';
import { GATEWAY_CATCH_ALL, GatewayProxy, proxiedRoute, requestIdFrom, trustedPeer } from './gateway-proxy';
import { announceUpstream } from './upstreams';

export const BODY_LIMIT = 1024 * 1024;

/** The path prefix of every route (`app.setGlobalPrefix`); lean routes (libs/http) write it themselves. */
export const API_PREFIX = '/api';

/** Deepest nesting of objects and arrays accepted in a JSON body. */
export const MAX_JSON_DEPTH = 32;

/**
 * Most members accepted in one JSON object of a body. No object of the contract comes near it (the
 * largest free-form one, a workflow step's `body` of at most 8,000 characters, holds at most about
 * 1,150 distinct members); the DTO pipeline (class-transformer) costs time quadratic in an
 * object's member count, so 80,000 unknown members held the event loop for 7.6 s.
 */
export const MAX_JSON_MEMBERS = 2000;

/**
 * What the JSON parser checks of a parsed value, in one iterative walk (a deep value must not
 * exhaust the stack): its nesting depth (counting stops past MAX_JSON_DEPTH), whether one of its
 * objects has more than MAX_JSON_MEMBERS members, and whether a string or key holds an unpaired
 * surrogate.
 */
export function jsonShape(value: unknown): { depth: number; tooManyMembers: boolean; loneSurrogate: boolean } {
  let max = 0;
  let loneSurrogate = typeof value === 'string' && !isWellFormed(value);
  const stack: [unknown, number][] = [[value, 0]];
  while (stack.length) {
    const [v, d] = stack.pop()!;
    if (v === null || typeof v !== 'object') continue;
    if (d + 1 > max) max = d + 1;
    if (max > MAX_JSON_DEPTH) return { depth: max, tooManyMembers: false, loneSurrogate };
    const isArray = Array.isArray(v);
    const children = Object.values(v as Record<string, unknown>);
    if (!isArray && children.length > MAX_JSON_MEMBERS) return { depth: max, tooManyMembers: true, loneSurrogate };
    if (!loneSurrogate && !isArray) for (const key of Object.keys(v)) if (!isWellFormed(key)) loneSurrogate = true;
    for (const child of children) {
      if (child !== null && typeof child === 'object') stack.push([child, d + 1]);
      else if (!loneSurrogate && typeof child === 'string' && !isWellFormed(child)) loneSurrogate = true;
    }
  }
  return { depth: max, tooManyMembers: false, loneSurrogate };
}

/**
 * No unpaired UTF-16 surrogate (a `\ud800` escape alone): such a string is no Unicode text; stored
 * as UTF-8 it turns into U+FFFD while a copy sent on as JSON keeps the escape, so the two differ.
 */
const isWellFormed = (s: string): boolean => (s as string & { isWellFormed(): boolean }).isWellFormed();

function isJson(text: string): boolean {
  try {
    JSON.parse(text);
    return true;
  } catch {
    return false;
  }
}

/** Headers of every answer (see where the hook sets them), also on the answers written below. */
const SECURITY_HEADERS = { 'cache-control': 'no-store', 'x-content-type-options': 'nosniff', 'referrer-policy': 'no-referrer' } as const;
const SECURITY_HEADER_LINES = Object.entries(SECURITY_HEADERS).map(([k, v]) => `${k}: ${v}\r\n`).join('');

/** The error answer of an error Node's HTTP parser raises (decisions 11's body). */
function clientErrorAnswer(err: NodeJS.ErrnoException): { status: number; body: string } {
  const [status, code, message] =
    err.code === 'HPE_HEADER_OVERFLOW'
      ? [431, 'REQUEST_HEADERS_TOO_LARGE', 'The request headers (or URL) are too large']
      : err.code === 'ERR_HTTP_REQUEST_TIMEOUT'
        ? [408, 'REQUEST_TIMEOUT', 'The request took too long to arrive']
        : [400, 'VALIDATION_FAILED', 'The request is not valid HTTP'];
  const body = JSON.stringify(code === 'VALIDATION_FAILED' ? { code, message, details: [{ path: '', message: 'malformed HTTP request' }] } : { code, message });
  return { status, body };
}

/** An answer written straight to the socket (no request object exists for it), closing the connection. */
const rawAnswer = (status: number, body: string): string =>
  `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\nContent-Length: ${Buffer.byteLength(body)}\r\nContent-Type: application/json\r\n${SECURITY_HEADER_LINES}Connection: close\r\n\r\n${body}`;

/**
 * The responses of a connection not yet written (in request order: Node writes a connection's
 * responses one after another), so that an answer written straight to the socket (a parse error,
 * CONNECT) waits for the answers to the requests before it (RFC 9112 section 9.3.2).
 */
const PENDING = Symbol('svc.pendingResponses');
/** What to do once the last of them has been written. */
const WHEN_WRITTEN = Symbol('svc.whenWritten');
/** Set once an answer that closes the connection is under way (Node may report the same socket's error again). */
const CLOSING = Symbol('svc.closing');

/** The connection's latest request and its response (the one being read when a client error comes). */
const LAST = Symbol('svc.lastRequest');
/**
 * Set when a request was answered with `Connection: close` because the connection cannot go on
 * (no or two Host lines, an Expect the service does not meet, an Upgrade): requests Node already
 * parsed after it in the same read are not processed (RFC 9112 section 9.6), since their answers
 * would never be written (the socket closes after the closing answer).
 */
const ENDING = Symbol('svc.ending');
/** On a request: answer it 400 for its Host lines (decided when Node emitted it). */
const BAD_HOST = Symbol('svc.badHost');

type TrackedSocket = Socket & {
  [PENDING]?: Set<ServerResponse>;
  [WHEN_WRITTEN]?: () => void;
  [CLOSING]?: boolean;
  [LAST]?: { req: IncomingMessage; res: ServerResponse };
  [ENDING]?: boolean;
};
type MarkedRequest = IncomingMessage & { [BAD_HOST]?: boolean; [ENDING]?: boolean };

/** Longest wait for the pending answers of a connection before its error answer is written anyway. */
export const PENDING_ANSWERS_WAIT_MS = 30_000;

/** Records a response as pending on its connection until Node has written it (or the connection closed). */
function trackResponse(req: IncomingMessage, res: ServerResponse): void {
  const socket = req.socket as TrackedSocket;
  socket[LAST] = { req, res };
  // Decided here, as Node emits the request (before it parses the next one in the same read), so
  // that the requests after a closing answer are known not to be processed.
  const marked = req as MarkedRequest;
  if (socket[ENDING]) marked[ENDING] = true;
  else if (req.headers.host === undefined ? req.httpVersion === '1.1' : hostLines(req.rawHeaders) > 1) {
    marked[BAD_HOST] = true;
    socket[ENDING] = true;
  } else if (req.headers.upgrade !== undefined) socket[ENDING] = true; // answered, then closed (see the onRequest hook)
  let pending = socket[PENDING];
  if (!pending) socket[PENDING] = pending = new Set();
  pending.add(res);
  // 'close' comes after Node's own 'finish' handling (which hands the socket to the next response).
  res.once('close', () => {
    pending.delete(res);
    if (pending.size === 0) socket[WHEN_WRITTEN]?.();
  });
}

/** Closes a connection once what was written to it is sent (an immediate destroy may reset it first). */
function closeAfterWrites(socket: Socket): void {
  (socket as Socket & { destroySoon(): void }).destroySoon();
}

/**
 * Runs `then` once every response pending on the connection has been written: at once when none
 * is. Stops reading meanwhile (what follows a request that cannot be parsed is not read), and
 * gives up waiting after PENDING_ANSWERS_WAIT_MS.
 */
function afterPendingAnswers(socket: TrackedSocket, then: () => void): void {
  if (!socket[PENDING]?.size) return then();
  let done = false;
  const run = (): void => {
    if (done) return;
    done = true;
    clearTimeout(guard);
    socket[WHEN_WRITTEN] = undefined;
    then();
  };
  const guard = setTimeout(run, PENDING_ANSWERS_WAIT_MS);
  guard.unref();
  socket[WHEN_WRITTEN] = run;
  socket.once('close', () => clearTimeout(guard));
  socket.pause();
}

/**
 * Errors Node's HTTP parser raises (bytes that are not HTTP, headers over 16 KiB, a request that
 * took too long): the error body of decisions 11, after the answers to the requests before it on
 * the connection, then the connection is closed.
 *
 * - The request being read when the error came (a broken chunked body, a body cut short) gets
 *   the error as its own answer, through its response, which Node writes in its turn.
 * - Bytes after a request that closed the connection (`Connection: close`, HTTP/1.0) are ignored
 *   (RFC 9112 section 9.6): that request is answered and the connection closed, nothing more.
 * - Otherwise (the bytes of a next request are not HTTP) the error is written once every earlier
 *   request is answered. Until the fix, it was written at once and the socket destroyed, so an
 *   earlier request's answer was lost although its write had been applied.
 */
function answerClientError(err: NodeJS.ErrnoException, socket: Socket): void {
  const s = socket as TrackedSocket;
  if (err.code === 'ECONNRESET' || socket.destroyed) return;
  if (s[CLOSING]) return;
  s[CLOSING] = true;
  const { status, body } = clientErrorAnswer(err);
  let reading: ServerResponse | undefined;
  for (const res of s[PENDING] ?? []) if (!(res as ServerResponse & { req: IncomingMessage }).req.complete) reading = res;
  if (reading && !reading.headersSent && !reading.writableEnded) {
    reading.writeHead(status, { ...SECURITY_HEADERS, 'content-type': 'application/json', 'content-length': Buffer.byteLength(body), connection: 'close' });
    reading.end(body);
    return;
  }
  // A request that was being read but is answered already (413 or 415 before its body, say): its
  // answer stands, written or still pending.
  const last = s[LAST];
  const answeredWhileRead = !!last && !last.req.complete && last.res.headersSent;
  const answer = !reading && !answeredWhileRead && err.code !== 'HPE_CLOSED_CONNECTION';
  afterPendingAnswers(s, () => {
    if (answer && socket.writable) socket.write(rawAnswer(status, body));
    closeAfterWrites(socket);
  });
}

/**
 * CONNECT (no route takes it): Node would close the connection without a word. Answered like any
 * unknown route, 404 NOT_FOUND with the error body and the security headers, after the answers to
 * the requests before it; then the connection is closed (Node has let go of it).
 */
function answerConnect(req: IncomingMessage, socket: Socket): void {
  const s = socket as TrackedSocket;
  socket.on('error', () => undefined); // Node removed its own error listener with the connection
  if (s[CLOSING]) return;
  s[CLOSING] = true;
  const body = JSON.stringify({ code: 'NOT_FOUND', message: 'Route not found' });
  getLogger().info({ reqId: randomUUID(), method: req.method, route: 'unmatched', statusCode: 404, durationMs: 0 }, 'request');
  afterPendingAnswers(s, () => {
    if (socket.writable) socket.write(rawAnswer(404, body));
    closeAfterWrites(socket);
  });
}

/**
 * Content-Encoding tokens that leave the body as it is: `identity`, and the charset `utf-8` that
 * some clients put there by mistake (no content coding: it says the body is UTF-8 text, which a
 * JSON body must be and is checked to be, so it passes).
 */
const PLAIN_CODINGS = new Set(['', 'identity', 'utf-8', 'utf8']);

/**
 * A Content-Encoding the service reads as it is: none, empty, or only the tokens above. The
 * service decodes no coding, so any other (gzip, br, zstd, pack200-gzip, aes128gcm, exi, an
 * unknown token) is 415: a body in a coding it does not decode must not be read as plain.
 */
export function plainContentEncoding(value: string | undefined): boolean {
  if (value === undefined) return true;
  for (const token of value.split(',')) if (!PLAIN_CODINGS.has(token.trim().toLowerCase())) return false;
  return true;
}

/** A Transfer-Encoding Node decodes in full: none, or `chunked` alone (`gzip, chunked` leaves a gzip body). */
export function plainTransferEncoding(value: string | undefined): boolean {
  if (value === undefined) return true;
  for (const token of value.split(',')) if (token.trim().toLowerCase() !== 'chunked') return false;
  return true;
}

/** How many Host lines the raw headers hold (more than one is 400, RFC 9112 section 3.2). */
function hostLines(rawHeaders: string[]): number {
  let n = 0;
  for (let i = 0; i < rawHeaders.length; i += 2) if (rawHeaders[i].length === 4 && rawHeaders[i].toLowerCase() === 'host') n++;
  return n;
}

/** A body the parsers refused, with its code: the error filter answers by code (details included). */
class BodyParseError extends Error {
  constructor(
    readonly statusCode: number,
    readonly code: string,
    message: string,
  ) {
    super(message);
    this.name = 'BodyParseError';
  }
}

const TOKEN = /^[\w!#$%&'*+.^`|~-]+$/;
const SUBTYPE = /^[\w!#$%&'*+.^`|~-]+\s*$/;

/** Whether Fastify can read a content-type header at all (its ContentType: `type/subtype`, tokens; else it answers 415 before any parser). */
export function readableContentType(header: string): boolean {
  if (header === '' || header === 'undefined') return false;
  const semi = header.indexOf(';');
  const media = semi === -1 ? header : header.slice(0, semi);
  const slash = media.indexOf('/');
  if (slash === -1) return false;
  return TOKEN.test(media.slice(0, slash).trimStart()) && SUBTYPE.test(media.slice(slash + 1).trimEnd());
}

/** Stands in for a content-type header Fastify cannot read, so that the catch-all parser (415 after the guards) takes the body. */
const UNREADABLE_CONTENT_TYPE = 'application/x-svc-unreadable-content-type';

/**
 * Errors Fastify answers itself before routing (a badly percent-encoded URL, a path parameter over
 * maxParamLength): the error body of decisions 11 instead of Fastify's own.
 */
function answerFrameworkError(err: Error, req: { id?: string; method?: string }, reply: ErrorReply): void {
  const { status, body, headers } = toErrorResponse(err);
  for (const [k, v] of Object.entries({ ...SECURITY_HEADERS, ...(headers ?? {}) })) reply.header(k, v);
  void reply.code(status).header('content-type', 'application/json; charset=utf-8').send(JSON.stringify(body));
  // The request line of the other requests (the route hooks do not run here); never the URL.
  getLogger().info({ reqId: req.id, method: req.method, route: 'unmatched', statusCode: status, durationMs: 0 }, 'request');
}

/** The part of a Fastify reply answerFrameworkError uses (@nestjs/platform-fastify has its own copy of Fastify's types). */
interface ErrorReply {
  code(status: number): ErrorReply;
  header(name: string, value: string): ErrorReply;
  send(payload: string): unknown;
}

/** The app's RateLimiter (PlatformModule); none in an app built without it. */
function rateLimiterOf(app: INestApplication): RateLimiter | undefined {
  try {
    return app.get(RateLimiter, { strict: false });
  } catch {
    return undefined;
  }
}

const servedRoutes = new WeakMap<object, { method: string; url: string }[]>();

/** The method and URL pattern of every route an app built by createHttpApp serves. */
export function routesOf(app: object): { method: string; url: string }[] {
  return [...(servedRoutes.get(app) ?? [])];
}

/** HTTP errors as `{ code, message }`; bus (RPC) errors as the bus's error payload. */
@Catch()
export class AnyContextFilter implements ExceptionFilter {
  private readonly http = new ErrorFilter();
  private readonly bus = new BusExceptionFilter();

  catch(exception: unknown, host: ArgumentsHost): unknown {
    if (host.getType() === 'rpc') return this.bus.catch(exception, host);
    return this.http.catch(exception, host);
  }
}

/**
 * Builds the HTTP app for a root module: Fastify, the `/api` prefix, the error filter and
 * validation pipe, JSON only, and request logging with metadata only (no URL query, no bodies,
 * no headers).
 */
export async function createHttpApp(rootModule: unknown, config: ServiceConfig): Promise<NestFastifyApplication> {
  const trusted = trustedPeer(config.trustProxy);
  const adapter = new FastifyAdapter({
    bodyLimit: BODY_LIMIT,
    // A request the gateway forwarded (distributed mode) keeps the gateway's id in the log, when
    // it comes from a proxy this app trusts (SVC_TRUST_PROXY); else a new one.
    genReqId: (req: IncomingMessage) => requestIdFrom(req, trusted) ?? randomUUID(),
    // No Nest middleware is used (guards, pipes and filters do that work), so @fastify/middie,
    // which would otherwise run on every request, is not registered.
    skipMiddie: true,
    logger: false,
    return503OnClosing: false,
    routerOptions: { maxParamLength: 2048 },
    // The client address (`req.ip`, counted by the per-address rate limit) from X-Forwarded-For
    // only when it comes through these proxies (SVC_TRUST_PROXY); else the connection's peer.
    // (A hop count is a Fastify option too; the adapter's copy of Fastify's types leaves numbers out.)
    trustProxy: config.trustProxy as boolean | string[],
    // Fastify's default (0) lifts Node's limit: a client that declared a body and sent part of it
    // held its connection for ever. Checked every second; the late request gets 408 REQUEST_TIMEOUT.
    // Given to Node when the server is created too: set afterwards (as Fastify does with its own
    // option), Node 20 applies it to slow headers but not to a body that stops arriving.
    requestTimeout: config.requestTimeoutMs,
    // requireHostHeader off: Node's own answer to an HTTP/1.1 request without Host is a bare 400
    // (no error body, no security headers); the hook below refuses it in the service's form.
    http: { requestTimeout: config.requestTimeoutMs, connectionsCheckingInterval: 1000, requireHostHeader: false } as never,
    clientErrorHandler: answerClientError,
    frameworkErrors: answerFrameworkError as never, // typed by its ErrorReply (Fastify's generic reply types do not narrow)
  });
  // bodyParser off: the JSON parser below (Fastify's, plus a nesting limit) is the only one.
  const app = await NestFactory.create<NestFastifyApplication>(rootModule as never, adapter, { logger: false, abortOnError: false, bodyParser: false });
  app.setGlobalPrefix(API_PREFIX.slice(1));
  app.useGlobalFilters(new AnyContextFilter());
  app.useGlobalPipes(createValidationPipe());
  // Body problems the parsers recorded are answered here, after the route's own guards and before the pipes.
  app.useGlobalGuards(new BodyProblemGuard(app.get(Reflector), app.get(ModuleRef)));
  app.enableShutdownHooks();

  const fastify = app.getHttpAdapter().getInstance();
  // An `Expect` other than 100-continue: Node would answer a bare 417 itself (no error body, no
  // security headers). Answered here in the service's form instead.
  // Every response is tracked until it is written, so that an answer written straight to the
  // socket (answerClientError, answerConnect) comes after those to the requests before it.
  fastify.server.prependListener('request', trackResponse);
  // The client's FIN after its request (`nc -N`, some HTTP/1.0 tools) must not drop the answer:
  // Node's default ends the connection at once and the request's answer (its write applied) was
  // lost. Half-open, the answer is written and the connection closed after it.
  (fastify.server as { httpAllowHalfOpen?: boolean }).httpAllowHalfOpen = true;
  fastify.server.on('connect', answerConnect);
  fastify.server.on('checkExpectation', (req, res) => {
    trackResponse(req, res);
    (req.socket as TrackedSocket)[ENDING] = true;
    const body = JSON.stringify({ code: 'EXPECTATION_FAILED', message: 'Only "Expect: 100-continue" is supported' });
    res.writeHead(417, { ...SECURITY_HEADERS, 'content-type': 'application/json; charset=utf-8', 'content-length': Buffer.byteLength(body), connection: 'close' });
    res.end(body);
  });
  // Fastify parses a body before any Nest guard runs, but authentication comes first (401/403 on
  // every call, decisions 11): the parsers below never fail a request over its body. They record
  // the problem on the request (deferBodyProblem) and give no body; BodyProblemGuard answers it
  // with the same status and body once the route's guards have passed. Only a body over the limit
  // (413) and a body shorter or longer than its content-length are still answered at once.
  //
  // JSON only: any other body is 415 UNSUPPORTED_MEDIA_TYPE (decisions section 11). The catch-all
  // parser takes every other content type (and a body without one) and leaves the body unread.
  fastify.removeContentTypeParser(['text/plain']);
  fastify.addContentTypeParser('*', (req, _payload, done) => {
    deferBodyProblem(req, new BodyParseError(415, 'FST_ERR_CTP_INVALID_MEDIA_TYPE', 'Unsupported media type'));
    done(null, undefined);
  });
  // A content-type header Fastify cannot read at all would be 415 before any parser: handed to
  // the catch-all parser instead (a stand-in type over the raw headers, which stay as they came).
  fastify.addHook('onRequest', (req, _reply, done) => {
    const ct = req.headers['content-type'];
    if (ct !== undefined && !readableContentType(ct)) req.headers = { 'content-type': UNREADABLE_CONTENT_TYPE };
    done();
  });
  // Every answer may carry PHI or a credential (cases, threads, check-in questions, secrets shown
  // once): never stored by a browser or a shared cache, never sniffed as another type, and no
  // Referer leaves a page opened from a check-in link (its token is in the URL). First, so that a
  // preflight the CORS hook answers carries them too (and the answers written outside Fastify's
  // reply, above, add them themselves).
  // Then (in the same hook: one hook less on every request) the requests no route of the service
  // can take, refused before anything else: an HTTP/1.1 request without a Host header, or any with
  // more than one (RFC 9112 section 3.2), is 400 VALIDATION_FAILED like other malformed HTTP, and
  // its connection closed (Node's own answer was a bare 400); QUERY (no route takes it) is 404
  // NOT_FOUND like any unknown route, where Fastify refused it first for having no content type
  // (400 in its own words).
  fastify.addHook('onRequest', (req, reply, done) => {
    const raw = req.raw as MarkedRequest;
    // Parsed after a request the connection closes with: not processed, never answered (the
    // connection closes after that answer; the client sends it again on a new one).
    if (raw[ENDING]) {
      reply.hijack();
      return;
    }
    reply.headers(SECURITY_HEADERS);
    // Node stops reading a connection after a request with Upgrade (the rest of that read is
    // dropped, and the connection would idle until the keep-alive timeout): answered as usual,
    // then closed, so that a client knows to send what followed again.
    if (raw.headers.upgrade !== undefined) reply.header('connection', 'close');
    if (raw[BAD_HOST]) {
      const body = { code: 'VALIDATION_FAILED', message: 'The request is not valid HTTP', details: [{ path: 'Host', message: 'exactly one Host header is required' }] };
      void reply.code(400).header('connection', 'close').header('content-type', 'application/json; charset=utf-8').send(JSON.stringify(body));
      return;
    }
    if (req.method === 'QUERY') {
      void reply.code(404).header('content-type', 'application/json; charset=utf-8').send(JSON.stringify({ code: 'NOT_FOUND', message: 'Route not found' }));
      return;
    }
    done();
  });
  // CORS by path (./cors.ts): the widget from its pages' origins, the staff API from the staff
  // app's, API-key routes never. A preflight anywhere else is 404 like any unknown route.
  fastify.addHook('onRequest', corsHook(config.cors));
  // Rate limit per client address on the widget and check-in routes, before the body is read
  // (libs/http rate-limit.ts); API keys and staff subjects are counted by their guards.
  const limiter = rateLimiterOf(app);
  if (limiter) fastify.addHook('onRequest', addressRateLimitHook(limiter));
  // Uuids are case-insensitive: every uuid path id reaches the guards and handlers in lower case.
  fastify.addHook('preHandler', (req, _reply, done) => {
    lowercaseUuidParams(req.params);
    done();
  });
  // Fastify's own JSON parser (prototype-poisoning checks kept), then a nesting limit: no field of
  // the contract nests deeply, and a deep body would exhaust the stack in validation.
  const parseJson = fastify.getDefaultJsonParser('error', 'error');
  fastify.removeContentTypeParser(['application/json']);
  fastify.addContentTypeParser('application/json', { parseAs: 'buffer' }, (req, raw, done) => {
    // The service decodes no content coding: a gzip or br body is not JSON text, and a plain
    // body labelled with a coding is not what it says. Either way 415, not "malformed JSON" nor
    // read as if unlabelled. The same for a transfer coding Node does not undo (`gzip, chunked`).
    if (!plainContentEncoding(req.headers['content-encoding'])) {
      deferBodyProblem(req, new BodyParseError(415, 'SVC_CONTENT_ENCODING', 'unsupported content encoding'));
      return done(null, undefined);
    }
    if (!plainTransferEncoding(req.headers['transfer-encoding'])) {
      deferBodyProblem(req, new BodyParseError(415, 'SVC_TRANSFER_ENCODING', 'unsupported transfer encoding'));
      return done(null, undefined);
    }
    // JSON is UTF-8 (RFC 8259): bytes that are not are malformed, not text to repair with U+FFFD.
    if (!isUtf8(raw as Buffer)) {
      deferBodyProblem(req, new BodyParseError(400, 'SVC_JSON_NOT_UTF8', 'JSON body is not UTF-8'));
      return done(null, undefined);
    }
    const body = (raw as Buffer).toString('utf8');
    parseJson(req, body, (err, value) => {
      if (err) {
        const code = (err as { code?: string }).code ?? 'FST_ERR_CTP_INVALID_JSON_BODY';
        // Valid JSON that the parser still refused holds a prototype-poisoning key.
        deferBodyProblem(req, new BodyParseError(400, code === 'FST_ERR_CTP_INVALID_JSON_BODY' && isJson(body) ? 'SVC_JSON_FORBIDDEN_KEY' : code, err.message));
        return done(null, undefined);
      }
      const shape = jsonShape(value);
      const problem =
        shape.depth > MAX_JSON_DEPTH ? 'SVC_JSON_TOO_DEEP' : shape.tooManyMembers ? 'SVC_JSON_TOO_MANY_MEMBERS' : shape.loneSurrogate ? 'SVC_JSON_LONE_SURROGATE' : null;
      if (problem) {
        deferBodyProblem(req, new BodyParseError(400, problem, 'JSON body refused'));
        return done(null, undefined);
      }
      done(null, value);
    });
  });
  // Every route the app serves, for the contract test that holds openapi.yaml to them.
  const routes: { method: string; url: string }[] = [];
  servedRoutes.set(app, routes);
  fastify.addHook('onRoute', (r) => {
    for (const method of [r.method].flat()) if (method !== 'HEAD' && method !== 'OPTIONS') routes.push({ method, url: r.url });
  });
  const log = getLogger();
  // The request line is logged at info: below that level (SVC_LOG_LEVEL=warn, say) the hook
  // would only build a record to throw away on every request.
  if (log.isLevelEnabled('info')) {
    fastify.addHook('onResponse', (req, reply, done) => {
      // A request the gateway forwarded (distributed mode) names the owning app's route and the app.
      const proxied = proxiedRoute(req);
      log.info(
        {
          reqId: req.id,
          method: req.method,
          route: proxied?.route ?? req.routeOptions?.url ?? 'unmatched',
          ...(proxied ? { upstream: proxied.app } : {}),
          statusCode: reply.statusCode,
          durationMs: Math.round(reply.elapsedTime * 10) / 10,
        },
        'request',
      );
      done();
    });
  }
  return app;
}

/** Shortest time between two log lines about connections dropped over SVC_MAX_CONNECTIONS. */
const DROP_LOG_INTERVAL_MS = 60_000;

/**
 * Caps the listener's open connections (`SVC_MAX_CONNECTIONS`): past it Node closes a new
 * connection at once, so that a flood of idle or slow connections cannot exhaust the process's
 * file descriptors and memory. Drops are logged, at most once a minute, with their count.
 */
function capConnections(server: Server, maxConnections: number): void {
  server.maxConnections = maxConnections;
  let dropped = 0;
  let lastLog = -Infinity;
  server.on('drop', () => {
    dropped++;
    const now = performance.now();
    if (now - lastLog < DROP_LOG_INTERVAL_MS) return;
    lastLog = now;
    getLogger().warn({ dropped, maxConnections }, 'connections dropped: SVC_MAX_CONNECTIONS reached');
    dropped = 0;
  });
}

/** Listens on `HOST:PORT` (HOST defaults by the dev tools, decisions 16), open connections capped. */
export async function listen(app: INestApplication, config: ServiceConfig): Promise<string> {
  capConnections(app.getHttpServer() as Server, config.maxConnections);
  await app.listen(config.port, config.host);
  const address = app.getHttpServer().address() as { port: number };
  return `http://localhost:${address.port}/api`;
}

/**
 * Connects the app's message handlers to the bus (in-process broker or Kafka) and starts the app
 * in this order (docs/decisions.md, "Kafka consumers: offsets, concurrency, dead letters"):
 * 1. the app is initialised: every module registers its projections, the projections start and
 *    catch up with the log, and the bus client is connected with its reply consumer joined
 *    (PlatformModule's BUS_CLIENT and PlatformLifecycle);
 * 2. the bus handlers start consuming;
 * 3. the relays and timers start (BackgroundWork): on the in-process bus an event published
 *    before its subscribers are there would reach nobody.
 * So no message is handled before the read models it feeds and the replies it may wait for exist.
 */
export async function connectBus(app: INestApplication, serviceName: string, config: ServiceConfig): Promise<void> {
  const broker = app.get(IN_PROCESS_BROKER);
  const log = getLogger();
  // Failed attempts and dead letters of the Kafka consumer: topic, partition, offset, error code, counts; never a record's value.
  const logger = { info: (meta: object, msg: string) => log.info(meta, msg), warn: (meta: object, msg: string) => log.warn(meta, msg), error: (meta: object, msg: string) => log.error(meta, msg) };
  // The bus handlers inherit the app's global filter, which answers RPC contexts the bus way
  // (status/code of a domain refusal kept; anything unexpected hidden).
  app.connectMicroservice(busServerStrategy(serviceName, { kind: config.bus, broker, brokers: config.kafkaBrokers, consumer: { logger } }) as never, { inheritAppConfig: true });
  await app.init();
  await app.startAllMicroservices();
  // An app without the platform (a test's bare module) has no background work.
  let background: BackgroundWork | null = null;
  try {
    background = app.get(BackgroundWork, { strict: false });
  } catch {
    background = null;
  }
  await background?.start();
}

/** How often each app of distributed mode announces its routes again (a read store that lost them gets them back). */
const ANNOUNCE_EVERY_MS = 30_000;

/**
 * Distributed mode's wiring of one app (docs/decisions.md, "Distributed topology"): the gateway
 * forwards what it does not serve itself (./gateway-proxy.ts); every app announces its routes and
 * internal address once it listens (./upstreams.ts); with the dev tools on, every app but the
 * gateway takes the shared dev clock's offset on an internal route (./dev-clock-sync.ts).
 */
async function distributedRoutes(app: NestFastifyApplication, serviceName: string, config: ServiceConfig, options: RunServiceOptions): Promise<() => Promise<void>> {
  const fastify = app.getHttpAdapter().getInstance();
  const readStore = app.get<ReadStore>(READ_STORE);
  let proxy: GatewayProxy | undefined;
  if (options.gatewayProxy) {
    const gateway = new GatewayProxy({ readStore, self: serviceName, timeoutMs: config.upstreamTimeoutMs, bodyLimit: BODY_LIMIT });
    await gateway.start();
    gateway.register(fastify as never);
    fastify.addHook('onClose', async () => gateway.close());
    proxy = gateway;
  }
  const clock = app.get(CLOCK);
  if (config.devTools && clock instanceof DevClock && !options.gatewayProxy) {
    fastify.put(DEV_CLOCK_PUSH_PATH, async (req, reply) => {
      const offsetMs = (req.body as { offsetMs?: unknown } | undefined)?.offsetMs;
      if (typeof offsetMs !== 'number' || !Number.isSafeInteger(offsetMs) || offsetMs < 0) {
        return reply.code(400).send({ code: 'VALIDATION_FAILED', message: 'The request is not valid', details: [{ path: 'offsetMs', message: 'a whole number of milliseconds >= 0' }] });
      }
      clock.follow(offsetMs);
      return { now: clock.now().toISOString() };
    });
  }
  let timer: NodeJS.Timeout | undefined;
  fastify.addHook('onClose', async () => clearInterval(timer));
  return async () => {
    const port = (app.getHttpServer().address() as { port: number }).port;
    const host = config.host === '0.0.0.0' || config.host === '::' ? hostname() : config.host.includes(':') ? `[${config.host}]` : config.host;
    proxy?.setOwnRoutes(routesOf(app));
    // The gateway's catch-all is not a route of the contract.
    const routes = routesOf(app).filter((r) => !(proxy && r.url === GATEWAY_CATCH_ALL));
    const announce = () => announceUpstream(readStore, { app: serviceName, origin: config.internalUrl ?? `http://${host}:${port}`, routes, announcedAt: new Date().toISOString() });
    await announce();
    timer = setInterval(() => {
      announce().catch((err) => getLogger().warn({ error: (err as Error)?.name }, 'routes not announced; retrying'));
    }, ANNOUNCE_EVERY_MS);
    timer.unref();
  };
}

export interface RunServiceOptions {
  /** The gateway: forwards every route it does not serve to the app that announced it. */
  gatewayProxy?: boolean;
}

/** Distributed mode: one app in its own process (`node dist/apps/<app>/main.js`). */
export async function runService(serviceName: string, modules: (DynamicModule | (new (...args: never[]) => unknown))[], options: RunServiceOptions = {}): Promise<void> {
  // Before anything is written: whatever is created without a mode of its own is owner-only (decisions 16).
  process.umask(PRIVATE_UMASK);
  process.env.SVC_SERVICE_NAME ??= serviceName;
  const config = loadConfig(process.env, 'distributed');
  try {
    class ServiceRoot {}
    const root: DynamicModule = { module: ServiceRoot, imports: [PlatformModule.forRoot(config, serviceName), ...(modules as DynamicModule[])] };
    const app = await createHttpApp(root, config);
    const announce = await distributedRoutes(app, serviceName, config, options);
    await connectBus(app, serviceName, config);
    const baseUrl = await listen(app, config);
    await announce();
    process.stdout.write(`${serviceName} listening at ${baseUrl}\n`);
  } catch (err) {
    process.stderr.write(`${serviceName} failed to start: ${(err as Error).name}: ${(err as Error).message}\n`);
    process.exit(1);
  }
}
