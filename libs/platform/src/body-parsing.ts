import { isUtf8 } from 'node:buffer';
import type { FastifyInstance } from 'fastify';
import { deferBodyProblem } from '@svc/http';

/**
 * How a request body is read (docs/decisions.md, "Errors and the HTTP edge"): JSON only, UTF-8,
 * no content coding, bounded nesting and member counts. The parsers never fail a request over its
 * body themselves: they record the problem (deferBodyProblem) and BodyProblemGuard answers it
 * once the route's guards have passed, so that authentication comes first.
 */

/** Largest body accepted (413 above it). */
export const BODY_LIMIT = 1024 * 1024;

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

/** A body the parsers refused, with its code: the error filter answers by code (details included). */
export class BodyParseError extends Error {
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
 * Fastify parses a body before any Nest guard runs, but authentication comes first (401/403 on
 * every call): the parsers below never fail a request over its body. They record the problem on
 * the request (deferBodyProblem) and give no body; BodyProblemGuard answers it with the same
 * status and body once the route's guards have passed. Only a body over the limit (413) and a
 * body shorter or longer than its content-length are still answered at once.
 *
 * JSON only: any other body is 415 UNSUPPORTED_MEDIA_TYPE. The catch-all parser takes every other
 * content type (and a body without one) and leaves the body unread; a content-type header Fastify
 * cannot read at all is handed to it too (an onRequest hook, registered here, first of the hooks).
 */
export function registerContentTypeGate(fastify: FastifyInstance): void {
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
}

/**
 * Fastify's own JSON parser (prototype-poisoning checks kept), then the checks above: content and
 * transfer codings, UTF-8, nesting depth, member counts, lone surrogates.
 */
export function registerJsonParser(fastify: FastifyInstance): void {
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
        shape.depth > MAX_JSON_DEPTH
          ? 'SVC_JSON_TOO_DEEP'
          : shape.tooManyMembers
            ? 'SVC_JSON_TOO_MANY_MEMBERS'
            : shape.loneSurrogate
              ? 'SVC_JSON_LONE_SURROGATE'
              : null;
      if (problem) {
        deferBodyProblem(req, new BodyParseError(400, problem, 'JSON body refused'));
        return done(null, undefined);
      }
      done(null, value);
    });
  });
}
