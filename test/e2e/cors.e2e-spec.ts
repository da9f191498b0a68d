import { connect } from 'node:net';
import { TestApp, describeInProcess } from '@svc/testing';
import { loadConfig } from '@svc/platform';

/**
 * CORS (docs/decisions.md, "Security and access", "CORS"): the patient widget is called from the caller's web
 * pages, the staff API from the staff app; API-key routes never answer a browser's cross-origin call.
 */
describe('CORS (e2e, real HTTP)', () => {
  const preflight = (app: TestApp, path: string, origin: string, method = 'POST', headers = 'authorization, content-type, idempotency-key') =>
    app.api.request('OPTIONS', path, { headers: { origin, 'access-control-request-method': method, 'access-control-request-headers': headers } });

  describe('defaults: the widget from any origin, the staff API from none', () => {
    const app = new TestApp();
    beforeAll(() => app.start());
    afterAll(() => app.stop());

    it('answers a widget preflight 204 before authentication, with the methods and headers the widget sends', async () => {
      const r = await preflight(app, '/widget/v1/messages', 'https://clinic.example');
      expect(r.status).toBe(204);
      expect(r.text).toBe('');
      expect(r.headers.get('access-control-allow-origin')).toBe('*');
      expect(r.headers.get('access-control-allow-methods')).toBe('GET, POST');
      expect(r.headers.get('access-control-allow-headers')).toBe('authorization, content-type, idempotency-key');
      expect(r.headers.get('access-control-max-age')).toBe('600');
      expect(r.headers.get('access-control-allow-credentials')).toBeNull();
      for (const path of [
        '/widget/v1/sessions',
        '/widget/v1/check-ins/00000000-0000-4000-8000-000000000000/answers',
        '/widget/v1/cases/00000000-0000-4000-8000-000000000000/messages',
      ]) {
        expect((await preflight(app, path, 'https://clinic.example')).status).toBe(204);
      }
    });

    it('marks widget answers, errors included, readable by the page (and Retry-After exposed)', async () => {
      const t = await app.tenant();
      const ok = await app.api.request('POST', '/widget/v1/sessions', { body: { environmentId: t.sandbox }, headers: { origin: 'https://clinic.example' } });
      expect(ok.status).toBe(201);
      expect(ok.headers.get('access-control-allow-origin')).toBe('*');
      expect(ok.headers.get('access-control-expose-headers')).toBe('retry-after');
      const bad = await app.api.request('POST', '/widget/v1/sessions', { body: { environmentId: 'nope' }, headers: { origin: 'https://clinic.example' } });
      expect(bad.status).toBe(400);
      expect(bad.body.code).toBe('VALIDATION_FAILED');
      expect(bad.headers.get('access-control-allow-origin')).toBe('*');
      const unauthenticated = await app.api.request('POST', '/widget/v1/messages', { body: { message: 'hi' }, headers: { origin: 'https://clinic.example' } });
      expect(unauthenticated.status).toBe(401);
      expect(unauthenticated.headers.get('access-control-allow-origin')).toBe('*');
      // Without an Origin (not a browser's cross-origin call) nothing is added.
      expect((await app.api.post('/widget/v1/sessions', { environmentId: t.sandbox })).headers.get('access-control-allow-origin')).toBeNull();
    });

    it('never lets a browser call API-key routes, staff routes or the dev tools cross-origin: no CORS header, preflight 404', async () => {
      const t = await app.tenant();
      for (const path of ['/v1/ping', '/v1/patients/events', `/organizations/${t.orgId}`, '/dev/staff-tokens']) {
        const p = await preflight(app, path, 'https://clinic.example');
        expect({ path, status: p.status, code: p.body?.code }).toEqual({ path, status: 404, code: 'NOT_FOUND' });
        expect(p.headers.get('access-control-allow-origin')).toBeNull();
      }
      const ping = await app.api.request('GET', '/v1/ping', { token: t.apiKey, headers: { origin: 'https://clinic.example' } });
      expect(ping.status).toBe(200);
      expect(ping.headers.get('access-control-allow-origin')).toBeNull();
      expect(ping.headers.get('vary')).toBeNull();
      const org = await app.api.request('GET', `/organizations/${t.orgId}`, { token: t.staff, headers: { origin: 'https://clinic.example' } });
      expect(org.status).toBe(200);
      expect(org.headers.get('access-control-allow-origin')).toBeNull();
      // An OPTIONS that is not a preflight is an unknown route, on the widget too.
      expect((await app.api.request('OPTIONS', '/widget/v1/messages')).status).toBe(404);
    });
  });

  describeInProcess('origins configured for this service alone')('configured: WIDGET_ALLOWED_ORIGINS and STAFF_APP_ORIGINS', () => {
    const app = new TestApp(undefined, {
      WIDGET_ALLOWED_ORIGINS: 'https://clinic.example, https://portal.clinic.example:8443',
      STAFF_APP_ORIGINS: 'https://staff.example',
    });
    beforeAll(() => app.start());
    afterAll(() => app.stop());

    it('allows only the listed origins, echoing the origin and varying on it', async () => {
      const yes = await preflight(app, '/widget/v1/messages', 'https://portal.clinic.example:8443');
      expect(yes.status).toBe(204);
      expect(yes.headers.get('access-control-allow-origin')).toBe('https://portal.clinic.example:8443');
      expect(yes.headers.get('vary')).toBe('Origin');
      const no = await preflight(app, '/widget/v1/messages', 'https://evil.example');
      expect(no.status).toBe(404);
      expect(no.headers.get('access-control-allow-origin')).toBeNull();
      const t = await app.tenant();
      const call = await app.api.request('POST', '/widget/v1/sessions', { body: { environmentId: t.sandbox }, headers: { origin: 'https://evil.example' } });
      expect(call.status).toBe(201); // served (CORS is the browser's check), but the page may not read it
      expect(call.headers.get('access-control-allow-origin')).toBeNull();
      expect(call.headers.get('vary')).toBe('Origin');
    });

    it('lets the staff app call the staff API, and only it', async () => {
      const t = await app.tenant();
      const p = await preflight(
        app,
        `/organizations/${t.orgId}/environments/${t.sandbox}/api-keys`,
        'https://staff.example',
        'DELETE',
        'authorization, content-type',
      );
      expect(p.status).toBe(204);
      expect(p.headers.get('access-control-allow-origin')).toBe('https://staff.example');
      expect(p.headers.get('access-control-allow-methods')).toBe('GET, POST, PUT, PATCH, DELETE');
      expect(p.headers.get('access-control-allow-headers')).toBe('authorization, content-type');
      expect((await preflight(app, '/organizations', 'https://staff.example')).status).toBe(204);
      const org = await app.api.request('GET', `/organizations/${t.orgId}`, { token: t.staff, headers: { origin: 'https://staff.example' } });
      expect(org.status).toBe(200);
      expect(org.headers.get('access-control-allow-origin')).toBe('https://staff.example');
      expect((await preflight(app, `/organizations/${t.orgId}`, 'https://clinic.example')).status).toBe(404);
      expect((await preflight(app, '/organizationsx', 'https://staff.example')).status).toBe(404);
      expect((await preflight(app, '/v1/ping', 'https://staff.example')).status).toBe(404);
    });
  });

  it('refuses to start with an origin list it cannot read', () => {
    for (const bad of [
      'clinic.example',
      'https://clinic.example/',
      'https://clinic.example/widget',
      'ftp://clinic.example',
      'https://a.example, *',
      ',',
      ' , ',
    ]) {
      expect(() => loadConfig({ WIDGET_ALLOWED_ORIGINS: bad })).toThrow(/WIDGET_ALLOWED_ORIGINS/);
    }
    expect(() => loadConfig({ STAFF_APP_ORIGINS: '*' })).toThrow(/STAFF_APP_ORIGINS/);
    expect(loadConfig({ WIDGET_ALLOWED_ORIGINS: 'https://a.example,http://localhost:5173' }).cors.widgetOrigins).toEqual([
      'https://a.example',
      'http://localhost:5173',
    ]);
    expect(loadConfig({}).cors).toEqual({ widgetOrigins: '*', staffOrigins: [] });
  });
});

