import { randomUUID } from 'node:crypto';
import Redis from 'ioredis';
import { TestApp } from '@svc/testing';

/**
 * The whole service on the Redis read store (READ_STORE=redis, the distributed read models) with the
 * Redis at 127.0.0.1:6379: access control, a case with its progress read right after each write, and
 * a restart that keeps everything.
 */
describe('standalone on the Redis read store (e2e)', () => {
  const prefix = `svc-e2e-${randomUUID()}`;
  const app = new TestApp(undefined, { READ_STORE: 'redis', REDIS_URL: 'redis://127.0.0.1:6379', REDIS_KEY_PREFIX: prefix });
  const redis = new Redis('redis://127.0.0.1:6379');
  beforeAll(() => app.start());
  afterAll(async () => {
    await app.stop();
    const keys = await redis.keys(`${prefix}:*`);
    if (keys.length) await redis.del(...keys);
    redis.disconnect();
  });

  it('serves access, cases and read-your-writes from Redis, and keeps them across a restart', async () => {
    const t = await app.tenant();
    expect((await app.api.get('/v1/ping', t.apiKey)).status).toBe(200);
    expect((await redis.keys(`${prefix}:*`)).length).toBeGreaterThan(0);

    const { patientId } = await app.enrolledPatient(t);
    const opened = await app.api.post(`${t.env}/clinical-cases`, { patientId, request: 'Please review the new prescription' }, t.staff);
    expect(opened.status).toBe(201);
    const caseId = opened.body.caseId as string;
    const update = await app.api.post(
      `/v1/clinical-cases/${caseId}/updates`,
      { updateId: randomUUID(), sequence: 1, status: 'processed', externalReference: 'EHR-1' },
      t.apiKey,
    );
    expect(update.status).toBe(200);
    const progress = await app.api.get(`/v1/clinical-cases/${caseId}/progress`, t.apiKey);
    expect(progress.body).toMatchObject({ status: 'processed', sequence: 1, nextSequence: 2 });

    // A revoked key fails at once (no cache in front of Redis).
    const keys = await app.api.get(`${t.env}/api-keys`, t.staff);
    expect((await app.api.delete(`${t.env}/api-keys/${keys.body.apiKeys[0].id}`, t.staff)).status).toBe(204);
    expect((await app.api.get('/v1/ping', t.apiKey)).status).toBe(401);

    await app.restart();
    const fresh = await app.api.post(`${t.env}/api-keys`, { name: 'after restart' }, t.staff);
    const after = await app.api.get(`/v1/clinical-cases/${caseId}/progress`, fresh.body.key);
    expect(after.body).toMatchObject({ status: 'processed', nextSequence: 2 });
  });

  it('loses nothing when Redis loses its content: rebuilt from the event log while running, and complete from the first answer after a restart', async () => {
    const wipe = async () => {
      const keys = await redis.keys(`${prefix}:*`);
      if (keys.length) await redis.del(...keys);
    };
    const t = await app.tenant();
    const { patientId } = await app.enrolledPatient(t);
    const opened = await app.api.post(`${t.env}/clinical-cases`, { patientId, request: 'Please call the patient back' }, t.staff);
    const caseId = opened.body.caseId as string;
    for (let sequence = 1; sequence <= 5; sequence++) {
      const status = sequence === 1 ? 'processed' : 'patient_contacted';
      expect(
        (
          await app.api.post(
            `/v1/clinical-cases/${caseId}/updates`,
            { updateId: randomUUID(), sequence, status, externalReference: `EHR-${sequence}` },
            t.apiKey,
          )
        ).status,
      ).toBe(200);
    }
    const expected = (await app.api.get(`/v1/clinical-cases/${caseId}/progress`, t.apiKey)).body;
    expect(expected).toMatchObject({ sequence: 5, nextSequence: 6 });

    // Lost while running, then a write: the write's commit finds the loss, and every read model is rebuilt.
    await wipe();
    // The first write's commit finds the loss; while the read models are rebuilt, requests are 503
    // with Retry-After (docs/scaling.md, "Read store loss"), retried here as a client would.
    let other: Awaited<ReturnType<typeof app.tenant>> | undefined;
    for (let attempt = 0; !other; attempt++) {
      try {
        other = await app.tenant();
      } catch (err) {
        if (attempt >= 50 || !/: 503 .*UNAVAILABLE/.test((err as Error).message)) throw err;
        await new Promise((r) => setTimeout(r, 200));
      }
    }
    expect((await app.api.get('/v1/ping', other.apiKey)).status).toBe(200);
    const until = Date.now() + 15_000;
    let progress = await app.api.get(`/v1/clinical-cases/${caseId}/progress`, t.apiKey);
    while (Date.now() < until && progress.status !== 200) {
      await new Promise((r) => setTimeout(r, 100));
      progress = await app.api.get(`/v1/clinical-cases/${caseId}/progress`, t.apiKey);
    }
    expect(progress.body).toEqual({ ...expected, confirmationOverdue: progress.body.confirmationOverdue });
    expect((await app.api.get(`/organizations/${t.orgId}`, t.staff)).status).toBe(200);
    expect(
      (
        await app.api.post(
          `/v1/clinical-cases/${caseId}/updates`,
          { updateId: randomUUID(), sequence: 6, status: 'scheduled', scheduledFor: '2031-01-01T09:00:00Z', externalReference: 'EHR-6' },
          t.apiKey,
        )
      ).status,
    ).toBe(200);

    // Lost while stopped: the restarted service answers only once its read models are rebuilt
    // (PlatformLifecycle waits for ProjectionRunner.caughtUp before serving; on a log this short the
    // rebuild is quick either way, so the wait itself is shown by the runner's own test).
    for (let sequence = 7; sequence <= 60; sequence++) {
      expect(
        (
          await app.api.post(
            `/v1/clinical-cases/${caseId}/updates`,
            { updateId: randomUUID(), sequence, status: 'patient_contacted', externalReference: `EHR-${sequence}` },
            t.apiKey,
          )
        ).status,
      ).toBe(200);
    }
    await app.stop();
    await wipe();
    await app.start();
    const first = await app.api.get(`/v1/clinical-cases/${caseId}/progress`, t.apiKey);
    expect(first.status).toBe(200);
    expect(first.body).toMatchObject({ status: 'patient_contacted', sequence: 60, nextSequence: 61, scheduledFor: '2031-01-01T09:00:00Z' });
    expect((await app.api.get(`/v1/conversations/${caseId}/messages`, t.apiKey)).status).toBe(200);
    expect((await app.api.get(`${t.env}/clinical-cases`, t.staff)).body.clinicalCases.map((c: { caseId?: string; id?: string }) => c.caseId ?? c.id)).toContain(
      caseId,
    );
  });
});
