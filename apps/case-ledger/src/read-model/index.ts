import type { Projection } from '@svc/read-store';
import type { Keyring } from '@svc/security';
import { caseProjection } from './case.projection';
import { patientCasesProjection } from './patient-cases.projection';

/**
 * Every projection of this app, as its module registers them: the composition roots that rebuild
 * read models from the log (`svc rebuild`) take the same list.
 */
export function caseLedgerProjections(keyring: Keyring): Projection[] {
  return [caseProjection(keyring), patientCasesProjection()];
}
