import { AsyncLocalStorage } from 'node:async_hooks';
import { randomUUID } from 'node:crypto';
import { IntegrationEventTypes, Patterns, Topics } from '@svc/messaging';
import type { InProcessBroker, ReplyPacket, SendOptions } from '@svc/messaging';
import { TestApp } from '@svc/testing';
import { Tenant, brokerOf, busRequest, openCase, update, widgetToken } from './case-helpers';

type App = 'case-ledger' | 'conversation';
const PAIR: App[] = ['case-ledger', 'conversation'];
const ownerOfPattern = (pattern: string): App | null => PAIR.find((a) => pattern.startsWith(`${a}.`)) ?? null;
const producerOfTopic = (topic: string): App | null =>
  topic === Topics.caseEvents ? 'case-ledger' : topic === Topics.conversationEvents ? 'conversation' : null;
const otherThan = (a: App): App => (a === 'case-ledger' ? 'conversation' : 'case-ledger');

type RequestHandler = (message: unknown, reply: (packet: ReplyPacket) => void) => void;
type EventHandler = (message: unknown) => unknown;

/**
 * The app's in-process bus, watched: every handler of a case-ledger or conversation request pattern
 * runs as that app's handler, every subscriber of either app's event topic as a consumer of that
 * app's facts (an AsyncLocalStorage context that follows everything the handler awaits). A request
 * from inside one of them to the other side (a case-ledger handler asking the conversation app, a
 * consumer of the case-ledger's facts asking the case-ledger, and so on) is refused (503) and
 * recorded; so is any `start_case_thread` / `close_case_thread`, which no flow sends (the
 * thread starts and closes on the case-ledger's relayed facts). Requests from an HTTP request's path
 * pass.
 */
function watchBus(app: TestApp) {
  const broker = brokerOf(app);
  const inside = new AsyncLocalStorage<{ handler: string; mayNotAsk: App }>();
  const requestHandlers = (broker as unknown as { requestHandlers: Map<string, RequestHandler> }).requestHandlers;
  const eventHandlers = (broker as unknown as { eventHandlers: Map<string, Set<EventHandler>> }).eventHandlers;
  const undo: Array<() => void> = [];
  for (const [pattern, handler] of [...requestHandlers]) {
    const owner = ownerOfPattern(pattern);
    if (!owner) continue;
    requestHandlers.set(pattern, (m, reply) => inside.run({ handler: pattern, mayNotAsk: otherThan(owner) }, () => handler(m, reply)));
    undo.push(() => requestHandlers.set(pattern, handler));
  }
  for (const [topic, handlers] of [...eventHandlers]) {
    const producer = producerOfTopic(topic);
    if (!producer) continue;
    for (const handler of [...handlers]) {
      const watched: EventHandler = (m) => inside.run({ handler: `consumer of ${topic}`, mayNotAsk: producer }, () => handler(m));
      handlers.delete(handler);
      handlers.add(watched);
      undo.push(() => {
        handlers.delete(watched);
        handlers.add(handler);
      });
    }
  }
  const refused: string[] = [];
  const request = broker.request;
  broker.request = function (this: InProcessBroker, pattern: string, data: unknown, onReply: (packet: ReplyPacket) => void, options?: SendOptions) {
    const where = inside.getStore();
    const sent = data && typeof data === 'object' && typeof (data as { json?: unknown }).json === 'string' ? JSON.parse((data as { json: string }).json) : data;
    const control = pattern === Patterns.caseThread ? (sent as { control?: string })?.control : undefined;
    const reason =
      where && ownerOfPattern(pattern) === where.mayNotAsk
        ? `${where.handler} asked ${pattern}`
        : control === 'start_case_thread' || control === 'close_case_thread'
          ? `${control} sent (${where?.handler ?? 'outside any handler'})`
          : null;
    if (reason) {
      refused.push(reason);
      setImmediate(() => onReply({ err: { status: 503, code: 'UNAVAILABLE', message: 'refused by the watched bus' }, isDisposed: true }));
      return () => undefined;
    }
    return request.call(this, pattern, data, onReply, options);
  };
  return {
    refused,
    stop: () => {
      broker.request = request;
      for (const u of undo.reverse()) u();
    },
  };
}

