import { TestApp } from '@svc/testing';
import { rawHttp } from './case-helpers';

/**
 * docs/decisions.md, "Errors and the HTTP edge" and the spec's Authentication: a credential is judged before the body. Without (or
 * with a refused) credential, a malformed, empty, poisoned, over-deep or non-JSON body is still
 * 401/403 (or the guard's 404); with a good one it is the same 400/415 as always; routes without a
 * guard still refuse bad bodies. Over real HTTP.
 */

/** A request with exactly the headers given (fetch would add a content-type of its own). */
const send = (app: TestApp, method: string, path: string, headers: Record<string, string>, body?: string) => rawHttp(app, method, path, headers, body);

const JSON_CT = { 'content-type': 'application/json' };
const auth = (token?: string): Record<string, string> => (token ? { authorization: `Bearer ${token}` } : {});

/** Every body problem the edge knows, with what it answers once the caller is let in (unchanged from before). */
const BAD_BODIES: { name: string; headers: Record<string, string>; body: string; status: number; answer: unknown }[] = [
  {
    name: 'malformed JSON',
    headers: JSON_CT,
    body: '{bad',
    status: 400,
    answer: { code: 'VALIDATION_FAILED', message: expect.any(String), details: [{ path: '', message: 'malformed JSON' }] },
  },
  {
    name: 'an empty JSON body',
    headers: JSON_CT,
    body: '',
    status: 400,
    answer: { code: 'VALIDATION_FAILED', message: expect.any(String), details: [{ path: '', message: 'empty body' }] },
  },
  {
    name: 'a __proto__ key',
    headers: JSON_CT,
    body: '{"a":1,"__proto__":{"admin":true}}',
    status: 400,
    answer: { code: 'VALIDATION_FAILED', message: expect.any(String), details: [{ path: '', message: expect.stringContaining('__proto__') }] },
  },
  {
    name: 'JSON nested too deeply',
    headers: JSON_CT,
    body: `{"a":${'['.repeat(40)}${']'.repeat(40)}}`,
    status: 400,
    answer: { code: 'VALIDATION_FAILED', message: expect.any(String), details: [{ path: '', message: 'nested too deeply' }] },
  },
  {
    name: 'a text/plain body',
    headers: { 'content-type': 'text/plain' },
    body: 'name=A',
    status: 415,
    answer: { code: 'UNSUPPORTED_MEDIA_TYPE', message: expect.any(String) },
  },
  {
    name: 'a gzip-encoded JSON body',
    headers: { ...JSON_CT, 'content-encoding': 'gzip' },
    body: '\u001f\u008b',
    status: 415,
    answer: { code: 'UNSUPPORTED_MEDIA_TYPE', message: expect.stringContaining('Content-Encoding') },
  },
  {
    name: 'a plain JSON body labelled br',
    headers: { ...JSON_CT, 'content-encoding': 'br' },
    body: '{"name":"A"}',
    status: 415,
    answer: { code: 'UNSUPPORTED_MEDIA_TYPE', message: expect.stringContaining('Content-Encoding') },
  },
  {
    name: 'a form body',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: 'name=A',
    status: 415,
    answer: { code: 'UNSUPPORTED_MEDIA_TYPE', message: expect.any(String) },
  },
  {
    name: 'a body without a content type',
    headers: {},
    body: '{"name":"A"}',
    status: 415,
    answer: { code: 'UNSUPPORTED_MEDIA_TYPE', message: expect.any(String) },
  },
  {
    name: 'an unreadable content type',
    headers: { 'content-type': 'nonsense' },
    body: '{"name":"A"}',
    status: 415,
    answer: { code: 'UNSUPPORTED_MEDIA_TYPE', message: expect.any(String) },
  },
];

