import { createHash } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { basename, join, resolve } from 'node:path';
import { gzipSync } from 'node:zlib';

/**
 * The pages for people (the check-in page, the patient widget, the widget demo, the staff console): built from `web/`
 * by `npm run build` (scripts/build-web.js) into `dist/web`, read once, served from memory.
 *
 * - Hashed assets (`/assets/<name>-<hash>.<ext>`) never change under their name: cached for a year,
 *   immutable. Pages (HTML) and the stable `/widget.js` are revalidated (`no-cache` with an ETag),
 *   the check-in page never stored at all (its address holds the link's token).
 * - Every page has a Content-Security-Policy that allows scripts, styles and connections to this
 *   origin only (no inline script, nothing from third parties) and `Referrer-Policy: no-referrer`
 *   (set on every answer by the HTTP edge), so a check-in token in the address leaves the page for
 *   nowhere but the service's own API.
 */

export interface WebAsset {
  body: Buffer;
  /** gzip of the body, when it is smaller (text assets). */
  gzip: Buffer | null;
  contentType: string;
  etag: string;
}

/** What scripts/build-web.js writes to dist/web/manifest.json. */
export interface WebManifest {
  /** Entry name → its hashed files under assets/. */
  entries: Record<string, { js: string; css?: string }>;
  /** Page name → its HTML file under pages/. */
  pages: Record<string, string>;
}

/**
 * The policy of every page: this origin's scripts, styles, images and API only; no plugins, no
 * framing, no forms posted anywhere, no `<base>`.
 */
export const PAGE_CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  "connect-src 'self'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join('; ');

const TYPES: Record<string, string> = {
  '.js': 'application/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.html': 'text/html; charset=utf-8',
  '.map': 'application/json; charset=utf-8',
  '.png': 'image/png',
  '.svg': 'image/svg+xml',
};

const etagOf = (body: Buffer): string => `"${createHash('sha256').update(body).digest('base64url').slice(0, 27)}"`;

function asset(body: Buffer, contentType: string): WebAsset {
  const text = contentType.startsWith('text/') || contentType.startsWith('application/');
  const gz = text ? gzipSync(body, { level: 9 }) : null;
  return { body, gzip: gz && gz.length < body.length ? gz : null, contentType, etag: etagOf(body) };
}

/** dist/web, whether this file runs from the sources (libs/platform/src) or from dist (dist/libs/platform/src). */
export function defaultWebDir(): string {
  const up = resolve(__dirname, '..', '..', '..');
  return basename(up) === 'dist' ? join(up, 'web') : join(up, 'dist', 'web');
}

/** The built pages and assets, in memory. */
export class WebPages {
  private constructor(
    readonly manifest: WebManifest,
    private readonly assets: Map<string, WebAsset>,
    private readonly pages: Map<string, string>,
  ) {}

  /** Reads dist/web (or `dir`); null when the pages were not built. */
  static load(dir: string = defaultWebDir()): WebPages | null {
    const file = join(dir, 'manifest.json');
    if (!existsSync(file)) return null;
    const manifest = JSON.parse(readFileSync(file, 'utf8')) as WebManifest;
    const assets = new Map<string, WebAsset>();
    for (const entry of Object.values(manifest.entries)) {
      for (const name of [entry.js, entry.css]) {
        if (!name) continue;
        const ext = name.slice(name.lastIndexOf('.'));
        assets.set(name, asset(readFileSync(join(dir, 'assets', name)), TYPES[ext] ?? 'application/octet-stream'));
      }
    }
    const pages = new Map<string, string>();
    for (const [name, html] of Object.entries(manifest.pages)) pages.set(name, readFileSync(join(dir, 'pages', html), 'utf8'));
    return new WebPages(manifest, assets, pages);
  }

  /** A hashed asset by its file name (`checkin-3F2A9C1B.js`). */
  asset(name: string): WebAsset | null {
    return this.assets.get(name) ?? null;
  }

  /** The script of an entry (the widget's for `/widget.js`). */
  entryScript(entry: string): WebAsset | null {
    const name = this.manifest.entries[entry]?.js;
    return name ? this.asset(name) : null;
  }

  /** A page's HTML. */
  page(name: string): string | null {
    return this.pages.get(name) ?? null;
  }
}

