import { deciderSpec } from '../../../libs/eventstore/src/testing';
import { CaseCommand, CaseEvent, caseDecider, referenceFrom } from '../src/domain/case';
import { emergencyKinds } from '@svc/clinical';

const env = 'e0000000-0000-4000-8000-000000000001';
const caseId = 'c0000000-0000-4000-8000-000000000001';
const now = new Date('2026-01-01T00:00:00Z');
const open: CaseCommand = {
  type: 'OpenCase',
  caseId,
  requestId: 'r1',
  bodyHash: 'open-hash',
  organizationId: 'o1',
  environmentId: env,
  patientId: 'p1',
  reference: 'CC-ABCDEFGH',
  priority: 'urgent',
  source: 'staff_chat',
  patientNotes: '',
  symptomScores: {},
  matchedRules: ['staff_request:chat'],
  stoppedEarly: false,
  internalNote: 'note',
  actor: 'staff:s',
};
const opened = caseDecider.decide(open, caseDecider.initialState(), now);
const upd = (sequence: number, status: any, extra: Partial<Extract<CaseCommand, { type: 'UpdateCase' }>> = {}): CaseCommand => ({
  type: 'UpdateCase',
  environmentId: env,
  updateId: `u${sequence}`,
  bodyHash: `h${sequence}`,
  sequence,
  status,
  externalReference: 'x',
  scheduledFor: null,
  resolutionOutcome: null,
  resolutionNote: null,
  ...extra,
});
const accepted = (c: CaseCommand): CaseEvent[] => caseDecider.decide(c, opened.reduce(caseDecider.evolve, caseDecider.initialState()), now);

