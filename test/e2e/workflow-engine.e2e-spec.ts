// Over 400 lines: the workflow contract end to end (definitions, versions, destinations, runs) on one service.
import { createHmac, timingSafeEqual } from 'node:crypto';
import { IncomingMessage, Server, ServerResponse, createServer } from 'node:http';
import { eventSchemas } from '../../apps/webhook-dispatcher/test/receiver';
import { TestApp } from '@svc/testing';
import { identityToken } from './case-helpers';

/** JSON Schemas of contracts/events: the Destination's received payload must satisfy its contract. */
const validatePayload = eventSchemas();

/** Issue 6, "Must show": conversation workflows over real HTTP against a real Destination. */

interface Seen {
  method: string;
  url: string;
  headers: IncomingMessage['headers'];
  raw: string;
  signatureOk: boolean;
}

/** A real Destination: verifies x-svc-signature from the raw bytes before parsing. */
class Destination {
  server!: Server;
  baseUrl!: string;
  secret = '';
  mode: 'orders' | 'broken' | 'empty' = 'orders';
  seen: Seen[] = [];
  /** When set, each answer waits for it (a slow Destination). */
  gate: Promise<void> | null = null;

  async start(): Promise<void> {
    this.server = createServer((req: IncomingMessage, res: ServerResponse) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', async () => {
        if (this.gate) await this.gate;
        const raw = Buffer.concat(chunks).toString('utf8');
        const ts = String(req.headers['x-svc-timestamp'] ?? '');
        const sig = String(req.headers['x-svc-signature'] ?? '');
        const expected = `v1=${createHmac('sha256', this.secret).update(`${ts}.${req.method} ${req.url}\n${raw}`).digest('hex')}`;
        const signatureOk = /^[0-9]+$/.test(ts) && sig.length === expected.length && timingSafeEqual(Buffer.from(sig), Buffer.from(expected));
        this.seen.push({ method: req.method!, url: req.url!, headers: req.headers, raw, signatureOk });
        if (!signatureOk) {
          res.writeHead(401).end();
          return;
        }
        const body =
          this.mode === 'broken'
            ? { orders: [{ id: 123, status: 'teleported' }] }
            : this.mode === 'empty'
              ? { orders: [] }
              : {
                  orders: [
                    {
                      id: 'A-1',
                      status: 'delivered',
                      statusLabel: null,
                      carrier: 'UPS',
                      trackingUrl: 'https://track.example/A-1',
                      estimatedDelivery: '2026-01-02',
                      placedAt: '2026-01-01',
                      items: [{ name: 'Vitamin D', quantity: 1 }],
                    },
                    {
                      id: 'A-3',
                      status: 'shipped',
                      statusLabel: 'On its way',
                      carrier: 'UPS',
                      trackingUrl: 'https://user:pw@track.example/A-3',
                      estimatedDelivery: null,
                      placedAt: '2026-03-01T10:00:00Z',
                      items: null,
                    },
                    {
                      id: 'A-2',
                      status: 'processing',
                      statusLabel: null,
                      carrier: null,
                      trackingUrl: 'http://track.example/A-2',
                      estimatedDelivery: null,
                      placedAt: '2026-02-01',
                      items: null,
                    },
                    {
                      id: 'A-0',
                      status: 'cancelled',
                      statusLabel: null,
                      carrier: null,
                      trackingUrl: null,
                      estimatedDelivery: null,
                      placedAt: '2025-12-01',
                      items: null,
                    },
                  ],
                };
        res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(body));
      });
    });
    await new Promise<void>((r) => this.server.listen(0, '127.0.0.1', () => r()));
    this.baseUrl = `http://127.0.0.1:${(this.server.address() as { port: number }).port}`;
  }

  stop(): Promise<void> {
    return new Promise((r) => this.server.close(() => r()));
  }
}

const PATIENT_EXT = 'ext-patient-4711';
const PATIENT_EMAIL = 'pat.canary@example.test';

