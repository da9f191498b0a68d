import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse } from 'yaml';
import { TestApp } from '@svc/testing';

/**
 * docs/decisions.md, "Path parameters": a path parameter the contract types as uuid but that is not one is 400
 * `VALIDATION_FAILED` naming the parameter; a well-formed unknown id is 404 `NOT_FOUND`. Every
 * operation of contracts/openapi.yaml with a uuid path parameter is walked over real HTTP, with the
 * credential its security scheme names (authentication still comes first: 401 without it).
 */

type Obj = Record<string, any>;
const doc: Obj = parse(readFileSync(join(__dirname, '..', '..', 'contracts', 'openapi.yaml'), 'utf8'));
const deref = (node: Obj): Obj =>
  typeof node.$ref === 'string'
    ? deref(
        node.$ref
          .slice(2)
          .split('/')
          .reduce((o: Obj, k: string) => o[k], doc),
      )
    : node;

type Scheme = 'apiKey' | 'staffToken' | 'widgetSession' | null;
interface Route {
  method: string;
  path: string;
  params: { name: string; uuid: boolean }[];
  scheme: Scheme;
  takesBody: boolean;
}

const routes: Route[] = [];
for (const [path, item] of Object.entries(doc.paths as Obj)) {
  for (const method of ['get', 'post', 'put', 'patch', 'delete']) {
    const op = (item as Obj)[method] as Obj | undefined;
    if (!op) continue;
    const params = [...((item as Obj).parameters ?? []), ...(op.parameters ?? [])].map(deref).filter((p: Obj) => p.in === 'path');
    if (!params.some((p: Obj) => p.schema?.format === 'uuid')) continue;
    const security = (op.security ?? doc.security ?? []) as Obj[];
    const scheme = (security.length ? Object.keys(security[0])[0] : null) as Scheme;
    routes.push({
      method: method.toUpperCase(),
      path,
      params: params.map((p: Obj) => ({ name: p.name as string, uuid: p.schema?.format === 'uuid' })),
      scheme,
      takesBody: !!op.requestBody,
    });
  }
}

/** One case per uuid path parameter of each operation. */
const cases = routes.flatMap((r) => r.params.filter((p) => p.uuid).map((p) => ({ ...r, param: p.name, name: `${r.method} ${r.path} {${p.name}}` })));

const MALFORMED = ['not-a-uuid', '12345', `${randomUUID()}0`, randomUUID().replace(/-/g, ''), `${randomUUID().slice(0, 35)}g`];

describe('uuid path parameters: 400 when malformed, 404 when unknown (e2e, real HTTP)', () => {
  const app = new TestApp();
  let t: Awaited<ReturnType<TestApp['tenant']>>;
  let session: string;

  beforeAll(async () => {
    await app.start();
    t = await app.tenant();
    const opened = await app.api.post('/widget/v1/sessions', { environmentId: t.sandbox });
    expect(opened.status).toBe(201);
    session = opened.body.sessionToken as string;
  });
  afterAll(() => app.stop());

  const credential = (scheme: Scheme): string | undefined =>
    scheme === 'apiKey' ? t.apiKey : scheme === 'staffToken' ? t.staff : scheme === 'widgetSession' ? session : undefined;

  /** The route's path with `value` for `param`, the tenant's organization and environment, and fresh uuids for the rest. */
  function pathFor(route: Route, param: string, value: string): string {
    return route.path.replace(/\{([^}]+)\}/g, (_, name: string) => {
      if (name === param) return encodeURIComponent(value);
      if (name === 'orgId') return t.orgId;
      if (name === 'envId') return t.sandbox;
      if (name === 'sub') return 'someone';
      return randomUUID();
    });
  }

  const send = (route: Route, path: string, token: string | undefined) =>
    app.api.request(route.method, path, { token, ...(route.takesBody ? { body: {} } : {}) });

  it('walks every operation the contract gives a uuid path parameter', () => {
    expect(cases.length).toBeGreaterThan(50);
    // The lean routes, the widget's and the check-in pages are among them.
    expect(cases.map((c) => c.name)).toEqual(
      expect.arrayContaining([
        'GET /v1/clinical-cases/{caseId}/progress {caseId}',
        'POST /v1/clinical-cases/{caseId}/updates {caseId}',
        'POST /widget/v1/cases/{caseId}/messages {caseId}',
        'GET /check-ins/{checkInId} {checkInId}',
        'DELETE /organizations/{orgId}/members/{sub} {orgId}',
      ]),
    );
  });

  it.each(cases)('$name: a malformed value is 400 VALIDATION_FAILED naming it', async (route) => {
    for (const bad of MALFORMED) {
      const r = await send(route, pathFor(route, route.param, bad), credential(route.scheme));
      expect({ bad, status: r.status, body: r.body }).toEqual({
        bad,
        status: 400,
        body: { code: 'VALIDATION_FAILED', message: expect.any(String), details: [{ path: route.param, message: expect.any(String) }] },
      });
    }
  });

  it.each(cases.filter((c) => c.scheme !== null))('$name: without a credential still 401 first', async (route) => {
    const r = await send(route, pathFor(route, route.param, 'not-a-uuid'), undefined);
    const code = { apiKey: 'INVALID_API_CREDENTIAL', staffToken: 'STAFF_AUTH_REQUIRED', widgetSession: 'SESSION_REQUIRED' }[route.scheme!];
    expect({ status: r.status, body: r.body }).toEqual({ status: 401, body: { code, message: expect.any(String) } });
  });

  it.each(cases.filter((c) => !c.takesBody))('$name: a well-formed unknown id is 404 NOT_FOUND', async (route) => {
    for (const id of [randomUUID(), randomUUID().toUpperCase(), '00000000-0000-0000-0000-000000000000']) {
      const r = await send(route, pathFor(route, route.param, id), credential(route.scheme));
      expect({ id, status: r.status, code: r.body?.code }).toEqual({ id, status: 404, code: 'NOT_FOUND' });
    }
  });

  it.each(cases.filter((c) => c.takesBody))('$name: a well-formed unknown id passes the path check (the body is judged next)', async (route) => {
    for (const id of [randomUUID(), randomUUID().toUpperCase()]) {
      const r = await send(route, pathFor(route, route.param, id), credential(route.scheme));
      const namesParam = r.status === 400 && (r.body?.details ?? []).some((d: { path: string }) => d.path === route.param);
      expect({ id, status: r.status, namesParam }).toEqual({ id, status: expect.any(Number), namesParam: false });
      expect([400, 404]).toContain(r.status);
    }
  });

  it('names every malformed parameter of a request, and a member `sub` is no uuid', async () => {
    const r = await app.api.get('/organizations/nope/environments/also-nope/api-keys', t.staff);
    expect(r.status).toBe(400);
    expect(r.body.details.map((d: { path: string }) => d.path).sort()).toEqual(['envId', 'orgId']);
    // `sub` is not a uuid: a well-formed organization with any sub reaches the members' own rules.
    const member = await app.api.delete(`/organizations/${t.orgId}/members/not-a-uuid-and-fine`, t.staff);
    expect(member.status).toBe(404);
  });
});
