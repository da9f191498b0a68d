import { SignJWT } from 'jose';
import { randomUUID } from 'node:crypto';
import { TestApp } from '@svc/testing';
import { created, protocolBody } from '../../apps/patient-pathway/test/e2e-helpers';

/** A fresh `jti` each time: a token opens one session only (see widget-identity-replay.e2e-spec.ts). */
async function identityToken(secret: string, claims: { sub: string; email?: string }, iat: number, lifetime = 300) {
  return new SignJWT({ jti: randomUUID(), ...(claims.email ? { email: claims.email } : {}) })
    .setProtectedHeader({ alg: 'HS256' })
    .setSubject(claims.sub)
    .setIssuedAt(iat)
    .setExpirationTime(iat + lifetime)
    .sign(new TextEncoder().encode(secret));
}

describe('widget sessions (e2e, real HTTP)', () => {
  const app = new TestApp();
  beforeAll(() => app.start());
  afterAll(() => app.stop());

  it('signs a patient in with an identity token, or starts an anonymous session', async () => {
    const t = await app.tenant();
    const rotated = await app.api.post(`${t.env}/secrets/rotate`, { kind: 'identity_token' }, t.staff);
    expect(rotated.status).toBe(201);
    const secret = rotated.body.secret as string;
    const now = Math.floor(Date.parse(await app.advanceClock(0)) / 1000);

    const anon = await app.api.post('/widget/v1/sessions', { environmentId: t.sandbox });
    expect(anon.status).toBe(201);
    // An environment id in capitals is the same environment.
    expect((await app.api.post('/widget/v1/sessions', { environmentId: t.sandbox.toUpperCase() })).status).toBe(201);
    // identityToken is a string when sent: null breaks the contract (400), it is not "anonymous".
    const nullToken = await app.api.post('/widget/v1/sessions', { environmentId: t.sandbox, identityToken: null });
    expect(nullToken.status).toBe(400);
    expect(nullToken.body.code).toBe('VALIDATION_FAILED');
    expect(new Set(nullToken.body.details.map((d: { path: string }) => d.path))).toEqual(new Set(['identityToken']));
    expect(anon.body).toEqual({ sessionToken: expect.any(String), patientId: null, expiresAt: expect.any(String) });

    const token = await identityToken(secret, { sub: 'ext-canary-991', email: 'pat@example.test' }, now);
    const signedIn = await app.api.post('/widget/v1/sessions', { environmentId: t.sandbox, identityToken: token });
    expect(signedIn.status).toBe(201);
    // The session token does not reveal the external ID or email.
    expect(signedIn.body.sessionToken).not.toContain('ext-canary-991');
    expect(Buffer.from(signedIn.body.sessionToken.split('.')[0], 'base64url').toString()).not.toContain('ext-canary');

    const wrongSecret = await identityToken('not-the-secret', { sub: 'x' }, now);
    const bad = await app.api.post('/widget/v1/sessions', { environmentId: t.sandbox, identityToken: wrongSecret });
    expect(bad.status).toBe(401);
    expect(bad.body.code).toBe('INVALID_IDENTITY_TOKEN');

    const tooLong = await identityToken(secret, { sub: 'x' }, now, 3600);
    expect((await app.api.post('/widget/v1/sessions', { environmentId: t.sandbox, identityToken: tooLong })).body.code).toBe('INVALID_IDENTITY_TOKEN');

    // An identity token expires with the service clock.
    const soon = await identityToken(secret, { sub: 'x' }, now, 60);
    await app.advanceClock(120);
    expect((await app.api.post('/widget/v1/sessions', { environmentId: t.sandbox, identityToken: soon })).body.code).toBe('INVALID_IDENTITY_TOKEN');

    // An identity token issued in the future (to live long) is refused.
    const future = await identityToken(secret, { sub: 'x' }, now + 365 * 86400, 300);
    expect((await app.api.post('/widget/v1/sessions', { environmentId: t.sandbox, identityToken: future })).body.code).toBe('INVALID_IDENTITY_TOKEN');
    // ... but a caller's clock a few seconds ahead is tolerated (up to a minute).
    const clockNow = Math.floor(new Date(await app.advanceClock(0)).getTime() / 1000);
    const skewed = await identityToken(secret, { sub: 'x' }, clockNow + 30, 300);
    expect((await app.api.post('/widget/v1/sessions', { environmentId: t.sandbox, identityToken: skewed })).status).toBe(201);
    const tooFar = await identityToken(secret, { sub: 'x' }, clockNow + 120, 300);
    expect((await app.api.post('/widget/v1/sessions', { environmentId: t.sandbox, identityToken: tooFar })).body.code).toBe('INVALID_IDENTITY_TOKEN');

    expect((await app.api.post('/widget/v1/sessions', { environmentId: '00000000-0000-4000-8000-000000000000' })).status).toBe(404);
    expect((await app.api.post('/widget/v1/sessions', { environmentId: 'nope' })).status).toBe(400);
  });

  it('links an enrolled patient, and only while the pathway is active', async () => {
    const t = await app.tenant();
    const protocol = await app.api.post(`${t.env}/protocols`, protocolBody('widget-check'), t.staff);
    expect((await app.api.post(`${t.env}/protocols/${protocol.body.id}/activate`, undefined, t.staff)).status).toBe(200);
    const enrolled = await app.api.post('/client/patient-events', created('ext-widget-1', 'w1@example.test'), t.apiKey);
    expect(enrolled.status).toBe(202);
    const secret = (await app.api.post(`${t.env}/secrets/rotate`, { kind: 'identity_token' }, t.staff)).body.secret as string;
    const now = Math.floor(Date.parse(await app.advanceClock(0)) / 1000);

    const session = await app.api.post('/widget/v1/sessions', {
      environmentId: t.sandbox,
      identityToken: await identityToken(secret, { sub: 'ext-widget-1' }, now),
    });
    expect(session.status).toBe(201);
    expect(session.body.patientId).toBe(enrolled.body.patientId);

    const stranger = await app.api.post('/widget/v1/sessions', {
      environmentId: t.sandbox,
      identityToken: await identityToken(secret, { sub: 'ext-unknown' }, now),
    });
    expect(stranger.body.patientId).toBeNull();

    const cancelled = await app.api.post(
      '/client/patient-events',
      { eventId: randomUUID(), type: 'patient.cancelled', externalPatientId: 'ext-widget-1' },
      t.apiKey,
    );
    expect(cancelled.status).toBe(202);
    const after = await app.api.post('/widget/v1/sessions', {
      environmentId: t.sandbox,
      identityToken: await identityToken(secret, { sub: 'ext-widget-1' }, now),
    });
    expect(after.body.patientId).toBeNull();
  });

  it('refuses sessions before the BAA is signed', async () => {
    const t = await app.tenant({ baa: false });
    const r = await app.api.post('/widget/v1/sessions', { environmentId: t.sandbox });
    expect(r.status).toBe(403);
    expect(r.body.code).toBe('BAA_REQUIRED');
  });
});
