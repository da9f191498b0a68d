import { performance } from 'node:perf_hooks';
import { TestApp } from '@svc/testing';
import { orderStatusTemplate } from '../../apps/workflow-engine/src/domain/templates';
import { SWITCHED_OFF_REPLY } from '../../apps/workflow-engine/src/application/runner.service';
import { OrderDestination } from './order-destination';
import { identityToken } from './case-helpers';

/**
 * Switched off means off for calls in flight (docs/decisions.md, "Workflows", "Switch-off"): no Destination
 * call reaches the Destination after the deactivate/archive 200, also for runs matched (or turns
 * answered) just before it; a run stopped this way ends `switched_off`.
 */

/** Two order lookups in a row (optionally after a question): a switch-off between them stops the second. */
const twoCalls = (trigger: string, ask: boolean) => {
  const call = (id: string) => ({
    id,
    type: 'call_api',
    destinationStableKey: 'order_system',
    method: 'POST',
    path: '/orders/lookup',
    readOnly: true,
    contract: 'orders_v1',
    save: [],
    notFoundReply: 'No orders found.',
    errorReply: 'Could not check.',
  });
  return {
    category: 'fulfillment',
    description: 'Two lookups',
    triggerPhrases: [trigger],
    steps: [
      ...(ask ? [{ id: 'go', type: 'ask', variable: 'go', prompt: 'Shall I look up your orders?', format: 'text' }] : []),
      call('first'),
      call('second'),
      { id: 'done', type: 'reply', message: 'Looked twice.' },
    ],
  };
};

