import { randomUUID } from 'node:crypto';
import { STATUS_CODES } from 'node:http';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { FastifyInstance } from 'fastify';
import { getLogger, toErrorResponse } from '@svc/http';

/**
 * Answers written at the edge of the HTTP server, outside Nest's pipeline (docs/decisions.md,
 * "Errors and the HTTP edge"): errors of Node's HTTP parser, CONNECT, `Expect`, Host lines,
 * Upgrade, QUERY, and the errors Fastify answers before routing. Each carries the error body and
 * the security headers, in request order on its connection.
 */

/** Headers of every answer (see where the hook sets them), also on the answers written below. */
const SECURITY_HEADERS = { 'cache-control': 'no-store', 'x-content-type-options': 'nosniff', 'referrer-policy': 'no-referrer' } as const;
const SECURITY_HEADER_LINES = Object.entries(SECURITY_HEADERS)
  .map(([k, v]) => `${k}: ${v}\r\n`)
  .join('');

/** The error answer of an error Node's HTTP parser raises (the error body, docs/decisions.md, "Errors and the HTTP edge"). */
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

/**
 * On a request whose body this process passes on as it arrives instead of reading it (the gateway
 * proxy's streamed bodies): who answers it when its bytes break off (passBodyOn).
 */
const PASSED_ON = Symbol('svc.bodyPassedOn');

interface PassedOnBody {
  /** The edge's own answer to the broken body, once it broke. */
  broken?: () => void;
  /** Who takes over the answer when the body breaks (onBodyBreak). */
  onBreak?: (answerHere: () => void) => void;
}

type TrackedSocket = Socket & {
  [PENDING]?: Set<ServerResponse>;
  [WHEN_WRITTEN]?: () => void;
  [CLOSING]?: boolean;
  [LAST]?: { req: IncomingMessage; res: ServerResponse };
  [ENDING]?: boolean;
};
type MarkedRequest = IncomingMessage & { [BAD_HOST]?: boolean; [ENDING]?: boolean; [PASSED_ON]?: PassedOnBody };

/**
 * Marks a request whose body this process passes on unread, as it arrives, to the process that
 * answers it (the gateway's proxy and the owning app, ./gateway-proxy.ts). That process answers
 * such a body without reading it (415, or 401 first), so when the client's bytes break off (a FIN
 * or a bad chunk in the body) its answer, not this edge's 400, is the request's: the edge leaves
 * the answer to the handler given to onBodyBreak and closes the connection after it. Not for a
 * request that took too long (408 is this edge's: the other process had that time to answer).
 * To be called as Node emits the request (a `request` listener), before its body is parsed.
 */
export function passBodyOn(req: IncomingMessage): void {
  (req as MarkedRequest)[PASSED_ON] = {};
}

/**
 * Takes over the answer of a request marked by passBodyOn once its body breaks off (at once if it
 * broke already): `answerHere` writes the edge's own answer, for when the other process gives none.
 */
export function onBodyBreak(req: IncomingMessage, handler: (answerHere: () => void) => void): void {
  const passed = (req as MarkedRequest)[PASSED_ON];
  if (!passed) return;
  passed.onBreak = handler;
  if (passed.broken) handler(passed.broken);
}

/** Longest wait for the pending answers of a connection before its error answer is written anyway. */
export const PENDING_ANSWERS_WAIT_MS = 30_000;

/** How many Host lines the raw headers hold (more than one is 400, RFC 9112 section 3.2). */
function hostLines(rawHeaders: string[]): number {
  let n = 0;
  for (let i = 0; i < rawHeaders.length; i += 2) if (rawHeaders[i].length === 4 && rawHeaders[i].toLowerCase() === 'host') n++;
  return n;
}

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
 * took too long): the error body of docs/decisions.md, "Errors and the HTTP edge", after the answers to the requests before it on
 * the connection, then the connection is closed.
 *
 * - The request being read when the error came (a broken chunked body, a body cut short) gets
 *   the error as its own answer, through its response, which Node writes in its turn.
 * - Bytes after a request that closed the connection (`Connection: close`, HTTP/1.0) are ignored
 *   (RFC 9112 section 9.6): that request is answered and the connection closed, nothing more.
 * - Otherwise (the bytes of a next request are not HTTP) the error is written once every earlier
 *   request is answered. Written at once with the socket destroyed, it would lose an earlier
 *   request's answer although that request's write had been applied.
 */
