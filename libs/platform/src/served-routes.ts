import type { FastifyInstance } from 'fastify';

const servedRoutes = new WeakMap<object, { method: string; url: string }[]>();

/** The method and URL pattern of every route an app built by createHttpApp serves. */
export function routesOf(app: object): { method: string; url: string }[] {
  return [...(servedRoutes.get(app) ?? [])];
}

/** Records every route `fastify` registers from now on as served by `app` (HEAD and OPTIONS left out). */
export function recordRoutes(app: object, fastify: FastifyInstance): void {
  const routes: { method: string; url: string }[] = [];
  servedRoutes.set(app, routes);
  fastify.addHook('onRoute', (r) => {
    for (const method of [r.method].flat()) if (method !== 'HEAD' && method !== 'OPTIONS') routes.push({ method, url: r.url });
  });
}
