import { mkdtempSync, mkdirSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gunzipSync } from 'node:zlib';
import Fastify from 'fastify';
import { HASHED_ASSET_CACHE, PAGE_CSP, WebPages, prefersHtml, registerWebRoutes } from '../src/web-pages';
import type { ConsoleConfig } from '../src/web-pages';

describe('prefersHtml (which variant of the check-in link a client gets)', () => {
  it('gives browsers the page and API clients the JSON', () => {
    // Chromium, Firefox and Safari navigations.
    expect(
      prefersHtml('text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,image/apng,*/*;q=0.8,application/signed-exchange;v=b3;q=0.7'),
    ).toBe(true);
    expect(prefersHtml('text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8')).toBe(true);
    // API clients: none, anything, JSON, JSON first.
    expect(prefersHtml(undefined)).toBe(false);
    expect(prefersHtml('')).toBe(false);
    expect(prefersHtml('*/*')).toBe(false);
    expect(prefersHtml('application/json')).toBe(false);
    expect(prefersHtml('application/json, text/html;q=0.5')).toBe(false);
    expect(prefersHtml('text/html;q=0.5, application/json')).toBe(false);
    expect(prefersHtml('text/*, application/json;q=0.9')).toBe(true);
    expect(prefersHtml('text/html;q=0, */*')).toBe(false);
    expect(prefersHtml('garbage')).toBe(false);
  });
});