/**
 * The staff console's sign-in settings, as the console page carries them (a `<meta name="console-config">`):
 * the dev issuer's form when the dev tools are on; the OIDC authorization-code flow with PKCE when an
 * issuer is configured. The console is a public client whose `client_id` is the audience the service
 * checks (`STAFF_OIDC_AUDIENCE`: an ID token's `aud` is its client's id); its redirect URI is
 * `{origin}/console/callback`. The issuer's endpoints come from its discovery document, read here
 * (so that the page's policy can name the token endpoint's origin, the one other address it may call).
 */
export interface ConsoleConfig {
  devTools: boolean;
  oidc: { issuer: string; clientId: string; authorizationEndpoint: string; tokenEndpoint: string } | null;
  /** Why OIDC sign-in is unavailable although an issuer is configured (its discovery failed). */
  oidcProblem: string | null;
}

type Discovered = { at: number; value: { authorizationEndpoint: string; tokenEndpoint: string } | { problem: string } };
const discovered = new Map<string, Discovered>();
/** A discovery answer is kept an hour, a failure a minute. */
const DISCOVERY_TTL_MS = 3_600_000;
const DISCOVERY_RETRY_MS = 60_000;

/** The issuer's authorization and token endpoints from `{issuer}/.well-known/openid-configuration`. */
export async function discoverIssuer(issuer: string, fetcher: typeof fetch = fetch): Promise<Discovered['value']> {
  const hit = discovered.get(issuer);
  const age = hit ? Date.now() - hit.at : Infinity;
  if (hit && age < ('problem' in hit.value ? DISCOVERY_RETRY_MS : DISCOVERY_TTL_MS)) return hit.value;
  let value: Discovered['value'];
  try {
    const res = await fetcher(`${issuer.replace(/\/$/, '')}/.well-known/openid-configuration`, {
      signal: AbortSignal.timeout(5000),
      headers: { accept: 'application/json' },
    });
    if (!res.ok) throw new Error(`discovery answered ${res.status}`);
    const doc = (await res.json()) as Record<string, unknown>;
    const endpoint = (name: string): string => {
      const v = doc[name];
      if (typeof v !== 'string') throw new Error(`discovery has no ${name}`);
      const u = new URL(v);
      if (u.protocol !== 'https:' && u.protocol !== 'http:') throw new Error(`${name} is not an http(s) URL`);
      return u.href;
    };
    if (doc.issuer !== issuer) throw new Error('discovery names another issuer');
    value = { authorizationEndpoint: endpoint('authorization_endpoint'), tokenEndpoint: endpoint('token_endpoint') };
  } catch (err) {
    value = { problem: `The sign-in provider's discovery document could not be read (${(err as Error).message}).` };
  }
  discovered.set(issuer, { at: Date.now(), value });
  return value;
}

/** The console page's policy: the page policy, plus the token endpoint's origin for the sign-in exchange. */
export function consoleCsp(config: ConsoleConfig): string {
  if (!config.oidc) return PAGE_CSP;
  return PAGE_CSP.replace("connect-src 'self'", `connect-src 'self' ${new URL(config.oidc.tokenEndpoint).origin}`);
}

