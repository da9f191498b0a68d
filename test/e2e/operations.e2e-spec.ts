import { randomBytes, randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import Redis from 'ioredis';
import { Client } from 'pg';
import { parse } from 'yaml';
import { DEFAULT_DATABASE_URL, EVENT_STORE, EventStore } from '@svc/eventstore';
import { READ_STORE, ReadStore } from '@svc/read-store';
import { StandaloneProcess, TcpForwarder, TestApp } from '@svc/testing';

/**
 * Operations routes over real HTTP (docs/decisions.md, "Start-up and health"): GET /healthz, GET /readyz (the event store, bus
 * and read store each asked, a 503 naming the one that does not answer, bounded in time when one
 * hangs), GET /openapi.json (the contract) and the API reference page beside it (a bundled Redoc,
 * nothing from another origin). No credentials anywhere.
 */
const contract = parse(readFileSync(join(__dirname, '..', '..', 'contracts', 'openapi.yaml'), 'utf8'));
/** GET /readyz's bound on one check, with room for a slow machine. */
const READY_BOUND_MS = 5000;

/** The Nest app inside a TestApp, to reach its ports (as the routes contract test does). */
const nest = (app: TestApp) => (app as unknown as { app: { get<T>(token: unknown): T } }).app;

function urlThrough(url: string, port: number): string {
  const u = new URL(url);
  u.hostname = '127.0.0.1';
  u.port = String(port);
  return u.toString();
}

describe('operations routes (e2e)', () => {
  describe('standalone on SQLite', () => {
    const app = new TestApp();
    beforeAll(() => app.start());
    afterAll(() => app.stop());

    it('GET /healthz answers 200 { status: "ok" } without credentials, with the headers of every answer', async () => {
      const r = await app.api.get('/healthz');
      expect(r.status).toBe(200);
      expect(r.body).toEqual({ status: 'ok' });
      expect(r.headers.get('content-type')).toMatch(/^application\/json/);
      expect(r.headers.get('cache-control')).toBe('no-store');
      expect(r.headers.get('x-content-type-options')).toBe('nosniff');
    });

    it('GET /readyz answers 200 ready, with the event store, the bus and the read store each ok', async () => {
      const r = await app.api.get('/readyz');
      expect(r.status).toBe(200);
      expect(r.body).toEqual({
        status: 'ready',
        checks: {
          eventStore: { status: 'ok', durationMs: expect.any(Number) },
          bus: { status: 'ok', durationMs: expect.any(Number) },
          readStore: { status: 'ok', durationMs: expect.any(Number) },
        },
      });
    });

    it('GET /openapi.json serves contracts/openapi.yaml as JSON', async () => {
      const r = await app.api.get('/openapi.json');
      expect(r.status).toBe(200);
      expect(r.headers.get('content-type')).toMatch(/^application\/json/);
      expect(r.body).toEqual(contract);
      // Every operation of the contract, these included, is in it.
      for (const path of ['/healthz', '/readyz', '/openapi.json', '/reference', '/organizations']) expect(Object.keys(r.body.paths)).toContain(path);
    });

    it('GET /reference is an HTML page under a strict Content-Security-Policy that loads only the bundled reference script and the contract, all from the service', async () => {
      const page = await app.api.get('/reference');
      expect(page.status).toBe(200);
      expect(page.headers.get('content-type')).toBe('text/html; charset=utf-8');
      const csp = page.headers.get('content-security-policy') ?? '';
      const directives = new Map(
        csp
          .split(';')
          .map((d) => d.trim().split(/\s+/))
          .map(([name, ...values]) => [name, values] as const),
      );
      expect(directives.get('default-src')).toEqual(["'none'"]);
      expect(directives.get('script-src')).toEqual(["'self'"]);
      expect(directives.get('connect-src')).toEqual(["'self'"]);
      expect(directives.get('frame-ancestors')).toEqual(["'none'"]);
      expect(directives.get('base-uri')).toEqual(["'none'"]);
      // No other origin and no eval anywhere in the policy.
      expect(csp).not.toMatch(/https?:|\*|unsafe-eval/);

      const html = page.text;
      const scripts = [...html.matchAll(/<script\b([^>]*)>([\s\S]*?)<\/script>/gi)];
      expect(scripts.length).toBeGreaterThan(0);
      for (const [, attrs, body] of scripts) {
        expect(body.trim()).toBe(''); // no inline script (the policy would refuse it anyway)
        const src = /\bsrc="([^"]+)"/.exec(attrs)?.[1];
        expect(src).toBeDefined();
        expect(src).not.toMatch(/^[a-z][a-z0-9+.-]*:|^\/\//i); // relative: same origin
      }
      for (const [, href] of html.matchAll(/<link\b[^>]*\bhref="([^"]+)"/gi)) expect(href).not.toMatch(/^[a-z][a-z0-9+.-]*:|^\/\//i);
      expect(html).not.toMatch(/https?:\/\//);
      // The page names the contract it renders, beside it.
      const specUrl = /spec-url="([^"]+)"/.exec(html)?.[1];
      expect(new URL(specUrl!, `${app.baseUrl}/reference`).toString()).toBe(`${app.baseUrl}/openapi.json`);

      // Its script is served by the service itself, as JavaScript: the Redoc bundle.
      const scriptUrl = new URL(/\bsrc="([^"]+)"/.exec(scripts[0][1])![1], `${app.baseUrl}/reference`);
      expect(scriptUrl.origin).toBe(new URL(app.baseUrl).origin);
      const script = await fetch(scriptUrl);
      expect(script.status).toBe(200);
      expect(script.headers.get('content-type')).toBe('text/javascript; charset=utf-8');
      expect(script.headers.get('x-content-type-options')).toBe('nosniff');
      const js = await script.text();
      expect(js.length).toBeGreaterThan(100_000);
      expect(js.includes('Redoc')).toBe(true);
      // The source map is not served: the bundle does not point the browser at it.
      expect(js.trimEnd().split('\n').pop()).not.toMatch(/^\/\/# sourceMappingURL=/);
    });

    it('GET /readyz answers 503 naming the read store once its SQLite handle is closed, then the event store too; /healthz still 200', async () => {
      await nest(app).get<ReadStore>(READ_STORE).close();
      const r = await app.api.get('/readyz');
      expect(r.status).toBe(503);
      expect(r.body).toMatchObject({
        code: 'NOT_READY',
        message: expect.stringContaining('readStore'),
        status: 'not_ready',
        checks: { eventStore: { status: 'ok' }, bus: { status: 'ok' }, readStore: { status: 'failed', reason: 'unavailable' } },
      });
      expect(r.text).not.toContain(app.dataDir);

      await nest(app).get<EventStore>(EVENT_STORE).close();
      const both = await app.api.get('/readyz');
      expect(both.status).toBe(503);
      expect(both.body.checks).toMatchObject({ eventStore: { status: 'failed' }, bus: { status: 'ok' }, readStore: { status: 'failed' } });
      expect(both.body.message).toMatch(/eventStore.*readStore/);

      expect((await app.api.get('/healthz')).status).toBe(200);
    });
  });

  describe('standalone on a Redis read store that stops answering', () => {
    const redisUrl = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
    const prefix = `svc-e2e-ready-${randomUUID()}`;
    let forwarder: TcpForwarder;
    let app: TestApp;

    beforeAll(async () => {
      const { host, port } = TcpForwarder.target(redisUrl, 6379);
      forwarder = await new TcpForwarder(host, port).start();
      app = await new TestApp(undefined, { READ_STORE: 'redis', REDIS_URL: urlThrough(redisUrl, forwarder.port), REDIS_KEY_PREFIX: prefix }).start();
    });
    afterAll(async () => {
      forwarder.resume();
      await app.stop();
      await forwarder.close();
      const redis = new Redis(redisUrl);
      const keys = await redis.keys(`${prefix}:*`);
      if (keys.length) await redis.del(...keys);
      redis.disconnect();
    });

    it('answers 503 naming the read store within its bound while Redis is silent, without the Redis address; ready again once it answers', async () => {
      expect((await app.api.get('/readyz')).status).toBe(200);

      forwarder.hang();
      const started = Date.now();
      const r = await app.api.get('/readyz');
      const took = Date.now() - started;
      expect(r.status).toBe(503);
      expect(r.body).toMatchObject({
        code: 'NOT_READY',
        status: 'not_ready',
        checks: { eventStore: { status: 'ok' }, bus: { status: 'ok' }, readStore: { status: 'failed', reason: 'timeout' } },
      });
      expect(took).toBeLessThan(READY_BOUND_MS);
      expect(r.text).not.toContain(String(forwarder.port));
      expect(r.text).not.toContain('redis://');
      // Probes that arrive meanwhile do not pile up: each is answered within the bound too.
      const again = await Promise.all([app.api.get('/readyz'), app.api.get('/readyz'), app.api.get('/readyz')]);
      expect(again.map((x) => x.status)).toEqual([503, 503, 503]);
      expect(Date.now() - started).toBeLessThan(2 * READY_BOUND_MS);
      expect((await app.api.get('/healthz')).status).toBe(200);

      forwarder.resume();
      const back = await app.api.get('/readyz');
      expect(back.status).toBe(200);
      expect(back.body.status).toBe('ready');
    });
  });

  describe('standalone on a PostgreSQL event store that goes away', () => {
    const databaseUrl = process.env.DATABASE_URL || DEFAULT_DATABASE_URL;
    const schema = `svc_events_e2e_ready_${randomUUID().replace(/-/g, '').slice(0, 10)}`;
    let forwarder: TcpForwarder;
    let app: TestApp;

    beforeAll(async () => {
      const { host, port } = TcpForwarder.target(databaseUrl, 5432);
      forwarder = await new TcpForwarder(host, port).start();
      app = await new TestApp(undefined, {
        EVENT_STORE: 'postgres',
        DATABASE_URL: urlThrough(databaseUrl, forwarder.port),
        EVENT_STORE_SCHEMA: schema,
        SVC_MASTER_KEY: randomBytes(32).toString('base64'),
      }).start();
    });
    afterAll(async () => {
      await app.stop();
      await forwarder.close();
      const c = new Client({ connectionString: databaseUrl });
      await c.connect();
      await c.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
      await c.end();
    });

    it('answers 503 naming the event store once PostgreSQL cannot be reached, without its address', async () => {
      expect((await app.api.get('/readyz')).status).toBe(200);
      await forwarder.close();
      const started = Date.now();
      const r = await app.api.get('/readyz');
      expect(r.status).toBe(503);
      expect(Date.now() - started).toBeLessThan(READY_BOUND_MS);
      expect(r.body).toMatchObject({ code: 'NOT_READY', checks: { eventStore: { status: 'failed' }, bus: { status: 'ok' }, readStore: { status: 'ok' } } });
      expect(r.body.message).toContain('eventStore');
      expect(r.text).not.toContain(String(forwarder.port));
      expect(r.text).not.toContain('postgres');
    });
  });

  describe('the built service (dist)', () => {
    const proc = new StandaloneProcess();
    beforeAll(() => proc.start());
    afterAll(() => proc.kill9());

    it('serves the contract and the reference page from what the build wrote into dist', async () => {
      const json = await proc.api.get('/openapi.json');
      expect(json.status).toBe(200);
      expect(json.body).toEqual(contract);
      const page = await proc.api.get('/reference');
      expect(page.status).toBe(200);
      const src = /<script\b[^>]*\bsrc="([^"]+)"/.exec(page.text)![1];
      const script = await fetch(new URL(src, `${proc.baseUrl}/reference`));
      expect(script.status).toBe(200);
      expect((await script.text()).length).toBeGreaterThan(100_000);
      expect((await proc.api.get('/readyz')).status).toBe(200);
    });
  });
});
