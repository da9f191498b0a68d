import { RecordedEvent } from '@svc/eventstore';
import { Projection, ProjectionTx, cancelTimer, scheduleTimer } from '@svc/read-store';
import { CheckInEvent } from '../domain/check-in';
import { ClaimEvent } from '../domain/claim';
import { PatientEvent } from '../domain/patient';
import { ProtocolEvent, ProtocolView } from '../domain/protocol';
import { STREAM_PREFIX } from '../domain/streams';

export const PATHWAY_PROJECTION = 'patient-pathway';

/**
 * Read models of the patient-pathway. None holds PHI: protocols (staff configuration) and timer
 * documents (ids and due times only). Profiles stay in the (encrypted) event data.
 */
export const PathwayCollections = {
  protocols: 'patient-pathway.protocols',
  /** Due scheduled check-ins (score = due time). */
  checkInTimers: 'patient-pathway.checkin-timers',
  /** Sent check-ins whose email is not confirmed yet. */
  dispatch: 'patient-pathway.dispatch',
  /** Check-ins whose case is not opened yet. */
  caseOpen: 'patient-pathway.case-open',
} as const;
export const TIMER_PARTITION = 'due';

export interface ProtocolDoc extends ProtocolView {
  organizationId: string;
  environmentId: string;
}
export interface CheckInTimerDoc {
  id: string;
  dueAt: string;
  patientId: string;
  [k: string]: unknown;
}
export interface DispatchDoc {
  id: string;
  dueAt: string;
  patientId: string;
  [k: string]: unknown;
}
export interface CaseOpenDoc {
  id: string;
  dueAt: string;
  [k: string]: unknown;
}

type PathwayEvent = ProtocolEvent | PatientEvent | CheckInEvent | ClaimEvent;

export function pathwayProjection(): Projection {
  return {
    name: PATHWAY_PROJECTION,
    collections: Object.values(PathwayCollections),
    streamPrefixes: [STREAM_PREFIX],
    async apply(recorded: RecordedEvent, tx: ProjectionTx) {
      const event = { type: recorded.type, ...(recorded.data as object) } as PathwayEvent;
      const checkInIdOfStream = () => recorded.streamId.slice('patient-pathway-checkin-'.length);
      switch (event.type) {
        case 'ProtocolCreated': {
          const { type: _t, protocolId, ...rest } = event;
          void _t;
          const doc: ProtocolDoc = { id: protocolId, ...rest, active: false };
          tx.put(PathwayCollections.protocols, protocolId, doc, { partition: event.environmentId, score: Date.parse(event.createdAt) });
          return;
        }
        case 'ProtocolActivated':
        case 'ProtocolDeactivated': {
          const doc = await tx.get<ProtocolDoc>(PathwayCollections.protocols, event.protocolId);
          if (!doc) return;
          tx.put(
            PathwayCollections.protocols,
            event.protocolId,
            { ...doc, active: event.type === 'ProtocolActivated' },
            { partition: doc.environmentId, score: Date.parse(doc.createdAt) },
          );
          return;
        }
        case 'PatientEnrolled':
          scheduleTimer(tx, PathwayCollections.checkInTimers, TIMER_PARTITION, {
            id: event.next.checkInId,
            dueAt: event.next.dueAt,
            patientId: event.patientId,
          });
          return;
        case 'PatientUpdated':
          if (event.rescheduled)
            scheduleTimer(tx, PathwayCollections.checkInTimers, TIMER_PARTITION, {
              id: event.rescheduled.checkInId,
              dueAt: event.rescheduled.dueAt,
              patientId: event.rescheduled.patientId,
            });
          return;
        case 'PatientCancelled':
          if (event.cancelledCheckInId) cancelTimer(tx, PathwayCollections.checkInTimers, event.cancelledCheckInId);
          return;
        case 'CheckInSent':
          if (event.reason === 'scheduled') cancelTimer(tx, PathwayCollections.checkInTimers, event.checkInId);
          if (event.next)
            scheduleTimer(tx, PathwayCollections.checkInTimers, TIMER_PARTITION, {
              id: event.next.checkInId,
              dueAt: event.next.dueAt,
              patientId: event.patientId,
            });
          scheduleTimer(tx, PathwayCollections.dispatch, TIMER_PARTITION, { id: event.checkInId, dueAt: event.sentAt, patientId: event.patientId });
          return;
        case 'CheckInSkipped':
          cancelTimer(tx, PathwayCollections.checkInTimers, event.checkInId);
          scheduleTimer(tx, PathwayCollections.checkInTimers, TIMER_PARTITION, {
            id: event.next.checkInId,
            dueAt: event.next.dueAt,
            patientId: event.patientId,
          });
          return;
        case 'check_in.sent':
          cancelTimer(tx, PathwayCollections.dispatch, event.checkInId);
          return;
        case 'CheckInVoided':
          cancelTimer(tx, PathwayCollections.dispatch, checkInIdOfStream());
          return;
        case 'CheckInStoppedEarly':
          scheduleTimer(tx, PathwayCollections.caseOpen, TIMER_PARTITION, { id: checkInIdOfStream(), dueAt: event.at });
          return;
        case 'CheckInCompleted':
          if (event.outcome === 'case_opened') scheduleTimer(tx, PathwayCollections.caseOpen, TIMER_PARTITION, { id: checkInIdOfStream(), dueAt: event.at });
          return;
        case 'CaseLinked':
        case 'CaseOpenFailed':
          cancelTimer(tx, PathwayCollections.caseOpen, checkInIdOfStream());
          return;
        default:
          return;
      }
    },
  };
}
