import { StandaloneProcess } from '@svc/testing';

/** Issue 2: kill -9 the built standalone process; everything acknowledged is there after restart. */
describe('gateway state survives kill -9 (e2e, built process)', () => {
  const proc = new StandaloneProcess();
  afterAll(() => proc.kill9());

  it('keeps organizations, keys and BAA state', async () => {
    await proc.start();
    const token = (await proc.api.post('/dev/staff-tokens', { sub: 'owner-k9', email: 'o@example.test' })).body.idToken;
    const org = await proc.api.post('/organizations', { name: 'Kill Nine Clinic' }, token);
    expect(org.status).toBe(201);
    const sandbox = org.body.environments[0].id;
    const keys = await Promise.all(
      Array.from({ length: 10 }, (_, i) => proc.api.post(`/organizations/${org.body.id}/environments/${sandbox}/api-keys`, { name: `k${i}` }, token)),
    );
    expect(keys.every((k) => k.status === 201)).toBe(true);
    const baa = await proc.api.post(`/organizations/${org.body.id}/baa`, { signerName: 'Ada', signerTitle: 'CEO' }, token);
    expect(baa.status).toBe(201);

    await proc.kill9();
    await proc.start();

    const after = await proc.api.get(`/organizations/${org.body.id}`, token);
    expect(after.status).toBe(200);
    expect(after.body.baaSignedAt).toBe(baa.body.baaSignedAt);
    for (const k of keys) {
      const ping = await proc.api.get('/v1/ping', k.body.key);
      expect(ping.status).toBe(200);
    }
    const list = await proc.api.get(`/organizations/${org.body.id}/environments/${sandbox}/api-keys`, token);
    expect(list.body.apiKeys).toHaveLength(10);
  });
});
