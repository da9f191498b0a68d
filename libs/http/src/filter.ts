import { ArgumentsHost, Catch, ExceptionFilter, HttpException } from '@nestjs/common';
import type { FastifyReply } from 'fastify';
import { DomainError, WrongExpectedRevisionError } from '@svc/eventstore';
import { ApiError } from './errors';
import { getLogger, loggableError } from './logger';

const STATUS_CODES: Record<number, string> = {
  400: 'VALIDATION_FAILED',
  401: 'STAFF_AUTH_REQUIRED',
  403: 'PERMISSION_REQUIRED',
  404: 'NOT_FOUND',
  405: 'NOT_FOUND',
  409: 'CONFLICT',
  413: 'PAYLOAD_TOO_LARGE',
  415: 'UNSUPPORTED_MEDIA_TYPE',
  429: 'RATE_LIMITED',
};

export interface ErrorBody {
  code: string;
  message: string;
  details?: { path: string; message: string }[];
  /** Extra members (docs/decisions.md, "Errors and the HTTP edge": allowed), e.g. `expectedSequence` of SEQUENCE_CONFLICT. */
  [extra: string]: unknown;
}

/** `details` of a VALIDATION_FAILED about the whole body (the ErrorDetail path of the whole body is ""). */
const bodyError = (message: string, detail: string): { status: number; body: ErrorBody } => ({
  status: 400,
  body: { code: 'VALIDATION_FAILED', message, details: [{ path: '', message: detail }] },
});

/** Any thrown value → status and `{ code, message }` (docs/decisions.md, "Errors and the HTTP edge"). Never leaks internals. */
export function toErrorResponse(err: unknown): { status: number; body: ErrorBody; headers?: Record<string, string> } {
  const r = errorResponse(err);
  // Every VALIDATION_FAILED carries `details` (docs/decisions.md, "Errors and the HTTP edge"; openapi ValidationFailed requires it).
  if (r.body.code === 'VALIDATION_FAILED' && !r.body.details?.length) r.body = { ...r.body, details: [{ path: '', message: r.body.message }] };
  return r;
}

