import { connect } from 'node:net';
import { OidcIssuer, TestApp } from '@svc/testing';
import { rawRequest } from './case-helpers';

/** Issue 2, "Must show": access control over real HTTP, and a restart on the same data dir. */
describe('gateway access (e2e, real HTTP)', () => {
  const app = new TestApp();
  beforeAll(() => app.start());
  afterAll(() => app.stop());

  it('walks the whole access story', async () => {
    const api = app.api;
    const owner = await app.staffToken({ sub: 'owner-1' });

    const org = await api.post('/organizations', { name: 'Northwind Clinic' }, owner);
    expect(org.status).toBe(201);
    expect(org.body).toMatchObject({ name: 'Northwind Clinic', baaSignedAt: null });
    expect(org.body.environments.map((e: { kind: string }) => e.kind)).toEqual(['sandbox', 'production']);
    const orgId = org.body.id;
    const [sandbox, production] = org.body.environments.map((e: { id: string }) => e.id);

    const got = await api.get(`/organizations/${orgId}`, owner);
    expect(got.status).toBe(200);
    expect(got.body).toEqual(org.body);

    // API key before the BAA: 403 BAA_REQUIRED.
    const key = await api.post(`/organizations/${orgId}/environments/${sandbox}/api-keys`, { name: 'server' }, owner);
    expect(key.status).toBe(201);
    expect(key.body.key).toMatch(/^svc_sb_/);
    expect(key.body.prefix).toBe(key.body.key.slice(0, key.body.prefix.length));
    const before = await api.get('/v1/ping', key.body.key);
    expect(before.status).toBe(403);
    expect(before.body).toEqual({ code: 'BAA_REQUIRED', message: expect.any(String) });

    // A member may not sign: 403 ROLE_REQUIRED.
    expect((await api.post(`/organizations/${orgId}/members`, { sub: 'member-1', email: 'm1@example.test', role: 'member' }, owner)).status).toBe(201);
    const member = await app.staffToken({ sub: 'member-1' });
    const memberSign = await api.post(`/organizations/${orgId}/baa`, { signerName: 'Mo Member', signerTitle: 'Nurse' }, member);
    expect(memberSign.status).toBe(403);
    expect(memberSign.body.code).toBe('ROLE_REQUIRED');

    // Owner signs: 201; again: 200 with the first time.
    const signed = await api.post(`/organizations/${orgId}/baa`, { signerName: 'Ada Owner', signerTitle: 'CEO' }, owner);
    expect(signed.status).toBe(201);
    const again = await api.post(`/organizations/${orgId}/baa`, { signerName: 'Ada Owner', signerTitle: 'CEO' }, owner);
    expect(again.status).toBe(200);
    expect(again.body.baaSignedAt).toBe(signed.body.baaSignedAt);

    // The same key works at once.
    const ping = await api.get('/v1/ping', key.body.key);
    expect(ping.status).toBe(200);
    expect(ping.body).toEqual({ organizationId: orgId, environmentId: sandbox, environmentKind: 'sandbox' });

    // Listing never shows secrets.
    const list = await api.get(`/organizations/${orgId}/environments/${sandbox}/api-keys`, owner);
    expect(list.status).toBe(200);
    expect(list.body.apiKeys).toHaveLength(1);
    // Path uuids in capitals name the same organization and environment.
    const shouted = await api.get(`/organizations/${orgId.toUpperCase()}/environments/${sandbox.toUpperCase()}/api-keys`, owner);
    expect(shouted.status).toBe(200);
    expect(shouted.body).toEqual(list.body);
    expect((await api.get(`/organizations/${orgId.toUpperCase()}`, owner)).body).toEqual({ ...org.body, baaSignedAt: signed.body.baaSignedAt });
    expect(JSON.stringify(list.body)).not.toContain(key.body.key);

    // Revoked key: 401.
    expect((await api.delete(`/organizations/${orgId}/environments/${sandbox}/api-keys/${key.body.id}`, owner)).status).toBe(204);
    const revoked = await api.get('/v1/ping', key.body.key);
    expect(revoked.status).toBe(401);
    expect(revoked.body.code).toBe('INVALID_API_CREDENTIAL');

    // Production key: prefix, and it reads its own environment only.
    const prodKey = await api.post(`/organizations/${orgId}/environments/${production}/api-keys`, { name: 'prod' }, owner);
    expect(prodKey.body.key).toMatch(/^svc_prod_/);
    expect((await api.get('/v1/ping', prodKey.body.key)).body.environmentId).toBe(production);

    // A production key gets 404 on a sandbox resource (a sandbox case), the sandbox key reads it.
    const sandboxKey = await api.post(`/organizations/${orgId}/environments/${sandbox}/api-keys`, { name: 'sandbox-2' }, owner);
    const sandboxEnv = `/organizations/${orgId}/environments/${sandbox}`;
    const { patientId } = await app.enrolledPatient({ staff: owner, env: sandboxEnv, apiKey: sandboxKey.body.key });
    const opened = await api.post(`${sandboxEnv}/clinical-cases`, { patientId, request: 'Please review the dosage' }, owner);
    expect(opened.status).toBe(201);
    const progressPath = `/v1/clinical-cases/${opened.body.caseId}/progress`;
    expect((await api.get(progressPath, sandboxKey.body.key)).status).toBe(200);
    const crossEnv = await api.get(progressPath, prodKey.body.key);
    expect(crossEnv.status).toBe(404);
    expect(crossEnv.body.code).toBe('NOT_FOUND');

    // API key on a staff endpoint: 401.
    const keyOnStaff = await api.get(`/organizations/${orgId}`, prodKey.body.key);
    expect(keyOnStaff.status).toBe(401);
    expect(keyOnStaff.body.code).toBe('STAFF_AUTH_REQUIRED');

    // Staff token without integrations.manage: 403 PERMISSION_REQUIRED.
    const noPerm = await app.staffToken({ sub: 'owner-1', permissions: [] });
    const denied = await api.post(`/organizations/${orgId}/environments/${sandbox}/api-keys`, { name: 'x' }, noPerm);
    expect(denied.status).toBe(403);
    expect(denied.body.code).toBe('PERMISSION_REQUIRED');

    // Token without MFA: 403 MFA_REQUIRED on a write, reads still work.
    const noMfa = await app.staffToken({ sub: 'owner-1', mfa: false });
    const write = await api.post(`/organizations/${orgId}/environments/${sandbox}/api-keys`, { name: 'x' }, noMfa);
    expect(write.status).toBe(403);
    expect(write.body.code).toBe('MFA_REQUIRED');
    expect((await api.get(`/organizations/${orgId}`, noMfa)).status).toBe(200);

    // Not a member: 404. Unknown environment: 404.
    const stranger = await app.staffToken({ sub: 'stranger' });
    expect((await api.get(`/organizations/${orgId}`, stranger)).status).toBe(404);
    expect((await api.get(`/organizations/${orgId}/environments/00000000-0000-4000-8000-000000000000/api-keys`, owner)).status).toBe(404);

    // Secrets rotate and are shown once.
    const rotated = await api.post(`/organizations/${orgId}/environments/${sandbox}/secrets/rotate`, { kind: 'widget_signing' }, owner);
    expect(rotated.status).toBe(201);
    expect(rotated.body).toEqual({ kind: 'widget_signing', secret: expect.any(String) });

    // Restart on the same data dir: organizations, keys and BAA state are still there.
    await app.restart();
    const afterOrg = await app.api.get(`/organizations/${orgId}`, owner);
    expect(afterOrg.status).toBe(200);
    expect(afterOrg.body.baaSignedAt).toBe(signed.body.baaSignedAt);
    expect((await app.api.get('/v1/ping', prodKey.body.key)).status).toBe(200);
    expect((await app.api.get('/v1/ping', key.body.key)).status).toBe(401);
  });

  it("keeps staff whose sub is named like an object's inherited member out of organizations they do not belong to (404), and lets them in once added", async () => {
    const api = app.api;
    const owner = await app.staffToken({ sub: 'owner-proto' });
    const org = await api.post('/organizations', { name: 'Inherited Names Clinic' }, owner);
    const orgId = org.body.id;
    const env = `/organizations/${orgId}/environments/${org.body.environments[0].id}`;
    for (const sub of ['constructor', '__proto__', 'toString', 'hasOwnProperty', 'valueOf', 'isPrototypeOf', '__defineGetter__']) {
      const stranger = await app.staffToken({ sub });
      const calls = [
        await api.get(`/organizations/${orgId}`, stranger),
        await api.get(`${env}/api-keys`, stranger),
        await api.post(`${env}/api-keys`, { name: 'not yours' }, stranger),
        await api.post(`${env}/secrets/rotate`, { kind: 'identity_token' }, stranger),
        await api.post(`${env}/webhook-endpoints`, { url: 'https://receiver.example/hook', events: ['clinical_case.opened'] }, stranger),
        await api.get(`${env}/clinical-cases`, stranger),
        await api.post(`/organizations/${orgId}/members`, { sub: 'someone', email: 'someone@example.test', role: 'admin' }, stranger),
        await api.post(`/organizations/${orgId}/baa`, { signerName: 'Not A Member', signerTitle: 'None' }, stranger),
        await api.put(`/organizations/${orgId}/plan`, { monthlyCredits: 1 }, stranger),
      ];
      expect({ sub, answers: calls.map((r) => `${r.status} ${r.body?.code}`) }).toEqual({ sub, answers: calls.map(() => '404 NOT_FOUND') });
    }
    expect((await api.get(`${env}/api-keys`, owner)).body.apiKeys).toEqual([]);
    expect((await api.get(`${env}/webhook-endpoints`, owner)).body.webhookEndpoints).toEqual([]);
    // Such a sub is an ordinary identity once it is a member, with the role it was given.
    expect((await api.post(`/organizations/${orgId}/members`, { sub: 'constructor', email: 'c@example.test', role: 'member' }, owner)).status).toBe(201);
    const member = await app.staffToken({ sub: 'constructor' });
    expect((await api.get(`/organizations/${orgId}`, member)).status).toBe(200);
    expect((await api.post(`/organizations/${orgId}/baa`, { signerName: 'Con Structor', signerTitle: 'Member' }, member)).body.code).toBe('ROLE_REQUIRED');
    expect((await api.put(`/organizations/${orgId}/plan`, { monthlyCredits: 5 }, member)).body.code).toBe('ROLE_REQUIRED');
    expect((await api.post(`/organizations/${orgId}/members`, { sub: '__proto__', email: 'p@example.test', role: 'admin' }, owner)).status).toBe(201);
    const admin = await app.staffToken({ sub: '__proto__' });
    expect((await api.put(`/organizations/${orgId}/plan`, { monthlyCredits: 5 }, admin)).status).toBe(200);
    expect((await api.get(`/organizations/${orgId}`, await app.staffToken({ sub: 'toString' }))).status).toBe(404);
  });

  it('answers edge errors with the error body, never 500', async () => {
    const api = app.api;
    const owner = await app.staffToken({ sub: 'owner-edge' });
    const missing = await api.post('/organizations', undefined, undefined);
    expect(missing.status).toBe(401);
    expect(missing.body.code).toBe('STAFF_AUTH_REQUIRED');
    // the credential is judged before the body: no credential and a bad body is still 401
    // (every body problem and route kind: edge-order.e2e-spec.ts)
    const anonymousMalformed = await api.request('POST', '/organizations', { rawBody: '{"name": ' });
    expect(anonymousMalformed.status).toBe(401);
    expect(anonymousMalformed.body).toEqual({ code: 'STAFF_AUTH_REQUIRED', message: expect.any(String) });
    const anonymousText = await api.request('POST', '/client/patient-events', { rawBody: 'name=A', headers: { 'content-type': 'text/plain' } });
    expect(anonymousText.status).toBe(401);
    expect(anonymousText.body).toEqual({ code: 'INVALID_API_CREDENTIAL', message: expect.any(String) });

    const malformed = await api.request('POST', '/organizations', { rawBody: '{"name": ', token: owner });
    expect(malformed.status).toBe(400);
    expect(malformed.body.code).toBe('VALIDATION_FAILED');
    // every VALIDATION_FAILED the edge produces carries details (path "" = the whole body)
    expect(malformed.body.details).toEqual([{ path: '', message: 'malformed JSON' }]);
    const empty = await api.request('POST', '/organizations', { rawBody: '', token: owner });
    expect(empty.status).toBe(400);
    expect(empty.body).toEqual({ code: 'VALIDATION_FAILED', message: expect.any(String), details: [{ path: '', message: 'empty body' }] });
    const poisoned = await api.request('POST', '/organizations', { rawBody: '{"name":"A","__proto__":{"admin":true}}', token: owner });
    expect(poisoned.status).toBe(400);
    expect(poisoned.body).toEqual({
      code: 'VALIDATION_FAILED',
      message: expect.any(String),
      details: [{ path: '', message: expect.stringContaining('__proto__') }],
    });
    const prototypeNamed = await api.request('POST', '/organizations', { rawBody: '{"name":"A","constructor":{"x":1}}', token: owner });
    expect(prototypeNamed.status).toBe(400);
    expect(prototypeNamed.body.details).toEqual([{ path: 'constructor', message: 'unknown field' }]);

    const unknown = await api.post('/organizations', { name: 'A', extra: 1 }, owner);
    expect(unknown.status).toBe(400);
    expect(unknown.body.code).toBe('VALIDATION_FAILED');
    expect(unknown.body.details).toEqual([{ path: 'extra', message: 'unknown field' }]);

    const wrongType = await api.post('/organizations', { name: 42 }, owner);
    expect(wrongType.status).toBe(400);
    expect(wrongType.body.details[0].path).toBe('name');

    const textBody = await api.request('POST', '/organizations', { rawBody: 'name=A', token: owner, headers: { 'content-type': 'text/plain' } });
    expect(textBody.status).toBe(415);
    expect(textBody.body.code).toBe('UNSUPPORTED_MEDIA_TYPE');

    const big = await api.request('POST', '/organizations', { rawBody: JSON.stringify({ name: 'x'.repeat(1024 * 1024 + 10) }), token: owner });
    expect(big.status).toBe(413);
    expect(big.body.code).toBe('PAYLOAD_TOO_LARGE');

    const route = await api.get('/no/such/route');
    expect(route.status).toBe(404);
    expect(route.body.code).toBe('NOT_FOUND');

    const badClock = await api.post('/dev/clock', { advanceSeconds: -5 });
    expect(badClock.status).toBe(400);
    const hugeClock = await api.post('/dev/clock', { advanceSeconds: 9e15 });
    expect(hugeClock.status).toBe(400);
    expect((await api.post('/dev/clock', { advanceSeconds: 0 })).status).toBe(200);

    const deep = await api.request('POST', '/widget/v1/sessions', { rawBody: `{"environmentId":${'{"a":'.repeat(4000)}1${'}'.repeat(4001)}` });
    expect(deep.status).toBe(400);
    expect(deep.body.code).toBe('VALIDATION_FAILED');
    expect(deep.body.details).toEqual([{ path: '', message: 'nested too deeply' }]);
    // a badly percent-encoded URL: the error body of docs/decisions.md, "Errors and the HTTP edge", not Fastify's own
    for (const url of ['/organizations/%zz', '/v1/ping/%zz%', '/widget/v1/check-ins/%E0%A4%A']) {
      const badUrl = await rawRequest(app, 'GET', url, { token: owner });
      expect({ url, status: badUrl.status, body: badUrl.body }).toEqual({
        url,
        status: 400,
        body: { code: 'VALIDATION_FAILED', message: expect.any(String), details: [{ path: 'url', message: expect.any(String) }] },
      });
    }
    // unparseable HTTP (answered before a request exists): the same body, details included
    const garbage = await new Promise<string>((resolve, reject) => {
      const socket = connect(Number(new URL(app.baseUrl).port), '127.0.0.1', () => socket.write('NOT HTTP AT ALL\r\n\r\n'));
      let text = '';
      socket.on('data', (c) => (text += c.toString('utf8')));
      socket.on('close', () => resolve(text));
      socket.on('error', reject);
    });
    expect(garbage).toMatch(/^HTTP\/1\.1 400 /);
    expect(JSON.parse(garbage.slice(garbage.indexOf('\r\n\r\n') + 4))).toEqual({
      code: 'VALIDATION_FAILED',
      message: expect.any(String),
      details: [{ path: '', message: expect.any(String) }],
    });
    const hugeHeader = await api.request('GET', '/v1/ping', { headers: { authorization: `Bearer svc_sb_${'x'.repeat(20000)}` } });
    expect(hugeHeader.status).toBe(431);
    expect(hugeHeader.body).toEqual({ code: 'REQUEST_HEADERS_TOO_LARGE', message: expect.any(String) });

    // not a uuid: 400 naming the parameter (docs/decisions.md, "Path parameters")
    const longId = await api.get(`/organizations/${'x'.repeat(300)}`, owner);
    expect(longId.status).toBe(400);
    expect(longId.body).toMatchObject({ code: 'VALIDATION_FAILED', details: [{ path: 'orgId' }] });
    // over the router's 2048-character parameter limit: 404 with the error body too, not Fastify's
    const longerId = await api.get(`/organizations/${'x'.repeat(3000)}`, owner);
    expect(longerId.status).toBe(404);
    expect(longerId.body).toEqual({ code: 'NOT_FOUND', message: expect.any(String) });
    const badKey = await api.get('/v1/ping', 'svc_sb_nope');
    expect(badKey.status).toBe(401);
    expect(badKey.body.code).toBe('INVALID_API_CREDENTIAL');
    const noKey = await api.get('/v1/ping');
    expect(noKey.status).toBe(401);
    expect(noKey.body.code).toBe('INVALID_API_CREDENTIAL');
  });
});

