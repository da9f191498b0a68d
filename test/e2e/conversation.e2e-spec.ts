// Over 400 lines: the conversation contract end to end on one service.
import { randomUUID } from 'node:crypto';
import { Patterns, Topics } from '@svc/messaging';
import { inProcess, onTopology, TestApp } from '@svc/testing';
import { Tenant, TopicWatch, brokerOf, busRequest, eventually, openCase, rawRequest, update, watchTopic, widgetToken } from './case-helpers';

const sha = 'a'.repeat(64);

/** Issue 4: conversations over real HTTP. */
describe('conversations (e2e, real HTTP)', () => {
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

  const list = (id: string, query = '', key = t.apiKey) => app.api.get(`/v1/conversations/${id}/messages${query}`, key);
  const inbound = (id: string, body: unknown, key = t.apiKey) => app.api.post(`/v1/conversations/${id}/messages`, body, key);
  /** A case: its thread exists as soon as the open answers (read your writes, no waiting). */
  async function caseThread(patientId?: string) {
    return openCase(app, t, 'Please check on the patient', patientId);
  }

  it('read your writes: the thread of a case exists when its open answers (staff and bus opens), 10 of 10', async () => {
    for (let i = 0; i < 10; i++) {
      const staff = await openCase(app, t);
      expect((await list(staff.caseId)).status).toBe(200);
      expect((await inbound(staff.caseId, { requestId: randomUUID(), message: 'right away' })).status).toBe(201);
      const bus = await busRequest(app, Patterns.openClinicalCase, {
        requestId: randomUUID(),
        organizationId: t.orgId,
        environmentId: t.sandbox,
        patientId: randomUUID(),
        source: 'patient_concern',
        priority: 'routine',
        patientNotes: 'I feel worse',
        symptomScores: {},
        matchedRules: [],
        stoppedEarly: false,
        actor: 'system',
      });
      const r = await inbound(bus.caseId, { requestId: randomUUID(), message: 'right away' });
      expect(r.status).toBe(201);
      expect(r.body.sequence).toBe(1);
    }
  });

  it('reads a case thread: empty at first, 404 for unknown or other-environment ids, 400 for a non-uuid id or a bad afterSequence', async () => {
    const c = await caseThread();
    const empty = await list(c.caseId);
    expect(empty.status).toBe(200);
    expect(empty.body).toEqual({ conversationId: c.caseId, messages: [], hasMore: false });
    expect((await list(randomUUID())).status).toBe(404);
    expect((await list('not-a-uuid')).status).toBe(400);
    const other = await app.tenant();
    expect((await list(c.caseId, '', other.apiKey)).status).toBe(404);
    expect((await inbound(c.caseId, { requestId: randomUUID(), message: 'hi' }, other.apiKey)).status).toBe(404);
    for (const q of ['?afterSequence=-1', '?afterSequence=abc', '?afterSequence=1.5', '?afterSequence=']) {
      const r = await list(c.caseId, q);
      expect(r.status).toBe(400);
      expect(r.body.code).toBe('VALIDATION_FAILED');
      expect(r.body.details[0].path).toBe('afterSequence');
    }
    expect((await list(c.caseId, '', 'svc_sb_nope')).status).toBe(401);
  });

  it('takes inbound patient messages: 201, requestId idempotency, attachments, ordering, patient_message_created', async () => {
    const c = await caseThread();
    const body = {
      requestId: randomUUID(),
      message: 'The swelling went down but I still feel dizzy.',
      externalMessageId: 'sms-1',
      attachments: [{ id: randomUUID(), fileName: 'photo.jpg', contentType: 'image/jpeg', sha256: sha }],
    };
    const r = await inbound(c.caseId, body);
    expect(r.status).toBe(201);
    expect(r.body).toEqual({ id: expect.any(String), conversationId: c.caseId, sequence: 1, duplicate: false, createdAt: expect.any(String) });
    const again = await inbound(c.caseId, body);
    expect(again.status).toBe(201);
    expect(again.body).toEqual({ ...r.body, duplicate: true });
    const reused = await inbound(c.caseId, { ...body, message: 'Another text' });
    expect(reused.status).toBe(409);
    expect(reused.body.code).toBe('IDEMPOTENCY_KEY_REUSED');

    const second = await inbound(c.caseId, { requestId: randomUUID(), message: 'Also a headache.' });
    expect(second.body.sequence).toBe(2);
    const all = await list(c.caseId);
    expect(all.body.messages.map((m: { sequence: number }) => m.sequence)).toEqual([1, 2]);
    expect(all.body.messages[0]).toEqual({
      id: r.body.id,
      conversationId: c.caseId,
      sequence: 1,
      sender: 'patient',
      message: body.message,
      externalMessageId: 'sms-1',
      attachments: body.attachments,
      createdAt: r.body.createdAt,
      delivery: null,
    });
    expect((await list(c.caseId, '?afterSequence=1')).body.messages.map((m: { sequence: number }) => m.sequence)).toEqual([2]);
    expect((await list(c.caseId, '?afterSequence=2')).body.messages).toEqual([]);
    // any size of integer is a valid afterSequence (past every message: nothing)
    for (const big of ['1234567890123456', '99999999999999999999999999'])
      expect(await list(c.caseId, `?afterSequence=${big}`)).toMatchObject({ status: 200, body: { messages: [] } });

    const ev = await eventually(
      async () => caseEvents.seen.find((m) => m.type === 'clinical_case.patient_message_created' && m.data.messageId === r.body.id),
      (v) => !!v,
    );
    expect(ev!.data).toEqual({
      caseId: c.caseId,
      messageId: r.body.id,
      patientId: c.patientId,
      sender: 'patient',
      message: body.message,
      sentAt: r.body.createdAt,
      replyPath: `/v1/clinical-cases/${c.caseId}/messages`,
    });
    // one event per message, none for the duplicate
    expect(caseEvents.seen.filter((m) => m.type === 'clinical_case.patient_message_created' && m.data.caseId === c.caseId)).toHaveLength(2);

    const bad: unknown[] = [
      {},
      { requestId: 'x', message: 'hi' },
      { requestId: randomUUID(), message: '' },
      { requestId: randomUUID(), message: 'x'.repeat(10001) },
      { requestId: randomUUID(), message: 'hi', externalMessageId: 'x'.repeat(201) },
      { requestId: randomUUID(), message: 'hi', attachments: [{ id: randomUUID(), fileName: 'a', contentType: 'b', sha256: 'A'.repeat(64) }] },
      { requestId: randomUUID(), message: 'hi', attachments: [{ id: randomUUID(), fileName: 'a', contentType: 'b' }] },
      { requestId: randomUUID(), message: 'hi', attachments: [{ id: 'x', fileName: 'x'.repeat(201), contentType: 'x'.repeat(161), sha256: sha }] },
      { requestId: randomUUID(), message: 'hi', attachments: [{ id: randomUUID(), fileName: 'a', contentType: 'b', sha256: sha, extra: 1 }] },
      { requestId: randomUUID(), message: 'hi', extra: true },
    ];
    for (const b of bad) {
      const res = await inbound(c.caseId, b);
      expect(res.status).toBe(400);
      expect(res.body.code).toBe('VALIDATION_FAILED');
    }
    expect((await inbound(randomUUID(), { requestId: randomUUID(), message: 'hi' })).status).toBe(404);
  });

  it('records delivery reports for messages the service sent; read never moves back to delivered', async () => {
    const c = await caseThread();
    expect(
      (
        await app.api.post(
          `/v1/clinical-cases/${c.caseId}/messages`,
          { messageId: randomUUID(), message: 'Please call us', externalReference: 'p-1' },
          t.apiKey,
        )
      ).status,
    ).toBe(200);
    const patientMsg = await inbound(c.caseId, { requestId: randomUUID(), message: 'ok' });
    const [provider] = (await list(c.caseId)).body.messages;
    expect(provider.sender).toBe('provider');
    const path = (id: string) => `/v1/conversations/${c.caseId}/messages/${id}/delivery`;

    const delivered = await app.api.post(path(provider.id), { externalMessageId: 'sms-99', status: 'delivered' }, t.apiKey);
    expect(delivered.status).toBe(201);
    expect(delivered.body).toEqual({ messageId: provider.id, status: 'delivered', recordedAt: expect.any(String) });
    expect((await list(c.caseId)).body.messages[0].delivery).toEqual({
      status: 'delivered',
      errorCode: null,
      externalMessageId: 'sms-99',
      reportedAt: delivered.body.recordedAt,
    });
    const read = await app.api.post(path(provider.id), { externalMessageId: 'sms-100', status: 'read' }, t.apiKey);
    expect(read.body.status).toBe('read');
    const back = await app.api.post(path(provider.id), { externalMessageId: 'sms-99', status: 'delivered' }, t.apiKey);
    expect(back.status).toBe(201);
    expect(back.body).toEqual({ messageId: provider.id, status: 'read', recordedAt: read.body.recordedAt });
    // The recorded report's own externalMessageId is kept with it (the transport's id of that delivery).
    expect((await list(c.caseId)).body.messages[0].delivery).toEqual({
      status: 'read',
      errorCode: null,
      externalMessageId: 'sms-100',
      reportedAt: read.body.recordedAt,
    });

    expect((await app.api.post(path(patientMsg.body.id), { externalMessageId: 'x', status: 'delivered' }, t.apiKey)).status).toBe(404);
    expect((await app.api.post(path(randomUUID()), { externalMessageId: 'x', status: 'delivered' }, t.apiKey)).status).toBe(404);
    expect((await app.api.post(path('nope'), { externalMessageId: 'x', status: 'delivered' }, t.apiKey)).status).toBe(400);
    for (const b of [
      { status: 'delivered' },
      { externalMessageId: 'x', status: 'seen' },
      { externalMessageId: 'x', status: 'failed', errorCode: 'e'.repeat(81) },
    ]) {
      expect((await app.api.post(path(provider.id), b, t.apiKey)).status).toBe(400);
    }
    const other = await app.tenant();
    expect((await app.api.post(path(provider.id), { externalMessageId: 'x', status: 'read' }, other.apiKey)).status).toBe(404);
  });

  it('takes patient replies from the widget: session required, own cases only, event with replyPath', async () => {
    const c = await caseThread();
    const token = await widgetToken(app, { organizationId: t.orgId, environmentId: t.sandbox, patientId: c.patientId, externalPatientId: c.externalPatientId });
    const path = `/widget/v1/cases/${c.caseId}/messages`;
    const r = await app.api.post(path, { message: 'Thank you, I feel better today.' }, token);
    expect(r.status).toBe(201);
    expect(r.body).toEqual({ id: expect.any(String), conversationId: c.caseId, sequence: 1, duplicate: false, createdAt: expect.any(String) });
    const thread = await list(c.caseId);
    expect(thread.body.messages[0]).toMatchObject({ sender: 'patient', message: 'Thank you, I feel better today.' });
    const ev = await eventually(
      async () => caseEvents.seen.find((m) => m.type === 'clinical_case.patient_message_created' && m.data.messageId === r.body.id),
      (v) => !!v,
    );
    expect(ev!.data.replyPath).toBe(`/v1/clinical-cases/${c.caseId}/messages`);
    expect(ev!.data.patientId).toBe(c.patientId);

    const none = await app.api.post(path, { message: 'hi' });
    expect(none.status).toBe(401);
    expect(none.body.code).toBe('SESSION_REQUIRED');
    expect((await app.api.post(path, { message: 'hi' }, 'garbage')).body.code).toBe('SESSION_REQUIRED');
    const stranger = await widgetToken(app, { organizationId: t.orgId, environmentId: t.sandbox, patientId: randomUUID() });
    const notTheirs = await app.api.post(path, { message: 'hi' }, stranger);
    expect(notTheirs.status).toBe(404);
    const anonymous = await widgetToken(app, { organizationId: t.orgId, environmentId: t.sandbox, patientId: null });
    expect((await app.api.post(path, { message: 'hi' }, anonymous)).status).toBe(404);
    // A case id that does not exist gets the very same answer as another patient's case (no existence oracle).
    for (const [id, session] of [
      [randomUUID(), token],
      [randomUUID(), anonymous],
    ] as const) {
      const r = await app.api.post(`/widget/v1/cases/${id}/messages`, { message: 'hi' }, session);
      expect({ status: r.status, body: r.body }).toEqual({ status: 404, body: notTheirs.body });
    }
    // An id that is not a uuid names no case of anyone's: 400 naming caseId (docs/decisions.md, "Path parameters").
    const malformed = await app.api.post('/widget/v1/cases/not-a-uuid/messages', { message: 'hi' }, token);
    expect({ status: malformed.status, body: malformed.body }).toEqual({
      status: 400,
      body: { code: 'VALIDATION_FAILED', message: expect.any(String), details: [{ path: 'caseId', message: expect.any(String) }] },
    });
    expect((await app.api.post(path, { message: '' }, token)).status).toBe(400);
    expect((await app.api.post(path, { message: 'hi', extra: 1 }, token)).status).toBe(400);
  });

  it('recognises a retried widget reply by its Idempotency-Key: same message once, another message 409, keys scoped to the patient, 10 at once one message', async () => {
    const c = await caseThread();
    const token = await widgetToken(app, { organizationId: t.orgId, environmentId: t.sandbox, patientId: c.patientId, externalPatientId: c.externalPatientId });
    const path = `/widget/v1/cases/${c.caseId}/messages`;
    const send = (message: string, key?: string, session = token, to = path) =>
      app.api.request('POST', to, { token: session, body: { message }, headers: key === undefined ? {} : { 'idempotency-key': key } });
    const key = randomUUID();
    const first = await send('Is it normal that the rash itches?', key);
    expect(first.status).toBe(201);
    expect(first.body).toEqual({ id: expect.any(String), conversationId: c.caseId, sequence: 1, duplicate: false, createdAt: expect.any(String) });
    const retry = await send('Is it normal that the rash itches?', key.toUpperCase());
    expect(retry.status).toBe(201);
    expect(retry.body).toEqual({ ...first.body, duplicate: true });
    const reused = await send('Something else entirely', key);
    expect(reused.status).toBe(409);
    expect(reused.body.code).toBe('IDEMPOTENCY_KEY_REUSED');
    for (const bad of ['not-a-uuid', `${key}, ${key}`, '']) {
      const r = await send('hello', bad);
      expect(r.status).toBe(400);
      expect(r.body.code).toBe('VALIDATION_FAILED');
      expect(r.body.details[0].path).toBe('Idempotency-Key');
    }
    // Without a key every reply is a new message (the contract's behaviour).
    expect((await send('Two of the same')).body.sequence).toBe(2);
    expect((await send('Two of the same')).body.sequence).toBe(3);
    // Ten identical retries at once: one message.
    const burstKey = randomUUID();
    const burst = await Promise.all(Array.from({ length: 10 }, () => send('Sent from a flaky network', burstKey)));
    expect(burst.map((r) => r.status)).toEqual(burst.map(() => 201));
    expect(new Set(burst.map((r) => r.body.id)).size).toBe(1);
    expect(burst.filter((r) => !r.body.duplicate)).toHaveLength(1);
    // The same key is the patient's own: another patient using it in their own case writes a new message,
    // and a caller's inbound requestId equal to the key is a different request.
    const other = await caseThread();
    const otherToken = await widgetToken(app, {
      organizationId: t.orgId,
      environmentId: t.sandbox,
      patientId: other.patientId,
      externalPatientId: other.externalPatientId,
    });
    const theirs = await send('Is it normal that the rash itches?', key, otherToken, `/widget/v1/cases/${other.caseId}/messages`);
    expect(theirs.status).toBe(201);
    expect(theirs.body.duplicate).toBe(false);
    const relayed = await inbound(c.caseId, { requestId: key, message: 'Is it normal that the rash itches?' });
    expect(relayed.status).toBe(201);
    expect(relayed.body.duplicate).toBe(false);
    const thread = (await list(c.caseId)).body.messages;
    expect(thread.map((m: { message: string }) => m.message)).toEqual([
      'Is it normal that the rash itches?',
      'Two of the same',
      'Two of the same',
      'Sent from a flaky network',
      'Is it normal that the rash itches?',
    ]);
    // A retry after the case was resolved is still the first reply, not CASE_RESOLVED.
    expect((await app.api.post(`/v1/clinical-cases/${c.caseId}/updates`, update(1, 'processed'), t.apiKey)).status).toBe(200);
    expect(
      (
        await app.api.post(
          `/v1/clinical-cases/${c.caseId}/updates`,
          update(2, 'resolved', { resolutionOutcome: 'no_further_action', resolutionNote: 'Answered in the thread' }),
          t.apiKey,
        )
      ).status,
    ).toBe(200);
    const late = await send('Is it normal that the rash itches?', key);
    expect(late.status).toBe(201);
    expect(late.body).toEqual({ ...first.body, duplicate: true });
    expect((await send('A new question', randomUUID())).body.code).toBe('CASE_RESOLVED');
  });

  // On the topology, 600 appends at once to one case thread (one stream of the PostgreSQL event
  // store) take longer than the case-ledger's 10 s wait for a provider message's thread append, and
  // those messages answer 503 UNAVAILABLE (standalone, on SQLite, answers every one).
  inProcess('600 appends at once to one thread outlast the 10 s thread-append wait on the topology (503s)')(
    'takes 200 messages sent at once to one case (inbound, widget replies, provider messages): every one answered 2xx, sequences 1..600 without gaps',
    async () => {
      const c = await caseThread();
      const token = await widgetToken(app, {
        organizationId: t.orgId,
        environmentId: t.sandbox,
        patientId: c.patientId,
        externalPatientId: c.externalPatientId,
      });
      const [inbounds, replies, providers] = await Promise.all([
        Promise.all(Array.from({ length: 200 }, (_, i) => inbound(c.caseId, { requestId: randomUUID(), message: `inbound ${i}` }))),
        Promise.all(Array.from({ length: 200 }, (_, i) => app.api.post(`/widget/v1/cases/${c.caseId}/messages`, { message: `reply ${i}` }, token))),
        Promise.all(
          Array.from({ length: 200 }, (_, i) =>
            app.api.post(
              `/v1/clinical-cases/${c.caseId}/messages`,
              { messageId: randomUUID(), message: `provider ${i}`, externalReference: `p-${i}` },
              t.apiKey,
            ),
          ),
        ),
      ]);
      expect([...inbounds, ...replies].map((r) => r.status)).toEqual(Array(400).fill(201));
      expect(providers.map((r) => r.status)).toEqual(Array(200).fill(200));
      // The thread is read in pages (at most 500 a read): 500, then the 100 after sequence 500.
      const first = await list(c.caseId, '?limit=500');
      const rest = await list(c.caseId, '?afterSequence=500&limit=500');
      expect([first.body.hasMore, rest.body.hasMore]).toEqual([true, false]);
      const messages = [...first.body.messages, ...rest.body.messages];
      expect(messages.map((m: { sequence: number }) => m.sequence)).toEqual(Array.from({ length: 600 }, (_, i) => i + 1));
      expect(messages.filter((m: { sender: string }) => m.sender === 'provider')).toHaveLength(200);
    },
  );

  it('read your writes: a resolve that answered 200 has closed the thread (inbound sent at once is 409), 10 of 10', async () => {
    // A slow consumer of case events (as a busy webhook dispatcher would be) holds the case relay:
    // a thread closed only by the relayed clinical_case.resolved would still take messages. (On the
    // topology the relay goes through Kafka to another process, later than the answer, unheld.)
    const slow = onTopology()
      ? () => undefined
      : brokerOf(app).subscribe(Topics.caseEvents, async (m) => {
          if ((m.data as { type?: string })?.type === 'clinical_case.resolved') await new Promise((r) => setTimeout(r, 150));
        });
    const cases = await Promise.all(Array.from({ length: 10 }, () => caseThread()));
    await Promise.all(
      cases.map(async (c) => expect((await app.api.post(`/v1/clinical-cases/${c.caseId}/updates`, update(1, 'processed'), t.apiKey)).status).toBe(200)),
    );
    const results = await Promise.all(
      cases.map(async (c) => {
        const r = await app.api.post(
          `/v1/clinical-cases/${c.caseId}/updates`,
          update(2, 'resolved', { resolutionOutcome: 'other', resolutionNote: 'Closed by the team' }),
          t.apiKey,
        );
        expect(r.status).toBe(200);
        return (await inbound(c.caseId, { requestId: randomUUID(), message: 'too late' })).status;
      }),
    );
    slow();
    expect(results).toEqual(cases.map(() => 409));
  });

  it("refuses patient messages in a resolved case's thread with 409 CASE_RESOLVED", async () => {
    const c = await caseThread();
    const token = await widgetToken(app, { organizationId: t.orgId, environmentId: t.sandbox, patientId: c.patientId, externalPatientId: c.externalPatientId });
    expect((await app.api.post(`/v1/clinical-cases/${c.caseId}/updates`, update(1, 'processed'), t.apiKey)).status).toBe(200);
    const pending = { requestId: randomUUID(), message: 'before resolution' };
    expect((await inbound(c.caseId, pending)).status).toBe(201);
    expect(
      (
        await app.api.post(
          `/v1/clinical-cases/${c.caseId}/updates`,
          update(2, 'resolved', { resolutionOutcome: 'no_further_action', resolutionNote: 'Nothing more to do here' }),
          t.apiKey,
        )
      ).status,
    ).toBe(200);
    // read your writes: the resolve's 200 means the thread already refuses patient messages
    const refused = await inbound(c.caseId, { requestId: randomUUID(), message: 'after resolution' });
    expect(refused.status).toBe(409);
    expect(refused.body.code).toBe('CASE_RESOLVED');
    const widget = await app.api.post(`/widget/v1/cases/${c.caseId}/messages`, { message: 'hello?' }, token);
    expect(widget.status).toBe(409);
    expect(widget.body.code).toBe('CASE_RESOLVED');
    // an identical retry of an earlier message is still recognized
    expect((await inbound(c.caseId, pending)).body.duplicate).toBe(true);
    // the thread still reads
    expect((await list(c.caseId)).body.messages).toHaveLength(1);
  });

  it('a provider messageId equal to an inbound requestId of the same thread is a different message (no 503)', async () => {
    const c = await caseThread();
    const shared = randomUUID();
    expect((await inbound(c.caseId, { requestId: shared, message: 'from the patient' })).status).toBe(201);
    const pm = { messageId: shared, message: 'from the provider', externalReference: 'ref-1' };
    const r = await app.api.post(`/v1/clinical-cases/${c.caseId}/messages`, pm, t.apiKey);
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({ caseId: c.caseId, messageId: shared, duplicate: false });
    const again = await app.api.post(`/v1/clinical-cases/${c.caseId}/messages`, pm, t.apiKey);
    expect(again.status).toBe(200);
    expect(again.body.duplicate).toBe(true);
    const thread = await list(c.caseId);
    expect(thread.body.messages.map((m: { sender: string; message: string }) => [m.sender, m.message])).toEqual([
      ['patient', 'from the patient'],
      ['provider', 'from the provider'],
    ]);
  });

  it('refuses attachments that are not objects, and explicit null for optional fields (400)', async () => {
    const c = await caseThread();
    const base = { requestId: randomUUID(), message: 'hello' };
    for (const attachments of [[[]], [null], ['x'], [1], [[{ id: randomUUID(), fileName: 'a', contentType: 'b', sha256: sha }]]]) {
      const r = await inbound(c.caseId, { ...base, requestId: randomUUID(), attachments });
      expect({ attachments, status: r.status, code: r.body.code }).toEqual({ attachments, status: 400, code: 'VALIDATION_FAILED' });
      expect(r.body.details.some((d: { path: string }) => d.path.startsWith('attachments'))).toBe(true);
    }
    for (const field of ['externalMessageId', 'attachments']) {
      const r = await inbound(c.caseId, { ...base, requestId: randomUUID(), [field]: null });
      expect({ field, status: r.status }).toEqual({ field, status: 400 });
    }
    const tooMany = Array.from({ length: 21 }, () => ({ id: randomUUID(), fileName: 'a', contentType: 'b', sha256: sha }));
    expect((await inbound(c.caseId, { ...base, requestId: randomUUID(), attachments: tooMany })).status).toBe(400);
    expect((await inbound(c.caseId, { ...base, requestId: randomUUID(), attachments: tooMany.slice(0, 20) })).status).toBe(201);
    const pm = await app.api.post(`/v1/clinical-cases/${c.caseId}/messages`, { messageId: randomUUID(), message: 'from us', externalReference: 'r' }, t.apiKey);
    expect(pm.status).toBe(200);
    const sent = (await list(c.caseId)).body.messages.find((m: { sender: string }) => m.sender === 'provider');
    const nullCode = await app.api.post(
      `/v1/conversations/${c.caseId}/messages/${sent.id}/delivery`,
      { externalMessageId: 'x', status: 'failed', errorCode: null },
      t.apiKey,
    );
    expect(nullCode.status).toBe(400);
    expect(nullCode.body.details[0].path).toBe('errorCode');
  });

  it('refuses unknown fields named like Object.prototype members in inbound messages, attachment items and delivery reports (400 naming the path)', async () => {
    const c = await caseThread();
    const attachment = { id: randomUUID(), fileName: 'photo.jpg', contentType: 'image/jpeg', sha256: sha };
    const body = { requestId: randomUUID(), message: 'hello', attachments: [attachment] };
    const raw = (value: unknown, key: string, at: 'top' | 'attachment') =>
      at === 'top'
        ? JSON.stringify(value).replace(/}$/, `,${JSON.stringify(key)}:{"x":1}}`)
        : JSON.stringify(value).replace(/}]}$/, `,${JSON.stringify(key)}:1}]}`);
    for (const key of ['constructor', 'toString', 'valueOf', 'hasOwnProperty', '__defineGetter__', 'prototype']) {
      for (const at of ['top', 'attachment'] as const) {
        const r = await app.api.request('POST', `/v1/conversations/${c.caseId}/messages`, { rawBody: raw(body, key, at), token: t.apiKey });
        const path = at === 'top' ? key : `attachments[0].${key}`;
        expect({ key, at, status: r.status, body: r.body }).toEqual({
          key,
          at,
          status: 400,
          body: { code: 'VALIDATION_FAILED', message: expect.any(String), details: [{ path, message: 'unknown field' }] },
        });
      }
    }
    // nothing was recorded: the same requestId without the extra member is a first write
    const ok = await inbound(c.caseId, body);
    expect(ok.status).toBe(201);
    expect(ok.body.duplicate).toBe(false);
    expect((await list(c.caseId)).body.messages).toHaveLength(1);

    expect(
      (await app.api.post(`/v1/clinical-cases/${c.caseId}/messages`, { messageId: randomUUID(), message: 'from us', externalReference: 'r' }, t.apiKey)).status,
    ).toBe(200);
    const sent = (await list(c.caseId)).body.messages.find((m: { sender: string }) => m.sender === 'provider');
    for (const key of ['isPrototypeOf', 'toLocaleString', 'propertyIsEnumerable']) {
      const r = await app.api.request('POST', `/v1/conversations/${c.caseId}/messages/${sent.id}/delivery`, {
        rawBody: `{"externalMessageId":"x","status":"read",${JSON.stringify(key)}:1}`,
        token: t.apiKey,
      });
      expect({ key, status: r.status, details: r.body.details }).toEqual({ key, status: 400, details: [{ path: key, message: 'unknown field' }] });
    }
    expect((await list(c.caseId)).body.messages.find((m: { id: string }) => m.id === sent.id).delivery).toBeNull();
    const token = await widgetToken(app, { organizationId: t.orgId, environmentId: t.sandbox, patientId: c.patientId, externalPatientId: c.externalPatientId });
    const widget = await app.api.request('POST', `/widget/v1/cases/${c.caseId}/messages`, { rawBody: '{"message":"hi","constructor":{"x":1}}', token });
    expect(widget.status).toBe(400);
    expect(widget.body.details).toEqual([{ path: 'constructor', message: 'unknown field' }]);
  });

  it('finds a conversation addressed by its uuid in upper case (read, inbound, delivery, widget reply); another environment still gets 404', async () => {
    const c = await caseThread();
    const upper = c.caseId.toUpperCase();
    const body = { requestId: randomUUID(), message: 'hello in capitals' };
    const r = await inbound(upper, body);
    expect(r.status).toBe(201);
    expect(r.body.conversationId).toBe(c.caseId);
    expect((await inbound(c.caseId, body)).body.duplicate).toBe(true);
    const read = await list(upper);
    expect(read.status).toBe(200);
    expect(read.body.conversationId).toBe(c.caseId);
    expect(read.body.messages).toHaveLength(1);

    expect(
      (await app.api.post(`/v1/clinical-cases/${c.caseId}/messages`, { messageId: randomUUID(), message: 'from us', externalReference: 'r' }, t.apiKey)).status,
    ).toBe(200);
    const sent = (await list(c.caseId)).body.messages.find((m: { sender: string }) => m.sender === 'provider');
    const delivery = await app.api.post(
      `/v1/conversations/${upper}/messages/${sent.id.toUpperCase()}/delivery`,
      { externalMessageId: 'x', status: 'read' },
      t.apiKey,
    );
    expect(delivery.status).toBe(201);
    expect(delivery.body.messageId).toBe(sent.id);

    const token = await widgetToken(app, { organizationId: t.orgId, environmentId: t.sandbox, patientId: c.patientId, externalPatientId: c.externalPatientId });
    const reply = await app.api.post(`/widget/v1/cases/${upper}/messages`, { message: 'Thanks' }, token);
    expect(reply.status).toBe(201);
    expect(reply.body.conversationId).toBe(c.caseId);

    const other = await app.tenant();
    expect((await list(upper, '', other.apiKey)).status).toBe(404);
    expect((await inbound(upper, { requestId: randomUUID(), message: 'hi' }, other.apiKey)).status).toBe(404);
    expect(
      (await app.api.post(`/v1/conversations/${upper}/messages/${sent.id.toUpperCase()}/delivery`, { externalMessageId: 'x', status: 'read' }, other.apiKey))
        .status,
    ).toBe(404);
  });

  it("answers a badly percent-encoded conversation path with VALIDATION_FAILED (path url), not Fastify's own body", async () => {
    for (const [method, url, body] of [
      ['POST', '/v1/conversations/%zz/messages', JSON.stringify({ requestId: randomUUID(), message: 'hi' })],
      ['GET', '/v1/conversations/%zz/messages', undefined],
      ['POST', `/v1/conversations/${randomUUID()}/messages/%zz/delivery`, '{"externalMessageId":"x","status":"read"}'],
    ] as const) {
      const r = await rawRequest(app, method, url, { token: t.apiKey, body });
      expect({ url, status: r.status, body: r.body }).toEqual({
        url,
        status: 400,
        body: { code: 'VALIDATION_FAILED', message: expect.any(String), details: [{ path: 'url', message: expect.any(String) }] },
      });
    }
  });

  it('lets other apps append over the bus (work items and case threads), idempotent by requestId', async () => {
    const conversationId = randomUUID();
    const cmd = {
      requestId: randomUUID(),
      organizationId: t.orgId,
      environmentId: t.sandbox,
      conversationId,
      kind: 'work_item',
      patientId: null,
      sender: 'system',
      message: 'Summary: order 123 late',
    };
    const [a, b] = await Promise.all([busRequest(app, Patterns.appendConversationMessage, cmd), busRequest(app, Patterns.appendConversationMessage, cmd)]);
    expect(a.id).toBe(b.id);
    expect([a.duplicate, b.duplicate].sort()).toEqual([false, true]);
    expect(a).toMatchObject({ conversationId, sequence: 1, createdAt: expect.any(String) });
    const agent = await busRequest(app, Patterns.appendConversationMessage, {
      ...cmd,
      requestId: randomUUID(),
      sender: 'agent',
      message: 'A teammate will reply soon.',
    });
    expect(agent.sequence).toBe(2);
    const thread = await list(conversationId);
    expect(thread.body.messages.map((m: { sender: string }) => m.sender)).toEqual(['system', 'agent']);
    await expect(busRequest(app, Patterns.appendConversationMessage, { ...cmd, message: 'changed' })).rejects.toMatchObject({
      status: 409,
      code: 'IDEMPOTENCY_KEY_REUSED',
    });
    await expect(busRequest(app, Patterns.appendConversationMessage, { ...cmd, requestId: randomUUID(), environmentId: t.production })).rejects.toMatchObject({
      status: 404,
    });
    await expect(busRequest(app, Patterns.appendConversationMessage, { ...cmd, kind: 'x' })).rejects.toMatchObject({ status: 400 });
    // a work item emits no clinical_case event
    expect(caseEvents.seen.some((m) => m.data?.caseId === conversationId)).toBe(false);
  });
});
