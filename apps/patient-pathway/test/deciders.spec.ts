// Over 400 lines: given/when/then cases of every patient-pathway decider.
import { deciderSpec } from '../../../libs/eventstore/src/testing';
import { CHECK_IN_RETRY_WINDOW_MS, CheckInEvent, checkInDecider } from '../src/domain/check-in';
import { PatientCommand, PatientEvent, patientDecider } from '../src/domain/patient';
import { ProtocolDefinition, protocolDecider, protocolProblems } from '../src/domain/protocol';

const now = new Date('2026-03-01T10:00:00.000Z');
const P = '11111111-1111-4111-8111-111111111111';
const ORG = 'org-1';
const ENV = 'env-1';

const lifecycle = (over: Partial<Extract<PatientCommand, { type: 'ApplyLifecycleEvent' }>> = {}): PatientCommand => ({
  type: 'ApplyLifecycleEvent',
  eventId: 'e1',
  bodyHash: 'h1',
  lifecycle: 'patient.created',
  patientId: P,
  organizationId: ORG,
  environmentId: ENV,
  profile: { email: 'a@example.test', firstName: 'Ana' },
  protocol: { ok: true, protocolId: 'proto-1', defaultCadenceDays: 7 },
  firstCheckInId: 'c1',
  ...over,
});

const enrolled: PatientEvent = {
  type: 'PatientEnrolled',
  eventId: 'e1',
  bodyHash: 'h1',
  patientId: P,
  organizationId: ORG,
  environmentId: ENV,
  protocolId: 'proto-1',
  cadenceDays: 3,
  profile: { email: 'a@example.test', firstName: 'Ana' },
  enrolledAt: '2026-02-01T00:00:00.000Z',
  next: { checkInId: 'c1', dueAt: '2026-02-04T00:00:00.000Z' },
};
const cancelled: PatientEvent = { type: 'PatientCancelled', eventId: 'e9', bodyHash: 'h9', cancelledAt: '2026-02-02T00:00:00.000Z', cancelledCheckInId: 'c1' };

