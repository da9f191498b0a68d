import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse } from 'yaml';
import { RedisReadStore } from '@svc/read-store';
import { RouteTable, readUpstreams } from '@svc/platform';
import { DistributedTopology } from '@svc/testing';

/**
 * Issue 18: distributed mode as `npm run start:distributed` starts it, six processes on Kafka
 * (KAFKA_BROKERS: the test command starts the local broker for this suite), PostgreSQL and Redis,
 * with a database, a Redis key prefix and a data dir of its own. Everything goes through the
 * gateway's one address over real HTTP: the contract's routes, the dev tools shared by every app
 * (issuer, clock, outbox), read-your-writes, an app killed by its pid and started again.
 */
const brokers = process.env.KAFKA_BROKERS;

/** Three updates in a row a case takes: processed first, then two others. */
const STATUSES: [number, string][] = [
  [1, 'processed'],
  [2, 'patient_contacted'],
  [3, 'clinician_responded'],
];

describe('the six-process topology through one gateway address', () => {
  const topology = new DistributedTopology(brokers ? { KAFKA_BROKERS: brokers } : {});
  let startedInMs = 0;

  beforeAll(async () => {
    const t0 = performance.now();
    await topology.start(150_000);
    startedInMs = performance.now() - t0;
  }, 170_000);

  afterAll(async () => {
    await topology.stop();
    await topology.cleanup();
  }, 60_000);

  it('started six processes and printed the gateway address', () => {
    expect([...topology.pids.keys()].sort()).toEqual(['case-ledger', 'conversation', 'gateway', 'patient-pathway', 'webhook-dispatcher', 'workflow-engine']);
    expect(new Set(topology.pids.values()).size).toBe(6);
    expect(topology.baseUrl).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/api$/);
    expect(startedInMs).toBeGreaterThan(0);
  });

  it('every route of contracts/openapi.yaml is served by exactly one app, and none is hidden behind a gateway route', async () => {
    const store = new RedisReadStore(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379', topology.redisKeyPrefix);
    try {
      const announced = await readUpstreams(store);
      expect(announced.map((a) => a.app).sort()).toEqual([
        'case-ledger',
        'conversation',
        'gateway',
        'patient-pathway',
        'webhook-dispatcher',
        'workflow-engine',
      ]);
      const norm = (url: string) => (url.startsWith('/api/') ? url.slice('/api'.length) : `origin:${url}`).replace(/:[^/]+/g, '{}');
      const owners = new Map<string, Set<string>>();
      for (const a of announced) {
        for (const r of a.routes) {
          const key = `${r.method} ${norm(r.url)}`;
          // Every app serves its own /healthz and /readyz; the gateway answers them at the public address.
          if (key.endsWith(' /healthz') || key.endsWith(' /readyz')) continue;
          owners.set(key, (owners.get(key) ?? new Set()).add(a.app));
        }
      }
      const doc = parse(readFileSync(join(__dirname, '..', '..', 'contracts', 'openapi.yaml'), 'utf8')) as { paths: Record<string, Record<string, unknown>> };
      const documented = new Set<string>();
      for (const [path, item] of Object.entries(doc.paths)) {
        const onOrigin = ((item as { servers?: { url: string }[] }).servers ?? []).some((s) => !s.url.endsWith('/api'));
        for (const method of Object.keys(item)) {
          if (['get', 'post', 'put', 'patch', 'delete'].includes(method))
            documented.add(`${method.toUpperCase()} ${onOrigin ? 'origin:' : ''}${path.replace(/\{[^}]+\}/g, '{}')}`);
        }
      }
      documented.delete('GET /healthz');
      documented.delete('GET /readyz');
      expect([...documented].filter((r) => !owners.has(r)).sort()).toEqual([]);
      expect([...owners.keys()].filter((r) => !documented.has(r)).sort()).toEqual([]);
      expect([...owners].filter(([, apps]) => apps.size > 1).map(([r, apps]) => `${r}: ${[...apps]}`)).toEqual([]);
      // A request for another app's route must not match one of the gateway's own (Fastify would serve it there).
      const gateway = new RouteTable(announced.filter((a) => a.app === 'gateway'));
      const hidden: string[] = [];
      for (const a of announced.filter((x) => x.app !== 'gateway')) {
        for (const r of a.routes) {
          const sample = r.url.replace(/:[^/]+/g, '0f8a0c1e-5b7d-4c3a-9e2f-1a2b3c4d5e6f');
          const hit = gateway.match(r.method, sample);
          if (hit && !r.url.endsWith('/healthz') && !r.url.endsWith('/readyz')) hidden.push(`${r.method} ${r.url} (${a.app}) behind ${hit.route}`);
        }
      }
      expect(hidden).toEqual([]);
    } finally {
      await store.close();
    }
  });

  it('a whole flow through the gateway: dev issuer, organization, BAA, key, protocol, patient, shared clock, outbox, case, read-your-writes, body limit', async () => {
    const api = topology.api;
    let staff = await topology.staffToken('owner-topology');
    const org = await api.post('/organizations', { name: 'Topology Clinic' }, staff);
    expect(org.status).toBe(201);
    const envId = org.body.environments.find((e: { kind: string }) => e.kind === 'sandbox').id as string;
    const env = `/organizations/${org.body.id}/environments/${envId}`;
    expect((await api.post(`/organizations/${org.body.id}/baa`, { signerName: 'Ada Owner', signerTitle: 'CEO' }, staff)).status).toBe(201);
    const key = await api.post(`${env}/api-keys`, { name: 'topology' }, staff);
    expect(key.status).toBe(201);
    const apiKey = key.body.key as string;
    // patient-pathway: a protocol with a daily check-in.
    const protocol = await api.post(
      `${env}/protocols`,
      {
        programKey: 'topology',
        name: 'Topology',
        defaultCadenceDays: 1,
        questions: [{ key: 'pain', text: 'How bad is your pain today?', type: 'scale', min: 0, max: 10 }],
        redFlags: { emergencyTerms: true },
      },
      staff,
    );
    expect(protocol.status).toBe(201);
    expect((await api.post(`${env}/protocols/${protocol.body.id}/activate`, undefined, staff)).status).toBe(200);
    const email = `patient-${randomUUID()}@example.test`;
    const patient = await api.post(
      '/client/patient-events',
      {
        eventId: randomUUID(),
        type: 'patient.created',
        externalPatientId: `canary-ext-${randomUUID()}`,
        email,
        firstName: 'Canary-First',
        lastName: 'Canary-Last',
        programKey: 'topology',
      },
      apiKey,
    );
    expect(patient.status).toBe(202);
    const patientId = patient.body.patientId as string;

    // One clock for every app: moved at the gateway, the patient-pathway's check-in timer fires and
    // its email lands in the one outbox the gateway reads.
    const before = Date.now();
    const moved = await api.post('/dev/clock', { advanceSeconds: 2 * 86_400 });
    expect(moved.status).toBe(200);
    expect(Date.parse(moved.body.now)).toBeGreaterThanOrEqual(before + 2 * 86_400_000);
    let emails: { to: string; subject: string; text: string }[] = [];
    for (const until = Date.now() + 20_000; Date.now() < until && emails.length === 0;) {
      emails = (await api.get(`/dev/outbox?to=${encodeURIComponent(email)}`)).body.emails;
      if (emails.length === 0) await new Promise((r) => setTimeout(r, 250));
    }
    expect(emails.length).toBeGreaterThanOrEqual(1);
    // The link leads to the public address, not to the patient-pathway's internal port.
    expect(emails[0].text).toContain(`${topology.baseUrl}/check-ins/`);

    // case-ledger: a case, then the clock moved past its confirmation deadline: the very next read
    // sees it overdue (every app took the new time before POST /dev/clock answered).
    staff = await topology.staffToken('owner-topology'); // the one minted before is 2 days old now
    const opened = await api.post(`${env}/clinical-cases`, { patientId, request: 'Please review the medication plan (canary-staff-note)' }, staff);
    expect(opened.status).toBe(201);
    const caseId = opened.body.caseId as string;
    const due = await api.get(`/v1/clinical-cases/${caseId}/progress`, apiKey);
    expect(due.status).toBe(200);
    expect(due.body.confirmationOverdue).toBe(false);
    const seconds =
      Math.ceil((Date.parse(due.body.confirmationDueAt) - Date.parse((await api.post('/dev/clock', { advanceSeconds: 0 })).body.now)) / 1000) + 60;
    expect((await api.post('/dev/clock', { advanceSeconds: seconds })).status).toBe(200);
    expect((await api.get(`/v1/clinical-cases/${caseId}/progress`, apiKey)).body.confirmationOverdue).toBe(true);

    // Read-your-writes through the gateway: each update's answer comes after the progress shows it.
    for (const [sequence, status] of STATUSES) {
      const u = await api.post(
        `/v1/clinical-cases/${caseId}/updates`,
        { updateId: randomUUID(), sequence, status, externalReference: `ext-${sequence}` },
        apiKey,
      );
      expect([u.status, u.text]).toEqual([200, expect.any(String)]);
      const p = await api.get(`/v1/clinical-cases/${caseId}/progress`, apiKey);
      expect([p.body.sequence, p.body.nextSequence, p.body.status]).toEqual([sequence, sequence + 1, status]);
    }

    // The owning app's body limit and error body, through the gateway (1 MiB).
    const big = await api.request('POST', '/client/patient-events', {
      rawBody: JSON.stringify({ eventId: randomUUID(), pad: 'x'.repeat(1024 * 1024) }),
      token: apiKey,
    });
    expect(big.status).toBe(413);
    expect(big.body).toEqual({ code: 'PAYLOAD_TOO_LARGE', message: expect.any(String) });
    expect(big.headers.get('cache-control')).toBe('no-store');
    // Authentication stays with the owning app: same 401 as standalone.
    const anonymous = await api.get(`/v1/clinical-cases/${caseId}/progress`);
    expect(anonymous.status).toBe(401);
    expect(anonymous.body.code).toBe('INVALID_API_CREDENTIAL');
  }, 60_000);

  it('an app killed by its pid: its routes answer 503 at once, the others keep serving; started again, it serves them with every acknowledged write kept and follows the clock moved meanwhile', async () => {
    const api = topology.api;
    const staff = await topology.staffToken('owner-kill');
    const org = await api.post('/organizations', { name: 'Kill Clinic' }, staff);
    const envId = org.body.environments.find((e: { kind: string }) => e.kind === 'sandbox').id as string;
    const env = `/organizations/${org.body.id}/environments/${envId}`;
    await api.post(`/organizations/${org.body.id}/baa`, { signerName: 'Ada Owner', signerTitle: 'CEO' }, staff);
    const apiKey = (await api.post(`${env}/api-keys`, { name: 'kill' }, staff)).body.key as string;
    const protocol = await api.post(
      `${env}/protocols`,
      {
        programKey: 'kill',
        name: 'Kill',
        defaultCadenceDays: 30,
        questions: [{ key: 'pain', text: 'How bad is your pain today?', type: 'scale', min: 0, max: 10 }],
        redFlags: { emergencyTerms: true },
      },
      staff,
    );
    await api.post(`${env}/protocols/${protocol.body.id}/activate`, undefined, staff);
    const patient = await api.post(
      '/client/patient-events',
      {
        eventId: randomUUID(),
        type: 'patient.created',
        externalPatientId: `canary-ext-${randomUUID()}`,
        email: `patient-${randomUUID()}@example.test`,
        firstName: 'Canary-First',
        lastName: 'Canary-Last',
        programKey: 'kill',
      },
      apiKey,
    );
    expect(patient.status).toBe(202);
    const opened = await api.post(
      `${env}/clinical-cases`,
      { patientId: patient.body.patientId, request: 'Please call the patient back (canary-staff-note)' },
      staff,
    );
    expect(opened.status).toBe(201);
    const caseId = opened.body.caseId as string;
    // A second case that nobody processes: its confirmation deadline shows whether the restarted app reads the shared clock.
    const waiting = await api.post(
      `${env}/clinical-cases`,
      { patientId: patient.body.patientId, request: 'Please check the dosage (canary-staff-note)' },
      staff,
    );
    expect(waiting.status).toBe(201);
    const waitingDue = await api.get(`/v1/clinical-cases/${waiting.body.caseId}/progress`, apiKey);
    expect(waitingDue.body.confirmationOverdue).toBe(false);
    const updates = STATUSES.map(([sequence, status]) => ({ updateId: randomUUID(), sequence, status, externalReference: `ext-${sequence}` }));
    for (const u of updates.slice(0, 2)) {
      const r = await api.post(`/v1/clinical-cases/${caseId}/updates`, u, apiKey);
      expect([r.status, r.text]).toEqual([200, expect.any(String)]);
    }

    const mark = topology.output.length;
    const killed = topology.kill9('case-ledger');
    // Its routes: 503 UNAVAILABLE with Retry-After, fast; the write is not acknowledged.
    const t0 = performance.now();
    const refused = await api.post(`/v1/clinical-cases/${caseId}/updates`, updates[2], apiKey);
    const progressDown = await api.get(`/v1/clinical-cases/${caseId}/progress`, apiKey);
    expect(performance.now() - t0).toBeLessThan(2000);
    for (const r of [refused, progressDown]) {
      expect(r.status).toBe(503);
      expect(r.body).toEqual({ code: 'UNAVAILABLE', message: expect.any(String) });
      expect(r.headers.get('retry-after')).toBe('1');
    }
    // The other apps' routes are not affected.
    expect((await api.get(`${env}/protocols`, staff)).status).toBe(200);
    expect((await api.get(`/organizations/${org.body.id}`, staff)).status).toBe(200);
    // The clock moves while case-ledger is down (its push fails fast; it reads the offset when it starts).
    const now = Date.parse((await api.post('/dev/clock', { advanceSeconds: 0 })).body.now);
    const t1 = performance.now();
    const moved = await api.post('/dev/clock', { advanceSeconds: Math.ceil((Date.parse(waitingDue.body.confirmationDueAt) - now) / 1000) + 60 });
    expect(moved.status).toBe(200);
    expect(performance.now() - t1).toBeLessThan(5000);

    // The command starts it again on its port; the gateway reaches it there.
    await topology.waitFor(/distributed: case-ledger\s+pid (\d+)\s+ready again/, 90_000, mark);
    expect(topology.pids.get('case-ledger')).not.toBe(killed);
    const retried = await api.post(`/v1/clinical-cases/${caseId}/updates`, updates[2], apiKey);
    expect(retried.status).toBe(200);
    const progress = await api.get(`/v1/clinical-cases/${caseId}/progress`, apiKey);
    expect([progress.status, progress.body.sequence, progress.body.nextSequence]).toEqual([200, 3, 4]);
    // Started after the clock moved, it follows the shared clock.
    expect((await api.get(`/v1/clinical-cases/${waiting.body.caseId}/progress`, apiKey)).body.confirmationOverdue).toBe(true);
    // The acknowledged ones were kept: sending them again is recognised, not applied twice.
    for (const u of updates.slice(0, 2)) {
      const again = await api.post(`/v1/clinical-cases/${caseId}/updates`, u, apiKey);
      expect([again.status, again.body.duplicate]).toEqual([200, true]);
    }
  }, 120_000);

  it('SIGTERM stops every app and then the command', async () => {
    const pids = [...topology.pids.values()];
    const code = await topology.stop();
    expect(code).toBe(0);
    const alive = pids.filter((pid) => {
      try {
        process.kill(pid, 0);
        return true;
      } catch {
        return false;
      }
    });
    expect(alive).toEqual([]);
  }, 60_000);
});
