import { randomUUID } from 'node:crypto';
import { EVENT_STORE, EventStore } from '@svc/eventstore';
import { IntegrationMessage, Patterns, Topics } from '@svc/messaging';
import { inProcess, TestApp } from '@svc/testing';
import { Tenant, TopicWatch, brokerOf, busRequest, eventStoreOf, eventually, openCase, update, watchTopic, widgetToken } from './case-helpers';

/**
 * A resolve and patient messages at the same moment (an audit found patient messages taken into the
 * thread up to ~120 ms after the resolution was recorded, each with a patient_message_created after
 * clinical_case.resolved): every patient message the service takes is from before the resolution,
 * every other one is 409 CASE_RESOLVED. And a hold on the thread that its resolve never finished
 * (a crash) is settled by the case's state, not left to refuse or take messages at random.
 */
describe('resolving a case while patient messages arrive (e2e, real HTTP)', () => {
  const app = new TestApp();
  let t: Tenant;
  let caseEvents: TopicWatch;
  beforeAll(async () => {
    await app.start();
    caseEvents = await watchTopic(app, Topics.caseEvents);
    t = await app.tenant();
  });
  afterAll(async () => {
    await caseEvents.stop();
    await app.stop();
  });

  const inbound = (caseId: string, message: string) => app.api.post(`/v1/conversations/${caseId}/messages`, { requestId: randomUUID(), message }, t.apiKey);
  const staffCase = async (caseId: string) => (await app.api.get(`${t.env}/clinical-cases/${caseId}`, t.staff)).body;
  const store = () => (app as unknown as { app: { get(token: symbol): EventStore } }).app.get(EVENT_STORE);
  /** Reads only: the in-process store on standalone, the topology's event store there. */
  const readStore = () => eventStoreOf(app);

  /**
   * Bus faults for one case: its thread's final close and the relayed clinical_case.resolved (the
   * close's backstop) are lost, as a crash between the resolution and the close would leave them;
   * with `holdFirstStatus`, the first case-status answer is also held back on its way until
   * `answerStatus()`. `restore()` puts the bus back.
   */
  function busFaults(caseId: string, holdFirstStatus = false) {
    const broker = brokerOf(app);
    const { request, publish } = broker;
    // What the bus carries (the app's clients send serialized snapshots).
    const open = (data: unknown): any =>
      data && typeof data === 'object' && typeof (data as { json?: unknown }).json === 'string' ? JSON.parse((data as { json: string }).json) : data;
    let held: (() => void) | null = null;
    broker.request = function (pattern, data, onReply, options) {
      const d = open(data);
      if (holdFirstStatus && !held && pattern === Patterns.caseStatus && d?.caseId === caseId) {
        return request.call(this, pattern, data, (p) => void (held = () => onReply(p)), options);
      }
      if (pattern === Patterns.caseThread && d?.control === 'close_case_thread' && d?.conversationId === caseId) {
        setImmediate(() => onReply({ err: { status: 503, code: 'UNAVAILABLE', message: 'lost' }, isDisposed: true }));
        return () => undefined;
      }
      return request.call(this, pattern, data, onReply, options);
    };
    broker.publish = function (pattern, data, options) {
      const d = open(data);
      if (pattern === Topics.caseEvents && d?.type === 'clinical_case.resolved' && d?.data?.caseId === caseId) return Promise.resolve(0);
      return publish.call(this, pattern, data, options);
    };
    return {
      statusHeld: () => held !== null,
      answerStatus: () => held!(),
      restore: () => {
        broker.request = request;
        broker.publish = publish;
      },
    };
  }

  it('takes no patient message after the resolution: each one is from before it (thread and event) or 409 CASE_RESOLVED', async () => {
    for (let round = 0; round < 3; round++) {
      const c = await openCase(app, t);
      expect((await app.api.post(`/v1/clinical-cases/${c.caseId}/updates`, update(1, 'processed'), t.apiKey)).status).toBe(200);
      const session = await widgetToken(app, {
        organizationId: t.orgId,
        environmentId: t.sandbox,
        patientId: c.patientId,
        externalPatientId: c.externalPatientId,
      });
      const resolve = update(2, 'resolved', { resolutionOutcome: 'no_further_action', resolutionNote: 'Resolved after review' });
      const patientSends: Promise<{ status: number; body: any }>[] = [];
      const providerSends: Promise<{ status: number; body: any }>[] = [];
      let resolving!: Promise<{ status: number; body: any }>;
      for (let i = 0; i < 20; i++) {
        patientSends.push(app.api.post(`/v1/conversations/${c.caseId}/messages`, { requestId: randomUUID(), message: `inbound ${i}` }, t.apiKey));
        if (i === 2) resolving = app.api.post(`/v1/clinical-cases/${c.caseId}/updates`, resolve, t.apiKey);
        patientSends.push(app.api.post(`/widget/v1/cases/${c.caseId}/messages`, { message: `widget ${i}` }, session));
        if (i % 5 === 0)
          providerSends.push(
            app.api.post(
              `/v1/clinical-cases/${c.caseId}/messages`,
              { messageId: randomUUID(), message: `provider ${i}`, externalReference: `ext-p${i}` },
              t.apiKey,
            ),
          );
      }
      const resolved = await resolving;
      const providers = await Promise.all(providerSends);
      const patients = await Promise.all(patientSends);
      expect(resolved.status).toBe(200);
      expect(resolved.body).toMatchObject({ sequence: 2, status: 'resolved', duplicate: false });
      const resolvedAt = (await staffCase(c.caseId)).resolvedAt as string;
      expect(resolvedAt).toEqual(expect.any(String));

      const taken = patients.filter((r) => r.status === 201);
      const refused = patients.filter((r) => r.status !== 201);
      for (const r of refused) expect({ status: r.status, code: r.body.code }).toEqual({ status: 409, code: 'CASE_RESOLVED' });
      for (const r of providers) expect(r.status === 200 ? 'taken' : `${r.status} ${r.body.code}`).toMatch(/^(taken|409 CASE_RESOLVED)$/);
      for (const r of taken) expect(Date.parse(r.body.createdAt)).toBeLessThanOrEqual(Date.parse(resolvedAt));
      // The thread holds exactly the messages taken, all before the resolution.
      const thread = (await app.api.get(`/v1/conversations/${c.caseId}/messages`, t.apiKey)).body.messages as {
        id: string;
        sender: string;
        createdAt: string;
      }[];
      const patientInThread = thread.filter((m) => m.sender === 'patient');
      expect(patientInThread.map((m) => m.id).sort()).toEqual(taken.map((r) => r.body.id).sort());
      for (const m of patientInThread) expect(Date.parse(m.createdAt)).toBeLessThanOrEqual(Date.parse(resolvedAt));
      // One patient_message_created per message taken, each sent before the resolution.
      const events = await eventually(
        async () => caseEvents.seen.filter((m: IntegrationMessage<any>) => m.type === 'clinical_case.patient_message_created' && m.data.caseId === c.caseId),
        (v) => v.length >= taken.length,
      );
      expect(events).toHaveLength(taken.length);
      for (const e of events) expect(Date.parse(e.data.sentAt)).toBeLessThanOrEqual(Date.parse(resolvedAt));
      // And afterwards: refused, the retry of the resolve is the same answer.
      expect((await inbound(c.caseId, 'after')).body.code).toBe('CASE_RESOLVED');
      expect((await app.api.post(`/v1/clinical-cases/${c.caseId}/updates`, resolve, t.apiKey)).body).toMatchObject({
        sequence: 2,
        status: 'resolved',
        duplicate: true,
      });
    }
  });

  it('a refused resolve never holds the thread: patient messages are taken', async () => {
    const c = await openCase(app, t);
    // Not processed yet: resolving is an invalid transition.
    const r = await app.api.post(
      `/v1/clinical-cases/${c.caseId}/updates`,
      update(1, 'resolved', { resolutionOutcome: 'no_further_action', resolutionNote: 'Resolved after review' }),
      t.apiKey,
    );
    expect({ status: r.status, code: r.body.code }).toEqual({ status: 409, code: 'INVALID_TRANSITION' });
    const m = await app.api.post(`/v1/conversations/${c.caseId}/messages`, { requestId: randomUUID(), message: 'still here' }, t.apiKey);
    expect(m.status).toBe(201);
    // Nor does a retry of a resolve that was recorded: the thread saw one hold, the first resolve's.
    expect((await app.api.post(`/v1/clinical-cases/${c.caseId}/updates`, update(1, 'processed'), t.apiKey)).status).toBe(200);
    const resolve = update(2, 'resolved', { resolutionOutcome: 'no_further_action', resolutionNote: 'Resolved after review' });
    expect((await app.api.post(`/v1/clinical-cases/${c.caseId}/updates`, resolve, t.apiKey)).status).toBe(200);
    expect((await app.api.post(`/v1/clinical-cases/${c.caseId}/updates`, resolve, t.apiKey)).body.duplicate).toBe(true);
    expect(
      (
        await app.api.post(
          `/v1/clinical-cases/${c.caseId}/updates`,
          update(3, 'resolved', { resolutionOutcome: 'other', resolutionNote: 'Resolved once more' }),
          t.apiKey,
        )
      ).body.code,
    ).toBe('CASE_RESOLVED');
    const threadEvents = (await (await readStore()).readStream(`conversation-conversation-${c.caseId}`))
      .map((e) => e.type)
      .filter((x) => x.startsWith('CaseThread'));
    expect(threadEvents).toEqual(['CaseThreadClosing', 'CaseThreadClosed']);
  });

  inProcess('counts the event store reads inside the process')(
    'messages waiting on a hold this process placed do not read the thread again and again',
    async () => {
      const c = await openCase(app, t);
      await busRequest(app, Patterns.caseThread, {
        control: 'begin_close_case_thread',
        organizationId: t.orgId,
        environmentId: t.sandbox,
        conversationId: c.caseId,
        kind: 'case',
        patientId: c.patientId,
      });
      const reads = jest.spyOn(store(), 'readStream');
      try {
        const waiting = Array.from({ length: 20 }, (_, i) => inbound(c.caseId, `waiting ${i}`));
        await new Promise((r) => setTimeout(r, 500));
        const readsOfThread = reads.mock.calls.filter(([stream]) => stream === `conversation-conversation-${c.caseId}`).length;
        expect(readsOfThread).toBeLessThanOrEqual(2);
        await busRequest(app, Patterns.caseThread, {
          control: 'cancel_close_case_thread',
          organizationId: t.orgId,
          environmentId: t.sandbox,
          conversationId: c.caseId,
          kind: 'case',
          patientId: c.patientId,
        });
        expect((await Promise.all(waiting)).map((r) => r.status)).toEqual(Array(20).fill(201));
      } finally {
        reads.mockRestore();
      }
    },
  );

  it('a hold its resolve never finished (a crash before the resolution): messages wait, and after the lease the case being open lets them in', async () => {
    const c = await openCase(app, t);
    // What a resolve that crashed right after holding the thread leaves behind.
    await busRequest(app, Patterns.caseThread, {
      control: 'begin_close_case_thread',
      organizationId: t.orgId,
      environmentId: t.sandbox,
      conversationId: c.caseId,
      kind: 'case',
      patientId: c.patientId,
    });
    let answered = false;
    const waiting = app.api
      .post(`/v1/conversations/${c.caseId}/messages`, { requestId: randomUUID(), message: 'are you there?' }, t.apiKey)
      .then((r) => ((answered = true), r));
    await new Promise((r) => setTimeout(r, 300));
    expect(answered).toBe(false); // held while the resolve might still be recorded
    await app.advanceClock(11); // past the hold's lease (service clock)
    const r = await waiting;
    expect(r.status).toBe(201);
    expect((await staffCase(c.caseId)).status).toBe('awaiting_processing');
    expect((await inbound(c.caseId, 'and again')).status).toBe(201);
  });

  inProcess('holds and fails bus messages on the in-process broker')(
    'a hold whose resolve was recorded but never closed the thread (a crash after the resolution): after the lease the case being resolved refuses them',
    async () => {
      const c = await openCase(app, t);
      expect((await app.api.post(`/v1/clinical-cases/${c.caseId}/updates`, update(1, 'processed'), t.apiKey)).status).toBe(200);
      const faults = busFaults(c.caseId);
      const resolve = update(2, 'resolved', { resolutionOutcome: 'no_further_action', resolutionNote: 'Resolved after review' });
      try {
        const r = await app.api.post(`/v1/clinical-cases/${c.caseId}/updates`, resolve, t.apiKey);
        expect({ status: r.status, code: r.body.code }).toEqual({ status: 503, code: 'UNAVAILABLE' });
      } finally {
        faults.restore();
      }
      expect((await staffCase(c.caseId)).status).toBe('resolved');
      await app.advanceClock(11);
      const m = await inbound(c.caseId, 'one more thing');
      expect({ status: m.status, code: m.body.code }).toEqual({ status: 409, code: 'CASE_RESOLVED' });
      expect(
        (await app.api.get(`/v1/conversations/${c.caseId}/messages`, t.apiKey)).body.messages.filter((x: { sender: string }) => x.sender === 'patient'),
      ).toEqual([]);
      expect((await app.api.post(`/v1/clinical-cases/${c.caseId}/updates`, resolve, t.apiKey)).body).toMatchObject({ status: 'resolved', duplicate: true });
    },
  );

  inProcess('holds bus messages on the in-process broker')(
    'a message settling an old hold never lifts the hold of a resolve begun since (its lease is another)',
    async () => {
      const c = await openCase(app, t);
      expect((await app.api.post(`/v1/clinical-cases/${c.caseId}/updates`, update(1, 'processed'), t.apiKey)).status).toBe(200);
      // H1: a hold a crashed resolve left behind, its lease run out.
      await busRequest(app, Patterns.caseThread, {
        control: 'begin_close_case_thread',
        organizationId: t.orgId,
        environmentId: t.sandbox,
        conversationId: c.caseId,
        kind: 'case',
        patientId: c.patientId,
      });
      await app.advanceClock(11);
      // The first case-status answer ("not resolved": the case is open) is held back on its way; the
      // new resolve's final close is lost, and so is its relayed backstop.
      const faults = busFaults(c.caseId, true);
      try {
        const m1 = app.api.post(`/v1/conversations/${c.caseId}/messages`, { requestId: randomUUID(), message: 'm1' }, t.apiKey);
        for (let i = 0; i < 1000 && !faults.statusHeld(); i++) await new Promise((r) => setTimeout(r, 5));
        expect(faults.statusHeld()).toBe(true);
        // H2: a resolve holds the thread, is recorded, and its final close is lost; then its lease runs out too.
        const r2 = await app.api.post(
          `/v1/clinical-cases/${c.caseId}/updates`,
          update(2, 'resolved', { resolutionOutcome: 'no_further_action', resolutionNote: 'Resolved after review' }),
          t.apiKey,
        );
        expect({ status: r2.status, code: r2.body.code }).toEqual({ status: 503, code: 'UNAVAILABLE' });
        await app.advanceClock(11);
        faults.answerStatus(); // "not resolved", about H1: it must not lift H2
        const r1 = await m1;
        expect({ status: r1.status, code: r1.body.code }).toEqual({ status: 409, code: 'CASE_RESOLVED' });
        const m2 = await inbound(c.caseId, 'm2');
        expect({ status: m2.status, code: m2.body.code }).toEqual({ status: 409, code: 'CASE_RESOLVED' });
      } finally {
        faults.restore();
      }
      expect(
        (await app.api.get(`/v1/conversations/${c.caseId}/messages`, t.apiKey)).body.messages.filter((x: { sender: string }) => x.sender === 'patient'),
      ).toEqual([]);
    },
  );
});