describe('patient decider', () => {
  const spec = deciderSpec(patientDecider);

  it('enrolls with the protocol default cadence; the first check-in is one cadence later', () => {
    spec
      .given([])
      .when(lifecycle(), now)
      .then([
        {
          type: 'PatientEnrolled',
          eventId: 'e1',
          bodyHash: 'h1',
          patientId: P,
          organizationId: ORG,
          environmentId: ENV,
          protocolId: 'proto-1',
          cadenceDays: 7,
          profile: { email: 'a@example.test', firstName: 'Ana' },
          enrolledAt: now.toISOString(),
          next: { checkInId: 'c1', dueAt: '2026-03-08T10:00:00.000Z' },
        },
      ]);
  });

  it('uses checkInCadenceDays when given', () => {
    const [e] = spec
      .given([])
      .when(lifecycle({ checkInCadenceDays: 2 }), now)
      .result();
    expect(e).toMatchObject({ cadenceDays: 2, next: { dueAt: '2026-03-03T10:00:00.000Z' } });
  });

  it('identical retry decides nothing; a reused eventId with another body is IDEMPOTENCY_KEY_REUSED (even after cancellation)', () => {
    spec.given([enrolled]).when(lifecycle(), now).then([]);
    spec
      .given([enrolled])
      .when(lifecycle({ bodyHash: 'other' }), now)
      .thenThrows('IDEMPOTENCY_KEY_REUSED');
    spec.given([enrolled, cancelled]).when(lifecycle(), now).then([]);
  });

  it('out of sequence is OUT_OF_ORDER, checked before the protocol', () => {
    spec
      .given([enrolled])
      .when(lifecycle({ eventId: 'e2' }), now)
      .thenThrows('OUT_OF_ORDER');
    spec
      .given([])
      .when(lifecycle({ eventId: 'e2', lifecycle: 'patient.updated' }), now)
      .thenThrows('OUT_OF_ORDER');
    spec
      .given([])
      .when(lifecycle({ eventId: 'e2', lifecycle: 'patient.cancelled' }), now)
      .thenThrows('OUT_OF_ORDER');
    spec
      .given([enrolled, cancelled])
      .when(lifecycle({ eventId: 'e3', lifecycle: 'patient.updated' }), now)
      .thenThrows('OUT_OF_ORDER');
    spec
      .given([enrolled])
      .when(lifecycle({ eventId: 'e2', protocol: { ok: false, status: 404, code: 'PROTOCOL_NOT_FOUND', message: 'x' } }), now)
      .thenThrows('OUT_OF_ORDER');
  });

  it('refuses enrolment with the protocol resolution error', () => {
    spec
      .given([])
      .when(lifecycle({ protocol: { ok: false, status: 404, code: 'PROTOCOL_NOT_FOUND', message: 'x' } }), now)
      .thenThrows('PROTOCOL_NOT_FOUND');
    spec
      .given([])
      .when(lifecycle({ protocol: { ok: false, status: 400, code: 'PROTOCOL_AMBIGUOUS', message: 'x' } }), now)
      .thenThrows('PROTOCOL_AMBIGUOUS');
  });

  it('re-enrolls a cancelled patient', () => {
    const [e] = spec
      .given([enrolled, cancelled])
      .when(lifecycle({ eventId: 'e4', firstCheckInId: 'c9' }), now)
      .result();
    expect(e).toMatchObject({ type: 'PatientEnrolled', next: { checkInId: 'c9' } });
  });

  it('updates only the fields sent', () => {
    spec
      .given([enrolled])
      .when(lifecycle({ eventId: 'e2', lifecycle: 'patient.updated', profile: { phone: '5550001234', email: undefined, firstName: undefined } }), now)
      .then([{ type: 'PatientUpdated', eventId: 'e2', bodyHash: 'h1', changes: { phone: '5550001234' }, updatedAt: now.toISOString() }]);
    const state = [enrolled, { type: 'PatientUpdated', eventId: 'e2', bodyHash: 'h', changes: { phone: '5550001234' }, updatedAt: '' } as PatientEvent].reduce(
      patientDecider.evolve,
      patientDecider.initialState(),
    );
    expect(state.profile).toEqual({ email: 'a@example.test', firstName: 'Ana', phone: '5550001234' });
  });

  it('a new cadence moves the pending check-in to one new cadence after its basis (at the earliest now); the same cadence moves nothing', () => {
    // Enrolled 2026-02-01 with 3 days: c1 due 02-04. Seen on 02-02 (clock `early`).
    const early = new Date('2026-02-02T00:00:00.000Z');
    const update = (days: number, at: Date) =>
      spec
        .given([enrolled])
        .when(lifecycle({ eventId: 'e2', lifecycle: 'patient.updated', profile: {}, checkInCadenceDays: days }), at)
        .result();
    expect(update(2, early)).toEqual([
      {
        type: 'PatientUpdated',
        eventId: 'e2',
        bodyHash: 'h1',
        changes: {},
        cadenceDays: 2,
        rescheduled: { checkInId: 'c1', dueAt: '2026-02-03T00:00:00.000Z', patientId: P },
        updatedAt: early.toISOString(),
      },
    ]);
    expect((update(10, early)[0] as Extract<PatientEvent, { type: 'PatientUpdated' }>).rescheduled?.dueAt).toBe('2026-02-11T00:00:00.000Z');
    // Shorter than the time already gone: due now.
    const later = new Date('2026-02-03T12:00:00.000Z');
    expect((update(1, later)[0] as Extract<PatientEvent, { type: 'PatientUpdated' }>).rescheduled?.dueAt).toBe(later.toISOString());
    expect((update(3, early)[0] as Extract<PatientEvent, { type: 'PatientUpdated' }>).rescheduled).toBeUndefined();
    const state = [enrolled, ...update(2, early)].reduce(patientDecider.evolve, patientDecider.initialState());
    expect(state).toMatchObject({ cadenceDays: 2, scheduled: { checkInId: 'c1', dueAt: '2026-02-03T00:00:00.000Z' } });
  });

  it('cancellation removes the scheduled check-in; a stale timer then decides nothing', () => {
    spec
      .given([enrolled])
      .when(lifecycle({ eventId: 'e9', bodyHash: 'h9', lifecycle: 'patient.cancelled' }), now)
      .then([cancelled].map((e) => ({ ...e, cancelledAt: now.toISOString() })));
    spec.given([enrolled, cancelled]).when({ type: 'FireScheduledCheckIn', checkInId: 'c1', paused: false, nextCheckInId: 'c2' }, now).then([]);
  });

  it('a due check-in is sent and the next one scheduled one cadence later; paused usage skips it', () => {
    spec
      .given([enrolled])
      .when({ type: 'FireScheduledCheckIn', checkInId: 'c1', paused: false, nextCheckInId: 'c2' }, now)
      .then([
        {
          type: 'CheckInSent',
          checkInId: 'c1',
          patientId: P,
          organizationId: ORG,
          environmentId: ENV,
          protocolId: 'proto-1',
          reason: 'scheduled',
          sentAt: now.toISOString(),
          next: { checkInId: 'c2', dueAt: '2026-03-04T10:00:00.000Z' },
        },
      ]);
    spec
      .given([enrolled])
      .when({ type: 'FireScheduledCheckIn', checkInId: 'c1', paused: true, nextCheckInId: 'c2' }, now)
      .then([
        {
          type: 'CheckInSkipped',
          checkInId: 'c1',
          patientId: P,
          reason: 'usage_paused',
          at: now.toISOString(),
          next: { checkInId: 'c2', dueAt: '2026-03-04T10:00:00.000Z' },
        },
      ]);
    // Fired twice: the second decides nothing.
    const sent = spec.given([enrolled]).when({ type: 'FireScheduledCheckIn', checkInId: 'c1', paused: false, nextCheckInId: 'c2' }, now).result();
    spec
      .given([enrolled, ...sent])
      .when({ type: 'FireScheduledCheckIn', checkInId: 'c1', paused: false, nextCheckInId: 'c3' }, now)
      .then([]);
  });

  it('staff check-in now: 404 for an unknown patient, 409 when cancelled, else sent without touching the schedule', () => {
    spec.given([]).when({ type: 'SendCheckInNow', checkInId: 'm1' }, now).thenThrows('NOT_FOUND');
    spec.given([enrolled, cancelled]).when({ type: 'SendCheckInNow', checkInId: 'm1' }, now).thenThrows('OUT_OF_ORDER');
    const events = spec.given([enrolled]).when({ type: 'SendCheckInNow', checkInId: 'm1' }, now).result();
    expect(events[0]).toMatchObject({ type: 'CheckInSent', reason: 'manual', next: null });
    expect([enrolled, ...events].reduce(patientDecider.evolve, patientDecider.initialState()).scheduled).toEqual(
      enrolled.type === 'PatientEnrolled' ? enrolled.next : null,
    );
  });
});

