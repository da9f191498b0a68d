import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse } from 'yaml';
import { TestApp } from '@svc/testing';

/**
 * Roles per organization over real HTTP: integration set-up needs `integrations.manage` and the
 * role owner or admin; clinical work needs membership of any role; members are changed, listed
 * and removed by an owner or admin, an admin never touches an owner, and the last owner stays.
 */
describe('roles per organization (e2e, real HTTP)', () => {
  const app = new TestApp();
  let t: Awaited<ReturnType<TestApp['tenant']>>;
  beforeAll(async () => {
    await app.start();
    t = await app.tenant();
  });
  afterAll(() => app.stop());

  const membersPath = () => `/organizations/${t.orgId}/members`;
  /** Adds (or changes) a member as the tenant's owner and signs them in; `permissions` default to `integrations.manage`. */
  async function join_(sub: string, role: 'admin' | 'member', permissions?: string[]): Promise<string> {
    const r = await app.api.post(membersPath(), { sub, email: `${sub}@example.test`, role }, t.staff);
    expect({ sub, status: r.status }).toEqual({ sub, status: 201 });
    return app.staffToken({ sub, ...(permissions ? { permissions } : {}) });
  }
  const code = (r: { status: number; body?: { code?: string } }) => `${r.status} ${r.body?.code ?? ''}`.trim();

  it('a member holding integrations.manage is refused every integration set-up call (403 ROLE_REQUIRED) and changes nothing', async () => {
    const member = await join_('setup-member', 'member');
    const env = t.env;
    // Resources of the owner's, so that a refusal is the role's and not a 404.
    const key = await app.api.post(`${env}/api-keys`, { name: 'owner key' }, t.staff);
    const endpoint = await app.api.post(`${env}/webhook-endpoints`, { url: 'http://127.0.0.1:9/roles-hook', events: ['clinical_case.opened'] }, t.staff);
    const destination = await app.api.post(`${env}/destinations`, { stableKey: 'roles_dest', name: 'Roles', baseUrl: 'https://orders.example.test' }, t.staff);
    const protocol = await app.api.post(
      `${env}/protocols`,
      {
        programKey: 'roles-program',
        name: 'Roles',
        defaultCadenceDays: 30,
        questions: [{ key: 'pain', text: 'Pain?', type: 'scale' }],
        redFlags: { emergencyTerms: true },
      },
      t.staff,
    );
    const definition = { category: 'support', description: 'Roles', triggerPhrases: ['roles hello'], steps: [{ id: 'hi', type: 'reply', message: 'Hello!' }] };
    const workflow = await app.api.post(`${env}/conversation-workflows`, { stableKey: 'roles_flow', name: 'Roles flow', definition }, t.staff);
    expect([key, endpoint, destination, protocol, workflow].map(code)).toEqual(['201', '201', '201', '201', '201']);

    const calls: [string, Promise<{ status: number; body: { code?: string } }>][] = [
      ['create API key', app.api.post(`${env}/api-keys`, { name: 'member key' }, member)],
      ['list API keys', app.api.get(`${env}/api-keys`, member)],
      ['revoke API key', app.api.delete(`${env}/api-keys/${key.body.id}`, member)],
      ['rotate secret', app.api.post(`${env}/secrets/rotate`, { kind: 'identity_token' }, member)],
      [
        'create webhook endpoint',
        app.api.post(`${env}/webhook-endpoints`, { url: 'http://127.0.0.1:9/member-hook', events: ['clinical_case.opened'] }, member),
      ],
      ['list webhook endpoints', app.api.get(`${env}/webhook-endpoints`, member)],
      ['rotate endpoint secret', app.api.post(`${env}/webhook-endpoints/${endpoint.body.id}/rotate-secret`, undefined, member)],
      ['read deliveries', app.api.get(`${env}/webhook-endpoints/${endpoint.body.id}/deliveries`, member)],
      ['delete webhook endpoint', app.api.delete(`${env}/webhook-endpoints/${endpoint.body.id}`, member)],
      ['create destination', app.api.post(`${env}/destinations`, { stableKey: 'member_dest', name: 'Member', baseUrl: 'https://orders.example.test' }, member)],
      ['list destinations', app.api.get(`${env}/destinations`, member)],
      [
        'create protocol',
        app.api.post(
          `${env}/protocols`,
          {
            programKey: 'member-program',
            name: 'Member',
            defaultCadenceDays: 30,
            questions: [{ key: 'pain', text: 'Pain?', type: 'scale' }],
            redFlags: { emergencyTerms: true },
          },
          member,
        ),
      ],
      ['list protocols', app.api.get(`${env}/protocols`, member)],
      ['activate protocol', app.api.post(`${env}/protocols/${protocol.body.id}/activate`, undefined, member)],
      ['create workflow', app.api.post(`${env}/conversation-workflows`, { stableKey: 'member_flow', name: 'Member flow', definition }, member)],
      ['list workflows', app.api.get(`${env}/conversation-workflows`, member)],
    ];
    const answers = await Promise.all(calls.map(async ([name, p]) => [name, code(await p)]));
    expect(answers).toEqual(calls.map(([name]) => [name, '403 ROLE_REQUIRED']));

    // Nothing of it happened.
    expect((await app.api.get(`${env}/api-keys`, t.staff)).body.apiKeys.map((k: { name: string; revokedAt: string | null }) => [k.name, k.revokedAt])).toEqual(
      expect.arrayContaining([['owner key', null]]),
    );
    expect((await app.api.get(`${env}/api-keys`, t.staff)).body.apiKeys.map((k: { name: string }) => k.name)).not.toContain('member key');
    expect((await app.api.get(`${env}/webhook-endpoints`, t.staff)).body.webhookEndpoints.map((e: { url: string }) => e.url)).toEqual([
      'http://127.0.0.1:9/roles-hook',
    ]);
    expect((await app.api.get(`${env}/destinations`, t.staff)).body.destinations.map((d: { stableKey: string }) => d.stableKey)).toEqual(['roles_dest']);
    expect((await app.api.get(`${env}/protocols`, t.staff)).body.protocols.map((p: { programKey: string }) => p.programKey)).not.toContain('member-program');
    expect((await app.api.get(`${env}/protocols`, t.staff)).body.protocols.find((p: { id: string }) => p.id === protocol.body.id).active).toBe(false);
    expect((await app.api.get(`${env}/conversation-workflows`, t.staff)).body.workflows.map((w: { stableKey: string }) => w.stableKey)).toEqual(['roles_flow']);

    // An admin with the permission may; an admin without it is 403 PERMISSION_REQUIRED, as is the owner without it.
    const admin = await join_('setup-admin', 'admin');
    expect(code(await app.api.post(`${env}/api-keys`, { name: 'admin key' }, admin))).toBe('201');
    expect(code(await app.api.get(`${env}/webhook-endpoints/${endpoint.body.id}/deliveries`, admin))).toBe('200');
    const adminNoPerm = await join_('setup-admin-no-perm', 'admin', []);
    expect(code(await app.api.post(`${env}/api-keys`, { name: 'x' }, adminNoPerm))).toBe('403 PERMISSION_REQUIRED');
    expect(code(await app.api.post(`${env}/secrets/rotate`, { kind: 'widget_signing' }, adminNoPerm))).toBe('403 PERMISSION_REQUIRED');
    expect(code(await app.api.get(`${env}/conversation-workflows`, adminNoPerm))).toBe('403 PERMISSION_REQUIRED');
    const ownerNoPerm = await app.staffToken({ sub: t.ownerSub, permissions: [] });
    expect(code(await app.api.post(`${env}/destinations`, { stableKey: 'x_dest', name: 'X', baseUrl: 'https://orders.example.test' }, ownerNoPerm))).toBe(
      '403 PERMISSION_REQUIRED',
    );

    // Promoted to admin, the same person may set up at once; demoted again, not.
    await join_('setup-member', 'admin');
    expect(code(await app.api.post(`${env}/api-keys`, { name: 'promoted key' }, member))).toBe('201');
    await join_('setup-member', 'member');
    expect(code(await app.api.post(`${env}/api-keys`, { name: 'demoted key' }, member))).toBe('403 ROLE_REQUIRED');
  });

  it('every integration set-up operation of the contract refuses a member (ROLE_REQUIRED) and a token without the permission (PERMISSION_REQUIRED); clinical work does not', async () => {
    const member = await join_('sweep-member', 'member');
    const adminNoPerm = await join_('sweep-admin-no-perm', 'admin', []);
    const memberNoPerm = await join_('sweep-member-no-perm', 'member', []);
    const doc = parse(readFileSync(join(__dirname, '..', '..', 'contracts', 'openapi.yaml'), 'utf8')) as { paths: Record<string, Record<string, unknown>> };
    const prefix = '/organizations/{orgId}/environments/{envId}/';
    const clinical = (path: string) => path.startsWith(`${prefix}clinical-cases`) || /\/patients\/\{patientId\}\/check-ins$/.test(path);
    const ops = Object.entries(doc.paths)
      .filter(([path]) => path.startsWith(prefix))
      .flatMap(([path, item]) => ['get', 'post', 'put', 'patch', 'delete'].filter((m) => item[m]).map((method) => ({ method: method.toUpperCase(), path })));
    const setUp = ops.filter((o) => !clinical(o.path));
    expect(setUp.length).toBeGreaterThan(25);
    expect(ops.filter((o) => clinical(o.path)).length).toBe(5);
    const url = (path: string) =>
      path
        .replace('{orgId}', t.orgId)
        .replace('{envId}', t.sandbox)
        .replace(/\{[^}]+\}/g, '00000000-0000-4000-8000-000000000000');
    const ask = (o: { method: string; path: string }, token: string) =>
      app.api.request(o.method, url(o.path), { token, ...(['POST', 'PUT', 'PATCH'].includes(o.method) ? { body: {} } : {}) });
    for (const [who, token, expected] of [
      ['member', member, '403 ROLE_REQUIRED'],
      ['admin without the permission', adminNoPerm, '403 PERMISSION_REQUIRED'],
      ['member without the permission', memberNoPerm, '403 PERMISSION_REQUIRED'],
    ] as const) {
      const got = [];
      for (const o of setUp) got.push({ op: `${o.method} ${o.path}`, who, answer: code(await ask(o, token)) });
      expect(got).toEqual(setUp.map((o) => ({ op: `${o.method} ${o.path}`, who, answer: expected })));
    }
    for (const o of ops.filter((x) => clinical(x.path))) {
      const r = await ask(o, memberNoPerm);
      expect({ op: `${o.method} ${o.path}`, refused: r.status === 403 }).toEqual({ op: `${o.method} ${o.path}`, refused: false });
    }
  });

  it('clinical work needs membership of any role: a member without any permission lists, opens, reads and acknowledges cases and sends a check-in now', async () => {
    const { patientId } = await app.enrolledPatient({ staff: t.staff, env: t.env, apiKey: t.apiKey });
    for (const [sub, permissions] of [
      ['clinic-member', []],
      ['clinic-member-perm', undefined],
    ] as const) {
      const member = await join_(sub, 'member', permissions as string[] | undefined);
      const opened = await app.api.post(`${t.env}/clinical-cases`, { patientId, request: `Please review the dosage (${sub})` }, member);
      expect(code(opened)).toBe('201');
      const list = await app.api.get(`${t.env}/clinical-cases`, member);
      expect(code(list)).toBe('200');
      expect(list.body.clinicalCases.map((c: { caseId: string }) => c.caseId)).toContain(opened.body.caseId);
      expect(code(await app.api.get(`${t.env}/clinical-cases/${opened.body.caseId}`, member))).toBe('200');
      expect(code(await app.api.post(`${t.env}/clinical-cases/${opened.body.caseId}/acknowledge`, undefined, member))).toBe('200');
      const checkIn = await app.api.post(`${t.env}/patients/${patientId}/check-ins`, undefined, member);
      expect(code(checkIn)).toBe('201');
      expect(checkIn.body.checkInId).toEqual(expect.any(String));
    }
  });

  it('lists members with their roles and the time they were added; changes a role; re-adding with the same role changes nothing', async () => {
    const o = await app.tenant();
    const path = `/organizations/${o.orgId}/members`;
    const added = await app.api.post(path, { sub: 'list-admin', email: 'list-admin@example.test', role: 'admin' }, o.staff);
    expect(added.status).toBe(201);
    expect(added.body).toEqual({ sub: 'list-admin', email: 'list-admin@example.test', role: 'admin', addedAt: expect.any(String) });
    await app.advanceClock(60);
    const m = await app.api.post(path, { sub: 'list-member', email: 'list-member@example.test', role: 'member' }, o.staff);
    expect(m.status).toBe(201);
    const member = await app.staffToken({ sub: 'list-member' });

    const list = await app.api.get(path, member); // any member may read the list
    expect(list.status).toBe(200);
    const bySub = (l: { members: { sub: string; role: string }[] }) => [...l.members].sort((a, b) => a.sub.localeCompare(b.sub));
    expect(bySub(list.body)).toEqual([
      { sub: 'list-admin', email: 'list-admin@example.test', role: 'admin', addedAt: added.body.addedAt },
      { sub: 'list-member', email: 'list-member@example.test', role: 'member', addedAt: m.body.addedAt },
      { sub: o.ownerSub, email: `${o.ownerSub}@example.test`, role: 'owner', addedAt: expect.any(String) },
    ]);
    expect(Date.parse(m.body.addedAt) - Date.parse(added.body.addedAt)).toBeGreaterThanOrEqual(60_000);

    // The same sub and role again: 201, nothing changes (the first addedAt stays).
    await app.advanceClock(60);
    const again = await app.api.post(path, { sub: 'list-member', email: 'list-member@example.test', role: 'member' }, o.staff);
    expect(again.status).toBe(201);
    expect(again.body).toEqual(m.body);
    // Another role: changed; still added when first added. An admin may change another admin, and a member.
    const admin = await app.staffToken({ sub: 'list-admin' });
    const promoted = await app.api.post(path, { sub: 'list-member', email: 'list-member@example.test', role: 'admin' }, admin);
    expect(promoted.status).toBe(201);
    expect(promoted.body).toEqual({ ...m.body, role: 'admin' });
    const demoted = await app.api.post(path, { sub: 'list-member', email: 'list-member@example.test', role: 'member' }, admin);
    expect(demoted.body.role).toBe('member');
    expect((await app.api.post(path, { sub: 'list-admin-2', email: 'a2@example.test', role: 'admin' }, admin)).status).toBe(201);
    expect(code(await app.api.post(path, { sub: 'list-admin-2', email: 'a2@example.test', role: 'member' }, admin))).toBe('201');
    // A member may change nobody.
    expect(code(await app.api.post(path, { sub: 'list-admin', email: 'list-admin@example.test', role: 'member' }, member))).toBe('403 ROLE_REQUIRED');
    expect(code(await app.api.post(path, { sub: 'list-member', email: 'list-member@example.test', role: 'admin' }, member))).toBe('403 ROLE_REQUIRED');
    const after = bySub((await app.api.get(path, o.staff)).body);
    expect(after.map((x: { sub: string; role: string }) => `${x.sub}:${x.role}`)).toEqual([
      'list-admin:admin',
      'list-admin-2:member',
      'list-member:member',
      `${o.ownerSub}:owner`,
    ]);
    // Oldest first, also for a sub that looks like an integer (an object would put it first).
    await app.advanceClock(1);
    expect((await app.api.post(path, { sub: '2024', email: 'numeric@example.test', role: 'member' }, o.staff)).status).toBe(201);
    expect((await app.api.get(path, o.staff)).body.members.map((x: { sub: string }) => x.sub)).toEqual([
      o.ownerSub,
      'list-admin',
      'list-member',
      'list-admin-2',
      '2024',
    ]);
    // Not a member: 404 like every other organization route.
    expect(code(await app.api.get(path, await app.staffToken({ sub: 'list-stranger' })))).toBe('404 NOT_FOUND');
  });

  it('removes a member: 204, and the removed user’s next request is 404 like any non-member’s', async () => {
    const o = await app.tenant();
    const path = `/organizations/${o.orgId}/members`;
    expect((await app.api.post(path, { sub: 'leaving-admin', email: 'leaving@example.test', role: 'admin' }, o.staff)).status).toBe(201);
    const leaving = await app.staffToken({ sub: 'leaving-admin' });
    expect(code(await app.api.get(`${o.env}/clinical-cases`, leaving))).toBe('200');
    expect(code(await app.api.get(`${o.env}/api-keys`, leaving))).toBe('200');

    const removed = await app.api.delete(`${path}/leaving-admin`, o.staff);
    expect(removed.status).toBe(204);
    expect(removed.text).toBe('');
    for (const r of [
      await app.api.get(`/organizations/${o.orgId}`, leaving),
      await app.api.get(`${o.env}/clinical-cases`, leaving),
      await app.api.get(`${o.env}/api-keys`, leaving),
      await app.api.post(`${o.env}/api-keys`, { name: 'after removal' }, leaving),
      await app.api.get(path, leaving),
    ]) {
      expect(code(r)).toBe('404 NOT_FOUND');
    }
    expect((await app.api.get(path, o.staff)).body.members.map((x: { sub: string }) => x.sub)).toEqual([o.ownerSub]);
    // Removing again, or an unknown sub: 404.
    expect(code(await app.api.delete(`${path}/leaving-admin`, o.staff))).toBe('404 NOT_FOUND');
    expect(code(await app.api.delete(`${path}/nobody-at-all`, o.staff))).toBe('404 NOT_FOUND');
    for (const sub of ['constructor', '__proto__', 'toString']) expect(code(await app.api.delete(`${path}/${sub}`, o.staff))).toBe('404 NOT_FOUND');

    // Added again: a member once more, added now.
    await app.advanceClock(5);
    const back = await app.api.post(path, { sub: 'leaving-admin', email: 'leaving@example.test', role: 'member' }, o.staff);
    expect(back.status).toBe(201);
    expect(code(await app.api.get(`/organizations/${o.orgId}`, leaving))).toBe('200');

    // A sub with characters a path must encode is named percent-encoded.
    const odd = 'auth0|abc/def ghi';
    expect((await app.api.post(path, { sub: odd, email: 'odd@example.test', role: 'member' }, o.staff)).status).toBe(201);
    expect((await app.api.delete(`${path}/${encodeURIComponent(odd)}`, o.staff)).status).toBe(204);
    expect((await app.api.get(path, o.staff)).body.members.map((x: { sub: string }) => x.sub)).not.toContain(odd);
  });

  it('keeps the owner: an admin may not change or remove an owner (403 ROLE_REQUIRED), the last owner can be neither removed nor demoted (409 LAST_OWNER), a member removes nobody', async () => {
    const o = await app.tenant();
    const path = `/organizations/${o.orgId}/members`;
    for (const [sub, role] of [
      ['keep-admin', 'admin'],
      ['keep-admin-2', 'admin'],
      ['keep-member', 'member'],
    ] as const) {
      expect((await app.api.post(path, { sub, email: `${sub}@example.test`, role }, o.staff)).status).toBe(201);
    }
    const admin = await app.staffToken({ sub: 'keep-admin' });
    const member = await app.staffToken({ sub: 'keep-member' });
    const ownerEmail = `${o.ownerSub}@example.test`;

    expect(code(await app.api.delete(`${path}/${o.ownerSub}`, admin))).toBe('403 ROLE_REQUIRED');
    expect(code(await app.api.post(path, { sub: o.ownerSub, email: ownerEmail, role: 'admin' }, admin))).toBe('403 ROLE_REQUIRED');
    expect(code(await app.api.post(path, { sub: o.ownerSub, email: ownerEmail, role: 'member' }, admin))).toBe('403 ROLE_REQUIRED');
    expect(code(await app.api.delete(`${path}/${o.ownerSub}`, o.staff))).toBe('409 LAST_OWNER');
    expect(code(await app.api.post(path, { sub: o.ownerSub, email: ownerEmail, role: 'admin' }, o.staff))).toBe('409 LAST_OWNER');
    expect(code(await app.api.post(path, { sub: o.ownerSub, email: ownerEmail, role: 'member' }, o.staff))).toBe('409 LAST_OWNER');
    expect(code(await app.api.delete(`${path}/keep-admin`, member))).toBe('403 ROLE_REQUIRED');
    expect(code(await app.api.delete(`${path}/keep-member`, member))).toBe('403 ROLE_REQUIRED');
    // A write without a recent MFA sign-in: 403 MFA_REQUIRED, nothing removed.
    expect(code(await app.api.delete(`${path}/keep-member`, await app.staffToken({ sub: o.ownerSub, mfa: false })))).toBe('403 MFA_REQUIRED');
    // Not a member: 404 before anything else.
    expect(code(await app.api.delete(`${path}/keep-member`, await app.staffToken({ sub: 'keep-stranger' })))).toBe('404 NOT_FOUND');

    const roles = async () => Object.fromEntries((await app.api.get(path, o.staff)).body.members.map((x: { sub: string; role: string }) => [x.sub, x.role]));
    expect(await roles()).toEqual({ [o.ownerSub]: 'owner', 'keep-admin': 'admin', 'keep-admin-2': 'admin', 'keep-member': 'member' });
    // An admin may remove another admin, and a member.
    expect((await app.api.delete(`${path}/keep-admin-2`, admin)).status).toBe(204);
    expect((await app.api.delete(`${path}/keep-member`, admin)).status).toBe(204);
    expect(await roles()).toEqual({ [o.ownerSub]: 'owner', 'keep-admin': 'admin' });
    expect(code(await app.api.get(`/organizations/${o.orgId}`, o.staff))).toBe('200');
  });

  it('refuses bad member bodies with 400 VALIDATION_FAILED', async () => {
    const path = membersPath();
    for (const [body, paths] of [
      [{ sub: 'v', email: 'v@example.test', role: 'owner' }, ['role']],
      [{ sub: 'v', email: 'v@example.test', role: 'superuser' }, ['role']],
      [{ sub: 'v', email: 'v@example.test' }, ['role']],
      [{ sub: 'v', email: 'v@example.test', role: 'member', extra: 1 }, ['extra']],
      [{ sub: '', email: 'v@example.test', role: 'member' }, ['sub']],
      [{ sub: 'v', email: 'not-an-email', role: 'member' }, ['email']],
    ] as const) {
      const r = await app.api.post(path, body, t.staff);
      expect({ body, status: r.status, code: r.body.code, paths: [...new Set(r.body.details?.map((d: { path: string }) => d.path))] }).toEqual({
        body,
        status: 400,
        code: 'VALIDATION_FAILED',
        paths,
      });
    }
    // A body on DELETE is refused like on any operation that takes none.
    expect((await app.api.post(path, { sub: 'v-body', email: 'v@example.test', role: 'member' }, t.staff)).status).toBe(201);
    const withBody = await app.api.request('DELETE', `${path}/v-body`, { token: t.staff, body: { reason: 'x' } });
    expect(code(withBody)).toBe('400 VALIDATION_FAILED');
    expect((await app.api.get(path, t.staff)).body.members.map((x: { sub: string }) => x.sub)).toContain('v-body');
  });
});