/**
 * No synchronous cycle between the case-ledger and the conversation app (docs/decisions.md, "Case
 * threads without synchronous cycles"): neither app's bus handlers ask the other app anything, the
 * thread starts and closes on the case-ledger's relayed facts, and the case-ledger learns of the
 * close from the conversation's facts. So a case-ledger consumer never waits for the conversation
 * app, even while a resolve does.
 */
describe('case threads without synchronous cycles between the case-ledger and the conversation app (e2e, real HTTP)', () => {
  const app = new TestApp();
  let t: Tenant;
  beforeAll(async () => {
    await app.start();
    t = await app.tenant();
  });
  afterAll(() => app.stop());

  const inbound = (caseId: string, message: string) => app.api.post(`/v1/conversations/${caseId}/messages`, { requestId: randomUUID(), message }, t.apiKey);
  const resolveUpdate = () => update(2, 'resolved', { resolutionOutcome: 'no_further_action', resolutionNote: 'Resolved after review' });

  it('the case flows pass on a bus that refuses any request from a handler of one app to the other', async () => {
    const bus = watchBus(app);
    try {
      // Opens (staff and bus): the thread works as soon as the open answers.
      const staff = await openCase(app, t);
      expect((await app.api.get(`/v1/conversations/${staff.caseId}/messages`, t.apiKey)).status).toBe(200);
      const session = await widgetToken(app, {
        organizationId: t.orgId,
        environmentId: t.sandbox,
        patientId: staff.patientId,
        externalPatientId: staff.externalPatientId,
      });
      expect((await app.api.post(`/widget/v1/cases/${staff.caseId}/messages`, { message: 'right away' }, session)).status).toBe(201);
      const { patientId } = await app.enrolledPatient(t);
      const opened = await busRequest(app, Patterns.openClinicalCase, {
        requestId: randomUUID(),
        organizationId: t.orgId,
        environmentId: t.sandbox,
        patientId,
        source: 'patient_concern',
        priority: 'routine',
        patientNotes: 'I feel worse',
        symptomScores: {},
        matchedRules: [],
        stoppedEarly: false,
        actor: 'system',
      });
      const first = await inbound(opened.caseId, 'right away');
      expect({ status: first.status, sequence: first.body.sequence }).toEqual({ status: 201, sequence: 1 });

      // A resolve with patient and provider messages racing it: each message taken is from before the
      // resolution, every other one 409 CASE_RESOLVED; the resolve's 200 means the thread is closed.
      expect((await app.api.post(`/v1/clinical-cases/${staff.caseId}/updates`, update(1, 'processed'), t.apiKey)).status).toBe(200);
      const sends: Promise<{ status: number; body: any }>[] = [];
      let resolving!: Promise<{ status: number; body: any }>;
      for (let i = 0; i < 10; i++) {
        sends.push(inbound(staff.caseId, `inbound ${i}`));
        if (i === 2) resolving = app.api.post(`/v1/clinical-cases/${staff.caseId}/updates`, resolveUpdate(), t.apiKey);
        sends.push(app.api.post(`/widget/v1/cases/${staff.caseId}/messages`, { message: `widget ${i}` }, session));
        if (i % 5 === 0)
          sends.push(
            app.api.post(
              `/v1/clinical-cases/${staff.caseId}/messages`,
              { messageId: randomUUID(), message: `provider ${i}`, externalReference: `p${i}` },
              t.apiKey,
            ),
          );
      }
      const resolved = await resolving;
      expect(resolved.status).toBe(200);
      const resolvedAt = Date.parse((await app.api.get(`${t.env}/clinical-cases/${staff.caseId}`, t.staff)).body.resolvedAt);
      for (const r of await Promise.all(sends)) {
        if (r.status === 201) expect(Date.parse(r.body.createdAt)).toBeLessThanOrEqual(resolvedAt);
        else if (r.status !== 200) expect({ status: r.status, code: r.body.code }).toEqual({ status: 409, code: 'CASE_RESOLVED' });
      }
      expect((await inbound(staff.caseId, 'too late')).body.code).toBe('CASE_RESOLVED');

      // A hold its resolve never finished: settled by the case's state once its lease ran out.
      const held = await openCase(app, t);
      await busRequest(app, Patterns.caseThread, {
        control: 'begin_close_case_thread',
        organizationId: t.orgId,
        environmentId: t.sandbox,
        conversationId: held.caseId,
        kind: 'case',
        patientId: held.patientId,
      });
      const waiting = inbound(held.caseId, 'are you there?');
      await new Promise((r) => setTimeout(r, 200));
      await app.advanceClock(11);
      expect((await waiting).status).toBe(201);
    } finally {
      bus.stop();
    }
    expect(bus.refused).toEqual([]);
  });

  it('while a resolve waits for the conversation app, the case-ledger still answers its bus: case status at once (resolving), a delivery fact of the case recorded', async () => {
    const c = await openCase(app, t);
    expect((await app.api.post(`/v1/clinical-cases/${c.caseId}/updates`, update(1, 'processed'), t.apiKey)).status).toBe(200);
    // The conversation app is slow to take the resolve's hold on the thread.
    const broker = brokerOf(app);
    const request = broker.request;
    let release: (() => void) | null = null;
    broker.request = function (this: InProcessBroker, pattern: string, data: unknown, onReply: (packet: ReplyPacket) => void, options?: SendOptions) {
      const sent =
        data && typeof data === 'object' && typeof (data as { json?: unknown }).json === 'string' ? JSON.parse((data as { json: string }).json) : data;
      if (pattern === Patterns.caseThread && sent?.control === 'begin_close_case_thread' && sent?.conversationId === c.caseId && !release) {
        release = () => request.call(this, pattern, data, onReply, options);
        return () => undefined;
      }
      return request.call(this, pattern, data, onReply, options);
    };
    let resolved: Promise<{ status: number; body: any }>;
    try {
      resolved = app.api.post(`/v1/clinical-cases/${c.caseId}/updates`, resolveUpdate(), t.apiKey);
      for (let i = 0; i < 400 && !release; i++) await new Promise((r) => setTimeout(r, 5));
      expect(release).not.toBeNull();

      const within = <T>(p: Promise<T>) => Promise.race([p, new Promise<'no answer within 1 s'>((r) => setTimeout(() => r('no answer within 1 s'), 1000))]);
      expect(await within(busRequest(app, Patterns.caseStatus, { environmentId: t.sandbox, caseId: c.caseId }))).toMatchObject({
        resolved: false,
        resolving: true,
      });
      const delivered = {
        type: IntegrationEventTypes.webhookDelivered,
        data: {
          organizationId: t.orgId,
          environmentId: t.sandbox,
          eventId: randomUUID(),
          eventType: 'clinical_case.opened',
          caseId: c.caseId,
          deliveredAt: new Date().toISOString(),
        },
        metadata: {
          eventId: randomUUID(),
          correlationId: randomUUID(),
          causationId: null,
          organizationId: t.orgId,
          environmentId: t.sandbox,
          actor: 'system',
          recordedAt: new Date().toISOString(),
        },
        streamId: 'webhook-dispatcher-delivery-x',
        position: 1,
      };
      expect(await within(broker.publish(Topics.dispatcherEvents, delivered))).toEqual(expect.any(Number));
      expect((await app.api.get(`/v1/clinical-cases/${c.caseId}/progress`, t.apiKey)).body).toMatchObject({ status: 'processed', transportDelivered: true });
    } finally {
      broker.request = request;
      (release as (() => void) | null)?.();
    }
    expect((await resolved!).status).toBe(200);
    expect((await inbound(c.caseId, 'after the resolve')).body.code).toBe('CASE_RESOLVED');
  });
});
