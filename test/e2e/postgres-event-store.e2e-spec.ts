import { randomBytes, randomUUID } from 'node:crypto';
import { Client } from 'pg';
import { DEFAULT_DATABASE_URL } from '@svc/eventstore';
import { TestApp } from '@svc/testing';

/**
 * The standalone service on the PostgreSQL event store (EVENT_STORE=postgres, everything else
 * embedded) at DATABASE_URL (default: the local server), in a schema of its own that is dropped at
 * the end: one real flow over HTTP, read back after a restart, and read back again by a service on
 * a new data dir whose read models can only come from the log in PostgreSQL.
 */
describe('standalone on the PostgreSQL event store (e2e)', () => {
  const url = process.env.DATABASE_URL || DEFAULT_DATABASE_URL;
  const schema = `svc_events_e2e_${randomUUID().replace(/-/g, '').slice(0, 12)}`;
  // Given, not generated in the data dir: the second service (another data dir) must open the same events.
  const env = { EVENT_STORE: 'postgres', DATABASE_URL: url, EVENT_STORE_SCHEMA: schema, SVC_MASTER_KEY: randomBytes(32).toString('base64') };
  const app = new TestApp(undefined, env);
  let other: TestApp | undefined;

  const sql = async <T extends Record<string, unknown>>(text: string): Promise<T[]> => {
    const c = new Client({ connectionString: url });
    await c.connect();
    try {
      return (await c.query<T>(text)).rows;
    } finally {
      await c.end();
    }
  };

  beforeAll(() => app.start());
  afterAll(async () => {
    await app.stop();
    await other?.stop();
    await sql(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  });

  it('organization, BAA, API key, patient, case and its progress: written to PostgreSQL, read back after a restart and by a fresh service', async () => {
    const t = await app.tenant();
    expect((await app.api.get('/v1/ping', t.apiKey)).status).toBe(200);
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
    // Read-your-writes through the log's subscriptions.
    const progress = await app.api.get(`/v1/clinical-cases/${caseId}/progress`, t.apiKey);
    expect(progress.status).toBe(200);
    expect(progress.body).toMatchObject({ status: 'processed', sequence: 1, nextSequence: 2 });

    // The events are in the schema, with their data sealed (encryption at rest over any store).
    const [{ n }] = await sql<{ n: string }>(`SELECT count(*) AS n FROM "${schema}".events`);
    expect(Number(n)).toBeGreaterThan(5);
    const [{ clear }] = await sql<{ clear: string }>(`SELECT count(*) AS clear FROM "${schema}".events WHERE data LIKE '%Please review%'`);
    expect(Number(clear)).toBe(0);

    await app.restart();
    const again = await app.api.get(`/v1/clinical-cases/${caseId}/progress`, t.apiKey);
    expect(again.status).toBe(200);
    expect(again.body).toEqual(progress.body);
    const next = await app.api.post(
      `/v1/clinical-cases/${caseId}/updates`,
      { updateId: randomUUID(), sequence: 2, status: 'patient_contacted', externalReference: 'EHR-2' },
      t.apiKey,
    );
    expect(next.status).toBe(200);
    await app.stop();

    // A new data dir: no read models, no generated key; everything it answers comes from the log.
    other = await new TestApp(undefined, env).start();
    const rebuilt = await other.api.get(`/v1/clinical-cases/${caseId}/progress`, t.apiKey);
    expect(rebuilt.status).toBe(200);
    expect(rebuilt.body).toMatchObject({ status: 'patient_contacted', sequence: 2, nextSequence: 3 });
    expect((await other.api.get('/v1/ping', t.apiKey)).status).toBe(200);
  });
});