describe('workflow switch-off with calls in flight (e2e, real HTTP, real Destination)', () => {
  const app = new TestApp();
  const dest = new OrderDestination();
  beforeAll(async () => {
    await app.start();
    await dest.start();
  });
  afterEach(() => {
    dest.release();
    dest.delayMs = 0;
  });
  afterAll(async () => {
    await dest.stop();
    await app.stop();
  });

  /** A tenant with the Destination, its widget_signing secret and an identity-token signer. */
  async function setUp() {
    const t = await app.tenant();
    const P = `${t.env}/conversation-workflows`;
    dest.secret = (await app.api.post(`${t.env}/secrets/rotate`, { kind: 'widget_signing' }, t.staff)).body.secret;
    expect(
      (await app.api.post(`${t.env}/destinations`, { stableKey: 'order_system', name: 'Orders', baseUrl: dest.baseUrl, timeoutMs: 5000 }, t.staff)).status,
    ).toBe(201);
    const identity = (await app.api.post(`${t.env}/secrets/rotate`, { kind: 'identity_token' }, t.staff)).body.secret as string;
    const session = async (sub: string): Promise<string> => {
      const token = await identityToken(app, identity, sub, { email: `${sub}@example.test` });
      const r = await app.api.post('/widget/v1/sessions', { environmentId: t.sandbox, identityToken: token });
      expect(r.status).toBe(201);
      return r.body.sessionToken;
    };
    const live = async (stableKey: string, definition: unknown, opening: string, replies: string[]) => {
      const c = await app.api.post(P, { stableKey, name: stableKey, definition }, t.staff);
      expect(c.status).toBe(201);
      const v = c.body.draftVersionId;
      const tested = await app.api.post(
        `${P}/versions/${v}/test`,
        { expectedRevision: 1, opening, replies, patientId: 'ext-sample', patientEmail: 'sample@example.test' },
        t.staff,
      );
      expect(tested.body.passed).toBe(true);
      expect((await app.api.post(`${P}/versions/${v}/activate`, { expectedRevision: 1 }, t.staff)).status).toBe(200);
      return c.body.id as string;
    };
    const runs = async (workflowId: string) =>
      ((await app.api.get(`${P}/${workflowId}/runs`, t.staff)).body.runs as { test: boolean; outcome: string }[]).filter((r) => !r.test);
    return { t, P, session, live, runs };
  }

  for (const op of ['deactivate', 'archive'] as const) {
    for (const waiting of [false, true]) {
      it(`${op}: the 200 waits for the call under way, and the run's next call is not made (ends switched_off)${waiting ? ' — a run answering its question' : ''}`, async () => {
        const { t, P, session, live, runs } = await setUp();
        const trigger = 'check my parcel';
        const wf = await live(`two_${op}_${waiting}`, twoCalls(trigger, waiting), trigger, waiting ? ['yes'] : []);
        const s = await session(`ext-held-${op}-${waiting}`);
        if (waiting)
          expect((await app.api.post('/widget/v1/messages', { message: trigger }, s)).body.replies).toEqual([
            { type: 'text', text: 'Shall I look up your orders?' },
          ]);
        dest.arrivals = [];
        dest.holdCalls();
        const reply = app.api.post('/widget/v1/messages', { message: waiting ? 'yes' : trigger }, s);
        await dest.waitForCalls(1); // the first call is under way (held by the Destination)
        let offAt: number | null = null;
        const off = app.api.post(`${P}/${wf}/${op}`, undefined, t.staff).then((r) => {
          offAt = performance.now();
          return r;
        });
        await new Promise((r) => setTimeout(r, 400));
        // Still under way: the switch-off has not answered.
        expect(offAt).toBeNull();
        dest.release();
        const offRes = await off;
        expect(offRes.status).toBe(200);
        expect(offRes.body.active).toBe(false);
        const answered = await reply;
        expect(answered.status).toBe(201);
        await new Promise((r) => setTimeout(r, 100));
        // One call only, and it arrived before the 200.
        expect(dest.arrivals).toHaveLength(1);
        expect(dest.arrivals[0].at).toBeLessThan(offAt!);
        expect(answered.body.replies.map((x: { type: string }) => x.type)).toEqual(['orders', 'text']);
        expect(answered.body.replies[1]).toEqual({ type: 'text', text: SWITCHED_OFF_REPLY });
        expect(answered.body.handedOff).toBe(false);
        expect((await runs(wf)).map((r) => r.outcome)).toEqual(['switched_off']);
        // The next message is a new one: no workflow is live, the generic answer, no call.
        const next = await app.api.post('/widget/v1/messages', { message: trigger }, s);
        expect(next.status).toBe(201);
        expect(dest.arrivals).toHaveLength(1);
      });
    }
  }

  for (const op of ['deactivate', 'archive'] as const) {
    it(`${op} racing 30 patients' order lookups: no Destination call arrives after the 200; runs end completed or switched_off`, async () => {
      let callsAfter = 0;
      for (let round = 0; round < 3; round++) {
        const { t, P, session, runs } = await setUp();
        const tpl = orderStatusTemplate();
        const created = await app.api.post(P, { stableKey: `orders_${round}`, name: 'Orders', definition: tpl.definition }, t.staff);
        expect(created.status).toBe(201);
        const v = created.body.draftVersionId;
        expect(
          (await app.api.post(`${P}/versions/${v}/test`, { expectedRevision: 1, opening: 'where is my order', replies: [], patientId: 'ext-sample' }, t.staff))
            .body.passed,
        ).toBe(true);
        expect((await app.api.post(`${P}/versions/${v}/activate`, { expectedRevision: 1 }, t.staff)).status).toBe(200);
        // A third of the patients enrolled (their sessions' link is confirmed before each run).
        const enrolled = await Promise.all(Array.from({ length: 10 }, () => app.enrolledPatient(t)));
        const subs = [...enrolled.map((p) => p.externalPatientId), ...Array.from({ length: 20 }, (_, i) => `ext-race-${round}-${i}`)];
        const sessions = await Promise.all(subs.map((sub) => session(sub)));
        dest.arrivals = [];
        dest.delayMs = 25;
        let offAt = Infinity;
        const off = (async () => {
          await new Promise((r) => setTimeout(r, 15 + Math.random() * 20));
          const r = await app.api.post(`${P}/${created.body.id}/${op}`, undefined, t.staff);
          offAt = performance.now();
          return r;
        })();
        const answers = await Promise.all(
          sessions.map(async (s, i) => {
            await new Promise((r) => setTimeout(r, i * 2));
            return app.api.post('/widget/v1/messages', { message: 'where is my order' }, s);
          }),
        );
        expect((await off).status).toBe(200);
        await new Promise((r) => setTimeout(r, 300));
        dest.delayMs = 0;
        expect(answers.map((a) => a.status)).toEqual(Array(30).fill(201));
        expect(dest.arrivals.every((a) => a.signatureOk)).toBe(true);
        const late = dest.arrivals.filter((a) => a.at > offAt);
        callsAfter += late.length;
        const outcomes = (await runs(created.body.id)).map((r) => r.outcome);
        expect(outcomes.every((o) => o === 'completed' || o === 'switched_off')).toBe(true);
        // Every completed run made its call (before the 200); a switched-off one made none.
        expect(outcomes.filter((o) => o === 'completed').length).toBe(dest.arrivals.length);
        const stopped = answers.filter((a) => a.body.replies.some((x: { text?: string }) => x.text === SWITCHED_OFF_REPLY)).length;
        expect(stopped).toBe(outcomes.filter((o) => o === 'switched_off').length);
      }
      // Without SwitchOffGate, 9-47 calls arrive after the 200 over three rounds (runs listed `completed`).
      expect(callsAfter).toBe(0);
    });
  }
});