/** The console page with its settings in a meta element (attribute-escaped JSON). */
export function consolePage(html: string, config: ConsoleConfig): string {
  const json = JSON.stringify(config).replace(/&/g, '&amp;').replace(/"/g, '&quot;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
  return html.replace('{{config}}', json);
}

let loaded: { dir: string; pages: WebPages | null } | undefined;

/** The pages of dist/web, read on first use (once per process). */
export function webPages(): WebPages | null {
  const dir = defaultWebDir();
  if (!loaded || loaded.dir !== dir || !loaded.pages) loaded = { dir, pages: WebPages.load(dir) };
  return loaded.pages;
}

/** One media range of an Accept header, with its quality. */
function ranges(accept: string): { type: string; subtype: string; q: number }[] {
  const out: { type: string; subtype: string; q: number }[] = [];
  for (const part of accept.split(',')) {
    const [range, ...params] = part.split(';').map((s) => s.trim().toLowerCase());
    const slash = range.indexOf('/');
    if (slash <= 0) continue;
    let q = 1;
    for (const p of params) {
      const m = /^q=([01](?:\.\d{0,3})?)$/.exec(p);
      if (m) q = Math.min(1, Number(m[1]));
    }
    out.push({ type: range.slice(0, slash), subtype: range.slice(slash + 1), q });
  }
  return out;
}

/** The quality the Accept ranges give a media type: the most specific matching range's (RFC 9110 section 12.5.1). */
function qualityOf(list: { type: string; subtype: string; q: number }[], type: string, subtype: string): number {
  let best = -1;
  let q = 0;
  for (const r of list) {
    const specificity = r.type === type && r.subtype === subtype ? 2 : r.type === type && r.subtype === '*' ? 1 : r.type === '*' && r.subtype === '*' ? 0 : -1;
    if (specificity > best) {
      best = specificity;
      q = r.q;
    }
  }
  return q;
}

/**
 * True when the client prefers an HTML page to JSON: `text/html` has a higher quality than
 * `application/json` in its Accept header. A browser's navigation (`text/html,...,*\/*;q=0.8`)
 * does; API clients (no Accept, `*\/*`, `application/json`) do not, so they keep the JSON answer.
 */
export function prefersHtml(accept: string | undefined): boolean {
  if (!accept) return false;
  const list = ranges(accept);
  return qualityOf(list, 'text', 'html') > qualityOf(list, 'application', 'json');
}

/** The pages' language for a request (docs/decisions.md, "Pages for people"): Spanish when its Accept-Language asks for it before English, else English. */
export function pageLanguage(acceptLanguage: string | undefined): 'en' | 'es' {
  const tags = (acceptLanguage ?? '')
    .split(',')
    .map((part, i) => {
      const [tag, ...params] = part.trim().toLowerCase().split(';');
      const q = params.map((p) => p.trim()).find((p) => p.startsWith('q='));
      return { tag: tag.trim(), q: q ? Number(q.slice(2)) : 1, i };
    })
    .filter((t) => t.tag && t.q > 0)
    .sort((a, b) => b.q - a.q || a.i - b.i);
  for (const { tag } of tags) {
    if (tag.startsWith('es')) return 'es';
    if (tag.startsWith('en')) return 'en';
  }
  return 'en';
}

const UNAVAILABLE_WORDS = {
  en: {
    title: 'Please try again in a minute',
    heading: 'This page is not available right now',
    text: 'The service is busy for a moment. Please try again in a minute.',
    again: 'Try again',
  },
  es: {
    title: 'Inténtelo de nuevo en un minuto',
    heading: 'Esta página no está disponible en este momento',
    text: 'El servicio está ocupado por un momento. Inténtelo de nuevo en un minuto.',
    again: 'Intentar de nuevo',
  },
} as const;

/**
 * What a 503 answers a browser opening a page (a `GET` or `HEAD` preferring HTML): the page's
 * headers and the page below; null for anyone else (API clients keep the JSON). Used by the
 * gateway's proxy (an app not reachable) and the read-model gate (read models being rebuilt).
 */
export function unavailablePageFor(
  method: string | undefined,
  headers: { accept?: string; 'accept-language'?: string },
): { headers: Record<string, string>; body: string } | null {
  if ((method !== 'GET' && method !== 'HEAD') || !prefersHtml(headers.accept)) return null;
  return { headers: { ...pageHeaders('no-store'), 'referrer-policy': 'no-referrer' }, body: unavailablePage(headers['accept-language']) };
}

/**
 * The page a browser gets instead of a 503's JSON (an app behind the gateway restarting, or its
 * read models being rebuilt): a few plain words in the reader's language and a link that loads the
 * same address again. No script, no style, nothing from the request in it.
 */
export function unavailablePage(acceptLanguage: string | undefined): string {
  const lang = pageLanguage(acceptLanguage);
  const w = UNAVAILABLE_WORDS[lang];
  return `<!doctype html>
<html lang="${lang}">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer">
<title>${w.title}</title>
</head>
<body>
<main>
<h1>${w.heading}</h1>
<p>${w.text}</p>
<p><a href="">${w.again}</a></p>
</main>
</body>
</html>
`;
}

/** Headers of an HTML page: its type, the policy, and how it may be cached. */
export function pageHeaders(cache: 'no-store' | 'no-cache'): Record<string, string> {
  return {
    'content-type': TYPES['.html'],
    'content-security-policy': PAGE_CSP,
    'cache-control': cache,
    'cross-origin-opener-policy': 'same-origin',
    'x-frame-options': 'DENY',
    vary: 'Accept',
  };
}

/** The minimal reply surface the routes below use (Fastify's, without its generics). */
interface Reply {
  code(status: number): Reply;
  header(name: string, value: string): Reply;
  send(payload?: unknown): unknown;
}
interface Request {
  headers: Record<string, string | string[] | undefined>;
  params: unknown;
}
interface RouteHost {
  get(path: string, handler: (req: Request, reply: Reply) => unknown): unknown;
}

const notFound = (reply: Reply) =>
  reply
    .code(404)
    .header('content-type', 'application/json; charset=utf-8')
    .send(JSON.stringify({ code: 'NOT_FOUND', message: 'Route not found' }));
const notBuilt = (reply: Reply) =>
  reply
    .code(503)
    .header('content-type', 'application/json; charset=utf-8')
    .header('retry-after', '60')
    .send(JSON.stringify({ code: 'UNAVAILABLE', message: 'The web pages are not built (npm run build)' }));

/** Sends an asset: 304 when the client has it, gzip when it takes gzip. */
function sendAsset(req: Request, reply: Reply, a: WebAsset, cacheControl: string): unknown {
  reply.header('cache-control', cacheControl).header('etag', a.etag).header('vary', 'Accept-Encoding');
  // Public code, loaded by pages of other origins (the widget): readable from anywhere.
  reply.header('cross-origin-resource-policy', 'cross-origin').header('access-control-allow-origin', '*');
  if (req.headers['if-none-match'] === a.etag) return reply.code(304).send();
  reply.header('content-type', a.contentType);
  const acceptEncoding = String(req.headers['accept-encoding'] ?? '');
  if (a.gzip && /\bgzip\b/.test(acceptEncoding)) return reply.header('content-encoding', 'gzip').send(a.gzip);
  return reply.send(a.body);
}

export const HASHED_ASSET_CACHE = 'public, max-age=31536000, immutable';
/** `/widget.js` keeps its name across releases: revalidated, so a new release reaches pages at once. */
export const STABLE_SCRIPT_CACHE = 'public, no-cache';
const FILE_NAME = /^[A-Za-z0-9_-]+\.(js|css)$/;

/**
 * The routes of the pages outside the API prefix (docs/decisions.md, "Pages for people": `{origin}/widget.js`):
 * `GET /widget.js`, `GET /assets/{file}` and, with the dev tools, `GET /widget-demo`. The pages
 * are read on first use, so a service started before `npm run build` answers 503 until built.
 */
export function registerWebRoutes(
  host: RouteHost,
  options: { devTools: boolean; pages?: () => WebPages | null; staffOidc?: { issuer: string; audience: string } | null; fetcher?: typeof fetch },
): void {
  const pages = options.pages ?? webPages;
  // The staff console, a single-page app: `/console/` and its deep links (a view, a view and an item) serve one page.
  const consoleRoute = async (_req: Request, reply: Reply) => {
    const html = pages()?.page('console');
    if (!html) return notBuilt(reply);
    const config: ConsoleConfig = { devTools: options.devTools, oidc: null, oidcProblem: null };
    if (options.staffOidc) {
      const found = await discoverIssuer(options.staffOidc.issuer, options.fetcher);
      if ('problem' in found) config.oidcProblem = found.problem;
      else config.oidc = { issuer: options.staffOidc.issuer, clientId: options.staffOidc.audience, ...found };
    }
    for (const [k, v] of Object.entries(pageHeaders('no-cache'))) reply.header(k, v);
    reply.header('content-security-policy', consoleCsp(config));
    return reply.code(200).send(consolePage(html, config));
  };
  host.get('/console', (_req, reply) => reply.code(308).header('location', '/console/').send());
  host.get('/console/', consoleRoute);
  host.get('/console/:view', consoleRoute);
  host.get('/console/:view/:item', consoleRoute);
  host.get('/widget.js', (req, reply) => {
    const built = pages();
    const script = built?.entryScript('widget');
    if (!script) return notBuilt(reply);
    return sendAsset(req, reply, script, STABLE_SCRIPT_CACHE);
  });
  host.get('/assets/:file', (req, reply) => {
    const file = String((req.params as { file?: string }).file ?? '');
    if (!FILE_NAME.test(file)) return notFound(reply);
    const built = pages();
    if (!built) return notBuilt(reply);
    const a = built.asset(file);
    if (!a) return notFound(reply);
    return sendAsset(req, reply, a, HASHED_ASSET_CACHE);
  });
  if (options.devTools) {
    host.get('/widget-demo', (_req, reply) => {
      const html = pages()?.page('widget-demo');
      if (!html) return notBuilt(reply);
      for (const [k, v] of Object.entries(pageHeaders('no-cache'))) reply.header(k, v);
      return reply.code(200).send(html);
    });
  }
}
