// Over 400 lines: the widget workflow agent end to end on one service.
import { randomUUID } from 'node:crypto';
import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import { IncomingMessage, Server, createServer } from 'node:http';
import { OidcIssuer, TestApp, describeInProcess } from '@svc/testing';
import { identityToken } from './case-helpers';

/** Issue 6: a multi-message conversation (pending asks, ownership, confirm, hand-off) and production address checks. */

class Destination {
  server!: Server;
  baseUrl!: string;
  secret = '';
  seen: { method: string; url: string; raw: string; ok: boolean }[] = [];
  /** When set, POSTs (account changes) wait for it before answering. */
  postGate: Promise<void> | null = null;
  async start(owner: string): Promise<void> {
    this.server = createServer((req: IncomingMessage, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', async () => {
        if (req.method === 'POST' && this.postGate) await this.postGate;
        const raw = Buffer.concat(chunks).toString('utf8');
        const ts = String(req.headers['x-svc-timestamp'] ?? '');
        const sig = String(req.headers['x-svc-signature'] ?? '');
        const expected = `v1=${createHmac('sha256', this.secret).update(`${ts}.${req.method} ${req.url}\n${raw}`).digest('hex')}`;
        const ok = sig.length === expected.length && timingSafeEqual(Buffer.from(sig), Buffer.from(expected));
        this.seen.push({ method: req.method!, url: req.url!, raw, ok });
        if (!ok) return void res.writeHead(401).end();
        const m = /^\/api\/orders\/([^/?]+)(\/returns)?$/.exec(req.url!);
        if (!m) return void res.writeHead(404).end();
        const id = decodeURIComponent(m[1]);
        const record = { id, status: 'delivered', patientId: id.startsWith('B') ? owner : 'someone-else' };
        res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(m[2] ? { ok: true, patientId: owner } : record));
      });
    });
    await new Promise<void>((r) => this.server.listen(0, '127.0.0.1', () => r()));
    this.baseUrl = `http://127.0.0.1:${(this.server.address() as { port: number }).port}/api`;
  }
  stop(): Promise<void> {
    return new Promise((r) => this.server.close(() => r()));
  }
}

const definition = {
  category: 'fulfillment',
  description: 'Returns',
  triggerPhrases: ['return my order', 'devolver mi pedido'],
  excludePhrases: ['never mind'],
  steps: [
    { id: 'which', type: 'ask', variable: 'orderNo', prompt: 'Which order number?', format: 'order_number', label: 'Order number' },
    {
      id: 'lookup',
      type: 'call_api',
      destinationStableKey: 'shop',
      method: 'GET',
      path: '/orders/{{orderNo}}',
      ownership: { patientIdPath: 'patientId' },
      save: [{ variable: 'status', path: 'status' }],
      notFoundReply: 'I could not find order {{orderNo}} for you.',
      errorReply: 'I could not check that order. Shall I connect you with our team?',
    },
    { id: 'delivered', type: 'condition', variable: 'status', operator: 'equals', value: 'delivered', then: 'sure', else: 'not_yet' },
    { id: 'sure', type: 'confirm', prompt: 'Return order {{orderNo}}?', declineReply: 'OK, nothing was changed.' },
    {
      id: 'start_return',
      type: 'call_api',
      destinationStableKey: 'shop',
      method: 'POST',
      path: '/orders/{{orderNo}}/returns',
      body: { note: 'Return "{{orderNo}}" for run {{run.id}}' },
      ownership: { patientIdPath: 'patientId' },
      save: [],
      notFoundReply: 'I could not start the return.',
      errorReply: 'I could not start the return. Shall I connect you with our team?',
    },
    {
      id: 'team',
      type: 'hand_off',
      message: 'Your return has started; our team will email the label.',
      summary: 'Return for {{orderNo}}',
      category: 'fulfillment',
    },
    { id: 'not_yet', type: 'reply', message: 'Order {{orderNo}} is {{status}}; returns open after delivery.' },
  ],
};

async function setUp(app: TestApp, dest: Destination, _owner: string) {
  const t = await app.tenant();
  dest.secret = (await app.api.post(`${t.env}/secrets/rotate`, { kind: 'widget_signing' }, t.staff)).body.secret;
  const d = await app.api.post(`${t.env}/destinations`, { stableKey: 'shop', name: 'Shop', baseUrl: dest.baseUrl }, t.staff);
  expect(d.status).toBe(201);
  const c = await app.api.post(`${t.env}/conversation-workflows`, { stableKey: 'returns', name: 'Returns', definition }, t.staff);
  expect(c.status).toBe(201);
  return { t, workflow: c.body };
}

