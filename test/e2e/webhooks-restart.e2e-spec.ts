import { randomUUID } from 'node:crypto';
import { Api, StandaloneProcess, TestApp, enrollPatient, tempDataDir } from '@svc/testing';
import { OpenClinicalCaseCommand, Patterns } from '@svc/messaging';
import { busRequest } from './case-helpers';
import { verifyWebhook } from '@svc/security';
import { WebhookReceiver, until } from '../../apps/webhook-dispatcher/test/receiver';

/**
 * Issue 5: pending and held deliveries survive kill -9 (they are events + durable timers).
 * Runs the built dist (`npm run build` first).
 */
describe('webhooks survive kill -9 (built standalone process)', () => {
  const receiver = new WebhookReceiver();
  let proc: StandaloneProcess;
  beforeAll(() => receiver.start());
  afterAll(async () => {
    await proc?.kill9();
    await receiver.stop();
  });

  async function setup(api: Api, baa: boolean, path: string, statuses: number[]) {
    const sub = `owner-${randomUUID()}`;
    const staff = (await api.post('/dev/staff-tokens', { sub, email: `${sub}@example.test` })).body.idToken as string;
    const org = (await api.post('/organizations', { name: 'Kill Clinic' }, staff)).body;
    const envId = org.environments.find((e: { kind: string }) => e.kind === 'sandbox').id;
    const env = `/organizations/${org.id}/environments/${envId}`;
    const apiKey = (await api.post(`${env}/api-keys`, { name: 'k' }, staff)).body.key as string;
    if (baa) expect((await api.post(`/organizations/${org.id}/baa`, { signerName: 'A', signerTitle: 'CEO' }, staff)).status).toBe(201);
    const ep = (await api.post(`${env}/webhook-endpoints`, { url: receiver.script(path, statuses), events: ['clinical_case.opened'] }, staff)).body;
    return { staff, sub, orgId: org.id as string, envId: envId as string, env, apiKey, ep: ep as { id: string; secret: string } };
  }

  it('delivers every pending and held delivery after a SIGKILL restart', async () => {
    const dataDir = tempDataDir('svc-webhooks-restart-');
    // The held delivery: before the BAA no patient can be enrolled, so no staff case can be opened
    // over HTTP (404); a case event can only be held when it comes over the bus (docs/decisions.md, "Staff cases need a known patient"). The
    // case is opened by the case-ledger's bus command in an in-process app on the same data dir,
    // which is then stopped; the built process takes over from there.
    const inProcess = await new TestApp(dataDir).start();
    const held = await setup(inProcess.api, false, '/k9-held', [200]);
    expect((await inProcess.api.post(`${held.env}/clinical-cases`, { patientId: randomUUID(), request: 'call back' }, held.staff)).status).toBe(404);
    await busRequest(inProcess, Patterns.openClinicalCase, {
      requestId: randomUUID(),
      organizationId: held.orgId,
      environmentId: held.envId,
      patientId: randomUUID(),
      source: 'staff_chat',
      priority: 'urgent',
      patientNotes: '',
      symptomScores: {},
      matchedRules: ['staff_request:chat'],
      stoppedEarly: false,
      internalNote: 'call back',
      actor: `staff:${held.sub}`,
    } satisfies OpenClinicalCaseCommand);
    await until(
      async () =>
        (await inProcess.api.get(`${held.env}/webhook-endpoints/${held.ep.id}/deliveries`, held.staff)).body.deliveries.some(
          (x: { status: string }) => x.status === 'held',
        ),
      15_000,
      'held delivery (in-process)',
    );
    await inProcess.stop();

    proc = await new StandaloneProcess(dataDir).start();
    const live = await setup(proc.api, true, '/k9', [500, 500, 500, 200]);
    const { patientId } = await enrollPatient(proc.api, live);
    for (let i = 0; i < 3; i++) expect((await proc.api.post(`${live.env}/clinical-cases`, { patientId, request: 'call back' }, live.staff)).status).toBe(201);

    const deliveries = async (api: Api, t: typeof live) =>
      (await api.get(`${t.env}/webhook-endpoints/${t.ep.id}/deliveries`, t.staff)).body.deliveries as {
        eventId: string;
        status: string;
        attempts: unknown[];
      }[];
    const pending = await until(
      async () => {
        const d = await deliveries(proc.api, live);
        return d.length === 3 && d.every((x) => x.status === 'pending' && x.attempts.length === 1) ? d : null;
      },
      15_000,
      'three pending deliveries after a failed first attempt',
    );
    await until(async () => (await deliveries(proc.api, held)).some((x) => x.status === 'held'), 15_000, 'held delivery');
    expect(receiver.on('/k9')).toHaveLength(3);

    await proc.kill9();
    proc = await new StandaloneProcess(proc.dataDir).start();
    await proc.api.post('/dev/clock', { advanceSeconds: 10 });
    const got = await receiver.waitFor('/k9', 6, 15_000);
    const now = new Date((await proc.api.post('/dev/clock', { advanceSeconds: 0 })).body.now);
    const retried = got.slice(3);
    for (const r of retried) await verifyWebhook({ rawBody: r.rawBody, headers: r.headers as Record<string, string>, secret: live.ep.secret, now, seen: null });
    expect(new Set(retried.map((r) => r.headers['x-svc-event-id']))).toEqual(new Set(pending.map((d) => d.eventId)));
    await until(async () => (await deliveries(proc.api, live)).every((x) => x.status === 'delivered'), 10_000, 'all delivered');

    // The held one is still held after the crash and goes out once the BAA is signed.
    expect(receiver.on('/k9-held')).toHaveLength(0);
    expect((await proc.api.post(`/organizations/${held.orgId}/baa`, { signerName: 'A', signerTitle: 'CEO' }, held.staff)).status).toBe(201);
    const [h] = await receiver.waitFor('/k9-held', 1, 15_000);
    await verifyWebhook({ rawBody: h.rawBody, headers: h.headers as Record<string, string>, secret: held.ep.secret, now, seen: null });
  });
});
