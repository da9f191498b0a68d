import { randomUUID } from 'node:crypto';
import Redis from 'ioredis';
import { JWTPayload, SignJWT } from 'jose';
import { TestApp } from '@svc/testing';

/**
 * docs/decisions.md "Widget sessions and identity tokens": an identity token opens at most one
 * session (its `jti`, or the token itself when it has none, is remembered until the token expires,
 * across restarts); an identified session ends no later than an hour after the token's `exp`, and
 * at once when the environment's `identity_token` secret is rotated. On the SQLite read store and on
 * Redis (distributed mode's, where the guard's organization read and the rotation's count meet).
 */
const redisPrefix = `svc-e2e-identity-${randomUUID()}`;
const stores: [string, Record<string, string>][] = [
  ['SQLite read store', {}],
  ['Redis read store', { READ_STORE: 'redis', REDIS_URL: 'redis://127.0.0.1:6379', REDIS_KEY_PREFIX: redisPrefix }],
];

afterAll(async () => {
  const redis = new Redis('redis://127.0.0.1:6379');
  const keys = await redis.keys(`${redisPrefix}:*`);
  if (keys.length) await redis.del(...keys);
  redis.disconnect();
});

/** An identity token as the caller's backend signs it; `jti: null` leaves the claim out. */
async function mint(secret: string, opts: { sub?: string; iat: number; lifetime?: number; jti?: string | number | null }): Promise<string> {
  const jwt = new SignJWT(opts.jti === null || opts.jti === undefined ? {} : ({ jti: opts.jti } as unknown as JWTPayload))
    .setProtectedHeader({ alg: 'HS256' })
    .setSubject(opts.sub ?? 'ext-replay-patient')
    .setIssuedAt(opts.iat)
    .setExpirationTime(opts.iat + (opts.lifetime ?? 300));
  return jwt.sign(new TextEncoder().encode(secret));
}