describe('workflow agent conversations (e2e, real HTTP)', () => {
  const OWNER = 'ext-owner-1';
  const app = new TestApp();
  const dest = new Destination();
  beforeAll(async () => {
    await app.start();
    await dest.start(OWNER);
  });
  afterAll(async () => {
    await dest.stop();
    await app.stop();
  });

  it('continues a conversation across messages: ask, ownership-checked lookup, confirm, account change, hand-off', async () => {
    const { t, workflow } = await setUp(app, dest, OWNER);
    const versionId = workflow.draftVersionId;
    const test = await app.api.post(
      `${t.env}/conversation-workflows/versions/${versionId}/test`,
      { expectedRevision: 1, opening: 'return my order', replies: ['B-77', 'yes'], patientId: OWNER },
      t.staff,
    );
    expect(test.status).toBe(201);
    expect(test.body.passed).toBe(true);
    expect(test.body.steps.map((s: { stepId: string; outcome: string }) => `${s.stepId}:${s.outcome}`)).toEqual([
      'which:asked',
      'which:answered',
      'lookup:call_ok',
      'delivered:then',
      'sure:confirm_asked',
      'sure:confirmed',
      'start_return:call_ok',
      'team:handed_off',
    ]);
    const post = dest.seen.find((s) => s.method === 'POST')!;
    expect(post.url).toBe('/api/orders/B-77/returns');
    expect(JSON.parse(post.raw).note).toBe(`Return "B-77" for run ${test.body.runId}`);
    expect((await app.api.post(`${t.env}/conversation-workflows/versions/${versionId}/activate`, { expectedRevision: 1 }, t.staff)).status).toBe(200);

    await app.enrolledPatient(t, { externalPatientId: OWNER }); // a care-team case needs a known patient
    const rotated = await app.api.post(`${t.env}/secrets/rotate`, { kind: 'identity_token' }, t.staff);
    const session = (
      await app.api.post('/widget/v1/sessions', { environmentId: t.sandbox, identityToken: await identityToken(app, rotated.body.secret, OWNER) })
    ).body.sessionToken;

    // Attachment items are objects: an array in their place is 400 naming it, and nothing runs.
    const att = { id: randomUUID(), fileName: 'a.jpg', contentType: 'image/jpeg', sha256: 'a'.repeat(64) };
    for (const attachments of [[[]], [[att]], [null], ['x']]) {
      const r = await app.api.post('/widget/v1/messages', { message: 'Quiero devolver mi pedido', attachments }, session);
      expect({ status: r.status, code: r.body.code }).toEqual({ status: 400, code: 'VALIDATION_FAILED' });
      expect(r.body.details.map((d: { path: string }) => d.path)).toContain('attachments');
    }
    const m1 = await app.api.post('/widget/v1/messages', { message: 'Quiero devolver mi pedido' }, session);
    expect(m1.status).toBe(201);
    expect(m1.body.replies).toEqual([{ type: 'text', text: 'Which order number?' }]);
    // A health question while the run waits for its answer goes to the care team, never to the
    // workflow (no call is made with it); the run still waits for the order number afterwards.
    const callsBefore = dest.seen.length;
    const health = await app.api.post('/widget/v1/messages', { message: 'I have a fever and a rash since I took the medication' }, session);
    expect(health.status).toBe(201);
    expect(health.body).toMatchObject({ conversationId: m1.body.conversationId, handedOff: true, caseReference: expect.stringMatching(/^CC-/) });
    expect(dest.seen.length).toBe(callsBefore);
    const bad = await app.api.post('/widget/v1/messages', { message: 'no idea!!' }, session);
    expect(bad.body.replies[0].text).toMatch(/order number/);
    const m2 = await app.api.post('/widget/v1/messages', { message: 'B-77' }, session);
    expect(m2.body.conversationId).toBe(m1.body.conversationId);
    expect(m2.body.replies).toEqual([{ type: 'text', text: 'Return order B-77?' }]);
    const m3 = await app.api.post('/widget/v1/messages', { message: 'sí' }, session);
    expect(m3.body.handedOff).toBe(true);
    expect(m3.body.replies).toEqual([{ type: 'text', text: 'Your return has started; our team will email the label.' }]);

    // Another patient's record reads as not found.
    await app.api.post('/widget/v1/messages', { message: 'return my order' }, session);
    const other = await app.api.post('/widget/v1/messages', { message: 'C-9' }, session);
    expect(other.body.replies).toEqual([{ type: 'text', text: 'I could not find order C-9 for you.' }]);

    // An exclude phrase stops the match.
    const excluded = await app.api.post('/widget/v1/messages', { message: 'return my order... never mind' }, session);
    expect(excluded.body.replies[0].text).toMatch(/team/);

    const runs = await app.api.get(`${t.env}/conversation-workflows/${workflow.id}/runs`, t.staff);
    const json = JSON.stringify(runs.body);
    expect(json).not.toContain('B-77');
    expect(json).not.toContain(OWNER);
    expect(runs.body.runs.map((r: { outcome: string }) => r.outcome)).toEqual(['not_found', 'handed_off', 'handed_off']);
  });

  it("calls that name the patient are never sent for an anonymous visitor (asked to sign in), nor for a signed-in patient whose token has no email (the step's errorReply)", async () => {
    const t = await app.tenant();
    dest.secret = (await app.api.post(`${t.env}/secrets/rotate`, { kind: 'widget_signing' }, t.staff)).body.secret;
    expect((await app.api.post(`${t.env}/destinations`, { stableKey: 'shop', name: 'Shop', baseUrl: dest.baseUrl }, t.staff)).status).toBe(201);
    const plan = {
      category: 'billing',
      description: 'Plan status',
      triggerPhrases: ['my plan status'],
      steps: [
        // No ownership check and no orders contract: only the body names the patient.
        {
          id: 'look',
          type: 'call_api',
          destinationStableKey: 'shop',
          method: 'POST',
          readOnly: true,
          path: '/orders/B-1',
          body: { email: '{{patient.email}}' },
          save: [{ variable: 'status', path: 'status' }],
          notFoundReply: 'Not found.',
          errorReply: 'I cannot check that here; shall I connect you with our team?',
        },
        { id: 'done', type: 'reply', message: 'Status: {{status}}' },
      ],
    };
    const c = await app.api.post(`${t.env}/conversation-workflows`, { stableKey: 'plan', name: 'Plan', definition: plan }, t.staff);
    expect(c.status).toBe(201);
    const versionId = c.body.draftVersionId;
    const seen = () => dest.seen.length;

    // A test run without a sample patient is the anonymous visitor: nothing is sent, and it does not pass.
    let before = seen();
    const anonTest = await app.api.post(
      `${t.env}/conversation-workflows/versions/${versionId}/test`,
      { expectedRevision: 1, opening: 'my plan status', replies: [] },
      t.staff,
    );
    expect(anonTest.body.passed).toBe(false);
    expect(anonTest.body.steps).toEqual([{ stepId: 'look', type: 'call_api', outcome: 'sign_in_required' }]);
    expect(seen()).toBe(before);
    const test = await app.api.post(
      `${t.env}/conversation-workflows/versions/${versionId}/test`,
      { expectedRevision: 1, opening: 'my plan status', replies: [], patientId: OWNER, patientEmail: 'p@example.test' },
      t.staff,
    );
    expect(test.body.passed).toBe(true);
    expect(JSON.parse(dest.seen.at(-1)!.raw)).toEqual({ email: 'p@example.test' });
    expect((await app.api.post(`${t.env}/conversation-workflows/versions/${versionId}/activate`, { expectedRevision: 1 }, t.staff)).status).toBe(200);

    before = seen();
    const anonymous = (await app.api.post('/widget/v1/sessions', { environmentId: t.sandbox })).body.sessionToken;
    const a = await app.api.post('/widget/v1/messages', { message: 'What is my plan status?' }, anonymous);
    expect(a.status).toBe(201);
    expect(a.body.replies).toEqual([{ type: 'text', text: expect.stringMatching(/^Please sign in/) }]);
    expect(seen()).toBe(before);

    const rotated = await app.api.post(`${t.env}/secrets/rotate`, { kind: 'identity_token' }, t.staff);
    const session = async (claims: Record<string, string>) =>
      (await app.api.post('/widget/v1/sessions', { environmentId: t.sandbox, identityToken: await identityToken(app, rotated.body.secret, OWNER, claims) }))
        .body.sessionToken;

    const withoutEmail = await app.api.post('/widget/v1/messages', { message: 'my plan status' }, await session({}));
    expect(withoutEmail.body.replies).toEqual([{ type: 'text', text: 'I cannot check that here; shall I connect you with our team?' }]);
    expect(seen()).toBe(before);

    const withEmail = await app.api.post('/widget/v1/messages', { message: 'my plan status' }, await session({ email: 'p@example.test' }));
    expect(withEmail.body.replies).toEqual([{ type: 'text', text: 'Status: delivered' }]);
    expect(seen()).toBe(before + 1);
    expect(JSON.parse(dest.seen.at(-1)!.raw)).toEqual({ email: 'p@example.test' });

    const runs = await app.api.get(`${t.env}/conversation-workflows/${c.body.id}/runs`, t.staff);
    expect(runs.body.runs.filter((r: { test: boolean }) => !r.test).map((r: { outcome: string }) => r.outcome)).toEqual([
      'completed',
      'error',
      'sign_in_required',
    ]);
  });
});

