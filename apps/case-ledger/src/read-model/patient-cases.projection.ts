import { RecordedEvent } from '@svc/eventstore';
import { Projection, ProjectionTx } from '@svc/read-store';
import { CASE_STREAM_PREFIX } from '../domain/case';

/**
 * The cases of each patient, for the widget's case list (`GET /widget/v1/cases`): one entry per
 * opened case in the partition of its environment and patient, ordered by the position of its
 * opening in the log (so by opening time, and the same after a rebuild). Only the case id: what the
 * patient sees of the case is read from the case document (CASES) when listed.
 */
export const PATIENT_CASES_PROJECTION = 'case-ledger-patient-cases';
export const PATIENT_CASES = 'case-ledger-patient-cases';

export interface PatientCaseDoc {
  caseId: string;
}

export const patientCasesPartition = (environmentId: string, patientId: string): string => `${environmentId}:${patientId}`;

export function patientCasesProjection(): Projection {
  return {
    name: PATIENT_CASES_PROJECTION,
    collections: [PATIENT_CASES],
    streamPrefixes: [CASE_STREAM_PREFIX],
    async apply(recorded: RecordedEvent, tx: ProjectionTx) {
      if (recorded.type !== 'clinical_case.opened') return;
      const { caseId, patientId } = recorded.data as { caseId: string; patientId: string };
      const env = recorded.metadata.environmentId;
      if (!env || !patientId) return;
      const doc: PatientCaseDoc = { caseId };
      tx.put(PATIENT_CASES, caseId, doc, { partition: patientCasesPartition(env, patientId), score: recorded.position });
    },
  };
}