export function answerClientError(err: NodeJS.ErrnoException, socket: Socket): void {
  const s = socket as TrackedSocket;
  if (err.code === 'ECONNRESET' || socket.destroyed) return;
  if (s[CLOSING]) return;
  s[CLOSING] = true;
  const { status, body } = clientErrorAnswer(err);
  let reading: ServerResponse | undefined;
  for (const res of s[PENDING] ?? []) if (!(res as ServerResponse & { req: IncomingMessage }).req.complete) reading = res;
  if (reading && !reading.headersSent && !reading.writableEnded) {
    const res = reading;
    const answerHere = (): void => {
      if (res.headersSent || res.writableEnded) return;
      res.writeHead(status, { ...SECURITY_HEADERS, 'content-type': 'application/json', 'content-length': Buffer.byteLength(body), connection: 'close' });
      res.end(body);
    };
    const passed = ((res as ServerResponse & { req: IncomingMessage }).req as MarkedRequest)[PASSED_ON];
    if (passed && err.code !== 'ERR_HTTP_REQUEST_TIMEOUT') {
      // Its body was passed on unread: the process it went to answers (passBodyOn), then the connection closes.
      passed.broken = answerHere;
      passed.onBreak?.(answerHere);
      afterPendingAnswers(s, () => closeAfterWrites(socket));
      return;
    }
    answerHere();
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
 * Errors Fastify answers itself before routing (a badly percent-encoded URL, a path parameter over
 * maxParamLength): the error body of docs/decisions.md, "Errors and the HTTP edge" instead of Fastify's own.
 */
export function answerFrameworkError(err: Error, req: { id?: string; method?: string }, reply: ErrorReply): void {
  const { status, body, headers } = toErrorResponse(err);
  for (const [k, v] of Object.entries({ ...SECURITY_HEADERS, ...(headers ?? {}) })) reply.header(k, v);
  void reply.code(status).header('content-type', 'application/json; charset=utf-8').send(JSON.stringify(body));
  // The request line of the other requests (the route hooks do not run here); never the URL.
  getLogger().info({ reqId: req.id, method: req.method, route: 'unmatched', statusCode: status, durationMs: 0 }, 'request');
}

/** The part of a Fastify reply answerFrameworkError uses (@nestjs/platform-fastify has its own copy of Fastify's types). */
export interface ErrorReply {
  code(status: number): ErrorReply;
  header(name: string, value: string): ErrorReply;
  send(payload: string): unknown;
}

/** The server-level answers: response tracking, half-open connections, CONNECT and `Expect`. */
export function registerConnectionAnswers(fastify: FastifyInstance): void {
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
    res.writeHead(417, {
      ...SECURITY_HEADERS,
      'content-type': 'application/json; charset=utf-8',
      'content-length': Buffer.byteLength(body),
      connection: 'close',
    });
    res.end(body);
  });
}

/**
 * The security headers on every answer, then the requests no route can take (Host lines, QUERY,
 * requests after a closing answer, Upgrade). An onRequest hook: registered after the content-type
 * gate and before CORS, the order the answers depend on.
 */
export function registerRequestGate(fastify: FastifyInstance): void {
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
      const body = {
        code: 'VALIDATION_FAILED',
        message: 'The request is not valid HTTP',
        details: [{ path: 'Host', message: 'exactly one Host header is required' }],
      };
      void reply.code(400).header('connection', 'close').header('content-type', 'application/json; charset=utf-8').send(JSON.stringify(body));
      return;
    }
    if (req.method === 'QUERY') {
      void reply
        .code(404)
        .header('content-type', 'application/json; charset=utf-8')
        .send(JSON.stringify({ code: 'NOT_FOUND', message: 'Route not found' }));
      return;
    }
    done();
  });
}
