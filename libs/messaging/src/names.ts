/**
 * Every bus topic and message pattern, in one place. Commands are request/reply patterns;
 * integration events are fire-and-forget patterns (Kafka topics in distributed mode).
 */
export const Patterns = {
  /** Command to the case-ledger: open a clinical case. Reply: { caseId, reference, priority }. */
  openClinicalCase: 'case-ledger.command.open-clinical-case',
  /**
   * Query to the case-ledger, from the conversation app's HTTP paths only: whether a case exists and
   * is resolved or being resolved (a thread hold whose lease ran out; a case thread not started yet).
   * Reply: CaseStatusReply.
   */
  caseStatus: 'case-ledger.query.case-status',
  /** Query to the patient-pathway: the service's patientId for an external patient ID (widget sign-in). */
  findPatient: 'patient-pathway.query.find-patient',
  /** Query to the patient-pathway: a patient's contact (email) for notifications. PHI: never logged. */
  patientContact: 'patient-pathway.query.patient-contact',
  /** Query to the webhook-dispatcher (billing): whether usage is paused for an organization. */
  usageStatus: 'webhook-dispatcher.query.usage-status',
  /** Command to the webhook-dispatcher (billing): reserve the credit of work about to be done, within the plan. */
  reserveCredit: 'webhook-dispatcher.command.reserve-credit',
  /** Command to the conversation service: append a message to a conversation (case threads, work items). */
  appendConversationMessage: 'conversation.command.append-message',
  /** Command to the conversation service: hold, release, start or close a case's thread (answered once its read model has it; see CaseThreadCommand). */
  caseThread: 'conversation.command.case-thread',
} as const;

export const Topics = {
  /** Integration events of the gateway (organization.created, baa.signed, ...). */
  gatewayEvents: 'svc.gateway.events',
  /** Integration events of the patient-pathway (check-in sent, ...). */
  pathwayEvents: 'svc.patient-pathway.events',
  /** Integration events of the case-ledger (clinical_case.*). */
  caseEvents: 'svc.case-ledger.events',
  /** Integration events of the conversation service: case thread facts (CaseThreadFacts), which the case-ledger consumes. */
  conversationEvents: 'svc.conversation.events',
  /** Integration events of the workflow-engine. */
  workflowEvents: 'svc.workflow-engine.events',
  /** Integration events of the webhook dispatcher (delivery succeeded, ...). */
  dispatcherEvents: 'svc.webhook-dispatcher.events',
} as const;

/** What goes over the bus for an integration event: the event and its metadata, as JSON. */
export interface IntegrationMessage<T = unknown> {
  type: string;
  data: T;
  metadata: {
    eventId: string;
    correlationId: string;
    causationId: string | null;
    organizationId: string | null;
    environmentId: string | null;
    actor: string;
    recordedAt: string;
  };
  streamId: string;
  position: number;
}
