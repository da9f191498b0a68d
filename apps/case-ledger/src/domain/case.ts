import { Map as PersistentMap } from 'immutable';
import { Decider, DomainError, type CasePriority, type CaseSource } from '@svc/decider';

export type CaseStatus = 'awaiting_processing' | 'processed' | 'scheduled' | 'clinician_responded' | 'patient_contacted' | 'resolved';
export type UpdateStatus = Exclude<CaseStatus, 'awaiting_processing'>;
export type ResolutionOutcome = 'patient_contacted' | 'provider_follow_up' | 'medication_adjusted' | 'emergency_referral' | 'no_further_action' | 'other';

export const CONFIRMATION_WINDOW_MS: Record<CasePriority, number> = {
  emergency: 15 * 60_000,
  urgent: 2 * 3600_000,
  routine: 24 * 3600_000,
};

export interface Handoff {
  progressPath: string;
  updatesPath: string;
  messagesPath: string;
}

export const handoffFor = (caseId: string): Handoff => ({
  progressPath: `/v1/clinical-cases/${caseId}/progress`,
  updatesPath: `/v1/clinical-cases/${caseId}/updates`,
  messagesPath: `/v1/clinical-cases/${caseId}/messages`,
});

export interface UpdateResult {
  caseId: string;
  updateId: string;
  sequence: number;
  status: UpdateStatus;
}

/**
 * Stored events. The four `clinical_case.*` events carry exactly the spec's webhook `data`
 * (the relay publishes them as they are); what else the ledger needs sits in its own events.
 */
export type CaseEvent =
  | {
      type: 'CaseRegistered';
      caseId: string;
      requestId: string;
      /** Hash of the open command's body (absent on cases registered before it was kept). */
      bodyHash?: string;
      organizationId: string;
      environmentId: string;
      reference: string;
      /** staff_chat: the teammate's words (event data is encrypted at rest). */
      internalNote: string | null;
      openedBy: string;
      openedAt: string;
      confirmationDueAt: string;
    }
  | {
      type: 'clinical_case.opened';
      caseId: string;
      patientId: string;
      priority: CasePriority;
      source: CaseSource;
      patientNotes: string | null;
      symptomScores: Record<string, number | boolean | string>;
      matchedRules: string[];
      stoppedEarly: boolean;
      handoff: Handoff;
    }
  | {
      type: 'CaseUpdateAccepted';
      caseId: string;
      updateId: string;
      bodyHash: string;
      sequence: number;
      status: UpdateStatus;
      externalReference: string;
      scheduledFor: string | null;
      resolutionOutcome: ResolutionOutcome | null;
      resolutionNote: string | null;
      acceptedAt: string;
    }
  | { type: 'clinical_case.resolved'; caseId: string; patientId: string; status: 'resolved'; resolutionOutcome: ResolutionOutcome; resolutionNote: string }
  | { type: 'clinical_case.acknowledged'; caseId: string; patientId: string; status: CaseStatus; resolutionOutcome: null; resolutionNote: null }
  | { type: 'CaseAcknowledgedBy'; caseId: string; by: string; acknowledgedAt: string }
  | { type: 'ProviderMessageAccepted'; caseId: string; messageId: string; bodyHash: string; message: string; externalReference: string; createdAt: string }
  | { type: 'CaseTransportDelivered'; caseId: string; webhookEventId: string; deliveredAt: string }
  /** The patient's email about a provider message was sent (`sent`) or there was no address to send it to (`no_email`). */
  | { type: 'PatientNotified'; caseId: string; messageId: string; outcome: NotifyOutcome; notifiedAt: string }
  /**
   * The conversation app reported the case's thread closed to patient messages (its `CaseThreadClosed`
   * fact): a `resolved` update, and any identical retry of it, answers once this is recorded.
   */
  | { type: 'CaseThreadClosedNoted'; caseId: string; notedAt: string };

export type NotifyOutcome = 'sent' | 'no_email';

export type CaseCommand =
  | {
      type: 'OpenCase';
      caseId: string;
      requestId: string;
      bodyHash: string;
      organizationId: string;
      environmentId: string;
      patientId: string;
      reference: string;
      priority: CasePriority;
      source: CaseSource;
      patientNotes: string | null;
      symptomScores: Record<string, number | boolean | string>;
      matchedRules: string[];
      stoppedEarly: boolean;
      internalNote: string | null;
      actor: string;
    }
  | {
      type: 'UpdateCase';
      environmentId: string;
      updateId: string;
      bodyHash: string;
      sequence: number;
      status: UpdateStatus;
      externalReference: string;
      scheduledFor: string | null;
      resolutionOutcome: ResolutionOutcome | null;
      resolutionNote: string | null;
    }
  | { type: 'SendProviderMessage'; environmentId: string; messageId: string; bodyHash: string; message: string; externalReference: string }
  | { type: 'AcknowledgeCase'; environmentId: string; by: string }
  | { type: 'MarkTransportDelivered'; environmentId: string; webhookEventId: string; deliveredAt: string }
  | { type: 'RecordPatientNotified'; environmentId: string; messageId: string; outcome: NotifyOutcome }
  /** The conversation app's fact that the case's thread is closed to patient messages (idempotent). */
  | { type: 'NoteThreadClosed'; environmentId: string };

