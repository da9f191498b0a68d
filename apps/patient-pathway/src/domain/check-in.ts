import { Decider, DomainError } from '@svc/decider';
import { Question, scaleBounds } from './protocol';
import { AnswerValue, RedFlags, RuleMatch, Tier, evaluateRedFlags, priorityOf } from './red-flags';

export const EMERGENCY_GUIDANCE =
  'Your answer suggests you may need emergency care. Call 911 (or your local emergency number) now, or go to the nearest emergency department. ' +
  'Your care team has been notified. / Su respuesta indica que puede necesitar atención de emergencia. Llame al 911 ahora o acuda a urgencias.';

/**
 * How long a send claim keeps other dispatchers off (service clock). A dispatcher that crashed
 * between its claim and `check_in.sent` leaves the email to be sent again after this, with the
 * same email id (at least once; the outbox and an SMTP server dedupe by Message-ID).
 */
export const SEND_LEASE_MS = 120_000;

/** What the case-ledger is asked to open (the OpenClinicalCaseCommand minus tenant/ids). */
export interface CaseRequest {
  priority: Tier;
  matchedRules: string[];
  symptomScores: Record<string, AnswerValue>;
  patientNotes: string | null;
  stoppedEarly: boolean;
}

export type CheckInCommand =
  | {
      type: 'IssueCheckIn';
      checkInId: string;
      patientId: string;
      organizationId: string;
      environmentId: string;
      protocolId: string;
      questions: Question[];
      redFlags: RedFlags;
      tokenHash: string;
    }
  /** Claim the email before mailing (the check-in stream's expected revision decides between two dispatchers). */
  | { type: 'ClaimSend'; emailId: string }
  | { type: 'MarkSent'; sentAt: string }
  | { type: 'RecordAnswer'; questionKey: string; value: unknown }
  | { type: 'CompleteCheckIn'; notes?: string }
  | { type: 'LinkCase'; caseId: string; reference: string }
  /** The case-ledger refused the case for good (a 4xx): stop retrying. */
  | { type: 'RecordCaseOpenFailure'; status: number; code: string }
  /** The patient was cancelled before the check-in's email went out: it never will (no-op once sent). */
  | { type: 'VoidCheckIn' };

export type CheckInEvent =
  | {
      type: 'CheckInIssued';
      checkInId: string;
      patientId: string;
      organizationId: string;
      environmentId: string;
      protocolId: string;
      questions: Question[];
      redFlags: RedFlags;
      tokenHash: string;
      issuedAt: string;
    }
  /** A dispatcher took the email: others leave it alone until the lease ends (then it is sent again, same id). */
  | { type: 'CheckInSendClaimed'; emailId: string; attempt: number; claimedAt: string; leaseUntil: string }
  /** The integration event of libs/messaging contracts (a credit), relayed as is. */
  | { type: 'check_in.sent'; organizationId: string; environmentId: string; checkInId: string; patientId: string; sentAt: string }
  | { type: 'AnswerRecorded'; questionKey: string; value: AnswerValue; at: string }
  | ({ type: 'CheckInStoppedEarly'; at: string } & CaseRequest)
  | ({ type: 'CheckInCompleted'; at: string; outcome: 'no_action' | 'case_opened' } & Omit<CaseRequest, 'priority'> & { priority: Tier | null })
  | { type: 'CaseLinked'; caseId: string; reference: string }
  | { type: 'CaseOpenFailed'; status: number; code: string; at: string }
  /** Not sent: the patient was cancelled first. Ends the dispatch (its timer) and the link. */
  | { type: 'CheckInVoided'; at: string };

export interface CheckInState {
  status: 'none' | 'open' | 'stopped' | 'completed' | 'voided';
  checkInId: string | null;
  patientId: string | null;
  organizationId: string | null;
  environmentId: string | null;
  questions: Question[];
  redFlags: RedFlags;
  tokenHash: string | null;
  answers: Record<string, AnswerValue>;
  sent: boolean;
  sendClaim: { attempt: number; leaseUntil: string } | null;
  outcome: 'no_action' | 'case_opened' | null;
  caseRequest: CaseRequest | null;
  caseLink: { caseId: string; reference: string } | null;
  caseOpenFailed: { status: number; code: string } | null;
  /** The key of the last answer recorded: after an early stop, the answer that stopped it. */
  lastAnswerKey: string | null;
  /** The notes the check-in was completed with (a retried completion carries the same). */
  completedNotes: string | null;
  /** When the check-in was completed or stopped early (service clock). */
  closedAt: string | null;
}