describe('web routes', () => {
  const dir = mkdtempSync(join(tmpdir(), 'web-pages-'));
  mkdirSync(join(dir, 'assets'));
  mkdirSync(join(dir, 'pages'));
  const script = 'console.log("widget");'.repeat(50);
  writeFileSync(join(dir, 'assets', 'widget-ABCD1234.js'), script);
  writeFileSync(join(dir, 'assets', 'demo-ABCD1234.js'), 'x');
  writeFileSync(join(dir, 'pages', 'widget-demo.html'), '<!doctype html><title>demo</title>');
  writeFileSync(
    join(dir, 'manifest.json'),
    JSON.stringify({
      entries: { widget: { js: 'widget-ABCD1234.js' }, 'widget-demo': { js: 'demo-ABCD1234.js' } },
      pages: { 'widget-demo': 'widget-demo.html' },
    }),
  );
  const pages = WebPages.load(dir);

  async function serve(devTools: boolean, built = true) {
    const app = Fastify();
    registerWebRoutes(app as never, { devTools, pages: () => (built ? pages : null) });
    await app.ready();
    return app;
  }

  it('serves /widget.js revalidated, hashed assets immutable, gzip when asked, 304 on a matching ETag', async () => {
    const app = await serve(false);
    const w = await app.inject({ method: 'GET', url: '/widget.js' });
    expect(w.statusCode).toBe(200);
    expect(w.body).toBe(script);
    expect(w.headers['cache-control']).toBe('public, no-cache');
    expect(w.headers['content-type']).toBe('application/javascript; charset=utf-8');
    expect(w.headers['cross-origin-resource-policy']).toBe('cross-origin');
    const a = await app.inject({ method: 'GET', url: '/assets/widget-ABCD1234.js', headers: { 'accept-encoding': 'gzip, br' } });
    expect(a.headers['cache-control']).toBe(HASHED_ASSET_CACHE);
    expect(a.headers['content-encoding']).toBe('gzip');
    expect(gunzipSync(a.rawPayload).toString()).toBe(script);
    const again = await app.inject({ method: 'GET', url: '/assets/widget-ABCD1234.js', headers: { 'if-none-match': String(a.headers.etag) } });
    expect(again.statusCode).toBe(304);
    expect(again.body).toBe('');
    for (const url of ['/assets/nope-ABCD1234.js', '/assets/..%2Fmanifest.json', '/assets/widget-ABCD1234.js.map']) {
      const r = await app.inject({ method: 'GET', url });
      expect({ url, status: r.statusCode, code: r.json().code }).toEqual({ url, status: 404, code: 'NOT_FOUND' });
    }
    // No demo page without the dev tools.
    expect((await app.inject({ method: 'GET', url: '/widget-demo' })).statusCode).toBe(404);
    await app.close();
  });

  it('serves the demo page with the dev tools, under the page policy', async () => {
    const app = await serve(true);
    const r = await app.inject({ method: 'GET', url: '/widget-demo' });
    expect(r.statusCode).toBe(200);
    expect(r.headers['content-security-policy']).toBe(PAGE_CSP);
    expect(PAGE_CSP).toContain("script-src 'self'");
    expect(PAGE_CSP).toContain("connect-src 'self'");
    expect(PAGE_CSP).not.toContain('unsafe-inline');
    await app.close();
  });

  it('answers 503 UNAVAILABLE while the pages are not built', async () => {
    const app = await serve(true, false);
    for (const url of ['/widget.js', '/assets/widget-ABCD1234.js', '/widget-demo']) {
      const r = await app.inject({ method: 'GET', url });
      expect({ url, status: r.statusCode, code: r.json().code }).toEqual({ url, status: 503, code: 'UNAVAILABLE' });
    }
    await app.close();
  });

  describe('the staff console', () => {
    const cdir = mkdtempSync(join(tmpdir(), 'web-console-'));
    mkdirSync(join(cdir, 'assets'));
    mkdirSync(join(cdir, 'pages'));
    writeFileSync(join(cdir, 'assets', 'console-ABCD1234.js'), 'x');
    writeFileSync(join(cdir, 'pages', 'console.html'), '<!doctype html><meta name="console-config" content="{{config}}"><title>console</title>');
    writeFileSync(join(cdir, 'manifest.json'), JSON.stringify({ entries: { console: { js: 'console-ABCD1234.js' } }, pages: { console: 'console.html' } }));
    const consolePages = WebPages.load(cdir);
    const configOf = (html: string) =>
      JSON.parse(
        /content="([^"]*)"/
          .exec(html)![1]
          .replace(/&quot;/g, '"')
          .replace(/&lt;/g, '<')
          .replace(/&gt;/g, '>')
          .replace(/&amp;/g, '&'),
      ) as ConsoleConfig;

    it('serves one page for /console/ and its deep links, with the dev form only while the dev tools are on', async () => {
      const app = Fastify();
      registerWebRoutes(app as never, { devTools: true, pages: () => consolePages });
      await app.ready();
      const bare = await app.inject({ method: 'GET', url: '/console' });
      expect([bare.statusCode, bare.headers.location]).toEqual([308, '/console/']);
      for (const url of ['/console/', '/console/webhooks', '/console/webhooks/3f1c', '/console/callback?code=x&state=y']) {
        const r = await app.inject({ method: 'GET', url });
        expect({ url, status: r.statusCode, csp: r.headers['content-security-policy'], config: configOf(r.body) }).toEqual({
          url,
          status: 200,
          csp: PAGE_CSP,
          config: { devTools: true, oidc: null, oidcProblem: null },
        });
      }
      expect((await app.inject({ method: 'GET', url: '/console/a/b/c' })).statusCode).toBe(404);
      await app.close();
      const off = Fastify();
      registerWebRoutes(off as never, { devTools: false, pages: () => consolePages });
      await off.ready();
      expect(configOf((await off.inject({ method: 'GET', url: '/console/' })).body).devTools).toBe(false);
      await off.close();
    });

    it("reads the issuer's discovery document, names its token endpoint in connect-src, and says so when discovery fails", async () => {
      const issuer = 'https://login.example.test/tenant-1';
      const discovery = { issuer, authorization_endpoint: 'https://login.example.test/authorize', token_endpoint: 'https://tokens.example.test/oauth/token' };
      const asked: string[] = [];
      const fetcher = (async (url: string) => {
        asked.push(url);
        return new Response(JSON.stringify(discovery), { status: 200, headers: { 'content-type': 'application/json' } });
      }) as unknown as typeof fetch;
      const app = Fastify();
      registerWebRoutes(app as never, { devTools: false, pages: () => consolePages, staffOidc: { issuer, audience: 'console-client-1' }, fetcher });
      await app.ready();
      const r = await app.inject({ method: 'GET', url: '/console/' });
      expect(asked).toEqual([`${issuer}/.well-known/openid-configuration`]);
      expect(configOf(r.body).oidc).toEqual({
        issuer,
        clientId: 'console-client-1',
        authorizationEndpoint: discovery.authorization_endpoint,
        tokenEndpoint: discovery.token_endpoint,
      });
      expect(r.headers['content-security-policy']).toContain("connect-src 'self' https://tokens.example.test;");
      expect(r.headers['content-security-policy']).toContain("script-src 'self';");
      await app.inject({ method: 'GET', url: '/console/cases' });
      expect(asked).toHaveLength(1); // kept
      await app.close();

      const broken = Fastify();
      const other = 'https://broken.example.test';
      registerWebRoutes(broken as never, {
        devTools: false,
        pages: () => consolePages,
        staffOidc: { issuer: other, audience: 'c' },
        fetcher: (async () => new Response('no', { status: 500 })) as unknown as typeof fetch,
      });
      await broken.ready();
      const b = await broken.inject({ method: 'GET', url: '/console/' });
      expect(configOf(b.body)).toEqual({
        devTools: false,
        oidc: null,
        oidcProblem: expect.stringContaining('discovery document could not be read (discovery answered 500)'),
      });
      expect(b.headers['content-security-policy']).toBe(PAGE_CSP);
      await broken.close();
    });
  });
});