export interface CaseState {
  caseId: string | null;
  requestId: string | null;
  openBodyHash: string | null;
  organizationId: string | null;
  environmentId: string | null;
  patientId: string | null;
  reference: string | null;
  priority: CasePriority | null;
  status: CaseStatus;
  sequence: number;
  /**
   * Every update and provider message the case took, by caller id (the "idempotency lives in the streams" rule). Persistent
   * maps (structural sharing): `evolve` adds one entry in O(log n) without copying the others, so
   * a case's n-th update costs no copy of the n-1 before it (nor a replay O(n^2)).
   */
  updates: PersistentMap<string, { bodyHash: string; result: UpdateResult }>;
  messages: PersistentMap<string, { bodyHash: string; createdAt: string; notified?: boolean }>;
  acknowledged: boolean;
  transportDelivered: boolean;
  /** The conversation app reported the case's thread closed (CaseThreadClosedNoted). */
  threadClosed: boolean;
}

const notFound = () => new DomainError(404, 'NOT_FOUND', 'Clinical case not found');

export const caseDecider: Decider<CaseCommand, CaseEvent, CaseState> = {
  initialState: () => ({
    caseId: null,
    requestId: null,
    openBodyHash: null,
    organizationId: null,
    environmentId: null,
    patientId: null,
    reference: null,
    priority: null,
    status: 'awaiting_processing',
    sequence: 0,
    updates: PersistentMap(),
    messages: PersistentMap(),
    acknowledged: false,
    transportDelivered: false,
    threadClosed: false,
  }),

  evolve(state, event) {
    switch (event.type) {
      case 'CaseRegistered':
        return {
          ...state,
          caseId: event.caseId,
          requestId: event.requestId,
          openBodyHash: event.bodyHash ?? null,
          organizationId: event.organizationId,
          environmentId: event.environmentId,
          reference: event.reference,
        };
      case 'clinical_case.opened':
        return { ...state, patientId: event.patientId, priority: event.priority };
      case 'CaseUpdateAccepted':
        return {
          ...state,
          status: event.status,
          sequence: event.sequence,
          updates: state.updates.set(event.updateId, {
            bodyHash: event.bodyHash,
            result: { caseId: event.caseId, updateId: event.updateId, sequence: event.sequence, status: event.status },
          }),
        };
      case 'ProviderMessageAccepted':
        return { ...state, messages: state.messages.set(event.messageId, { bodyHash: event.bodyHash, createdAt: event.createdAt }) };
      case 'clinical_case.acknowledged':
        return { ...state, acknowledged: true };
      case 'CaseTransportDelivered':
        return { ...state, transportDelivered: true };
      case 'CaseThreadClosedNoted':
        return { ...state, threadClosed: true };
      case 'PatientNotified': {
        const m = state.messages.get(event.messageId);
        return m ? { ...state, messages: state.messages.set(event.messageId, { ...m, notified: true }) } : state;
      }
      case 'clinical_case.resolved':
      case 'CaseAcknowledgedBy':
        return state;
      default: {
        const never: never = event;
        return never;
      }
    }
  },

  decide(command, state, now) {
    switch (command.type) {
      case 'OpenCase': {
        // First writer wins: the case id is derived from (environment, requestId).
        if (state.caseId) {
          if (state.requestId === command.requestId && state.environmentId === command.environmentId) {
            if (state.openBodyHash === null || state.openBodyHash === command.bodyHash) return [];
            throw new DomainError(409, 'IDEMPOTENCY_KEY_REUSED', 'This requestId opened a case with a different body');
          }
          throw new DomainError(409, 'DUPLICATE_KEY', 'The clinical case exists already');
        }
        const openedAt = now.toISOString();
        return [
          {
            type: 'CaseRegistered',
            caseId: command.caseId,
            requestId: command.requestId,
            bodyHash: command.bodyHash,
            organizationId: command.organizationId,
            environmentId: command.environmentId,
            reference: command.reference,
            internalNote: command.internalNote,
            openedBy: command.actor,
            openedAt,
            confirmationDueAt: new Date(now.getTime() + CONFIRMATION_WINDOW_MS[command.priority]).toISOString(),
          },
          {
            type: 'clinical_case.opened',
            caseId: command.caseId,
            patientId: command.patientId,
            priority: command.priority,
            source: command.source,
            patientNotes: command.patientNotes,
            symptomScores: command.symptomScores,
            matchedRules: command.matchedRules,
            stoppedEarly: command.stoppedEarly,
            handoff: handoffFor(command.caseId),
          },
        ];
      }

      case 'UpdateCase': {
        if (!state.caseId || state.environmentId !== command.environmentId) throw notFound();
        // Order of checks (docs/decisions.md, "Cases"): idempotency, resolved, sequence, transition.
        const seen = state.updates.get(command.updateId);
        if (seen) {
          if (seen.bodyHash === command.bodyHash) return [];
          throw new DomainError(409, 'IDEMPOTENCY_KEY_REUSED', 'This updateId was used with a different body');
        }
        if (state.status === 'resolved') throw new DomainError(409, 'CASE_RESOLVED', 'The clinical case is resolved; it takes no further updates');
        const expected = state.sequence + 1;
        if (command.sequence !== expected) {
          throw new DomainError(409, 'SEQUENCE_CONFLICT', `Sequence ${command.sequence} is not the next one; the expected sequence is ${expected}`, {
            expectedSequence: expected,
          });
        }
        if (state.status === 'awaiting_processing' && command.status !== 'processed') {
          throw new DomainError(409, 'INVALID_TRANSITION', 'The first update must be processed at sequence 1');
        }
        if (state.status !== 'awaiting_processing' && command.status === 'processed') {
          throw new DomainError(409, 'INVALID_TRANSITION', 'The case has been processed already');
        }
        const accepted: CaseEvent = {
          type: 'CaseUpdateAccepted',
          caseId: state.caseId,
          updateId: command.updateId,
          bodyHash: command.bodyHash,
          sequence: command.sequence,
          status: command.status,
          externalReference: command.externalReference,
          scheduledFor: command.status === 'scheduled' ? command.scheduledFor : null,
          resolutionOutcome: command.status === 'resolved' ? command.resolutionOutcome : null,
          resolutionNote: command.status === 'resolved' ? command.resolutionNote : null,
          acceptedAt: now.toISOString(),
        };
        if (command.status !== 'resolved') return [accepted];
        return [
          accepted,
          {
            type: 'clinical_case.resolved',
            caseId: state.caseId,
            patientId: state.patientId!,
            status: 'resolved',
            resolutionOutcome: command.resolutionOutcome!,
            resolutionNote: command.resolutionNote!,
          },
        ];
      }

      case 'SendProviderMessage': {
        if (!state.caseId || state.environmentId !== command.environmentId) throw notFound();
        const seen = state.messages.get(command.messageId);
        if (seen) {
          if (seen.bodyHash === command.bodyHash) return [];
          throw new DomainError(409, 'IDEMPOTENCY_KEY_REUSED', 'This messageId was used with a different body');
        }
        if (state.status === 'resolved') throw new DomainError(409, 'CASE_RESOLVED', 'The clinical case is resolved; it takes no further messages');
        return [
          {
            type: 'ProviderMessageAccepted',
            caseId: state.caseId,
            messageId: command.messageId,
            bodyHash: command.bodyHash,
            message: command.message,
            externalReference: command.externalReference,
            createdAt: now.toISOString(),
          },
        ];
      }

      case 'AcknowledgeCase': {
        if (!state.caseId || state.environmentId !== command.environmentId) throw notFound();
        if (state.acknowledged) return [];
        if (state.status === 'resolved') throw new DomainError(409, 'CASE_RESOLVED', 'The clinical case is resolved');
        return [
          {
            type: 'clinical_case.acknowledged',
            caseId: state.caseId,
            patientId: state.patientId!,
            status: state.status,
            resolutionOutcome: null,
            resolutionNote: null,
          },
          { type: 'CaseAcknowledgedBy', caseId: state.caseId, by: command.by, acknowledgedAt: now.toISOString() },
        ];
      }

      case 'MarkTransportDelivered': {
        if (!state.caseId || state.environmentId !== command.environmentId) throw notFound();
        if (state.transportDelivered) return [];
        return [{ type: 'CaseTransportDelivered', caseId: state.caseId, webhookEventId: command.webhookEventId, deliveredAt: command.deliveredAt }];
      }

      case 'RecordPatientNotified': {
        if (!state.caseId || state.environmentId !== command.environmentId) throw notFound();
        const m = state.messages.get(command.messageId);
        if (!m) throw new DomainError(404, 'NOT_FOUND', 'No provider message with this id in the case');
        if (m.notified) return [];
        return [{ type: 'PatientNotified', caseId: state.caseId, messageId: command.messageId, outcome: command.outcome, notifiedAt: now.toISOString() }];
      }

      case 'NoteThreadClosed': {
        if (!state.caseId || state.environmentId !== command.environmentId) throw notFound();
        if (state.threadClosed) return [];
        return [{ type: 'CaseThreadClosedNoted', caseId: state.caseId, notedAt: now.toISOString() }];
      }

      default: {
        const never: never = command;
        return never;
      }
    }
  },
};

export const caseStream = (caseId: string) => `case-ledger-case-${caseId}`;
export const CASE_STREAM_PREFIX = 'case-ledger-case-';

const REFERENCE_ALPHABET = 'ABCDEFGHJKLMNPQRSTUVWXYZ23456789';
/** `CC-` + 8 characters of [A-HJ-NP-Z2-9] from the given random bytes (>= 8). */
export function referenceFrom(bytes: Uint8Array): string {
  let s = 'CC-';
  for (let i = 0; i < 8; i++) s += REFERENCE_ALPHABET[bytes[i] % REFERENCE_ALPHABET.length];
  return s;
}