const issued: CheckInEvent = {
  type: 'CheckInIssued',
  checkInId: 'c1',
  patientId: P,
  organizationId: ORG,
  environmentId: ENV,
  protocolId: 'proto-1',
  questions: [
    { key: 'pain', text: 'Pain?', type: 'scale' },
    { key: 'fever', text: 'Fever?', type: 'yes_no' },
    { key: 'other', text: 'Else?', type: 'text' },
  ],
  redFlags: { scores: [{ question: 'pain', tier: 'urgent', op: '>=', value: 7 }], phrases: [{ phrase: 'leaking', tier: 'routine' }] },
  tokenHash: 'th',
  issuedAt: '2026-03-01T00:00:00.000Z',
};

describe('check-in decider', () => {
  const spec = deciderSpec(checkInDecider);
  const at = now.toISOString();

  it('issues once and marks sent once (check_in.sent payload of the contract)', () => {
    spec
      .given([issued])
      .when({ ...issued, type: 'IssueCheckIn' } as never, now)
      .then([]);
    spec
      .given([issued])
      .when({ type: 'MarkSent', sentAt: at }, now)
      .then([{ type: 'check_in.sent', organizationId: ORG, environmentId: ENV, checkInId: 'c1', patientId: P, sentAt: at }]);
    spec
      .given([issued, { type: 'check_in.sent', organizationId: ORG, environmentId: ENV, checkInId: 'c1', patientId: P, sentAt: at }])
      .when({ type: 'MarkSent', sentAt: at }, now)
      .then([]);
  });

  it('validates answers by question type', () => {
    for (const [questionKey, value] of [
      ['pain', 11],
      ['pain', 1.5],
      ['pain', '2'],
      ['fever', 1],
      ['other', ''],
      ['other', 'x'.repeat(2001)],
      ['nope', 1],
    ] as [string, unknown][]) {
      spec.given([issued]).when({ type: 'RecordAnswer', questionKey, value }, now).thenThrows('VALIDATION_FAILED');
    }
    spec
      .given([issued])
      .when({ type: 'RecordAnswer', questionKey: 'pain', value: 10 }, now)
      .then([{ type: 'AnswerRecorded', questionKey: 'pain', value: 10, at }]);
    // A text answer's 2000 characters are code points: 2000 emoji are 2000 characters, 2001 too many.
    const emoji = '\u{1F600}';
    spec
      .given([issued])
      .when({ type: 'RecordAnswer', questionKey: 'other', value: emoji.repeat(2000) }, now)
      .then([{ type: 'AnswerRecorded', questionKey: 'other', value: emoji.repeat(2000), at }]);
    spec
      .given([issued])
      .when({ type: 'RecordAnswer', questionKey: 'other', value: emoji.repeat(2001) }, now)
      .thenThrows('VALIDATION_FAILED');
  });

  it('an emergency answer stops the check-in with only the answered scores', () => {
    spec
      .given([issued, { type: 'AnswerRecorded', questionKey: 'pain', value: 8, at }])
      .when({ type: 'RecordAnswer', questionKey: 'other', value: 'I passed out twice' }, now)
      .then([
        { type: 'AnswerRecorded', questionKey: 'other', value: 'I passed out twice', at },
        {
          type: 'CheckInStoppedEarly',
          at,
          priority: 'emergency',
          matchedRules: ['score:urgent:pain>=7', 'emergency_terms:unconscious'],
          symptomScores: { pain: 8, other: 'I passed out twice' },
          patientNotes: null,
          stoppedEarly: true,
        },
      ]);
  });

  it('completion: case_opened with priority and rules when anything matched (notes included), else no_action', () => {
    spec
      .given([issued, { type: 'AnswerRecorded', questionKey: 'pain', value: 2, at }])
      .when({ type: 'CompleteCheckIn', notes: 'it is leaking' }, now)
      .then([
        {
          type: 'CheckInCompleted',
          at,
          outcome: 'case_opened',
          priority: 'routine',
          matchedRules: ['phrase:leaking'],
          symptomScores: { pain: 2 },
          patientNotes: 'it is leaking',
          stoppedEarly: false,
        },
      ]);
    spec
      .given([issued])
      .when({ type: 'CompleteCheckIn' }, now)
      .then([
        { type: 'CheckInCompleted', at, outcome: 'no_action', priority: null, matchedRules: [], symptomScores: {}, patientNotes: null, stoppedEarly: false },
      ]);
  });

  it('a check-in not mailed when its patient was cancelled is voided: its link never works; once mailed, voiding is a no-op', () => {
    spec
      .given([issued])
      .when({ type: 'VoidCheckIn' }, now)
      .then([{ type: 'CheckInVoided', at }]);
    spec
      .given([])
      .when({ type: 'VoidCheckIn' }, now)
      .then([{ type: 'CheckInVoided', at }]);
    const voided: CheckInEvent[] = [issued, { type: 'CheckInVoided', at }];
    spec.given(voided).when({ type: 'VoidCheckIn' }, now).then([]);
    spec.given(voided).when({ type: 'RecordAnswer', questionKey: 'pain', value: 1 }, now).thenThrows('INVALID_CHECK_IN_TOKEN');
    spec.given(voided).when({ type: 'CompleteCheckIn' }, now).thenThrows('INVALID_CHECK_IN_TOKEN');
    spec
      .given([issued, { type: 'check_in.sent', organizationId: ORG, environmentId: ENV, checkInId: 'c1', patientId: P, sentAt: at }])
      .when({ type: 'VoidCheckIn' }, now)
      .then([]);
  });

  it('after completion or an early stop the token is spent (401), but for a retry of the request that closed it; unknown check-in is 404; a case links once', () => {
    const done: CheckInEvent = {
      type: 'CheckInCompleted',
      at,
      outcome: 'no_action',
      priority: null,
      matchedRules: [],
      symptomScores: {},
      patientNotes: null,
      stoppedEarly: false,
    };
    spec.given([issued, done]).when({ type: 'CompleteCheckIn', notes: 'something else' }, now).thenThrows('INVALID_CHECK_IN_TOKEN');
    spec.given([issued, done]).when({ type: 'RecordAnswer', questionKey: 'pain', value: 1 }, now).thenThrows('INVALID_CHECK_IN_TOKEN');
    // The same completion again: nothing new (the service answers the recorded outcome).
    spec.given([issued, done]).when({ type: 'CompleteCheckIn' }, now).then([]);
    const withNotes: CheckInEvent = { ...done, outcome: 'case_opened', priority: 'routine', matchedRules: ['phrase:leaking'], patientNotes: 'it is leaking' };
    spec.given([issued, withNotes]).when({ type: 'CompleteCheckIn', notes: 'it is leaking' }, now).then([]);
    spec.given([issued, withNotes]).when({ type: 'CompleteCheckIn' }, now).thenThrows('INVALID_CHECK_IN_TOKEN');
    // The answer that stopped the check-in, again: nothing new; any other answer: spent.
    const stopped: CheckInEvent[] = [
      issued,
      { type: 'AnswerRecorded', questionKey: 'pain', value: 8, at },
      { type: 'AnswerRecorded', questionKey: 'other', value: 'I passed out twice', at },
      {
        type: 'CheckInStoppedEarly',
        at,
        priority: 'emergency',
        matchedRules: ['emergency_terms:unconscious'],
        symptomScores: { pain: 8, other: 'I passed out twice' },
        patientNotes: null,
        stoppedEarly: true,
      },
    ];
    spec.given(stopped).when({ type: 'RecordAnswer', questionKey: 'other', value: 'I passed out twice' }, now).then([]);
    spec.given(stopped).when({ type: 'RecordAnswer', questionKey: 'other', value: 'I passed out' }, now).thenThrows('INVALID_CHECK_IN_TOKEN');
    spec.given(stopped).when({ type: 'RecordAnswer', questionKey: 'pain', value: 8 }, now).thenThrows('INVALID_CHECK_IN_TOKEN');
    spec.given(stopped).when({ type: 'CompleteCheckIn' }, now).thenThrows('INVALID_CHECK_IN_TOKEN');
    // Only within the retry window (10 minutes of the close): later the link is spent for good.
    const late = new Date(now.getTime() + CHECK_IN_RETRY_WINDOW_MS + 1000);
    spec.given(stopped).when({ type: 'RecordAnswer', questionKey: 'other', value: 'I passed out twice' }, late).thenThrows('INVALID_CHECK_IN_TOKEN');
    spec.given([issued, done]).when({ type: 'CompleteCheckIn' }, late).thenThrows('INVALID_CHECK_IN_TOKEN');
    spec
      .given([issued, done])
      .when({ type: 'CompleteCheckIn' }, new Date(now.getTime() + CHECK_IN_RETRY_WINDOW_MS))
      .then([]);
    spec.given([]).when({ type: 'CompleteCheckIn' }, now).thenThrows('NOT_FOUND');
    spec
      .given([issued])
      .when({ type: 'LinkCase', caseId: 'k', reference: 'CC-AAAAAAAA' }, now)
      .then([{ type: 'CaseLinked', caseId: 'k', reference: 'CC-AAAAAAAA' }]);
    spec
      .given([issued, { type: 'CaseLinked', caseId: 'k', reference: 'CC-AAAAAAAA' }])
      .when({ type: 'LinkCase', caseId: 'k', reference: 'CC-AAAAAAAA' }, now)
      .then([]);
  });
});