/**
 * The environment's identity_token secret, rotated once to be read: rotating it again would end
 * the sessions opened before (docs/decisions.md "Widget sessions and identity tokens").
 */
const identitySecrets = new Map<string, Promise<string>>();
function identitySecret(app: TestApp, t: { env: string; staff: string }): Promise<string> {
  let secret = identitySecrets.get(t.env);
  if (!secret) {
    secret = app.api.post(`${t.env}/secrets/rotate`, { kind: 'identity_token' }, t.staff).then((r) => r.body.secret as string);
    identitySecrets.set(t.env, secret);
  }
  return secret;
}

async function patientSession(app: TestApp, t: { env: string; staff: string; sandbox: string }, externalId: string): Promise<string> {
  const r = await app.api.post('/widget/v1/sessions', {
    environmentId: t.sandbox,
    identityToken: await identityToken(app, await identitySecret(app, t), externalId),
  });
  expect(r.status).toBe(201);
  return r.body.sessionToken;
}

describe('concurrent replies to one turn (e2e)', () => {
  const OWNER = 'ext-owner-2';
  const app = new TestApp();
  const dest = new Destination();
  beforeAll(async () => {
    await app.start();
    await dest.start(OWNER);
  });
  afterAll(async () => {
    await dest.stop();
    await app.stop();
  });

  it('three quick "yes" to a confirm step: exactly one account-changing call; the others are told to wait', async () => {
    const { t, workflow } = await setUp(app, dest, OWNER);
    const versionId = workflow.draftVersionId;
    expect(
      (
        await app.api.post(
          `${t.env}/conversation-workflows/versions/${versionId}/test`,
          { expectedRevision: 1, opening: 'return my order', replies: ['B-5', 'yes'], patientId: OWNER },
          t.staff,
        )
      ).body.passed,
    ).toBe(true);
    expect((await app.api.post(`${t.env}/conversation-workflows/versions/${versionId}/activate`, { expectedRevision: 1 }, t.staff)).status).toBe(200);
    const session = await patientSession(app, t, OWNER);
    await app.api.post('/widget/v1/messages', { message: 'return my order' }, session);
    const asked = await app.api.post('/widget/v1/messages', { message: 'B-77' }, session);
    expect(asked.body.replies).toEqual([{ type: 'text', text: 'Return order B-77?' }]);

    const postsBefore = dest.seen.filter((x) => x.method === 'POST').length;
    let release!: () => void;
    dest.postGate = new Promise<void>((r) => (release = r));
    let settled = 0;
    try {
      const sends = [0, 1, 2].map(() =>
        app.api.post('/widget/v1/messages', { message: 'yes' }, session).then((r) => {
          settled++;
          return r;
        }),
      );
      // The winner waits on the Destination; the others answer at once.
      for (let i = 0; i < 500 && settled < 2; i++) await new Promise((r) => setTimeout(r, 10));
      release();
      const answers = await Promise.all(sends);
      for (const a of answers) expect(a.status).toBe(201);
      expect(dest.seen.filter((x) => x.method === 'POST').length).toBe(postsBefore + 1);
      const winners = answers.filter((a) => a.body.handedOff);
      expect(winners).toHaveLength(1);
      expect(winners[0].body.replies).toEqual([{ type: 'text', text: 'Your return has started; our team will email the label.' }]);
      const losers = answers.filter((a) => !a.body.handedOff);
      expect(losers.map((a) => a.body.replies)).toEqual([
        [{ type: 'text', text: expect.stringMatching(/still working on your previous message/) }],
        [{ type: 'text', text: expect.stringMatching(/still working on your previous message/) }],
      ]);
    } finally {
      dest.postGate = null;
      release();
    }
    const runs = await app.api.get(`${t.env}/conversation-workflows/${workflow.id}/runs`, t.staff);
    expect(runs.body.runs.map((r: { outcome: string }) => r.outcome)).toEqual(['handed_off', 'handed_off']);
  });

  it('recognises a retried widget message by its Idempotency-Key: the first answer again, no second run, case or call; another message 409', async () => {
    const { t, workflow } = await setUp(app, dest, OWNER);
    const versionId = workflow.draftVersionId;
    expect(
      (
        await app.api.post(
          `${t.env}/conversation-workflows/versions/${versionId}/test`,
          { expectedRevision: 1, opening: 'return my order', replies: ['B-5', 'yes'], patientId: OWNER },
          t.staff,
        )
      ).body.passed,
    ).toBe(true);
    expect((await app.api.post(`${t.env}/conversation-workflows/versions/${versionId}/activate`, { expectedRevision: 1 }, t.staff)).status).toBe(200);
    await app.enrolledPatient(t, { externalPatientId: OWNER }); // a care-team case needs a known patient
    const session = await patientSession(app, t, OWNER);
    const send = (message: string, key?: string) =>
      app.api.request('POST', '/widget/v1/messages', { token: session, body: { message }, headers: key ? { 'idempotency-key': key } : {} });

    // A workflow opening sent twice with one key: one run, the second answer is the first one again.
    const k1 = randomUUID();
    const first = await send('return my order', k1);
    expect(first.status).toBe(201);
    expect(first.body).toMatchObject({ replies: [{ type: 'text', text: 'Which order number?' }], duplicate: false });
    const again = await send('return my order', k1.toUpperCase());
    expect(again.status).toBe(201);
    expect(again.body).toEqual({ ...first.body, duplicate: true });
    const reused = await send('B-77', k1);
    expect(reused.status).toBe(409);
    expect(reused.body.code).toBe('IDEMPOTENCY_KEY_REUSED');
    expect((await send('B-77', 'not-a-uuid')).body).toMatchObject({ code: 'VALIDATION_FAILED', details: [{ path: 'Idempotency-Key' }] });

    // The run's next turn, five times at once with one key: one lookup call, one answer for all.
    const callsBefore = dest.seen.length;
    const k2 = randomUUID();
    const burst = await Promise.all([0, 1, 2, 3, 4].map(() => send('B-77', k2)));
    expect(burst.map((r) => r.status)).toEqual([201, 201, 201, 201, 201]);
    expect(burst.map((r) => r.body.replies)).toEqual(burst.map(() => [{ type: 'text', text: 'Return order B-77?' }]));
    expect(burst.filter((r) => !r.body.duplicate)).toHaveLength(1);
    expect(dest.seen.length).toBe(callsBefore + 1);

    // A health question retried with its key opens one case; without a key the contract's behaviour stays (a new turn each time).
    const k3 = randomUUID();
    const health = await send('I have a fever and a rash since I took the medication', k3);
    expect(health.body).toMatchObject({ handedOff: true, caseReference: expect.stringMatching(/^CC-/), duplicate: false });
    const healthAgain = await send('I have a fever and a rash since I took the medication', k3);
    expect(healthAgain.body).toEqual({ ...health.body, duplicate: true });
    // The key is the patient's: signed in again (a new session), the retry is still the same message.
    const session2 = await patientSession(app, t, OWNER);
    const fromNewSession = await app.api.request('POST', '/widget/v1/messages', {
      token: session2,
      body: { message: 'I have a fever and a rash since I took the medication' },
      headers: { 'idempotency-key': k3 },
    });
    expect(fromNewSession.body).toEqual({ ...health.body, duplicate: true });
    const cases = await app.api.get(`${t.env}/clinical-cases`, t.staff);
    expect(cases.body.clinicalCases.filter((c: { reference: string }) => c.reference === health.body.caseReference)).toHaveLength(1);
    expect((await send('B-78')).body.duplicate).toBe(false);
    const runs = await app.api.get(`${t.env}/conversation-workflows/${workflow.id}/runs`, t.staff);
    expect(runs.body.runs).toHaveLength(1 + 1); // the readiness test's run and the patient's one
  });

  it('a retry that arrives while a slow turn is still answered (even a minute later on the service clock) waits for its answer: one account-changing call', async () => {
    const { t, workflow } = await setUp(app, dest, OWNER);
    const versionId = workflow.draftVersionId;
    expect(
      (
        await app.api.post(
          `${t.env}/conversation-workflows/versions/${versionId}/test`,
          { expectedRevision: 1, opening: 'return my order', replies: ['B-5', 'yes'], patientId: OWNER },
          t.staff,
        )
      ).body.passed,
    ).toBe(true);
    expect((await app.api.post(`${t.env}/conversation-workflows/versions/${versionId}/activate`, { expectedRevision: 1 }, t.staff)).status).toBe(200);
    const session = await patientSession(app, t, OWNER);
    const send = (message: string, key: string) =>
      app.api.request('POST', '/widget/v1/messages', { token: session, body: { message }, headers: { 'idempotency-key': key } });
    await send('return my order', randomUUID());
    expect((await send('B-77', randomUUID())).body.replies).toEqual([{ type: 'text', text: 'Return order B-77?' }]);
    const postsBefore = dest.seen.filter((x) => x.method === 'POST').length;
    let release!: () => void;
    dest.postGate = new Promise<void>((r) => (release = r));
    try {
      const key = randomUUID();
      const first = send('yes', key);
      for (let i = 0; i < 200 && dest.seen.filter((x) => x.method === 'POST').length === postsBefore; i++) await new Promise((r) => setTimeout(r, 10));
      await app.advanceClock(61); // past a one-minute lease, were the lease that short
      const retry = send('yes', key);
      await new Promise((r) => setTimeout(r, 500));
      release();
      const [a, b] = await Promise.all([first, retry]);
      expect(a.body).toMatchObject({ handedOff: true, duplicate: false });
      expect(b.body).toEqual({ ...a.body, duplicate: true });
      expect((await send('yes', key)).body).toEqual({ ...a.body, duplicate: true });
      expect(dest.seen.filter((x) => x.method === 'POST').length).toBe(postsBefore + 1);
    } finally {
      dest.postGate = null;
      release();
    }
  });
});