describe('production mode', () => {
  const oidc = new OidcIssuer();
  // SVC_DEV_TOOLS=1 must not bring the dev tools back in production mode (docs/decisions.md, "Dev tools and the dev clock").
  const app = new TestApp(
    undefined,
    { NODE_ENV: 'production', SVC_DEV_TOOLS: '1', SVC_MASTER_KEY: Buffer.alloc(32, 7).toString('base64'), WIDGET_BASE_URL: 'https://care.example.test/api' },
    oidc,
  );
  beforeAll(async () => {
    await oidc.start();
    await app.start();
  });
  afterAll(async () => {
    await app.stop();
    await oidc.stop();
  });

  it('has no dev tools, even with SVC_DEV_TOOLS=1', async () => {
    const dev = [
      await app.api.post('/dev/staff-tokens', { sub: 'a', email: 'a@example.test' }),
      await app.api.post('/dev/clock', { advanceSeconds: 1 }),
      await app.api.get('/dev/outbox'),
    ];
    for (const r of dev) expect(r.status === 404 && r.body.code === 'NOT_FOUND').toBe(true);
  });

  it('signs staff in through the configured OIDC issuer only (JWKS fetched from it)', async () => {
    const token = await oidc.token({ sub: 'prod-owner' });
    const org = await app.api.post('/organizations', { name: 'Prod Clinic' }, token);
    expect(org.status).toBe(201);
    expect(oidc.jwksRequests).toBeGreaterThan(0);
    expect((await app.api.get(`/organizations/${org.body.id}`, token)).status).toBe(200);
    // Another audience, or a token the dev issuer would have minted (none exists here), is refused.
    const otherAudience = await app.api.post('/organizations', { name: 'X' }, await oidc.token({ sub: 'prod-owner', audience: 'someone-else' }));
    expect(otherAudience.status).toBe(401);
    expect(otherAudience.body.code).toBe('STAFF_AUTH_REQUIRED');
    // Writes still need MFA.
    const noMfa = await app.api.post('/organizations', { name: 'Y' }, await oidc.token({ sub: 'prod-owner', mfa: false }));
    expect(noMfa.status).toBe(403);
    expect(noMfa.body.code).toBe('MFA_REQUIRED');
  });
});

describe('a configured staff issuer outside production', () => {
  const oidc = new OidcIssuer();
  const app = new TestApp(undefined, {}, oidc); // NODE_ENV=test: dev tools on
  beforeAll(async () => {
    await oidc.start();
    await app.start();
  });
  afterAll(async () => {
    await app.stop();
    await oidc.stop();
  });

  it('accepts only its tokens: a dev token minted for the same sub cannot sign in beside it', async () => {
    const real = await oidc.token({ sub: 'staff-real' });
    const org = await app.api.post('/organizations', { name: 'Real Clinic' }, real);
    expect(org.status).toBe(201);
    const dev = await app.api.post('/dev/staff-tokens', { sub: 'staff-real', email: 'staff-real@example.test' });
    expect(dev.status).toBe(201);
    const impersonation = await app.api.get(`/organizations/${org.body.id}`, dev.body.idToken);
    expect(impersonation.status).toBe(401);
    expect(impersonation.body.code).toBe('STAFF_AUTH_REQUIRED');
    expect((await app.api.get(`/organizations/${org.body.id}`, real)).status).toBe(200);
  });
});