describe('check-in send claim (S3)', () => {
  const spec = deciderSpec(checkInDecider);
  const issued: CheckInEvent = {
    type: 'CheckInIssued',
    checkInId: 'c1',
    patientId: P,
    organizationId: ORG,
    environmentId: ENV,
    protocolId: 'p1',
    questions: [],
    redFlags: {},
    tokenHash: 'h',
    issuedAt: '',
  };
  const claimed: CheckInEvent = {
    type: 'CheckInSendClaimed',
    emailId: 'check-in-c1',
    attempt: 1,
    claimedAt: now.toISOString(),
    leaseUntil: new Date(now.getTime() + 120_000).toISOString(),
  };

  it('one claim per lease; none once sent; a new attempt (same email id) after the lease', () => {
    spec.given([issued]).when({ type: 'ClaimSend', emailId: 'check-in-c1' }, now).then([claimed]);
    spec
      .given([issued, claimed])
      .when({ type: 'ClaimSend', emailId: 'check-in-c1' }, new Date(now.getTime() + 1000))
      .then([]);
    const later = new Date(now.getTime() + 120_000);
    spec
      .given([issued, claimed])
      .when({ type: 'ClaimSend', emailId: 'check-in-c1' }, later)
      .then([{ ...claimed, attempt: 2, claimedAt: later.toISOString(), leaseUntil: new Date(later.getTime() + 120_000).toISOString() } as CheckInEvent]);
    const sent: CheckInEvent = { type: 'check_in.sent', organizationId: ORG, environmentId: ENV, checkInId: 'c1', patientId: P, sentAt: '' };
    spec.given([issued, claimed, sent]).when({ type: 'ClaimSend', emailId: 'check-in-c1' }, later).then([]);
    spec.given([]).when({ type: 'ClaimSend', emailId: 'check-in-c1' }, now).thenThrows('NOT_FOUND');
  });
});