describe('security headers (e2e)', () => {
  const app = new TestApp();
  beforeAll(() => app.start());
  afterAll(() => app.stop());

  it('marks every answer no-store, nosniff and no-referrer: successes, errors and unknown routes', async () => {
    const t = await app.tenant();
    const answers = [
      await app.api.get('/v1/ping', t.apiKey),
      await app.api.get(`/organizations/${t.orgId}`, t.staff),
      await app.api.post(`${t.env}/api-keys`, { name: 'shown once' }, t.staff),
      await app.api.get('/v1/ping'),
      await app.api.get('/no/such/route'),
      await app.api.request('POST', '/widget/v1/sessions', { rawBody: '{"environmentId":', headers: { 'content-type': 'application/json' } }),
      await app.api.request('POST', '/widget/v1/sessions', { rawBody: 'x'.repeat(1_100_000), headers: { 'content-type': 'application/json' } }), // 413
      await app.api.request('POST', '/widget/v1/sessions', { rawBody: 'x', headers: { 'content-type': 'text/plain' } }), // 415
      await app.api.get('/v1/conversations/%E0%A4%A/messages', t.apiKey), // 400 from Fastify's URL decoding
      await app.api.request('OPTIONS', '/widget/v1/messages', { headers: { origin: 'https://clinic.example', 'access-control-request-method': 'POST' } }), // 204 preflight
    ];
    expect(answers.map((r) => r.status)).toEqual([200, 200, 201, 401, 404, 400, 413, 415, 400, 204]);
    for (const r of answers) {
      expect({
        status: r.status,
        cache: r.headers.get('cache-control'),
        sniff: r.headers.get('x-content-type-options'),
        referrer: r.headers.get('referrer-policy'),
      }).toEqual({
        status: r.status,
        cache: 'no-store',
        sniff: 'nosniff',
        referrer: 'no-referrer',
      });
    }
    // Answers written straight to the socket (a request Node cannot parse) carry them too.
    const raw = await new Promise<string>((resolve) => {
      const socket = connect(Number(new URL(app.baseUrl).port), '127.0.0.1', () => socket.write('GARBAGE /api/v1/ping HTTP/1.1\r\n\r\n'));
      let text = '';
      socket.on('data', (d) => (text += d.toString('latin1')));
      socket.on('close', () => resolve(text));
    });
    expect(raw).toMatch(/^HTTP\/1\.1 400 /);
    for (const h of ['cache-control: no-store', 'x-content-type-options: nosniff', 'referrer-policy: no-referrer']) expect(raw.toLowerCase()).toContain(h);
    // So do the answers Node gives before any route: an Expect it does not know (417).
    const rawAnswer = (request: string) =>
      new Promise<string>((resolve) => {
        const socket = connect(Number(new URL(app.baseUrl).port), '127.0.0.1', () => socket.write(request));
        let text = '';
        socket.on('data', (d) => (text += d.toString('latin1')));
        socket.on('close', () => resolve(text));
      });
    const expectation = await rawAnswer('GET /api/v1/ping HTTP/1.1\r\nHost: x\r\nExpect: foo\r\nConnection: close\r\n\r\n');
    expect(expectation).toMatch(/^HTTP\/1\.1 417 /);
    for (const h of ['cache-control: no-store', 'x-content-type-options: nosniff', 'referrer-policy: no-referrer'])
      expect(expectation.toLowerCase()).toContain(h);
    expect(JSON.parse(expectation.slice(expectation.indexOf('\r\n\r\n') + 4))).toEqual({ code: 'EXPECTATION_FAILED', message: expect.any(String) });
  });
});