function errorResponse(err: unknown): { status: number; body: ErrorBody; headers?: Record<string, string> } {
  if (err instanceof ApiError) {
    return { status: err.status, body: { code: err.code, message: err.message, ...(err.details ? { details: err.details } : {}) }, headers: err.headers };
  }
  if (err instanceof DomainError) {
    const details = Array.isArray(err.details) ? (err.details as ErrorBody['details']) : undefined;
    // Object details (e.g. SEQUENCE_CONFLICT's `expectedSequence`) are extra top-level members (docs/decisions.md, "Errors and the HTTP edge": allowed).
    const extra = !details && err.details !== null && typeof err.details === 'object' ? extraMembers(err.details as Record<string, unknown>) : {};
    return { status: err.status, body: { code: err.code, message: err.message, ...extra, ...(details ? { details } : {}) } };
  }
  const e = err as { code?: string; statusCode?: number; status?: number; message?: string; name?: string };
  // The write is committed but a read model did not catch up in time: the caller retries with
  // the same idempotency id and gets the original result.
  if (e?.name === 'ProjectionWaitTimeoutError') {
    return {
      status: 503,
      body: { code: 'UNAVAILABLE', message: 'Accepted but not yet visible; retry with the same request' },
      headers: { 'retry-after': '1' },
    };
  }
  // A request to another app was not sent: its reply consumer was not ready within its bound
  // (BusUnavailableError of @svc/messaging, by name: this library does not depend on the bus).
  if (e?.name === 'BusUnavailableError') {
    return {
      status: 503,
      body: { code: 'UNAVAILABLE', message: 'A service this request needs is not reachable; retry shortly' },
      headers: { 'retry-after': '1' },
    };
  }
  // A request to another app got no reply within its wait (BusReplyTimeoutError of @svc/messaging):
  // it may have been carried out; the same request again is safe (queries, commands idempotent by id).
  if (e?.name === 'BusReplyTimeoutError') {
    return {
      status: 503,
      body: { code: 'UNAVAILABLE', message: 'A service this request needs did not answer in time; retry with the same request' },
      headers: { 'retry-after': '1' },
    };
  }
  // A store the request needs is not reachable (the Redis client gave up on the request after its
  // retries, or a connection was refused or reset): nothing was answered from it, so the same
  // request again is safe once it is back.
  if (e?.name === 'MaxRetriesPerRequestError' || e?.code === 'ECONNREFUSED' || e?.code === 'ECONNRESET') {
    return {
      status: 503,
      body: { code: 'UNAVAILABLE', message: 'A store this request needs is not reachable; retry shortly' },
      headers: { 'retry-after': '1' },
    };
  }
  // The stream kept moving under the command past the handler's bounded retries (writers in other
  // processes): nothing of this command was written; the same request again is safe.
  if (err instanceof WrongExpectedRevisionError) {
    return { status: 503, body: { code: 'UNAVAILABLE', message: 'The resource is busy; retry with the same request' }, headers: { 'retry-after': '1' } };
  }
  // Fastify's own errors (body parsing, content type, size, URL), and the JSON parser's
  // (libs/platform bootstrap: handed on with their codes, not as Nest's HttpException).
  switch (e?.code) {
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
      return { status: 415, body: { code: 'UNSUPPORTED_MEDIA_TYPE', message: 'Content-Type must be application/json' } };
    case 'SVC_CONTENT_ENCODING':
      return { status: 415, body: { code: 'UNSUPPORTED_MEDIA_TYPE', message: 'Content-Encoding is not supported: send the JSON body uncompressed' } };
    case 'SVC_TRANSFER_ENCODING':
      return {
        status: 415,
        body: { code: 'UNSUPPORTED_MEDIA_TYPE', message: 'Transfer-Encoding other than chunked is not supported: send the JSON body uncompressed' },
      };
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return { status: 413, body: { code: 'PAYLOAD_TOO_LARGE', message: 'The request body is larger than 1 MiB' } };
    case 'SVC_JSON_TOO_DEEP':
      return bodyError('The request body nests too deeply', 'nested too deeply');
    case 'SVC_JSON_NOT_UTF8':
      return bodyError('The request body is not valid JSON', 'not UTF-8');
    case 'SVC_JSON_LONE_SURROGATE':
      return bodyError('The request body is not valid JSON', 'unpaired surrogate in a string (not Unicode text)');
    case 'SVC_JSON_TOO_MANY_MEMBERS':
      return bodyError('The request body has an object with too many members', 'more than 2000 members in one object');
    case 'SVC_JSON_FORBIDDEN_KEY':
      return bodyError('The request body is not valid JSON', 'forbidden key (__proto__ or constructor.prototype)');
    case 'FST_ERR_CTP_EMPTY_JSON_BODY':
      return bodyError('The request body is empty', 'empty body');
    case 'FST_ERR_BAD_URL':
      return {
        status: 400,
        body: { code: 'VALIDATION_FAILED', message: 'The request URL is not valid', details: [{ path: 'url', message: 'badly percent-encoded' }] },
      };
    case 'FST_ERR_MAX_PARAM_LENGTH':
      return { status: 404, body: { code: 'NOT_FOUND', message: 'Resource not found' } };
    case 'FST_ERR_CTP_INVALID_JSON_BODY':
    case 'FST_ERR_CTP_INVALID_CONTENT_LENGTH':
      return bodyError('The request body is not valid JSON', 'malformed JSON');
  }
  if (err instanceof SyntaxError || e?.statusCode === 400) {
    return bodyError('The request body is not valid JSON', 'malformed JSON');
  }
  if (err instanceof HttpException) {
    const status = err.getStatus();
    return {
      status,
      body: { code: STATUS_CODES[status] ?? (status >= 500 ? 'INTERNAL_ERROR' : 'BAD_REQUEST'), message: status === 404 ? 'Route not found' : err.message },
    };
  }
  const status = e?.statusCode ?? e?.status;
  if (typeof status === 'number' && status >= 400 && status < 500) {
    return { status, body: { code: STATUS_CODES[status] ?? 'BAD_REQUEST', message: 'The request was refused' } };
  }
  return { status: 500, body: { code: 'INTERNAL_ERROR', message: 'Internal error' } };
}

/** Scalar members of a domain refusal's object details, minus the body's own members. */
function extraMembers(details: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(details)) {
    if (k === 'code' || k === 'message' || k === 'details') continue;
    if (v === null || ['string', 'number', 'boolean'].includes(typeof v)) out[k] = v;
  }
  return out;
}

@Catch()
export class ErrorFilter implements ExceptionFilter {
  catch(exception: unknown, host: ArgumentsHost): void {
    if (host.getType() !== 'http') throw exception;
    sendError(exception, host.switchToHttp().getResponse<FastifyReply>());
  }
}

/** Answers an error in the form of docs/decisions.md, "Errors and the HTTP edge" (the ErrorFilter's answer; also the lean routes'). */
export function sendError(exception: unknown, reply: FastifyReply): void {
  const { status, body, headers } = toErrorResponse(exception);
  if (status === 503) {
    // Expected while a dependency is away (the client retries): a warning, with the error's name
    // and the answer's code only.
    getLogger().warn({ err: { name: loggableError(exception).name }, code: body.code }, 'request answered 503');
  } else if (status >= 500) {
    // Name and stack frames only: messages of lower layers may quote data.
    getLogger().error({ err: loggableError(exception) }, 'unhandled error');
  }
  if (headers) for (const [k, v] of Object.entries(headers)) reply.header(k, v);
  void reply.status(status).send(body);
}