describe('edge order: authentication before the body (e2e, real HTTP)', () => {
  const app = new TestApp();
  let t: Awaited<ReturnType<TestApp['tenant']>>;
  let noBaa: Awaited<ReturnType<TestApp['tenant']>>;
  beforeAll(async () => {
    await app.start();
    t = await app.tenant();
    noBaa = await app.tenant({ baa: false });
  });
  afterAll(() => app.stop());

  it.each(BAD_BODIES)('API-key route, $name: 401 without a key, 403 BAA_REQUIRED without a BAA, else as always', async ({ headers, body, status, answer }) => {
    for (const token of [undefined, 'svc_sb_not-a-key', t.staff]) {
      const r = await send(app, 'POST', '/client/patient-events', { ...headers, ...auth(token) }, body);
      expect({ token, status: r.status, body: r.body }).toEqual({ token, status: 401, body: { code: 'INVALID_API_CREDENTIAL', message: expect.any(String) } });
    }
    const refused = await send(app, 'POST', '/client/patient-events', { ...headers, ...auth(noBaa.apiKey) }, body);
    expect({ status: refused.status, body: refused.body }).toEqual({ status: 403, body: { code: 'BAA_REQUIRED', message: expect.any(String) } });
    const good = await send(app, 'POST', '/client/patient-events', { ...headers, ...auth(t.apiKey) }, body);
    expect({ status: good.status, body: good.body }).toEqual({ status, body: answer });
  });

  it.each(BAD_BODIES)(
    'staff route, $name: 401 STAFF_AUTH_REQUIRED, the guard’s 404 and 403 first, else as always',
    async ({ headers, body, status, answer }) => {
      for (const token of [undefined, t.apiKey, 'not-a-token']) {
        const r = await send(app, 'POST', '/organizations', { ...headers, ...auth(token) }, body);
        expect({ token, status: r.status, body: r.body }).toEqual({ token, status: 401, body: { code: 'STAFF_AUTH_REQUIRED', message: expect.any(String) } });
      }
      // another organization's resource: the guard's 404, not the body's answer
      const stranger = await app.staffToken({ sub: 'edge-stranger' });
      const foreign = await send(app, 'POST', `/organizations/${t.orgId}/members`, { ...headers, ...auth(stranger) }, body);
      expect({ status: foreign.status, code: foreign.body?.code }).toEqual({ status: 404, code: 'NOT_FOUND' });
      const noMfa = await app.staffToken({ sub: t.ownerSub, mfa: false });
      const mfa = await send(app, 'POST', `${t.env}/api-keys`, { ...headers, ...auth(noMfa) }, body);
      expect({ status: mfa.status, code: mfa.body?.code }).toEqual({ status: 403, code: 'MFA_REQUIRED' });
      const good = await send(app, 'POST', '/organizations', { ...headers, ...auth(t.staff) }, body);
      expect({ status: good.status, body: good.body }).toEqual({ status, body: answer });
    },
  );

  it.each(BAD_BODIES)('widget-session route, $name: 401 SESSION_REQUIRED without a session', async ({ headers, body }) => {
    const r = await send(app, 'POST', '/widget/v1/messages', { ...headers }, body);
    expect({ status: r.status, body: r.body }).toEqual({ status: 401, body: { code: 'SESSION_REQUIRED', message: expect.any(String) } });
  });

  it.each(BAD_BODIES)('routes without a guard still refuse $name (widget sign-in, check-in answers, dev clock)', async ({ headers, body, status, answer }) => {
    for (const path of ['/widget/v1/sessions', '/widget/v1/check-ins/00000000-0000-4000-8000-000000000000/answers', '/dev/clock']) {
      const r = await send(app, 'POST', path, headers, body);
      expect({ path, status: r.status, body: r.body }).toEqual({ path, status, body: answer });
    }
  });

  it('a route without a body DTO (DELETE) judges the credential first, then the body', async () => {
    const key = await app.api.post(`${t.env}/api-keys`, { name: 'to-revoke' }, t.staff);
    expect(key.status).toBe(201);
    const path = `${t.env}/api-keys/${key.body.id}`;
    const anonymous = await send(app, 'DELETE', path, JSON_CT, '{bad');
    expect({ status: anonymous.status, code: anonymous.body?.code }).toEqual({ status: 401, code: 'STAFF_AUTH_REQUIRED' });
    const bad = await send(app, 'DELETE', path, { ...JSON_CT, ...auth(t.staff) }, '{bad');
    expect({ status: bad.status, body: bad.body }).toEqual({
      status: 400,
      body: { code: 'VALIDATION_FAILED', message: expect.any(String), details: [{ path: '', message: 'malformed JSON' }] },
    });
    expect((await app.api.get('/v1/ping', key.body.key)).status).toBe(200); // nothing was revoked
    expect((await send(app, 'DELETE', path, auth(t.staff))).status).toBe(204);
  });

  it('keeps what was answered at once: 413 for an over-large body, 404 for an unknown route', async () => {
    const big = await app.api.request('POST', '/client/patient-events', { rawBody: JSON.stringify({ x: 'x'.repeat(1024 * 1024 + 10) }) });
    expect({ status: big.status, body: big.body }).toEqual({ status: 413, body: { code: 'PAYLOAD_TOO_LARGE', message: expect.any(String) } });
    for (const { headers, body } of BAD_BODIES) {
      const r = await send(app, 'POST', '/no/such/route', headers, body);
      expect({ status: r.status, code: r.body?.code }).toEqual({ status: 404, code: 'NOT_FOUND' });
    }
  });

  it('a valid body still passes the guards, then the DTO (unknown fields 400 after 401)', async () => {
    const anonymous = await send(app, 'POST', '/organizations', JSON_CT, '{"name":"A","constructor":{"x":1}}');
    expect(anonymous.status).toBe(401);
    const unknown = await send(app, 'POST', '/organizations', { ...JSON_CT, ...auth(t.staff) }, '{"name":"A","constructor":{"x":1}}');
    expect({ status: unknown.status, details: unknown.body?.details }).toEqual({ status: 400, details: [{ path: 'constructor', message: 'unknown field' }] });
    const created = await send(
      app,
      'POST',
      '/organizations',
      { 'content-type': 'Application/JSON; charset=utf-8', ...auth(t.staff) },
      '{"name":"Edge Clinic"}',
    );
    expect(created.status).toBe(201);
  });
});

