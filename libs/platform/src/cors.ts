import type { FastifyReply, FastifyRequest } from 'fastify';

/**
 * Which browser origins may call which part of the API (CORS). Credentials are bearer tokens in
 * the Authorization header, never cookies, so no response allows credentials.
 * - Patient widget (`/api/widget/v1/...`): the widget runs in the caller's web pages, on their own
 *   origin; `WIDGET_ALLOWED_ORIGINS` lists the origins, `*` (the default) allows any.
 * - Staff API (`/api/organizations/...`): only the origins of `STAFF_APP_ORIGINS` (none by default).
 * - API-key routes (`/api/v1/...`) and the dev tools: never. An API key belongs on a server.
 */
export interface CorsPolicy {
  widgetOrigins: '*' | string[];
  staffOrigins: string[];
}

/** Parses a comma-separated origin list (`*` allowed where `allowAny`); a malformed entry fails start-up. */
export function parseOrigins(value: string | undefined, name: string, fallback: '*' | string[], allowAny: boolean): '*' | string[] {
  if (value === undefined || value.trim() === '') return fallback;
  const items = value
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  if (items.length === 0) throw new Error(`${name}: no origin in "${value}"`);
  if (allowAny && items.length === 1 && items[0] === '*') return '*';
  for (const item of items) {
    let origin: string | null = null;
    try {
      const u = new URL(item);
      origin = u.protocol === 'http:' || u.protocol === 'https:' ? u.origin : null;
    } catch {
      origin = null;
    }
    if (origin !== item) throw new Error(`${name}: "${item}" is not an origin (scheme://host[:port], no path)${allowAny ? ' or *' : ''}`);
  }
  return items;
}

interface CorsRule {
  origins: '*' | string[];
  methods: string;
  headers: string;
}

const WIDGET_PREFIX = '/api/widget/v1/';
const STAFF_PREFIX = '/api/organizations';
const EXPOSED = 'retry-after';
const MAX_AGE = '600';

/**
 * The CORS `onRequest` hook. Requests outside the widget and staff paths, and requests without
 * an `Origin`, pass untouched (no header, no cost beyond a prefix test). An allowed origin gets
 * `Access-Control-Allow-Origin` (and the headers a script may read); a preflight (`OPTIONS` with
 * `Access-Control-Request-Method`) is answered 204 here, before any guard. An origin that is not
 * allowed gets no CORS header, so the browser withholds the answer; a preflight from it falls
 * through to the 404 of an unknown route. Written here rather than with `@fastify/cors`, whose
 * per-request options delegate normalizes options and sets `Vary` on every response of the API.
 */
export function corsHook(policy: CorsPolicy): (req: FastifyRequest, reply: FastifyReply, done: () => void) => void {
  const widget: CorsRule = { origins: policy.widgetOrigins, methods: 'GET, POST', headers: 'authorization, content-type, idempotency-key' };
  const staff: CorsRule | null =
    policy.staffOrigins.length > 0 ? { origins: policy.staffOrigins, methods: 'GET, POST, PUT, PATCH, DELETE', headers: 'authorization, content-type' } : null;
  const ruleOf = (url: string): CorsRule | null => {
    if (url.startsWith(WIDGET_PREFIX)) return widget;
    if (staff && url.startsWith(STAFF_PREFIX)) {
      const next = url.charCodeAt(STAFF_PREFIX.length);
      if (Number.isNaN(next) || next === 0x2f /* / */ || next === 0x3f /* ? */) return staff;
    }
    return null;
  };
  return (req, reply, done) => {
    const rule = ruleOf(req.url);
    if (!rule) return done();
    const origin = req.headers.origin;
    if (rule.origins !== '*') reply.header('vary', 'Origin'); // the answer depends on the Origin
    if (origin === undefined) return done();
    const allowed = rule.origins === '*' ? '*' : rule.origins.includes(origin) ? origin : null;
    if (allowed === null) return done();
    reply.header('access-control-allow-origin', allowed);
    reply.header('access-control-expose-headers', EXPOSED);
    if (req.method === 'OPTIONS' && req.headers['access-control-request-method'] !== undefined) {
      reply.header('access-control-allow-methods', rule.methods);
      reply.header('access-control-allow-headers', rule.headers);
      reply.header('access-control-max-age', MAX_AGE);
      reply.code(204).header('content-length', '0').send();
      return;
    }
    done();
  };
}
