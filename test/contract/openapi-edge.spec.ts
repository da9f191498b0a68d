/**
 * contracts/openapi.yaml and the HTTP edge's own rules agree: the uuid path parameters the edge
 * checks (UUID_PATH_PARAMS) are exactly those the contract types `format: uuid`; every operation with
 * one documents its 400; every rate-limited operation documents its 429 with `Retry-After`
 * (docs/decisions.md, "Path parameters" and "Rate limits").
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse } from 'yaml';
import { ADDRESS_LIMITED_ROUTES, UUID_PATH_PARAMS } from '@svc/http';

type Obj = Record<string, any>;
const doc: Obj = parse(readFileSync(join(__dirname, '..', '..', 'contracts', 'openapi.yaml'), 'utf8'));
const deref = (node: Obj): Obj =>
  typeof node?.$ref === 'string'
    ? deref(
        node.$ref
          .slice(2)
          .split('/')
          .reduce((o: Obj, k: string) => o[k], doc),
      )
    : node;

interface Op {
  name: string;
  path: string;
  op: Obj;
  pathParams: Obj[];
  secured: boolean;
}
const ops: Op[] = [];
for (const [path, item] of Object.entries(doc.paths as Obj)) {
  for (const method of ['get', 'post', 'put', 'patch', 'delete']) {
    const op = (item as Obj)[method] as Obj | undefined;
    if (!op) continue;
    const pathParams = [...((item as Obj).parameters ?? []), ...(op.parameters ?? [])].map(deref).filter((p: Obj) => p.in === 'path');
    ops.push({ name: `${method.toUpperCase()} ${path}`, path, op, pathParams, secured: (op.security ?? doc.security ?? []).length > 0 });
  }
}

/** Operations the rate limits count: those with a credential, and the widget's and check-in pages' (by client address). */
const limited = ops.filter((o) => o.secured || ADDRESS_LIMITED_ROUTES.some((prefix) => `/api${o.path}/`.startsWith(prefix)));

describe('openapi.yaml and the edge: uuid path parameters and rate limits', () => {
  it('the edge checks exactly the path parameters the contract types as uuid', () => {
    const uuid = new Set<string>();
    const other = new Set<string>();
    for (const o of ops) for (const p of o.pathParams) (p.schema?.format === 'uuid' ? uuid : other).add(p.name);
    expect([...uuid].sort()).toEqual([...UUID_PATH_PARAMS].sort());
    expect([...other].filter((n) => UUID_PATH_PARAMS.has(n))).toEqual([]);
    expect(other.has('sub')).toBe(true);
  });

  it('every operation with a uuid path parameter documents 400 VALIDATION_FAILED', () => {
    const missing = ops.filter(
      (o) => o.pathParams.some((p) => p.schema?.format === 'uuid') && deref(o.op.responses?.['400'] ?? {}) !== doc.components.responses.ValidationFailed,
    );
    expect(missing.map((o) => o.name)).toEqual([]);
  });

  it('every rate-limited operation documents 429 RATE_LIMITED with Retry-After (whole seconds, at least 1)', () => {
    expect(limited.length).toBeGreaterThan(60);
    expect(limited.map((o) => o.name)).toEqual(
      expect.arrayContaining(['POST /widget/v1/sessions', 'GET /check-ins/{checkInId}', 'GET /v1/clinical-cases/{caseId}/progress', 'POST /organizations']),
    );
    const missing = limited.filter((o) => o.op.responses?.['429']?.$ref !== '#/components/responses/RateLimited');
    expect(missing.map((o) => o.name)).toEqual([]);
    const rateLimited = doc.components.responses.RateLimited;
    expect(rateLimited.content['application/json'].schema.allOf).toEqual(
      expect.arrayContaining([{ $ref: '#/components/schemas/Error' }, { type: 'object', properties: { code: { const: 'RATE_LIMITED' } } }]),
    );
    const retryAfter = deref(rateLimited.headers['Retry-After']);
    expect(retryAfter).toMatchObject({ required: true, schema: { type: 'integer', minimum: 1 } });
  });

  it('no operation that is never limited claims a 429 (dev tools, operations routes)', () => {
    const claims = ops.filter((o) => !limited.includes(o) && o.op.responses?.['429']);
    expect(claims.map((o) => o.name)).toEqual([]);
  });
});