describe('free-form members reach the domain exactly as sent (e2e, real HTTP)', () => {
  const app = new TestApp();
  let t: Awaited<ReturnType<TestApp['tenant']>>;
  beforeAll(async () => {
    await app.start();
    t = await app.tenant();
  });
  afterAll(() => app.stop());

  const reply = { id: 'hello', type: 'reply', message: 'Hello' };

  it('refuses a workflow definition with an unknown key named constructor (or toString) at any depth of the definition', async () => {
    const P = `${t.env}/conversation-workflows`;
    const cases: [Record<string, unknown>, string][] = [
      [{ category: 'support', description: 'D', steps: [reply], constructor: { x: 1 } }, 'definition.constructor'],
      [{ category: 'support', description: 'D', steps: [{ ...reply, constructor: 'x' }] }, 'definition.steps[0].constructor'],
      [{ category: 'support', description: 'D', steps: [{ ...reply, toString: 'x' }] }, 'definition.steps[0].toString'],
      [
        {
          category: 'support',
          description: 'D',
          steps: [
            {
              id: 'look',
              type: 'call_api',
              destinationStableKey: 'orders',
              method: 'GET',
              path: '/o',
              save: [],
              select: { listPath: 'a', matchPath: 'b', equals: 'c', valueOf: 1 },
              notFoundReply: 'x',
              errorReply: 'y',
            },
          ],
        },
        'definition.steps[0].select.valueOf',
      ],
    ];
    for (const [definition, path] of cases) {
      const r = await app.api.post(P, { stableKey: 'proto_keys', name: 'Proto keys', definition }, t.staff);
      expect({ path, status: r.status, code: r.body.code }).toEqual({ path, status: 400, code: 'VALIDATION_FAILED' });
      expect(r.body.details).toContainEqual({ path, message: 'unknown field' });
    }
    // the same definitions went through a draft save too (SaveDraftDto): refused the same way
    const ok = await app.api.post(
      P,
      { stableKey: 'proto_keys', name: 'Proto keys', definition: { category: 'support', description: 'D', steps: [reply] } },
      t.staff,
    );
    expect(ok.status).toBe(201);
    const draft = ok.body.versions[0];
    const saved = await app.api.put(
      `${P}/versions/${draft.id}`,
      { expectedRevision: draft.revision, definition: { category: 'support', description: 'D', steps: [reply], constructor: 1 } },
      t.staff,
    );
    expect(saved.status).toBe(400);
    expect(saved.body.details).toContainEqual({ path: 'definition.constructor', message: 'unknown field' });
  });

  it('keeps keys named like Object.prototype members where a definition allows any key (a call_api body): stored and returned unchanged', async () => {
    const body = { constructor: 'c', toString: { valueOf: 1, prototype: [{ hasOwnProperty: true }] }, plain: 'p' };
    const definition = {
      category: 'support',
      description: 'Posts a note',
      steps: [
        {
          id: 'note',
          type: 'call_api',
          destinationStableKey: 'notes',
          method: 'POST',
          path: '/notes',
          readOnly: true,
          body,
          save: [],
          notFoundReply: 'Not found',
          errorReply: 'Failed',
        },
        reply,
      ],
    };
    const r = await app.api.post(`${t.env}/conversation-workflows`, { stableKey: 'proto_body', name: 'Proto body', definition }, t.staff);
    expect(r.status).toBe(201);
    expect(JSON.stringify(r.body.versions[0].definition)).toBe(JSON.stringify(definition));
    const list = await app.api.get(`${t.env}/conversation-workflows`, t.staff);
    const stored = list.body.workflows.find((w: { id: string }) => w.id === r.body.id);
    expect(JSON.stringify(stored.versions[0].definition.steps[0].body)).toBe(JSON.stringify(body));
  });

  it('keeps a Destination header named constructor (a valid HTTP token) among its header names', async () => {
    const r = await app.api.post(
      `${t.env}/destinations`,
      { stableKey: 'proto_headers', name: 'Proto headers', baseUrl: 'https://orders.example.test', headers: { constructor: 'a', toString: 'b', 'x-key': 'c' } },
      t.staff,
    );
    expect(r.status).toBe(201);
    expect([...r.body.headerNames].sort()).toEqual(['constructor', 'toString', 'x-key']);
  });
});