describe('protocol decider and body rules', () => {
  const spec = deciderSpec(protocolDecider);
  const def: ProtocolDefinition = {
    programKey: 'post-op',
    name: 'Post-op',
    defaultCadenceDays: 7,
    questions: [{ key: 'pain', text: 'Pain?', type: 'scale' }],
    redFlags: { scores: [{ question: 'pain', tier: 'urgent', op: '>=', value: 7 }] },
  };

  it('creates inactive; activate and deactivate are idempotent; unknown is NOT_FOUND', () => {
    const [created] = spec
      .given([])
      .when({ type: 'CreateProtocol', protocolId: 'p1', organizationId: ORG, environmentId: ENV, ...def }, now)
      .result();
    expect(created).toMatchObject({ type: 'ProtocolCreated', protocolId: 'p1', createdAt: now.toISOString() });
    spec
      .given([created])
      .when({ type: 'ActivateProtocol' }, now)
      .then([{ type: 'ProtocolActivated', protocolId: 'p1', at: now.toISOString() }]);
    spec
      .given([created, { type: 'ProtocolActivated', protocolId: 'p1', at: '' }])
      .when({ type: 'ActivateProtocol' }, now)
      .then([]);
    spec.given([created]).when({ type: 'DeactivateProtocol' }, now).then([]);
    spec.given([]).when({ type: 'ActivateProtocol' }, now).thenThrows('NOT_FOUND');
  });

  it('a second CreateProtocol on a created protocol is DUPLICATE_KEY, never a silent success (S1)', () => {
    const [created] = spec
      .given([])
      .when({ type: 'CreateProtocol', protocolId: 'p1', organizationId: ORG, environmentId: ENV, ...def }, now)
      .result();
    spec
      .given([created])
      .when({ type: 'CreateProtocol', protocolId: 'p1', organizationId: ORG, environmentId: ENV, ...def, name: 'Other' }, now)
      .thenThrows('DUPLICATE_KEY');
  });

  it('cross-field rules', () => {
    expect(protocolProblems(def)).toEqual([]);
    expect(protocolProblems({ ...def, questions: [...def.questions, { key: 'pain', text: 'again', type: 'text' }] }).map((p) => p.path)).toEqual([
      'questions[1].key',
    ]);
    expect(protocolProblems({ ...def, questions: [{ key: 'pain', text: 'P', type: 'scale', min: 3, max: 3 }] }).map((p) => p.path)).toEqual([
      'questions[0].max',
    ]);
    expect(protocolProblems({ ...def, questions: [{ key: 'pain', text: 'P', type: 'text', max: 3 }] }).map((p) => p.path)).toContain('questions[0].max');
    expect(protocolProblems({ ...def, redFlags: { scores: [{ question: 'mood', tier: 'urgent', op: '<=', value: 2 }] } }).map((p) => p.path)).toEqual([
      'redFlags.scores[0].question',
    ]);
  });

  it('refuses red-flag phrases that could never match (no letter or digit; semantic: only stop words)', () => {
    const phrases = ['...', '😀', '   ', 'боль', '頭痛', 'ok!'].map((phrase) => ({ phrase, tier: 'urgent' as const }));
    const semanticPhrases = ['!!!', 'the and of', 'leg swelling', 'сильная боль'].map((phrase) => ({ phrase, tier: 'urgent' as const }));
    expect(protocolProblems({ ...def, redFlags: { phrases, semanticPhrases } }).map((p) => p.path)).toEqual([
      'redFlags.phrases[0].phrase',
      'redFlags.phrases[1].phrase',
      'redFlags.phrases[2].phrase',
      'redFlags.semanticPhrases[0].phrase',
      'redFlags.semanticPhrases[1].phrase',
    ]);
  });
});