describe.each(stores)('widget identity tokens: one session each, bounded lifetime, ended by rotation (e2e, real HTTP, %s)', (_name, env) => {
  const app = new TestApp(undefined, env);
  beforeAll(() => app.start());
  afterAll(() => app.stop());

  const nowS = async () => Math.floor(Date.parse(await app.advanceClock(0)) / 1000);
  const open = (environmentId: string, identityToken?: string) =>
    app.api.post('/widget/v1/sessions', { environmentId, ...(identityToken !== undefined ? { identityToken } : {}) });
  /** A request that needs the session: 201 while it lives. */
  const use = (sessionToken: string) => app.api.post('/widget/v1/messages', { message: 'Hello' }, sessionToken);

  it('a second use of one token is 401 INVALID_IDENTITY_TOKEN, with or without jti, also after a restart', async () => {
    const t = await app.tenant();
    const secret = (await app.api.post(`${t.env}/secrets/rotate`, { kind: 'identity_token' }, t.staff)).body.secret as string;
    const now = await nowS();

    const jti = randomUUID();
    const withJti = await mint(secret, { iat: now, jti });
    const first = await open(t.sandbox, withJti);
    expect(first.status).toBe(201);
    const again = await open(t.sandbox, withJti);
    expect(again.status).toBe(401);
    expect(again.body.code).toBe('INVALID_IDENTITY_TOKEN');
    // Another token carrying the same jti is the same identity token as far as the rule goes.
    const sameJti = await mint(secret, { sub: 'ext-other', iat: now - 1, jti });
    expect((await open(t.sandbox, sameJti)).body.code).toBe('INVALID_IDENTITY_TOKEN');
    // A fresh jti opens its own session.
    expect((await open(t.sandbox, await mint(secret, { iat: now, jti: randomUUID() }))).status).toBe(201);

    // Without jti the token itself is what is remembered.
    const noJti = await mint(secret, { iat: now - 2, jti: null });
    expect((await open(t.sandbox, noJti)).status).toBe(201);
    const noJtiAgain = await open(t.sandbox, noJti);
    expect(noJtiAgain.status).toBe(401);
    expect(noJtiAgain.body.code).toBe('INVALID_IDENTITY_TOKEN');
    // ... and so is the same token with its signature spelled differently (base64url's spare bits).
    const [h, p, s] = noJti.split('.');
    const last = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_'.indexOf(s[s.length - 1]);
    const respelled = `${h}.${p}.${s.slice(0, -1)}${'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_'[last ^ 1]}`;
    expect((await open(t.sandbox, respelled)).body.code).toBe('INVALID_IDENTITY_TOKEN');
    // A different token without jti (another iat) opens its own session.
    expect((await open(t.sandbox, await mint(secret, { iat: now - 3, jti: null }))).status).toBe(201);

    // A jti that is not a string cannot be remembered as the caller meant it: refused.
    const numeric = await open(t.sandbox, await mint(secret, { iat: now, jti: 12345 }));
    expect(numeric.status).toBe(401);
    expect(numeric.body.code).toBe('INVALID_IDENTITY_TOKEN');

    // The memory is durable: a restart does not forget a used token.
    await app.restart();
    expect((await open(t.sandbox, withJti)).body.code).toBe('INVALID_IDENTITY_TOKEN');
    expect((await open(t.sandbox, noJti)).body.code).toBe('INVALID_IDENTITY_TOKEN');

    // Remembered until the token expires (plus the minute of clock tolerance): afterwards the jti
    // may name a new token.
    await app.advanceClock(300 + 61);
    const later = await nowS();
    expect((await open(t.sandbox, withJti)).body.code).toBe('INVALID_IDENTITY_TOKEN'); // expired anyway
    expect((await open(t.sandbox, await mint(secret, { iat: later, jti }))).status).toBe(201);
  });

  it('two simultaneous uses of one token: exactly one 201', async () => {
    const t = await app.tenant();
    const secret = (await app.api.post(`${t.env}/secrets/rotate`, { kind: 'identity_token' }, t.staff)).body.secret as string;
    const now = await nowS();
    for (const token of [await mint(secret, { iat: now, jti: randomUUID() }), await mint(secret, { iat: now, jti: null })]) {
      const answers = await Promise.all(Array.from({ length: 8 }, () => open(t.sandbox, token)));
      expect(answers.map((a) => a.status).filter((s) => s === 201)).toHaveLength(1);
      const refused = answers.filter((a) => a.status !== 201);
      expect(refused.map((a) => [a.status, a.body.code])).toEqual(Array.from({ length: 7 }, () => [401, 'INVALID_IDENTITY_TOKEN']));
    }
  });

  it('an identified session ends no later than an hour after its token expires; expiresAt is when it ends', async () => {
    const t = await app.tenant();
    const secret = (await app.api.post(`${t.env}/secrets/rotate`, { kind: 'identity_token' }, t.staff)).body.secret as string;
    const now = await nowS();

    // Anonymous sessions keep their hour from opening.
    const anon = await open(t.sandbox);
    expect(anon.status).toBe(201);
    // An hour from the second it opened in (the service's clock may tick between the two reads).
    const opened = Date.parse(anon.body.expiresAt) / 1000 - 3600;
    expect(opened).toBeGreaterThanOrEqual(now);
    expect(opened).toBeLessThanOrEqual(await nowS());

    // A token whose exp just passed (inside the minute of clock tolerance) is still taken, but its
    // session may only run until exp + 60 minutes, not an hour from now.
    const exp = now - 30;
    const late = await open(t.sandbox, await mint(secret, { iat: exp - 270, lifetime: 270, jti: randomUUID() }));
    expect(late.status).toBe(201);
    expect(late.body.expiresAt).toBe(new Date((exp + 3600) * 1000).toISOString());

    // A fresh token: an hour from opening, which is before exp + 60 minutes.
    const fresh = await open(t.sandbox, await mint(secret, { iat: now, lifetime: 600, jti: randomUUID() }));
    expect(fresh.status).toBe(201);
    expect(Date.parse(fresh.body.expiresAt)).toBeLessThanOrEqual((now + 600 + 3600) * 1000);
    expect(Date.parse(fresh.body.expiresAt) / 1000 - 3600).toBeGreaterThanOrEqual(now);
    expect(Date.parse(fresh.body.expiresAt) / 1000 - 3600).toBeLessThanOrEqual(await nowS());

    // Just before the late session's expiresAt it works; just after, it is over.
    await app.advanceClock(Date.parse(late.body.expiresAt) / 1000 - now - 5);
    expect((await use(late.body.sessionToken)).status).toBe(201);
    await app.advanceClock(10);
    const over = await use(late.body.sessionToken);
    expect(over.status).toBe(401);
    expect(over.body.code).toBe('SESSION_REQUIRED');
    // The fresh one and the anonymous one are still within their hour, then end on time too.
    expect((await use(fresh.body.sessionToken)).status).toBe(201);
    expect((await use(anon.body.sessionToken)).status).toBe(201);
    await app.advanceClock(30);
    expect((await use(fresh.body.sessionToken)).body.code).toBe('SESSION_REQUIRED');
    expect((await use(anon.body.sessionToken)).body.code).toBe('SESSION_REQUIRED');
  });

  it('rotating identity_token ends the identified sessions of that environment at once; anonymous sessions and other environments go on', async () => {
    const t = await app.tenant();
    const secret = (await app.api.post(`${t.env}/secrets/rotate`, { kind: 'identity_token' }, t.staff)).body.secret as string;
    const prodEnv = `/organizations/${t.orgId}/environments/${t.production}`;
    const prodSecret = (await app.api.post(`${prodEnv}/secrets/rotate`, { kind: 'identity_token' }, t.staff)).body.secret as string;
    const now = await nowS();

    const identified = await open(t.sandbox, await mint(secret, { iat: now, jti: randomUUID() }));
    expect(identified.status).toBe(201);
    // A token without jti, used before the rotation: the same claims signed with the new secret are another token.
    expect((await open(t.sandbox, await mint(secret, { iat: now, jti: null }))).status).toBe(201);
    const anon = await open(t.sandbox);
    const elsewhere = await open(t.production, await mint(prodSecret, { iat: now, jti: randomUUID() }));
    expect(elsewhere.status).toBe(201);
    expect((await use(identified.body.sessionToken)).status).toBe(201);

    // Rotating the other secret ends nothing.
    expect((await app.api.post(`${t.env}/secrets/rotate`, { kind: 'widget_signing' }, t.staff)).status).toBe(201);
    expect((await use(identified.body.sessionToken)).status).toBe(201);

    const rotated = await app.api.post(`${t.env}/secrets/rotate`, { kind: 'identity_token' }, t.staff);
    expect(rotated.status).toBe(201);
    const ended = await use(identified.body.sessionToken);
    expect(ended.status).toBe(401);
    expect(ended.body.code).toBe('SESSION_REQUIRED');
    expect((await use(anon.body.sessionToken)).status).toBe(201);
    expect((await use(elsewhere.body.sessionToken)).status).toBe(201);

    // Tokens signed with the old secret are refused; the new secret opens sessions that work.
    expect((await open(t.sandbox, await mint(secret, { iat: now, jti: randomUUID() }))).body.code).toBe('INVALID_IDENTITY_TOKEN');
    const renewed = await open(t.sandbox, await mint(rotated.body.secret, { iat: now, jti: randomUUID() }));
    expect(renewed.status).toBe(201);
    expect((await use(renewed.body.sessionToken)).status).toBe(201);
    expect((await open(t.sandbox, await mint(rotated.body.secret, { iat: now, jti: null }))).status).toBe(201);

    await app.restart();
    expect((await use(identified.body.sessionToken)).body.code).toBe('SESSION_REQUIRED');
    expect((await use(renewed.body.sessionToken)).status).toBe(201);
  });
});
