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
    const update = await app.api.post(`/v1/clinical-cases/${caseId}/updates`, { updateId: randomUUID(), sequence: 1, status: 'processed', externalReference: 'EHR-1' }, t.apiKey);
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
});
