import { mkdtempSync, mkdirSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gunzipSync } from 'node:zlib';
import Fastify from 'fastify';
import { HASHED_ASSET_CACHE, PAGE_CSP, WebPages, prefersHtml, registerWebRoutes } from '../src/web-pages';

describe('prefersHtml (which variant of the check-in link a client gets)', () => {
  it('gives browsers the page and API clients the JSON', () => {
    // Chromium, Firefox and Safari navigations.
    expect(prefersHtml('text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,image/apng,*/*;q=0.8,application/signed-exchange;v=b3;q=0.7')).toBe(true);
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
  writeFileSync(join(dir, 'manifest.json'), JSON.stringify({ entries: { widget: { js: 'widget-ABCD1234.js' }, 'widget-demo': { js: 'demo-ABCD1234.js' } }, pages: { 'widget-demo': 'widget-demo.html' } }));
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
});