/** 400 with details, as the edge would answer. */
const invalid = (path: string, message: string) => new DomainError(400, 'VALIDATION_FAILED', 'The request is not valid', [{ path, message }]);
export const tokenRefused = () => new DomainError(401, 'INVALID_CHECK_IN_TOKEN', 'The check-in link is not valid or was already used');

/** Answer values of docs/decisions.md, "Patient pathway": scale an integer in min..max, yes_no a boolean, text 1-2000 characters. */
export function checkAnswer(q: Question, value: unknown): AnswerValue {
  switch (q.type) {
    case 'scale': {
      const { min, max } = scaleBounds(q);
      if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > max)
        throw invalid('value', `must be an integer from ${min} to ${max}`);
      return value;
    }
    case 'yes_no':
      if (typeof value !== 'boolean') throw invalid('value', 'must be a boolean');
      return value;
    case 'text':
      // Characters as class-validator counts them everywhere else: code points (an emoji is one).
      if (typeof value !== 'string' || value.length < 1 || (value.length > 2000 && [...value].length > 2000))
        throw invalid('value', 'must be a string of 1 to 2000 characters');
      return value;
    default: {
      const never: never = q.type;
      return never;
    }
  }
}

function textsOf(state: Pick<CheckInState, 'questions' | 'answers'>, notes?: string | null): string[] {
  const texts = state.questions.filter((q) => q.type === 'text' && typeof state.answers[q.key] === 'string').map((q) => state.answers[q.key] as string);
  if (notes) texts.push(notes);
  return texts;
}

/** All matches of the answers so far (and the notes). */
export function matchesOf(state: Pick<CheckInState, 'questions' | 'answers' | 'redFlags'>, notes?: string | null): RuleMatch[] {
  return evaluateRedFlags(state.redFlags, state.answers, textsOf(state, notes));
}

/** The next question to ask: the first one not answered, in protocol order. */
export function nextQuestion(state: Pick<CheckInState, 'questions' | 'answers'>): Question | null {
  return state.questions.find((q) => state.answers[q.key] === undefined) ?? null;
}

/**
 * How long after a check-in closed a retry of the request that closed it is still answered again
 * (service clock). A widget retries within seconds; a link used much later (a forwarded email, a
 * stolen one) gets 401 like any use of a closed check-in, and cannot probe which answer stopped it.
 */
export const CHECK_IN_RETRY_WINDOW_MS = 10 * 60_000;

const withinRetryWindow = (state: CheckInState, now: Date): boolean =>
  state.closedAt !== null && now.getTime() - Date.parse(state.closedAt) <= CHECK_IN_RETRY_WINDOW_MS;

/**
 * True when an answer to a stopped check-in is the very answer that stopped it (a retry whose
 * emergency guidance was lost on the way): it gets that guidance again instead of a spent link.
 */
function isRetryOfStop(state: CheckInState, value: unknown): boolean {
  const q = state.questions.find((x) => x.key === state.lastAnswerKey);
  if (!q) return false;
  try {
    return checkAnswer(q, value) === state.answers[q.key];
  } catch {
    return false;
  }
}