describeInProcess('production mode with an OIDC issuer of its own')('destinations in production mode (e2e)', () => {
  // Production mode has no dev tools: staff sign in through a (test) OIDC issuer.
  const oidc = new OidcIssuer();
  const app = new TestApp(
    undefined,
    { NODE_ENV: 'production', SVC_MASTER_KEY: randomBytes(32).toString('base64'), WIDGET_BASE_URL: 'https://care.example.test/api' },
    oidc,
  );
  const dest = new Destination();
  beforeAll(async () => {
    await oidc.start();
    await app.start();
    await dest.start('x');
  });
  afterAll(async () => {
    await dest.stop();
    await app.stop();
    await oidc.stop();
  });

  it('refuses at creation a Destination that is not https or not public, in every spelling of a private address (400 naming baseUrl); nothing is stored', async () => {
    const t = await app.tenant();
    const port = new URL(dest.baseUrl).port;
    const cases: [string, string][] = [
      [dest.baseUrl, 'must be an https URL'],
      ...[
        '127.0.0.1',
        '127.1',
        '0x7f000001',
        '2130706433',
        '[::1]',
        '[::ffff:127.0.0.1]',
        '[::ffff:7f00:1]',
        '[0:0:0:0:0:ffff:127.0.0.1]',
        '[::ffff:a9fe:a9fe]',
        '169.254.169.254',
        '10.0.0.1',
        '192.168.1.1',
        '[fd00::1]',
        '0.0.0.0',
        'localhost',
        'shop.localhost',
      ].map((host): [string, string] => [`https://${host}:${port}/api`, 'must not point to a loopback, private or link-local address']),
      ['https://user:pw@shop.example/api', 'must not contain a user name or password'],
    ];
    for (const [baseUrl, message] of cases) {
      const r = await app.api.post(`${t.env}/destinations`, { stableKey: 'shop', name: 'Shop', baseUrl }, t.staff);
      expect({ baseUrl, status: r.status, code: r.body.code, details: r.body.details }).toEqual({
        baseUrl,
        status: 400,
        code: 'VALIDATION_FAILED',
        details: [{ path: 'baseUrl', message }],
      });
    }
    expect((await app.api.get(`${t.env}/destinations`, t.staff)).body.destinations).toEqual([]);
    expect(dest.seen).toHaveLength(0);
  });
});
