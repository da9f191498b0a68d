import { StandaloneProcess } from '@svc/testing';

/**
 * Issue 2: each of the six apps of distributed mode boots on its own (`node dist/apps/<app>/main.js`)
 * and serves HTTP with the service's error contract. Here on the embedded adapters; the compose
 * file runs the same entry points on Kafka, KurrentDB and Redis.
 */
describe('each app boots alone (built dist)', () => {
  const apps = ['gateway', 'patient-pathway', 'case-ledger', 'conversation', 'workflow-engine', 'webhook-dispatcher'];
  const running: StandaloneProcess[] = [];
  afterAll(async () => {
    for (const p of running) await p.kill9();
  });

  it.each(apps)('%s', async (app) => {
    const proc = new StandaloneProcess(undefined, {}, app);
    running.push(proc);
    await proc.start();
    expect(proc.output).toContain(`${app} listening at`);
    const r = await proc.api.get('/no/such/route');
    expect(r.status).toBe(404);
    expect(r.body).toEqual({ code: 'NOT_FOUND', message: expect.any(String) });
  });

  it('gateway: dev tools off unless SVC_DEV_TOOLS=1 (decisions section 1, distributed column)', async () => {
    const off = new StandaloneProcess(undefined, {}, 'gateway');
    const on = new StandaloneProcess(undefined, { SVC_DEV_TOOLS: '1' }, 'gateway');
    running.push(off, on);
    await Promise.all([off.start(), on.start()]);
    expect((await off.api.post('/dev/staff-tokens', { sub: 'a', email: 'a@example.test' })).status).toBe(404);
    expect((await off.api.post('/dev/clock', { advanceSeconds: 1 })).status).toBe(404);
    expect((await on.api.post('/dev/staff-tokens', { sub: 'a', email: 'a@example.test' })).status).toBe(201);
  });
});