describe('case decider', () => {
  it('opens with CaseRegistered + clinical_case.opened (deadline from priority); same request again decides nothing', () => {
    expect(opened.map((e) => e.type)).toEqual(['CaseRegistered', 'clinical_case.opened']);
    expect((opened[0] as Extract<CaseEvent, { type: 'CaseRegistered' }>).confirmationDueAt).toBe('2026-01-01T02:00:00.000Z');
    deciderSpec(caseDecider).given(opened).when(open, now).then([]);
    deciderSpec(caseDecider)
      .given(opened)
      .when({ ...open, requestId: 'other' }, now)
      .thenThrows('DUPLICATE_KEY');
    deciderSpec(caseDecider)
      .given(opened)
      .when({ ...open, bodyHash: 'another body' }, now)
      .thenThrows('IDEMPOTENCY_KEY_REUSED');
  });

  it('orders the checks: idempotency, resolved, sequence, transition', () => {
    const spec = deciderSpec(caseDecider);
    spec.given(opened).when(upd(2, 'processed'), now).thenThrows('SEQUENCE_CONFLICT');
    spec.given(opened).when(upd(1, 'scheduled'), now).thenThrows('INVALID_TRANSITION');
    const first = accepted(upd(1, 'processed'));
    const h1 = [...opened, ...first];
    spec.given(h1).when(upd(1, 'processed'), now).then([]);
    spec
      .given(h1)
      .when(upd(1, 'processed', { bodyHash: 'other' }), now)
      .thenThrows('IDEMPOTENCY_KEY_REUSED');
    spec.given(h1).when(upd(2, 'processed'), now).thenThrows('INVALID_TRANSITION');
    spec.given(h1).when(upd(3, 'clinician_responded'), now).thenThrows('SEQUENCE_CONFLICT');
    const res = caseDecider.decide(
      upd(2, 'resolved', { resolutionOutcome: 'other', resolutionNote: 'long enough' }),
      h1.reduce(caseDecider.evolve, caseDecider.initialState()),
      now,
    );
    expect(res.map((e) => e.type)).toEqual(['CaseUpdateAccepted', 'clinical_case.resolved']);
    expect(res[1]).toEqual({
      type: 'clinical_case.resolved',
      caseId,
      patientId: 'p1',
      status: 'resolved',
      resolutionOutcome: 'other',
      resolutionNote: 'long enough',
    });
    const h2 = [...h1, ...res];
    spec.given(h2).when(upd(1, 'processed'), now).then([]);
    spec.given(h2).when(upd(3, 'clinician_responded'), now).thenThrows('CASE_RESOLVED');
    spec.given(h2).when(upd(9, 'processed'), now).thenThrows('CASE_RESOLVED');
    spec
      .given(h2)
      .when({ type: 'SendProviderMessage', environmentId: env, messageId: 'm', bodyHash: 'h', message: 'x', externalReference: 'y' }, now)
      .thenThrows('CASE_RESOLVED');
    spec.given(h2).when({ type: 'AcknowledgeCase', environmentId: env, by: 's' }, now).thenThrows('CASE_RESOLVED');
  });

  it('keeps every update of a long case: the first updateId stays a duplicate after 2,000 more, and evolve leaves the earlier state as it was', () => {
    let state = opened.reduce(caseDecider.evolve, caseDecider.initialState());
    const states = [state];
    for (let seq = 1; seq <= 2001; seq++) {
      const events = caseDecider.decide(upd(seq, seq === 1 ? 'processed' : 'clinician_responded'), state, now);
      expect(events).toHaveLength(1);
      state = events.reduce(caseDecider.evolve, state);
      states.push(state);
    }
    expect(state.sequence).toBe(2001);
    expect(state.updates.size).toBe(2001);
    // Identical retries of the first and a middle update: nothing new; another body: 409.
    expect(caseDecider.decide(upd(1, 'processed'), state, now)).toEqual([]);
    expect(caseDecider.decide(upd(1000, 'clinician_responded'), state, now)).toEqual([]);
    expect(() => caseDecider.decide(upd(1, 'processed', { bodyHash: 'other' }), state, now)).toThrow(
      expect.objectContaining({ code: 'IDEMPOTENCY_KEY_REUSED' }),
    );
    expect(state.updates.get('u1')!.result).toEqual({ caseId, updateId: 'u1', sequence: 1, status: 'processed' });
    // Pure: each earlier state still has exactly the updates it had.
    expect(states[0].updates.size).toBe(0);
    expect(states[10].updates.size).toBe(10);
    expect(states[10].updates.has('u11')).toBe(false);
    expect(states[10].sequence).toBe(10);
  });

  it('refuses another environment with NOT_FOUND', () => {
    deciderSpec(caseDecider)
      .given(opened)
      .when({ ...(upd(1, 'processed') as any), environmentId: 'other' }, now)
      .thenThrows('NOT_FOUND');
    deciderSpec(caseDecider).given([]).when(upd(1, 'processed'), now).thenThrows('NOT_FOUND');
  });

  it('acknowledges once with the status of the moment; transport delivered once', () => {
    const ack = caseDecider.decide(
      { type: 'AcknowledgeCase', environmentId: env, by: 's' },
      opened.reduce(caseDecider.evolve, caseDecider.initialState()),
      now,
    );
    expect(ack[0]).toEqual({
      type: 'clinical_case.acknowledged',
      caseId,
      patientId: 'p1',
      status: 'awaiting_processing',
      resolutionOutcome: null,
      resolutionNote: null,
    });
    deciderSpec(caseDecider)
      .given([...opened, ...ack])
      .when({ type: 'AcknowledgeCase', environmentId: env, by: 's' }, now)
      .then([]);
    const t = { type: 'MarkTransportDelivered' as const, environmentId: env, webhookEventId: 'w', deliveredAt: 'x' };
    const d = caseDecider.decide(t, opened.reduce(caseDecider.evolve, caseDecider.initialState()), now);
    deciderSpec(caseDecider)
      .given([...opened, ...d])
      .when(t, now)
      .then([]);
  });

  it('makes references of the decided alphabet and finds emergency terms in English and Spanish', () => {
    expect(referenceFrom(new Uint8Array([0, 7, 8, 12, 13, 23, 24, 31]))).toBe('CC-AHJNPZ29');
    expect(emergencyKinds('crushing CHEST pain and cannot breathe')).toEqual(['chest_pain', 'breathing']);
    expect(emergencyKinds('Tiene dolor de pecho y habla de suicidio')).toEqual(['chest_pain', 'self_harm']);
    expect(emergencyKinds('Se desmayó en la cocina')).toEqual(['unconscious']);
    expect(emergencyKinds('refill request for strokes of luck')).toEqual([]);
  });

  it('records the patient notification of a provider message once (its event removes the timer)', () => {
    const sent = accepted({ type: 'SendProviderMessage', environmentId: env, messageId: 'm1', bodyHash: 'h', message: 'x', externalReference: 'r' });
    const notify: CaseCommand = { type: 'RecordPatientNotified', environmentId: env, messageId: 'm1', outcome: 'no_email' };
    const done = caseDecider.decide(notify, [...opened, ...sent].reduce(caseDecider.evolve, caseDecider.initialState()), now);
    expect(done).toEqual([{ type: 'PatientNotified', caseId, messageId: 'm1', outcome: 'no_email', notifiedAt: now.toISOString() }]);
    deciderSpec(caseDecider)
      .given([...opened, ...sent, ...done])
      .when(notify, now)
      .then([]);
    deciderSpec(caseDecider).given(opened).when(notify, now).thenThrows('NOT_FOUND');
  });

  it("records the conversation's fact that the case thread is closed once; another environment's or an unknown case is NOT_FOUND", () => {
    const note: CaseCommand = { type: 'NoteThreadClosed', environmentId: env };
    const noted = caseDecider.decide(note, opened.reduce(caseDecider.evolve, caseDecider.initialState()), now);
    expect(noted).toEqual([{ type: 'CaseThreadClosedNoted', caseId, notedAt: now.toISOString() }]);
    expect([...opened, ...noted].reduce(caseDecider.evolve, caseDecider.initialState())).toMatchObject({ threadClosed: true, organizationId: 'o1' });
    deciderSpec(caseDecider)
      .given([...opened, ...noted])
      .when(note, now)
      .then([]);
    deciderSpec(caseDecider).given(opened).when({ type: 'NoteThreadClosed', environmentId: 'other' }, now).thenThrows('NOT_FOUND');
    deciderSpec(caseDecider).given([]).when(note, now).thenThrows('NOT_FOUND');
  });
});