export const checkInDecider: Decider<CheckInCommand, CheckInEvent, CheckInState> = {
  initialState: () => ({
    status: 'none',
    checkInId: null,
    patientId: null,
    organizationId: null,
    environmentId: null,
    questions: [],
    redFlags: {},
    tokenHash: null,
    answers: {},
    sent: false,
    sendClaim: null,
    outcome: null,
    caseRequest: null,
    caseLink: null,
    caseOpenFailed: null,
    lastAnswerKey: null,
    completedNotes: null,
    closedAt: null,
  }),

  evolve(state, event) {
    switch (event.type) {
      case 'CheckInIssued':
        return {
          ...state,
          status: 'open',
          checkInId: event.checkInId,
          patientId: event.patientId,
          organizationId: event.organizationId,
          environmentId: event.environmentId,
          questions: event.questions,
          redFlags: event.redFlags,
          tokenHash: event.tokenHash,
        };
      case 'CheckInSendClaimed':
        return { ...state, sendClaim: { attempt: event.attempt, leaseUntil: event.leaseUntil } };
      case 'check_in.sent':
        return { ...state, sent: true };
      case 'AnswerRecorded':
        return { ...state, answers: { ...state.answers, [event.questionKey]: event.value }, lastAnswerKey: event.questionKey };
      case 'CheckInStoppedEarly': {
        const { type: _t, at: _a, ...request } = event;
        void _t;
        void _a;
        return { ...state, status: 'stopped', outcome: 'case_opened', caseRequest: request, closedAt: event.at };
      }
      case 'CheckInCompleted':
        return {
          ...state,
          status: 'completed',
          outcome: event.outcome,
          completedNotes: event.patientNotes,
          closedAt: event.at,
          caseRequest:
            event.outcome === 'case_opened' && event.priority
              ? {
                  priority: event.priority,
                  matchedRules: event.matchedRules,
                  symptomScores: event.symptomScores,
                  patientNotes: event.patientNotes,
                  stoppedEarly: false,
                }
              : null,
        };
      case 'CaseLinked':
        return { ...state, caseLink: { caseId: event.caseId, reference: event.reference } };
      case 'CaseOpenFailed':
        return { ...state, caseOpenFailed: { status: event.status, code: event.code } };
      case 'CheckInVoided':
        return { ...state, status: 'voided' };
      default: {
        const never: never = event;
        return never;
      }
    }
  },

  decide(command, state, now) {
    const at = now.toISOString();
    switch (command.type) {
      case 'IssueCheckIn': {
        if (state.status !== 'none') return [];
        const { type: _t, ...rest } = command;
        void _t;
        return [{ type: 'CheckInIssued', ...rest, issuedAt: at }];
      }
      case 'ClaimSend': {
        if (state.status === 'none') throw new DomainError(404, 'NOT_FOUND', 'Check-in not found');
        // Sent already, or another dispatcher holds an unexpired claim: nothing to do here.
        if (state.sent) return [];
        if (state.sendClaim && now.getTime() < Date.parse(state.sendClaim.leaseUntil)) return [];
        const attempt = (state.sendClaim?.attempt ?? 0) + 1;
        return [
          { type: 'CheckInSendClaimed', emailId: command.emailId, attempt, claimedAt: at, leaseUntil: new Date(now.getTime() + SEND_LEASE_MS).toISOString() },
        ];
      }
      case 'MarkSent':
        if (state.status === 'none') throw new DomainError(404, 'NOT_FOUND', 'Check-in not found');
        if (state.sent) return [];
        return [
          {
            type: 'check_in.sent',
            organizationId: state.organizationId!,
            environmentId: state.environmentId!,
            checkInId: state.checkInId!,
            patientId: state.patientId!,
            sentAt: command.sentAt,
          },
        ];
      case 'RecordAnswer': {
        if (state.status === 'none') throw new DomainError(404, 'NOT_FOUND', 'Check-in not found');
        if (state.status === 'stopped' && withinRetryWindow(state, now) && command.questionKey === state.lastAnswerKey && isRetryOfStop(state, command.value))
          return [];
        if (state.status !== 'open') throw tokenRefused();
        const q = state.questions.find((x) => x.key === command.questionKey);
        if (!q) throw invalid('questionKey', 'no question with this key in the check-in');
        const value = checkAnswer(q, command.value);
        const events: CheckInEvent[] = [{ type: 'AnswerRecorded', questionKey: q.key, value, at }];
        const after = { ...state, answers: { ...state.answers, [q.key]: value } };
        const matches = matchesOf(after);
        if (matches.some((m) => m.tier === 'emergency')) {
          events.push({
            type: 'CheckInStoppedEarly',
            at,
            priority: 'emergency',
            matchedRules: matches.map((m) => m.rule),
            symptomScores: after.answers,
            patientNotes: null,
            stoppedEarly: true,
          });
        }
        return events;
      }
      case 'CompleteCheckIn': {
        if (state.status === 'none') throw new DomainError(404, 'NOT_FOUND', 'Check-in not found');
        const notes = command.notes ?? null;
        // The same completion again (its answer was lost on the way): the same outcome, nothing new.
        if (state.status === 'completed' && withinRetryWindow(state, now) && notes === state.completedNotes) return [];
        if (state.status !== 'open') throw tokenRefused();
        const matches = matchesOf(state, notes);
        const priority = priorityOf(matches);
        return [
          {
            type: 'CheckInCompleted',
            at,
            outcome: priority ? 'case_opened' : 'no_action',
            priority,
            matchedRules: matches.map((m) => m.rule),
            symptomScores: state.answers,
            patientNotes: notes,
            stoppedEarly: false,
          },
        ];
      }
      case 'LinkCase':
        if (state.caseLink) return [];
        return [{ type: 'CaseLinked', caseId: command.caseId, reference: command.reference }];
      case 'RecordCaseOpenFailure':
        if (state.caseLink || state.caseOpenFailed || !state.caseRequest) return [];
        return [{ type: 'CaseOpenFailed', status: command.status, code: command.code, at }];
      case 'VoidCheckIn':
        if (state.sent || state.status === 'voided') return [];
        return [{ type: 'CheckInVoided', at }];
      default: {
        const never: never = command;
        return never;
      }
    }
  },
};
