import { randomUUID } from 'node:crypto';
import { Api, StandaloneProcess } from '@svc/testing';
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
    if (baa) expect((await api.post(`/organizations/${org.id}/baa`, { signerName: 'A', signerTitle: 'CEO' }, staff)).status).toBe(201);
    const ep = (await api.post(`${env}/webhook-endpoints`, { url: receiver.script(path, statuses), events: ['clinical_case.opened'] }, staff)).body;
    return { staff, orgId: org.id as string, env, ep: ep as { id: string; secret: string } };
  }

  it('delivers every pending and held delivery after a SIGKILL restart', async () => {
    proc = await new StandaloneProcess().start();
    const live = await setup(proc.api, true, '/k9', [500, 500, 500, 200]);
    const held = await setup(proc.api, false, '/k9-held', [200]);
    for (let i = 0; i < 3; i++) expect((await proc.api.post(`${live.env}/clinical-cases`, { patientId: randomUUID(), request: 'call back' }, live.staff)).status).toBe(201);
    expect((await proc.api.post(`${held.env}/clinical-cases`, { patientId: randomUUID(), request: 'call back' }, held.staff)).status).toBe(201);

    const deliveries = async (api: Api, t: typeof live) => (await api.get(`${t.env}/webhook-endpoints/${t.ep.id}/deliveries`, t.staff)).body.deliveries as { eventId: string; status: string; attempts: unknown[] }[];
    const pending = await until(async () => {
      const d = await deliveries(proc.api, live);
      return d.length === 3 && d.every((x) => x.status === 'pending' && x.attempts.length === 1) ? d : null;
    }, 15_000, 'three pending deliveries after a failed first attempt');
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
