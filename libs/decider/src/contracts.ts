/**
 * Integration event types on the bus (IntegrationMessage.type), here without the bus so that a
 * decider can emit them; @svc/messaging re-exports them with the rest of the message contracts.
 * The clinical_case.* payloads are exactly the webhook `data` of the spec; the others are internal.
 */
export const IntegrationEventTypes = {
  caseOpened: 'clinical_case.opened',
  caseAcknowledged: 'clinical_case.acknowledged',
  caseResolved: 'clinical_case.resolved',
  casePatientMessageCreated: 'clinical_case.patient_message_created',
  /** gateway (stored event, relayed as is): { signerName, signerTitle, signedBy, baaSignedAt }; tenant in metadata */
  baaSigned: 'BaaSigned',
  /** gateway (stored event, relayed as is): { organizationId, name, owner, environments: [{ id, kind }], createdAt } */
  organizationCreated: 'OrganizationCreated',
  /** patient-pathway: { organizationId, environmentId, checkInId, patientId, sentAt } (a credit) */
  checkInSent: 'check_in.sent',
  /** workflow-engine: { organizationId, environmentId, runId, workflowId, startedAt } (a credit) */
  workflowRunStarted: 'workflow_run.started',
  /** webhook-dispatcher: { organizationId, environmentId, eventId, eventType, caseId, deliveredAt } */
  webhookDelivered: 'webhook.delivered',
} as const;