describe('conversation workflows (e2e, real HTTP)', () => {
  const app = new TestApp();
  const dest = new Destination();
  let t: Awaited<ReturnType<TestApp['tenant']>>;
  let P: string;

  beforeAll(async () => {
    await app.start();
    await dest.start();
    t = await app.tenant();
    P = `${t.env}/conversation-workflows`;
    const rotated = await app.api.post(`${t.env}/secrets/rotate`, { kind: 'widget_signing' }, t.staff);
    expect(rotated.status).toBe(201);
    dest.secret = rotated.body.secret;
  });
  afterAll(async () => {
    await dest.stop();
    await app.stop();
  });

  async function session(signedIn: boolean): Promise<string> {
    let signed: string | undefined;
    if (signedIn) {
      const rotated = await app.api.post(`${t.env}/secrets/rotate`, { kind: 'identity_token' }, t.staff);
      signed = await identityToken(app, rotated.body.secret, PATIENT_EXT, { email: PATIENT_EMAIL });
    }
    const r = await app.api.post('/widget/v1/sessions', { environmentId: t.sandbox, ...(signed ? { identityToken: signed } : {}) });
    expect(r.status).toBe(201);
    return r.body.sessionToken;
  }

  it('builds, fails readiness, tests, activates, and answers a signed-in patient with order cards (EN and ES)', async () => {
    const api = app.api;
    const d = await api.post(
      `${t.env}/destinations`,
      { stableKey: 'order_system', name: 'Orders', baseUrl: dest.baseUrl, headers: { authorization: 'Bearer dest-secret-xyz' }, timeoutMs: 3000 },
      t.staff,
    );
    expect(d.status).toBe(201);
    expect(JSON.stringify(d.body)).not.toContain('dest-secret-xyz');
    const dl = await api.get(`${t.env}/destinations`, t.staff);
    expect(dl.status).toBe(200);
    expect(dl.body.destinations).toHaveLength(1);
    expect(JSON.stringify(dl.body)).not.toContain('dest-secret-xyz');

    const templates = await api.get(`${P}/templates`, t.staff);
    expect(templates.status).toBe(200);
    expect(templates.body.templates[0].name).toBe('Order status and tracking');

    const created = await api.post(`${P}/from-template`, { templateKey: 'order_status_tracking' }, t.staff);
    expect(created.status).toBe(201);
    const wf = created.body;
    expect(wf).toMatchObject({ stableKey: 'order_status', active: false, archivedAt: null, everLive: false, liveVersionId: null });
    const versionId = wf.draftVersionId;
    expect(wf.versions[0]).toMatchObject({ id: versionId, number: 1, state: 'draft', revision: 1, lastTest: null });

    // Not ready: no passing test.
    const notReady = await api.get(`${P}/versions/${versionId}/readiness`, t.staff);
    expect(notReady.status).toBe(200);
    expect(notReady.body.ready).toBe(false);
    expect(notReady.body.blockers.map((b: { code: string }) => b.code)).toContain('NO_PASSING_TEST');
    const early = await api.post(`${P}/versions/${versionId}/activate`, { expectedRevision: 1 }, t.staff);
    expect(early.status).toBe(400);
    expect(early.body.code).toBe('VALIDATION_FAILED');

    // Test: calls the real Destination, signed; never the patient's words.
    const tested = await api.post(
      `${P}/versions/${versionId}/test`,
      { expectedRevision: 1, opening: 'where is my order', replies: [], patientEmail: PATIENT_EMAIL, patientId: PATIENT_EXT },
      t.staff,
    );
    expect(tested.status).toBe(201);
    expect(tested.body.passed).toBe(true);
    const callStep = tested.body.steps.find((s: { type: string }) => s.type === 'call_api');
    expect(callStep.request.method).toBe('POST');
    expect(callStep.request.headers.authorization).toBe('[redacted]');
    expect(callStep.response.status).toBe(200);
    expect(dest.seen).toHaveLength(1);
    expect(dest.seen[0].signatureOk).toBe(true);
    expect(dest.seen[0].url).toBe('/orders/lookup');
    expect(dest.seen[0].headers.authorization).toBe('Bearer dest-secret-xyz');
    const payload = JSON.parse(dest.seen[0].raw);
    expect(payload).toEqual({ version: 1, type: 'order_lookup.requested', requestId: tested.body.runId, patient: { externalId: PATIENT_EXT } });
    expect(validatePayload('order_lookup.requested', payload)).toEqual([]);

    const ready = await api.get(`${P}/versions/${versionId}/readiness`, t.staff);
    expect(ready.body).toEqual({ ready: true, blockers: [] });
    const on = await api.post(`${P}/versions/${versionId}/activate`, { expectedRevision: 1 }, t.staff);
    expect(on.status).toBe(200);
    expect(on.body).toMatchObject({ active: true, everLive: true, liveVersionId: versionId });

    // A signed-in patient, in English then Spanish.
    const token = await session(true);
    for (const message of ['Hi, where is my order?', '¿Dónde está mi pedido?']) {
      const before = dest.seen.length;
      const r = await api.post('/widget/v1/messages', { message }, token);
      expect(r.status).toBe(201);
      expect(r.body.handedOff).toBe(false);
      const cards = r.body.replies.find((x: { type: string }) => x.type === 'orders');
      expect(cards.orders.map((o: { id: string }) => o.id)).toEqual(['A-3', 'A-2', 'A-1']); // latest first, at most 3
      expect(cards.orders[0].trackingUrl).toBeNull(); // credentials in the URL: dropped
      expect(cards.orders[1].trackingUrl).toBeNull(); // not https: dropped
      expect(cards.orders[2].trackingUrl).toBe('https://track.example/A-1');
      expect(dest.seen).toHaveLength(before + 1);
      const seen = dest.seen[dest.seen.length - 1];
      expect(seen.signatureOk).toBe(true);
      // Never what the patient typed: exactly the order_lookup.requested payload.
      expect(seen.raw).not.toMatch(/where|d[oó]nde|pedido/i);
      expect(JSON.parse(seen.raw)).toEqual({ version: 1, type: 'order_lookup.requested', requestId: expect.any(String), patient: { externalId: PATIENT_EXT } });
    }

    // A broken contract: could not check, offer of the team.
    dest.mode = 'broken';
    const broken = await api.post('/widget/v1/messages', { message: 'where is my order' }, token);
    expect(broken.status).toBe(201);
    expect(broken.body.replies).toEqual([{ type: 'text', text: expect.stringMatching(/couldn't check.*team/) }]);
    dest.mode = 'orders';

    // No call for an anonymous visitor or an emergency.
    const calls = dest.seen.length;
    const anon = await session(false);
    const a = await api.post('/widget/v1/messages', { message: 'where is my order' }, anon);
    expect(a.status).toBe(201);
    expect(a.body.replies.some((x: { type: string }) => x.type === 'orders')).toBe(false);
    const e = await api.post('/widget/v1/messages', { message: 'I have chest pain, where is my order' }, token);
    expect(e.status).toBe(201);
    expect(e.body.replies[0].text).toMatch(/emergency/i);
    const h = await api.post('/widget/v1/messages', { message: 'what dose of my medication should I take? where is my order' }, token);
    expect(h.status).toBe(201);
    expect(dest.seen.length).toBe(calls);

    // Runs: outcomes only, never values.
    const runs = await api.get(`${P}/${wf.id}/runs`, t.staff);
    expect(runs.status).toBe(200);
    // Latest first: the anonymous visitor, the broken contract, Spanish, English, the test run.
    expect(runs.body.runs.map((r: { test: boolean; outcome: string }) => [r.test, r.outcome])).toEqual([
      [false, 'sign_in_required'],
      [false, 'call_failed'],
      [false, 'completed'],
      [false, 'completed'],
      [true, 'completed'],
    ]);
    const json = JSON.stringify(runs.body);
    expect(json).not.toContain(PATIENT_EMAIL);
    expect(json).not.toContain(PATIENT_EXT);
    expect(json).not.toContain('A-1');
    expect(runs.body.runs[0].steps[0]).toEqual({ stepId: 'lookup', type: 'call_api', outcome: expect.any(String) });
  });

  it('answers each lifecycle 409', async () => {
    const api = app.api;
    const def = { category: 'support', description: 'Simple', triggerPhrases: ['hello there'], steps: [{ id: 'hi', type: 'reply', message: 'Hello!' }] };
    const c = await api.post(P, { stableKey: 'greeter', name: 'Greeter', definition: def }, t.staff);
    expect(c.status).toBe(201);
    const dup = await api.post(P, { stableKey: 'greeter', name: 'Again', definition: def }, t.staff);
    expect(dup.status).toBe(409);
    expect(dup.body.code).toBe('DUPLICATE_KEY');
    const v1 = c.body.draftVersionId;

    const saved = await api.put(`${P}/versions/${v1}`, { expectedRevision: 1, definition: { ...def, description: 'Simple v2' } }, t.staff);
    expect(saved.status).toBe(200);
    expect(saved.body.versions[0].revision).toBe(2);
    const stale = await api.put(`${P}/versions/${v1}`, { expectedRevision: 1, definition: def }, t.staff);
    expect(stale.status).toBe(409);
    expect(stale.body.code).toBe('STALE_REVISION');

    const tested = await api.post(`${P}/versions/${v1}/test`, { expectedRevision: 2, opening: 'hello there', replies: [] }, t.staff);
    expect(tested.status).toBe(201);
    expect(tested.body.passed).toBe(true);
    expect(tested.body.transcript).toEqual([
      { from: 'patient', text: 'hello there' },
      { from: 'agent', text: 'Hello!' },
    ]);
    expect((await api.post(`${P}/versions/${v1}/activate`, { expectedRevision: 2 }, t.staff)).status).toBe(200);

    const locked = await api.put(`${P}/versions/${v1}`, { expectedRevision: 2, definition: def }, t.staff);
    expect(locked.status).toBe(409);
    expect(locked.body.code).toBe('VERSION_LOCKED');

    const del = await api.delete(`${P}/${c.body.id}`, t.staff);
    expect(del.status).toBe(409);
    expect(del.body.code).toBe('WORKFLOW_EVER_LIVE');

    // A draft on top of the live version, discarded.
    const draft = await api.post(`${P}/${c.body.id}/draft`, undefined, t.staff);
    expect(draft.status).toBe(201);
    expect(draft.body).toMatchObject({ state: 'draft', number: 2, revision: 1 });
    const reuse = await api.post(`${P}/${c.body.id}/draft`, undefined, t.staff);
    expect(reuse.body.id).toBe(draft.body.id);
    expect((await api.delete(`${P}/versions/${draft.body.id}`, t.staff)).status).toBe(204);

    const archived = await api.post(`${P}/${c.body.id}/archive`, undefined, t.staff);
    expect(archived.status).toBe(200);
    expect(archived.body.archivedAt).not.toBeNull();
    expect(archived.body.active).toBe(false);
    const edit = await api.patch(`${P}/${c.body.id}`, { name: 'Renamed' }, t.staff);
    expect(edit.status).toBe(409);
    expect(edit.body.code).toBe('WORKFLOW_ARCHIVED');
    const d2 = await api.post(`${P}/${c.body.id}/draft`, undefined, t.staff);
    expect(d2.status).toBe(409);
    expect(d2.body.code).toBe('WORKFLOW_ARCHIVED');
    const act = await api.post(`${P}/versions/${v1}/activate`, { expectedRevision: 2 }, t.staff);
    expect(act.status).toBe(409);
    expect(act.body.code).toBe('WORKFLOW_ARCHIVED');
    const list = await api.get(P, t.staff);
    expect(list.body.workflows.find((w: { id: string }) => w.id === c.body.id)).toMatchObject({ everLive: true, archivedAt: expect.any(String) });
    const restored = await api.post(`${P}/${c.body.id}/restore`, undefined, t.staff);
    expect(restored.status).toBe(200);
    expect(restored.body).toMatchObject({ archivedAt: null, active: false });
    expect((await api.patch(`${P}/${c.body.id}`, { name: 'Renamed' }, t.staff)).body.name).toBe('Renamed');

    // A never-live workflow is deleted, and its key can be used again.
    const other = await api.post(P, { stableKey: 'temp_flow', name: 'Temp', definition: def }, t.staff);
    expect((await api.delete(`${P}/${other.body.id}`, t.staff)).status).toBe(204);
    expect((await api.get(P, t.staff)).body.workflows.some((w: { id: string }) => w.id === other.body.id)).toBe(false);
    expect((await api.post(P, { stableKey: 'temp_flow', name: 'Temp', definition: def }, t.staff)).status).toBe(201);
  });

  it("a variable named like an Object.prototype member is an ordinary unset variable in a test run (was 500, and a function's source in replies)", async () => {
    const def = {
      category: 'support',
      description: 'Proto names',
      triggerPhrases: ['proto names'],
      steps: [
        { id: 'k', type: 'condition', variable: 'constructor', operator: 'is_empty', then: 'a', else: 'end' },
        { id: 'a', type: 'reply', message: 'empty [{{valueOf}}]', next: 'q' },
        { id: 'q', type: 'ask', variable: 'toString', prompt: 'Name?', format: 'text' },
        { id: 'b', type: 'reply', message: 'hi {{toString}}' },
      ],
    };
    const c = await app.api.post(P, { stableKey: 'proto_names', name: 'Proto names', definition: def }, t.staff);
    expect(c.status).toBe(201);
    const tested = await app.api.post(
      `${P}/versions/${c.body.draftVersionId}/test`,
      { expectedRevision: 1, opening: 'proto names', replies: ['Ann'] },
      t.staff,
    );
    expect(tested.status).toBe(201);
    expect(tested.body.transcript).toEqual([
      { from: 'patient', text: 'proto names' },
      { from: 'agent', text: 'empty []' },
      { from: 'agent', text: 'Name?' },
      { from: 'patient', text: 'Ann' },
      { from: 'agent', text: 'hi Ann' },
    ]);
  });

  it("a patient's answer of '.' or '..' cannot move a call to another path of the Destination: the call is refused, nothing is sent", async () => {
    const d = await app.api.post(`${t.env}/destinations`, { stableKey: 'records_system', name: 'Records', baseUrl: `${dest.baseUrl}/clinic/api` }, t.staff);
    expect(d.status).toBe(201);
    const def = {
      category: 'support',
      description: 'Record status',
      triggerPhrases: ['record status'],
      steps: [
        { id: 'q', type: 'ask', variable: 'ref', prompt: 'Which record?', format: 'text' },
        {
          id: 'look',
          type: 'call_api',
          destinationStableKey: 'records_system',
          method: 'GET',
          path: '/records/{{ref}}/status?ref={{ref}}',
          ownership: { patientIdPath: 'patientId' },
          save: [],
          notFoundReply: 'Not found.',
          errorReply: 'Sorry, I could not look that up.',
        },
        { id: 'done', type: 'reply', message: 'Done.' },
      ],
    };
    const c = await app.api.post(P, { stableKey: 'record_status', name: 'Record status', definition: def }, t.staff);
    expect(c.status).toBe(201);
    for (const answer of ['..', '.']) {
      const before = dest.seen.length;
      const r = await app.api.post(
        `${P}/versions/${c.body.draftVersionId}/test`,
        { expectedRevision: 1, opening: 'record status', replies: [answer], patientId: PATIENT_EXT },
        t.staff,
      );
      expect(r.status).toBe(201);
      expect({ answer, seen: dest.seen.length - before, last: r.body.transcript.at(-1) }).toEqual({
        answer,
        seen: 0,
        last: { from: 'agent', text: 'Sorry, I could not look that up.' },
      });
    }
    const before = dest.seen.length;
    // Dots inside a value, and a typed percent-encoded dot, are values like any other: sent, escaped, in place.
    for (const answer of ['a.b..c', '%2e%2e']) {
      expect(
        (
          await app.api.post(
            `${P}/versions/${c.body.draftVersionId}/test`,
            { expectedRevision: 1, opening: 'record status', replies: [answer], patientId: PATIENT_EXT },
            t.staff,
          )
        ).status,
      ).toBe(201);
    }
    expect(dest.seen.slice(before).map((x) => x.url)).toEqual([
      '/clinic/api/records/a.b..c/status?ref=a.b..c',
      '/clinic/api/records/%252e%252e/status?ref=%252e%252e',
    ]);
  });

  it('refuses invalid definitions with details naming each step and rule', async () => {
    const r = await app.api.post(
      P,
      {
        stableKey: 'bad_flow',
        name: 'Bad',
        definition: {
          category: 'support',
          description: 'Bad',
          steps: [
            { id: 'num', type: 'ask', variable: 'orderNo', prompt: 'Order?', format: 'order_number' },
            {
              id: 'cancel',
              type: 'call_api',
              destinationStableKey: 'order_system',
              method: 'POST',
              path: '/orders/{{orderNo}}/cancel',
              save: [],
              notFoundReply: 'x',
              errorReply: 'y',
            },
            {
              id: 'sel',
              type: 'call_api',
              destinationStableKey: 'order_system',
              method: 'GET',
              path: '/o',
              contract: 'orders_v1',
              select: { listPath: 'a', matchPath: 'b', equals: 'c' },
              save: [],
              notFoundReply: 'x',
              errorReply: 'y',
            },
            { id: 'oops', type: 'reply', message: 'hi', next: 'nowhere' },
          ],
        },
      },
      t.staff,
    );
    expect(r.status).toBe(400);
    expect(r.body.code).toBe('VALIDATION_FAILED');
    const paths = r.body.details.map((d: { path: string }) => d.path);
    expect(paths).toEqual(expect.arrayContaining(['definition.steps[3].next', 'definition.steps[2].contract']));

    const ordering = await app.api.post(
      P,
      {
        stableKey: 'bad_order',
        name: 'Bad',
        definition: {
          category: 'support',
          description: 'Bad',
          steps: [
            { id: 'num', type: 'ask', variable: 'orderNo', prompt: 'Order?', format: 'order_number' },
            {
              id: 'cancel',
              type: 'call_api',
              destinationStableKey: 'order_system',
              method: 'POST',
              path: '/orders/{{orderNo}}/cancel',
              save: [],
              notFoundReply: 'x',
              errorReply: 'y',
            },
            { id: 'loop_a', type: 'reply', message: 'a', next: 'loop_b' },
            { id: 'loop_b', type: 'reply', message: 'b', next: 'loop_a' },
          ],
        },
      },
      t.staff,
    );
    expect(ordering.status).toBe(400);
    const messages = ordering.body.details.map((d: { path: string; message: string }) => `${d.path}: ${d.message}`).join('\n');
    expect(messages).toMatch(/steps\[1\].*ownership/);
    expect(messages).toMatch(/steps\[1\].*confirm/);
    expect(messages).toMatch(/steps\[1\]\.ownership.*patient typed/);
    expect(messages).toMatch(/cycle without an ask/);
  });

  it('refuses Destination headers Node could never send (400 VALIDATION_FAILED headers.<name>)', async () => {
    const cases: [Record<string, string>, string][] = [
      [{ 'x-token': 'abc\r\nx-injected: 1' }, 'headers.x-token'],
      [{ 'x-token': 'line\nbreak' }, 'headers.x-token'],
      [{ 'x-price': 'price €5' }, 'headers.x-price'],
      [{ 'bad name': 'v' }, 'headers.bad name'],
    ];
    for (const [headers, path] of cases) {
      const r = await app.api.post(`${t.env}/destinations`, { stableKey: 'bad_headers', name: 'Bad', baseUrl: dest.baseUrl, headers }, t.staff);
      expect(r.status).toBe(400);
      expect(r.body.code).toBe('VALIDATION_FAILED');
      expect(r.body.details.map((d: { path: string }) => d.path)).toEqual([path]);
    }
    for (const baseUrl of [dest.baseUrl.replace('http://', 'http://user:secret@'), dest.baseUrl.replace('http://', 'http://user@')]) {
      const r = await app.api.post(`${t.env}/destinations`, { stableKey: 'with_credentials', name: 'Creds', baseUrl }, t.staff);
      expect({ status: r.status, code: r.body.code, path: r.body.details?.[0]?.path }).toEqual({ status: 400, code: 'VALIDATION_FAILED', path: 'baseUrl' });
    }
    // Schemes are case-insensitive.
    expect(
      (await app.api.post(`${t.env}/destinations`, { stableKey: 'upper_scheme', name: 'Upper', baseUrl: dest.baseUrl.replace('http://', 'HTTP://') }, t.staff))
        .status,
    ).toBe(201);
    const latin1 = await app.api.post(
      `${t.env}/destinations`,
      { stableKey: 'latin1_headers', name: 'Latin-1', baseUrl: dest.baseUrl, headers: { 'x-name': 'caf\u00e9' } },
      t.staff,
    );
    expect(latin1.status).toBe(201);
    expect((await app.api.delete(`${t.env}/destinations/${latin1.body.id}`, t.staff)).status).toBe(204);
  });

  it('checks the revision before any call, and records no test run when the version changed during the calls (409 STALE_REVISION)', async () => {
    const api = app.api;
    expect((await api.post(`${t.env}/destinations`, { stableKey: 'slow_system', name: 'Slow', baseUrl: dest.baseUrl }, t.staff)).status).toBe(201);
    const created = await api.post(
      `${P}/from-template`,
      { templateKey: 'order_status_tracking', stableKey: 'slow_orders', destinationStableKey: 'slow_system' },
      t.staff,
    );
    expect(created.status).toBe(201);
    const versionId = created.body.draftVersionId;
    const body = { opening: 'where is my order', replies: [], patientId: PATIENT_EXT };

    // Stale before any call: no call at all.
    const calls = dest.seen.length;
    const early = await api.post(`${P}/versions/${versionId}/test`, { ...body, expectedRevision: 2 }, t.staff);
    expect(early.status).toBe(409);
    expect(early.body.code).toBe('STALE_REVISION');
    expect(dest.seen.length).toBe(calls);

    // Saved while the Destination is answering: 409, and neither a test result nor a run is kept.
    let release!: () => void;
    dest.gate = new Promise<void>((r) => (release = r));
    try {
      const pending = api.post(`${P}/versions/${versionId}/test`, { ...body, expectedRevision: 1 }, t.staff);
      for (let i = 0; i < 200 && dest.seen.length === calls; i++) await new Promise((r) => setTimeout(r, 10));
      const saved = await api.put(`${P}/versions/${versionId}`, { expectedRevision: 1, definition: created.body.versions[0].definition }, t.staff);
      expect(saved.status).toBe(200);
      release();
      const late = await pending;
      expect(late.status).toBe(409);
      expect(late.body.code).toBe('STALE_REVISION');
    } finally {
      dest.gate = null;
      release();
    }
    expect(dest.seen.length).toBe(calls + 1);
    const runs = await api.get(`${P}/${created.body.id}/runs`, t.staff);
    expect(runs.body.runs).toEqual([]);
    const list = await api.get(P, t.staff);
    expect(list.body.workflows.find((w: { id: string }) => w.id === created.body.id).versions[0]).toMatchObject({ revision: 2, lastTest: null });
  });

  it('refuses a test that would call a Destination before the BAA is signed (403 BAA_REQUIRED)', async () => {
    const u = await app.tenant({ baa: false });
    const created = await app.api.post(`${u.env}/conversation-workflows/from-template`, { templateKey: 'order_status_tracking' }, u.staff);
    expect(created.status).toBe(201);
    const r = await app.api.post(
      `${u.env}/conversation-workflows/versions/${created.body.draftVersionId}/test`,
      { expectedRevision: 1, opening: 'where is my order', replies: [], patientId: 'x' },
      u.staff,
    );
    expect(r.status).toBe(403);
    expect(r.body.code).toBe('BAA_REQUIRED');
    // Nothing recorded.
    const list = await app.api.get(`${u.env}/conversation-workflows`, u.staff);
    expect(list.body.workflows.find((w: { id: string }) => w.id === created.body.id).versions[0].lastTest).toBeNull();
    // A test that would not call (no patient: the lookup ends at sign-in) runs before the BAA.
    const signIn = await app.api.post(
      `${u.env}/conversation-workflows/versions/${created.body.draftVersionId}/test`,
      { expectedRevision: 1, opening: 'where is my order', replies: [] },
      u.staff,
    );
    expect(signIn.status).toBe(201);
    expect(signIn.body.passed).toBe(false);
    // Nor does one whose call is on a branch the test does not take.
    const def = {
      category: 'support',
      description: 'Branch',
      triggerPhrases: ['branch'],
      steps: [
        { id: 'q', type: 'ask', variable: 'go', prompt: 'Call?', format: 'text' },
        { id: 'c', type: 'condition', variable: 'go', operator: 'equals', value: 'yes', then: 'call', else: 'bye' },
        { id: 'bye', type: 'reply', message: 'Bye', next: 'end' },
        { id: 'call', type: 'call_api', destinationStableKey: 'nowhere', method: 'GET', path: '/x', save: [], notFoundReply: 'n', errorReply: 'e' },
      ],
    };
    const branch = await app.api.post(`${u.env}/conversation-workflows`, { stableKey: 'branchy', name: 'Branchy', definition: def }, u.staff);
    expect(branch.status).toBe(201);
    const not = await app.api.post(
      `${u.env}/conversation-workflows/versions/${branch.body.draftVersionId}/test`,
      { expectedRevision: 1, opening: 'branch', replies: ['no'] },
      u.staff,
    );
    expect(not.status).toBe(201);
    expect(not.body.transcript.at(-1)).toEqual({ from: 'agent', text: 'Bye' });
    const would = await app.api.post(
      `${u.env}/conversation-workflows/versions/${branch.body.draftVersionId}/test`,
      { expectedRevision: 1, opening: 'branch', replies: ['yes'] },
      u.staff,
    );
    expect(would.status).toBe(403);
    expect(would.body.code).toBe('BAA_REQUIRED');
  });
});
