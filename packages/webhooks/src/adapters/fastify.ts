import { WebhookVerificationError } from '../verify';
import { AdapterOptions, RequestLike, rejectionBody, verifyDestinationRequest, verifyWebhookRequest } from './common';

/** The parts of a Fastify instance the plugin uses. */
export interface FastifyInstanceLike {
  addContentTypeParser(
    contentType: string,
    options: { parseAs: 'buffer' },
    parser: (req: unknown, body: Uint8Array, done: (err: Error | null, body?: unknown) => void) => void,
  ): unknown;
  addHook(name: 'preHandler', hook: (request: RequestLike, reply: FastifyReplyLike) => Promise<unknown>): unknown;
}

export interface FastifyReplyLike {
  code(statusCode: number): FastifyReplyLike;
  send(payload?: unknown): FastifyReplyLike;
}

/** A Fastify plugin (registered into the scope it is given: it does not open a scope of its own). */
export type FastifyPluginLike = ((instance: FastifyInstanceLike, options: unknown, done: (err?: Error) => void) => void) & { [key: symbol]: unknown };

function plugin(verify: (req: RequestLike, options: AdapterOptions) => Promise<unknown>, options: AdapterOptions): FastifyPluginLike {
  const register = (instance: FastifyInstanceLike, _opts: unknown, done: (err?: Error) => void) => {
    // The signed bytes, untouched: JSON bodies in this scope stay a Buffer (no JSON parse).
    instance.addContentTypeParser('application/json', { parseAs: 'buffer' }, (_req, body, next) => next(null, body));
    instance.addHook('preHandler', async (request, reply) => {
      try {
        await verify(request, options);
      } catch (err) {
        if (!(err instanceof WebhookVerificationError)) throw err;
        options.onRejected?.(err);
        return reply.code(400).send(rejectionBody(err));
      }
      return undefined;
    });
    done();
  };
  // As fastify-plugin does: the parser and hook apply to the scope the plugin is registered in.
  return Object.assign(register, { [Symbol.for('skip-override')]: true, [Symbol.for('fastify.display-name')]: 'svc-webhooks-receiver' });
}

/**
 * Fastify plugin for webhook routes: in the scope it is registered in, JSON bodies are kept as their raw
 * bytes and every route's request is verified before its handler (400 `{ code, message }` otherwise); the
 * handler reads the event with `webhookEventOf(request)`. Register it in a scope of its own, with the
 * webhook route, so the app's other routes keep their JSON parsing:
 *
 *   app.register(async (scope) => {
 *     await scope.register(fastifyWebhook({ secret }));
 *     scope.post('/hooks/svc', async (request) => { const event = webhookEventOf(request); … });
 *   });
 */
export function fastifyWebhook(options: AdapterOptions): FastifyPluginLike {
  return plugin(verifyWebhookRequest, options);
}

/** Fastify plugin for the routes a Destination calls; the handler reads the call with `destinationCallOf(request)`. Same scoping as `fastifyWebhook`. */
export function fastifyDestinationCall(options: AdapterOptions): FastifyPluginLike {
  return plugin(verifyDestinationRequest, options);
}
