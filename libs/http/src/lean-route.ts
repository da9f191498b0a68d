import type { PipeTransform } from '@nestjs/common';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { bodyProblemFor } from './body-problem';
import { sendError } from './filter';
import { uuidParamProblem } from './path-params';

/**
 * A route Fastify serves itself, without Nest's per-request execution context (guards, pipes and
 * interceptor consumers, the response controller): on this service's hottest operations that
 * context cost about as much CPU as the whole bare Fastify route (docs/decisions.md, "Lean routes
 * and coalesced progress answers"). It runs the steps a controller route runs, in Nest's order and with the same parts:
 *
 * 1. an empty path parameter is "Route not found", as Nest's Fastify adapter answers it;
 * 2. `authenticate` (the route's guard, e.g. `ApiKeyGuard.authenticate`): 401/403/429 first;
 * 3. a uuid path parameter that is not a uuid (`uuidParamProblem`), then the body problem the
 *    parsers recorded, or a body sent to an operation that takes none (`bodyProblemFor`): the
 *    rules of the global BodyProblemGuard;
 * 4. the body through the app's validation pipe with the route's DTO (`body`), as `@Body()` does;
 * 5. `handle`; its result is the answer (status `status`), serialized by `responseSchema` when given;
 * 6. any error answered by `sendError`, the global ErrorFilter's answer.
 *
 * With `coalesce` (an operation without a body), a successful answer to a request that came
 * without a body (no Content-Length above 0, no Transfer-Encoding) is written at the end of the
 * event-loop turn (setImmediate), together with the other answers of that turn, in the order they
 * were decided, instead of as soon as it is decided: a burst of small answers to several
 * connections then costs the kernel one wake-up of a waiting client instead of one per answer,
 * which on a virtual machine is most of what a small answer costs (the same record). Such a request is complete when its handler runs, so nothing of it can arrive after
 * its answer is decided (a request that carries a body, which Fastify does not read for a GET, is
 * answered at once: its body's bytes could otherwise be read, and answered by the HTTP edge, before
 * the queued answer is written). An answer waits for the event loop's next check phase, never for
 * a timer of its own.
 *
 * The app's Fastify hooks (security headers, CORS, lower-case uuid parameters, request log) run as
 * for every route, and the route is listed with the others (contract test against openapi.yaml).
 */
export interface LeanRoute<A, B> {
  method: 'GET' | 'POST';
  /** Full path, with the app's global prefix (`/api/...`), in Fastify's syntax (`:param`). */
  url: string;
  status: number;
  authenticate: (req: FastifyRequest) => Promise<A>;
  /** The DTO class of the body; none: the operation takes no body. */
  body?: new () => B;
  responseSchema?: object;
  /** Write successful answers at the end of the turn, the turn's together (see above). Only for operations without a body. */
  coalesce?: boolean;
  handle: (auth: A, params: Record<string, string>, body: B) => Promise<unknown>;
}

export function registerLeanRoute<A, B extends object>(fastify: FastifyInstance, pipe: PipeTransform, route: LeanRoute<A, B>): void {
  const takesBody = route.body !== undefined;
  if (route.coalesce && takesBody) throw new Error(`${route.method} ${route.url}: only an operation without a body coalesces its answers`);
  const bodyMeta = { type: 'body' as const, metatype: route.body, data: undefined };
  fastify.route({
    method: route.method,
    url: route.url,
    ...(route.responseSchema ? { schema: { response: { [route.status]: route.responseSchema } } } : {}),
    handler: async (req: FastifyRequest, reply: FastifyReply) => {
      const params = req.params as Record<string, string>;
      for (const name in params) if (params[name] === '') return reply.callNotFound();
      try {
        const auth = await route.authenticate(req);
        const problem = uuidParamProblem(params) ?? bodyProblemFor(req, () => takesBody);
        if (problem) throw problem;
        const body = (takesBody ? await pipe.transform(req.body, bodyMeta) : undefined) as B;
        const result = await route.handle(auth, params, body);
        reply.code(route.status);
        if (!route.coalesce || !withoutBody(req)) return result;
        if (turnAnswers.push({ reply, result }) === 1) setImmediate(writeTurnAnswers);
        return reply;
      } catch (err) {
        sendError(err, reply);
        return reply;
      }
    },
  });
}

/** Successful answers of coalescing routes decided in this event-loop turn, not yet written. */
const turnAnswers: { reply: FastifyReply; result: unknown }[] = [];

function writeTurnAnswers(): void {
  for (const { reply, result } of turnAnswers.splice(0)) {
    try {
      reply.send(result);
    } catch (err) {
      // Not seen: Fastify answers its own serialization errors. Should a send throw, the request
      // still gets the error answer (or, its headers gone out, its connection closed), and the
      // other answers of the turn are written.
      try {
        if (!reply.raw.headersSent) sendError(err, reply);
        else reply.raw.destroy();
      } catch {
        reply.raw.destroy();
      }
    }
  }
}

/** The request came without a body: no Content-Length above 0 and no Transfer-Encoding. */
function withoutBody(req: FastifyRequest): boolean {
  const length = req.headers['content-length'];
  return req.headers['transfer-encoding'] === undefined && (length === undefined || Number(length) === 0);
}
