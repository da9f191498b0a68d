import { deciderSpec } from '../../../libs/eventstore/src/testing';
import { CASE_THREAD_CLOSE_LEASE_MS, ConversationCommand, ConversationEvent, conversationDecider } from '../src/domain/conversation';

const env = 'e0000000-0000-4000-8000-000000000001';
const conv = 'c0000000-0000-4000-8000-000000000001';
const now = new Date('2026-01-01T00:00:00Z');
const started: ConversationEvent[] = [
  { type: 'ConversationStarted', conversationId: conv, kind: 'case', organizationId: 'o', environmentId: env, patientId: 'p1', startedAt: 'x' },
];
const append = (requestId: string, sender: any = 'patient', bodyHash = 'h'): ConversationCommand => ({
  type: 'AppendMessage',
  conversationId: conv,
  start: null,
  environmentId: env,
  id: `id-${requestId}`,
  requestId,
  bodyHash,
  sender,
  message: 'm',
  externalMessageId: null,
  attachments: [],
});
const fold = (events: ConversationEvent[]) => events.reduce(conversationDecider.evolve, conversationDecider.initialState());

describe('conversation decider', () => {
  it('appends in sequence; a patient message in a case thread also records clinical_case.patient_message_created', () => {
    const e1 = conversationDecider.decide(append('r1'), fold(started), now);
    expect(e1.map((e) => e.type)).toEqual(['ConversationMessageAppended', 'clinical_case.patient_message_created']);
    expect(e1[1]).toEqual({
      type: 'clinical_case.patient_message_created',
      caseId: conv,
      messageId: 'id-r1',
      patientId: 'p1',
      sender: 'patient',
      message: 'm',
      sentAt: now.toISOString(),
      replyPath: `/v1/clinical-cases/${conv}/messages`,
    });
    const e2 = conversationDecider.decide(append('r2', 'provider'), fold([...started, ...e1]), now);
    expect(e2).toHaveLength(1);
    expect((e2[0] as any).sequence).toBe(2);
    deciderSpec(conversationDecider)
      .given([...started, ...e1])
      .when(append('r1'), now)
      .then([]);
    deciderSpec(conversationDecider)
      .given([...started, ...e1])
      .when(append('r1', 'patient', 'other'), now)
      .thenThrows('IDEMPOTENCY_KEY_REUSED');
    deciderSpec(conversationDecider).given([]).when(append('r1'), now).thenThrows('NOT_FOUND');
  });

  it('closes case threads to patients; delivery reports only for sent messages and never back from read', () => {
    const closed: ConversationEvent[] = [...started, { type: 'CaseThreadClosed', conversationId: conv, closedAt: 'x' }];
    deciderSpec(conversationDecider).given(closed).when(append('r9'), now).thenThrows('CASE_RESOLVED');
    const sent = conversationDecider.decide(append('r1', 'provider'), fold(started), now);
    const h = [...started, ...sent];
    const report = (status: any): ConversationCommand => ({
      type: 'ReportDelivery',
      environmentId: env,
      messageId: 'id-r1',
      status,
      errorCode: null,
      externalMessageId: 'x',
    });
    const read = conversationDecider.decide(report('read'), fold(h), now);
    expect(read).toHaveLength(1);
    deciderSpec(conversationDecider)
      .given([...h, ...read])
      .when(report('delivered'), now)
      .then([]);
    deciderSpec(conversationDecider)
      .given([...h, ...read])
      .when(report('failed'), now)
      .then([]);
    const patient = conversationDecider.decide(append('r2'), fold(h), now);
    deciderSpec(conversationDecider)
      .given([...h, ...patient])
      .when({ ...(report('read') as any), messageId: 'id-r2' }, now)
      .thenThrows('NOT_FOUND');
  });

  it('a begun close holds patient messages (not provider ones) until it is made final, called off, or its lease runs out', () => {
    const spec = deciderSpec(conversationDecider);
    const begin: ConversationCommand = {
      type: 'BeginCaseThreadClose',
      environmentId: env,
      start: { organizationId: 'o', conversationId: conv, patientId: 'p1' },
    };
    const until = new Date(now.getTime() + CASE_THREAD_CLOSE_LEASE_MS).toISOString();
    spec
      .given(started)
      .when(begin, now)
      .then([{ type: 'CaseThreadClosing', conversationId: conv, until, at: now.toISOString() }]);
    const closing: ConversationEvent[] = [...started, { type: 'CaseThreadClosing', conversationId: conv, until, at: now.toISOString() }];
    spec.given(closing).when(append('r1'), now).thenThrows('CASE_THREAD_CLOSING');
    const later = new Date(Date.parse(until));
    spec.given(closing).when(append('r1'), later).thenThrows('CASE_THREAD_CLOSE_EXPIRED');
    expect(conversationDecider.decide(append('r1', 'provider'), fold(closing), now).map((e) => e.type)).toEqual(['ConversationMessageAppended']);
    // A retry of a message taken before the hold is still answered as the duplicate it is.
    const taken = conversationDecider.decide(append('r0'), fold(started), now);
    spec
      .given([...started, ...taken, closing[1]])
      .when(append('r0'), now)
      .then([]);
    // Called off: by the resolve that placed it at once; by a settling message only the very hold it
    // saw (its lease) and only once that has run out; never once final.
    const cancel = (lease: string | null, onlyIfExpired = lease !== null): ConversationCommand => ({
      type: 'CancelCaseThreadClose',
      environmentId: env,
      lease,
      onlyIfExpired,
    });
    spec.given(closing).when(cancel(until), now).then([]);
    // The resolve that placed it names its lease: at once, but never another resolve's hold.
    spec
      .given(closing)
      .when(cancel(until, false), now)
      .then([{ type: 'CaseThreadReopened', conversationId: conv, at: now.toISOString() }]);
    spec
      .given(closing)
      .when(cancel(new Date(0).toISOString(), false), now)
      .then([]);
    spec
      .given(closing)
      .when(cancel(until), later)
      .then([{ type: 'CaseThreadReopened', conversationId: conv, at: later.toISOString() }]);
    spec
      .given(closing)
      .when(cancel(null), now)
      .then([{ type: 'CaseThreadReopened', conversationId: conv, at: now.toISOString() }]);
    // A resolve begun since placed a hold of its own (another lease): a stale settle leaves it alone.
    const renewed: ConversationEvent[] = [
      ...closing,
      { type: 'CaseThreadClosing', conversationId: conv, until: new Date(Date.parse(until) + 5000).toISOString(), at: later.toISOString() },
    ];
    spec
      .given(renewed)
      .when(cancel(until), new Date(Date.parse(until) + 60_000))
      .then([]);
    expect(() => conversationDecider.decide(append('r1'), fold(closing), now)).toThrow(expect.objectContaining({ details: { until } }));
    const reopened: ConversationEvent[] = [...closing, { type: 'CaseThreadReopened', conversationId: conv, at: now.toISOString() }];
    expect(conversationDecider.decide(append('r1'), fold(reopened), now).map((e) => e.type)).toEqual([
      'ConversationMessageAppended',
      'clinical_case.patient_message_created',
    ]);
    spec.given(started).when(cancel(null), now).then([]);
    const final: ConversationEvent[] = [...closing, { type: 'CaseThreadClosed', conversationId: conv, closedAt: now.toISOString() }];
    spec.given(final).when(cancel(null), later).then([]);
    spec.given(final).when(begin, now).then([]);
    spec.given(final).when(append('r1'), later).thenThrows('CASE_RESOLVED');
    // Begun before the thread existed: started and held at once; another environment: nothing.
    spec
      .given([])
      .when(begin, now)
      .then([
        {
          type: 'ConversationStarted',
          conversationId: conv,
          kind: 'case',
          organizationId: 'o',
          environmentId: env,
          patientId: 'p1',
          startedAt: now.toISOString(),
        },
        { type: 'CaseThreadClosing', conversationId: conv, until, at: now.toISOString() },
      ]);
    spec
      .given(started)
      .when({ ...begin, environmentId: 'e0000000-0000-4000-8000-000000000002' } as ConversationCommand, now)
      .then([]);
  });

  it('a close that arrives before the thread was started starts it closed (the resolve is never lost); closing twice is a no-op', () => {
    const close: ConversationCommand = { type: 'CloseCaseThread', environmentId: env, start: { organizationId: 'o', conversationId: conv, patientId: 'p1' } };
    const events = conversationDecider.decide(close, fold([]), now);
    expect(events.map((e) => e.type)).toEqual(['ConversationStarted', 'CaseThreadClosed']);
    deciderSpec(conversationDecider).given(events).when(append('r1'), now).thenThrows('CASE_RESOLVED');
    deciderSpec(conversationDecider).given(events).when(close, now).then([]);
    deciderSpec(conversationDecider).given([]).when({ type: 'CloseCaseThread', environmentId: env }, now).then([]);
  });
});
