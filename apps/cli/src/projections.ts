/**
 * The read models `svc rebuild` can rebuild: every app's projections, as each app's module
 * registers them (the app lists them in its read-model/index.ts and exports that list). The CLI is
 * a composition root like apps/standalone, so it imports the apps.
 */
import type { Projection } from '@svc/read-store';
import type { Keyring } from '@svc/security';

/** Loaded on demand (the apps pull in the framework): `svc --help` stays quick. */
export async function serviceProjections(keyring: Keyring): Promise<Projection[]> {
  const [caseLedger, conversation, gateway, pathway, dispatcher, workflows] = await Promise.all([
    import('@apps/case-ledger'),
    import('@apps/conversation'),
    import('@apps/gateway'),
    import('@apps/patient-pathway'),
    import('@apps/webhook-dispatcher'),
    import('@apps/workflow-engine'),
  ]);
  return [
    ...gateway.gatewayProjections(keyring),
    ...pathway.patientPathwayProjections(keyring),
    ...caseLedger.caseLedgerProjections(keyring),
    ...conversation.conversationProjections(keyring),
    ...workflows.workflowEngineProjections(keyring),
    ...dispatcher.webhookDispatcherProjections(keyring),
  ];
}
