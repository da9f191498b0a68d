import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { TestApp, inProcess } from '@svc/testing';

/**
 * GET /organizations over real HTTP: the caller's organizations (where its `sub` is a member, any
 * role), each as GET /organizations/{orgId} answers it, kept right as members are added, change
 * role and are removed, read-your-writes, and rebuilt from the event log.
 */
describe('GET /organizations (e2e)', () => {
  const app = new TestApp();
  beforeAll(() => app.start());
  afterAll(() => app.stop());

  const ids = (body: { organizations: { id: string }[] }) => body.organizations.map((o) => o.id);

  it("lists the caller's organizations only, each as GET /organizations/{orgId} answers it", async () => {
    const sub = `lister-${Math.random().toString(36).slice(2)}`;
    const staff = await app.staffToken({ sub });
    const none = await app.api.get('/organizations', staff);
    expect(none.status).toBe(200);
    expect(none.body).toEqual({ organizations: [] });

    const first = await app.api.post('/organizations', { name: 'First Clinic' }, staff);
    const second = await app.api.post('/organizations', { name: 'Second Clinic' }, staff);
    const someoneElse = await app.tenant();
    const list = await app.api.get('/organizations', staff);
    expect(list.status).toBe(200);
    expect(ids(list.body).sort()).toEqual([first.body.id, second.body.id].sort());
    expect(ids(list.body)).not.toContain(someoneElse.orgId);
    for (const org of list.body.organizations) {
      const one = await app.api.get(`/organizations/${org.id}`, staff);
      expect(org).toEqual(one.body);
    }
    // Oldest membership first.
    expect(ids(list.body)).toEqual([first.body.id, second.body.id]);

    // A BAA signed shows at once.
    await app.api.post(`/organizations/${first.body.id}/baa`, { signerName: 'Ada Owner', signerTitle: 'CEO' }, staff);
    const signed = await app.api.get('/organizations', staff);
    expect(signed.body.organizations[0].baaSignedAt).toEqual(expect.any(String));
  });

  it('follows membership: added (any role) it appears, a role change keeps it, removed it is gone at once', async () => {
    const owner = await app.tenant();
    const sub = `member-${Math.random().toString(36).slice(2)}`;
    const staff = await app.staffToken({ sub });
    expect(ids((await app.api.get('/organizations', staff)).body)).toEqual([]);

    expect((await app.api.post(`/organizations/${owner.orgId}/members`, { sub, email: `${sub}@example.test`, role: 'member' }, owner.staff)).status).toBe(201);
    expect(ids((await app.api.get('/organizations', staff)).body)).toEqual([owner.orgId]);

    expect((await app.api.post(`/organizations/${owner.orgId}/members`, { sub, email: `${sub}@example.test`, role: 'admin' }, owner.staff)).status).toBe(201);
    expect(ids((await app.api.get('/organizations', staff)).body)).toEqual([owner.orgId]);
    // The owner's own list is untouched by another member's changes.
    expect(ids((await app.api.get('/organizations', owner.staff)).body)).toEqual([owner.orgId]);

    expect((await app.api.delete(`/organizations/${owner.orgId}/members/${sub}`, owner.staff)).status).toBe(204);
    expect(ids((await app.api.get('/organizations', staff)).body)).toEqual([]);

    // Added again: listed again.
    await app.api.post(`/organizations/${owner.orgId}/members`, { sub, email: `${sub}@example.test`, role: 'member' }, owner.staff);
    expect(ids((await app.api.get('/organizations', staff)).body)).toEqual([owner.orgId]);
  });

  it('needs a staff token: none or an API key is 401 STAFF_AUTH_REQUIRED; a read needs no recent MFA', async () => {
    const t = await app.tenant();
    const none = await app.api.get('/organizations');
    expect(none.status).toBe(401);
    expect(none.body.code).toBe('STAFF_AUTH_REQUIRED');
    const key = await app.api.get('/organizations', t.apiKey);
    expect(key.status).toBe(401);
    expect(key.body.code).toBe('STAFF_AUTH_REQUIRED');
    const noMfa = await app.staffToken({ sub: t.ownerSub, mfa: false });
    const read = await app.api.get('/organizations', noMfa);
    expect(read.status).toBe(200);
    expect(ids(read.body)).toEqual([t.orgId]);
  });

  inProcess('deletes the SQLite read-model file and restarts the app')('is rebuilt from the event log (read models lost)', async () => {
    const sub = `rebuild-${Math.random().toString(36).slice(2)}`;
    const staff = await app.staffToken({ sub });
    const org = await app.api.post('/organizations', { name: 'Rebuilt Clinic' }, staff);
    const other = await app.tenant();
    await app.api.post(`/organizations/${other.orgId}/members`, { sub, email: `${sub}@example.test`, role: 'member' }, other.staff);
    const before = await app.api.get('/organizations', staff);
    expect(ids(before.body)).toEqual([org.body.id, other.orgId]);

    await app.stop();
    for (const suffix of ['', '-wal', '-shm']) rmSync(join(app.dataDir, `read-models.sqlite${suffix}`), { force: true });
    await app.start();
    const again = await app.api.get('/organizations', await app.staffToken({ sub }));
    expect(again.body).toEqual(before.body);
  });
});
