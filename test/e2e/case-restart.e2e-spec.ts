import { randomUUID } from 'node:crypto';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { Api, StandaloneProcess, enrollPatient, tempDataDir } from '@svc/testing';

const mainJs = join(__dirname, '../../dist/apps/standalone/main.js');

async function tenant(api: Api) {
  const staff = (await api.post('/dev/staff-tokens', { sub: 'owner-restart', email: 'owner@example.test' })).body.idToken as string;
  const org = (await api.post('/organizations', { name: 'Restart Clinic' }, staff)).body;
  const sandbox = org.environments.find((e: { kind: string }) => e.kind === 'sandbox').id as string;
  const env = `/organizations/${org.id}/environments/${sandbox}`;
  const key = (await api.post(`${env}/api-keys`, { name: 'k' }, staff)).body.key as string;
  expect((await api.post(`/organizations/${org.id}/baa`, { signerName: 'A', signerTitle: 'B' }, staff)).status).toBe(201);
  return { staff, env, key, apiKey: key };
}

/** Issue 4, "Must show": kill -9 in the middle of a stream of updates; every 200 survives and sequences continue. */
describe('clinical case updates survive kill -9 (built standalone process)', () => {
  // The test command builds first; a missing build is a failure, never a silent skip.
  it('has the built standalone app to run', () => {
    expect({ built: existsSync(mainJs), hint: 'run npm run build first' }).toEqual({ built: true, hint: 'run npm run build first' });
  });

  const dataDir = tempDataDir('svc-case-restart-');
  let proc = new StandaloneProcess(dataDir);
  afterAll(() => proc.kill9());

  it('keeps every acknowledged update and continues at nextSequence', async () => {
    await proc.start();
    const t = await tenant(proc.api);
    const cases: string[] = [];
    const { patientId } = await enrollPatient(proc.api, t);
    for (let i = 0; i < 8; i++) {
      const r = await proc.api.post(`${t.env}/clinical-cases`, { patientId, request: `restart request ${i}` }, t.staff);
      expect(r.status).toBe(201);
      cases.push(r.body.caseId);
    }
    const acked = new Map<string, { body: Record<string, unknown>; result: Record<string, unknown> }[]>();
    let killed = false;
    const api = proc.api;
    const streams = cases.map(async (caseId) => {
      acked.set(caseId, []);
      for (let seq = 1; !killed; seq++) {
        const body = { updateId: randomUUID(), sequence: seq, status: seq === 1 ? 'processed' : 'clinician_responded', externalReference: `r-${seq}` };
        try {
          const r = await api.post(`/v1/clinical-cases/${caseId}/updates`, body, t.key);
          if (r.status !== 200) throw new Error(`unexpected ${r.status} ${r.text}`);
          acked.get(caseId)!.push({ body, result: r.body });
        } catch (err) {
          if (killed) return;
          throw err;
        }
      }
    });
    await new Promise((r) => setTimeout(r, 1500));
    killed = true;
    await proc.kill9();
    await Promise.allSettled(streams);
    const total = [...acked.values()].reduce((n, a) => n + a.length, 0);
    expect(total).toBeGreaterThan(8);

    proc = new StandaloneProcess(dataDir);
    await proc.start();
    for (const caseId of cases) {
      const list = acked.get(caseId)!;
      const last = list.length;
      const p = await proc.api.get(`/v1/clinical-cases/${caseId}/progress`, t.key);
      expect(p.status).toBe(200);
      // every 200 is there; at most the one in flight at the kill may have landed too
      expect(p.body.sequence).toBeGreaterThanOrEqual(last);
      expect(p.body.sequence).toBeLessThanOrEqual(last + 1);
      expect(p.body.nextSequence).toBe(p.body.sequence + 1);
      for (const a of list.slice(-3)) {
        const again = await proc.api.post(`/v1/clinical-cases/${caseId}/updates`, a.body, t.key);
        expect(again.status).toBe(200);
        expect(again.body).toEqual({ ...a.result, duplicate: true });
      }
      const next = await proc.api.post(
        `/v1/clinical-cases/${caseId}/updates`,
        { updateId: randomUUID(), sequence: p.body.nextSequence, status: 'patient_contacted', externalReference: 'after' },
        t.key,
      );
      expect(next.status).toBe(200);
      expect((await proc.api.get(`/v1/clinical-cases/${caseId}/progress`, t.key)).body.nextSequence).toBe(p.body.nextSequence + 1);
    }
  });
});
