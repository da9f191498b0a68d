import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse } from 'yaml';
import { routesOf } from '@svc/platform';
import { TestApp } from '@svc/testing';

/** contracts/openapi.yaml describes every endpoint the standalone service serves, and nothing it does not. */
describe('OpenAPI covers every served route', () => {
  const app = new TestApp();
  beforeAll(() => app.start());
  afterAll(() => app.stop());

  it('matches the routes one to one', () => {
    const doc = parse(readFileSync(join(__dirname, '..', '..', 'contracts', 'openapi.yaml'), 'utf8')) as { paths: Record<string, Record<string, unknown>> };
    const documented = new Set<string>();
    for (const [path, item] of Object.entries(doc.paths)) {
      // Paths served on the origin itself (the pages for people: `servers` without /api) are compared with the routes outside /api.
      const onOrigin = ((item as { servers?: { url: string }[] }).servers ?? []).some((s) => !s.url.endsWith('/api'));
      for (const method of Object.keys(item)) {
        if (['get', 'post', 'put', 'patch', 'delete'].includes(method))
          documented.add(`${method.toUpperCase()} ${onOrigin ? 'origin:' : ''}${path.replace(/\{[^}]+\}/g, '{}')}`);
      }
    }
    const served = new Set(
      routesOf((app as unknown as { app: object }).app).map((r) =>
        r.url.startsWith('/api/')
          ? `${r.method} ${r.url.slice('/api'.length).replace(/:[^/]+/g, '{}')}`
          : `${r.method} origin:${r.url.replace(/:[^/]+/g, '{}')}`,
      ),
    );
    expect(served.size).toBeGreaterThan(50);
    expect(documented.size).toBeGreaterThan(50);
    expect([...served].filter((r) => !documented.has(r)).sort()).toEqual([]);
    expect([...documented].filter((r) => !served.has(r)).sort()).toEqual([]);
  });
});
