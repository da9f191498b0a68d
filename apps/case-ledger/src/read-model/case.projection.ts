import { RecordedEvent } from '@svc/eventstore';
import { Projection, ProjectionTx, TimerDoc, cancelTimer, scheduleTimer } from '@svc/read-store';
import { Keyring } from '@svc/security';
import type { CasePriority, CaseSource } from '@svc/messaging';
import { CASE_STREAM_PREFIX, CaseEvent, CaseStatus, ResolutionOutcome } from '../domain/case';

/**
 * `-v2`: matched rules are stored encrypted (`encMatchedRules`); the versioned name rebuilds every
 * case document from the log, so none keeps them in clear.
 */
export const CASE_PROJECTION = 'case-ledger-cases-v2';
export const CASES = 'case-ledger-cases';
/** Durable follow-up of a provider message: email the patient that a message waits (one timer per message). */
export const NOTIFY_TIMERS = 'case-ledger-notify';
export const NOTIFY_PARTITION = 'all';

export interface NotifyTimerDoc extends TimerDoc {
  caseId: string;
  messageId: string;
  organizationId: string;
  environmentId: string;
  patientId: string;
}
export const notifyTimerId = (caseId: string, messageId: string) => `${caseId}:${messageId}`;

/** One case's read model (progress + staff view). PHI fields are keyring-encrypted (`enc*`). */
export interface CaseDoc {
  caseId: string;
  organizationId: string;
  environmentId: string;
  patientId: string | null;
  reference: string;
  priority: CasePriority | null;
  source: CaseSource | null;
  status: CaseStatus;
  sequence: number;
  openedAt: string;
  confirmationDueAt: string;
  processedAt: string | null;
  transportDelivered: boolean;
  scheduledFor: string | null;
  encExternalReference: string | null;
  updatedAt: string;
  acknowledgedAt: string | null;
  acknowledgedBy: string | null;
  resolvedAt: string | null;
  resolutionOutcome: ResolutionOutcome | null;
  encResolutionNote: string | null;
  encInternalNote: string | null;
  encPatientNotes: string | null;
  encSymptomScores: string | null;
  /** JSON of the matched rules (`phrase:…`, `emergency_terms:self_harm`…): health information, so encrypted. */
  encMatchedRules: string | null;
  stoppedEarly: boolean;
}

export function caseProjection(keyring: Keyring): Projection {
  return {
    name: CASE_PROJECTION,
    collections: [CASES, NOTIFY_TIMERS],
    streamPrefixes: [CASE_STREAM_PREFIX],
    async apply(recorded: RecordedEvent, tx: ProjectionTx) {
      const event = { type: recorded.type, ...(recorded.data as object) } as CaseEvent;
      const env = recorded.metadata.environmentId!;
      const enc = (v: string | null) => (v === null ? null : keyring.encrypt(env, v));
      const save = (doc: CaseDoc) => tx.put(CASES, doc.caseId, doc, { partition: doc.environmentId, score: Date.parse(doc.openedAt) });
      if (event.type === 'CaseRegistered') {
        save({
          caseId: event.caseId,
          organizationId: event.organizationId,
          environmentId: event.environmentId,
          patientId: null,
          reference: event.reference,
          priority: null,
          source: null,
          status: 'awaiting_processing',
          sequence: 0,
          openedAt: event.openedAt,
          confirmationDueAt: event.confirmationDueAt,
          processedAt: null,
          transportDelivered: false,
          scheduledFor: null,
          encExternalReference: null,
          updatedAt: event.openedAt,
          acknowledgedAt: null,
          acknowledgedBy: null,
          resolvedAt: null,
          resolutionOutcome: null,
          encResolutionNote: null,
          encInternalNote: enc(event.internalNote),
          encPatientNotes: null,
          encSymptomScores: null,
          encMatchedRules: null,
          stoppedEarly: false,
        });
        return;
      }
      const doc = await tx.get<CaseDoc>(CASES, (event as { caseId: string }).caseId);
      if (!doc) return;
      switch (event.type) {
        case 'clinical_case.opened':
          save({
            ...doc,
            patientId: event.patientId,
            priority: event.priority,
            source: event.source,
            encPatientNotes: enc(event.patientNotes),
            encSymptomScores: enc(JSON.stringify(event.symptomScores ?? {})),
            encMatchedRules: enc(JSON.stringify(event.matchedRules ?? [])),
            stoppedEarly: event.stoppedEarly,
          });
          return;
        case 'CaseUpdateAccepted':
          save({
            ...doc,
            status: event.status,
            sequence: event.sequence,
            processedAt: event.status === 'processed' ? event.acceptedAt : doc.processedAt,
            scheduledFor: event.status === 'scheduled' ? event.scheduledFor : doc.scheduledFor,
            encExternalReference: enc(event.externalReference),
            updatedAt: event.acceptedAt,
            resolvedAt: event.status === 'resolved' ? event.acceptedAt : doc.resolvedAt,
            resolutionOutcome: event.status === 'resolved' ? event.resolutionOutcome : doc.resolutionOutcome,
            encResolutionNote: event.status === 'resolved' ? enc(event.resolutionNote) : doc.encResolutionNote,
          });
          return;
        case 'CaseAcknowledgedBy':
          save({ ...doc, acknowledgedAt: event.acknowledgedAt, acknowledgedBy: event.by });
          return;
        case 'CaseTransportDelivered':
          save({ ...doc, transportDelivered: true });
          return;
        case 'ProviderMessageAccepted':
          if (doc.patientId) {
            const timer: NotifyTimerDoc = {
              id: notifyTimerId(doc.caseId, event.messageId),
              dueAt: event.createdAt,
              caseId: doc.caseId,
              messageId: event.messageId,
              organizationId: doc.organizationId,
              environmentId: doc.environmentId,
              patientId: doc.patientId,
            };
            scheduleTimer(tx, NOTIFY_TIMERS, NOTIFY_PARTITION, timer);
          }
          return;
        case 'PatientNotified':
          cancelTimer(tx, NOTIFY_TIMERS, notifyTimerId(doc.caseId, event.messageId));
          return;
        case 'clinical_case.resolved':
        case 'clinical_case.acknowledged':
        case 'CaseThreadClosedNoted':
          return;
        default: {
          const never: never = event;
          return never;
        }
      }
    },
  };
}
