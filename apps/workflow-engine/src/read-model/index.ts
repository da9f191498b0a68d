import type { Projection } from '@svc/read-store';
import type { Keyring } from '@svc/security';
import { workflowProjection } from './workflow.projection';

/**
 * Every projection of this app, as its module registers them: the composition roots that rebuild
 * read models from the log (`svc rebuild`) take the same list.
 */
export function workflowEngineProjections(keyring: Keyring): Projection[] {
  return [workflowProjection(keyring)];
}
