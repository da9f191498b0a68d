/**
 * The service's streams and events in the words of the contract, for people reading a log.
 * Stream names are `<context>-<aggregate>-<id>` (never PHI); a test holds these prefixes to the
 * stream names each context's domain code builds.
 */

export interface Category {
  /** Short name an auditor types (`--category case`). */
  name: string;
  /** Stream id prefix. */
  prefix: string;
  /** What one stream of it is. */
  describes: string;
}

export const CATEGORIES: readonly Category[] = [
  { name: 'case', prefix: 'case-ledger-case-', describes: 'a clinical case' },
  { name: 'conversation', prefix: 'conversation-conversation-', describes: 'a conversation (one per clinical case or work item)' },
  { name: 'patient', prefix: 'patient-pathway-patient-', describes: "a patient's pathway" },
  { name: 'check-in', prefix: 'patient-pathway-checkin-', describes: 'a check-in' },
  { name: 'protocol', prefix: 'patient-pathway-protocol-', describes: 'a check-in protocol' },
  { name: 'patient-identity', prefix: 'patient-pathway-identity-', describes: 'the patientId of an external patient ID (keyed hash)' },
  { name: 'lifecycle-event', prefix: 'patient-pathway-eventid-', describes: 'the claim of a lifecycle eventId' },
  { name: 'program-key', prefix: 'patient-pathway-programkey-', describes: 'the claim of a programKey' },
  { name: 'organization', prefix: 'gateway-organization-', describes: 'an organization, its members and BAA' },
  { name: 'environment', prefix: 'gateway-environment-', describes: 'a sandbox or production environment and its secrets' },
  { name: 'api-key', prefix: 'gateway-apikey-', describes: 'an API key' },
  { name: 'identity-token', prefix: 'gateway-identity-token-', describes: 'one use of a widget identity token' },
  { name: 'account', prefix: 'webhook-dispatcher-account-', describes: "an organization's billing account" },
  { name: 'webhook-endpoint', prefix: 'webhook-dispatcher-endpoint-', describes: 'a webhook endpoint' },
  { name: 'webhook-delivery', prefix: 'webhook-dispatcher-delivery-', describes: 'the delivery of one webhook event' },
  { name: 'usage', prefix: 'webhook-dispatcher-usage-', describes: "an organization's usage in one month" },
  { name: 'workflow', prefix: 'workflow-engine-workflow-', describes: 'a conversation workflow and its versions' },
  { name: 'workflow-key', prefix: 'workflow-engine-key-', describes: 'the claim of a workflow key' },
  { name: 'workflow-run', prefix: 'workflow-engine-run-', describes: 'a workflow run (test or live)' },
  { name: 'destination', prefix: 'workflow-engine-destination-', describes: "a Destination (a call to the caller's system)" },
  { name: 'destination-key', prefix: 'workflow-engine-destkey-', describes: 'the claim of a Destination key' },
  { name: 'widget-turn', prefix: 'workflow-engine-widget-turn-', describes: 'one widget turn of the agent' },
  { name: 'workflow-request', prefix: 'workflow-engine-delivery-', describes: 'a case or hand-off the agent asked for' },
  { name: 'decrypting-reads', prefix: 'audit-decrypt-', describes: 'decrypting reads made with the audit CLI (one stream a month)' },
  { name: 'checkpoints', prefix: 'audit-checkpoint-', describes: 'the checkpoints of the global log (a stream per 1,000)' },
  { name: 'chain-anchors', prefix: 'audit-chain-anchor', describes: 'the anchors of events written before the hash chain (svc migrate-chain; one stream)' },
];

/** The category of a stream id (longest matching prefix), or null. */
export function categoryOf(streamId: string): Category | null {
  let best: Category | null = null;
  for (const c of CATEGORIES) if (streamId.startsWith(c.prefix) && (!best || c.prefix.length > best.prefix.length)) best = c;
  return best;
}

/** `--category`: a short name (`case`), or a stream id prefix with or without its final `-`. */
export function categoryPrefix(value: string): string {
  const named = CATEGORIES.find((c) => c.name === value);
  if (named) return named.prefix;
  return value.endsWith('-') ? value : `${value}-`;
}

/** What each event means, in the contract's words (spec event names first where one exists). */
const PHRASES: Record<string, string> = {
  // Clinical cases (case-ledger)
  CaseRegistered: 'case registered',
  'clinical_case.opened': 'clinical_case.opened — case opened',
  CaseUpdateAccepted: 'case update accepted',
  'clinical_case.acknowledged': 'clinical_case.acknowledged — acknowledged by the team',
  CaseAcknowledgedBy: 'acknowledged in the staff app',
  'clinical_case.resolved': 'clinical_case.resolved — case resolved',
  ProviderMessageAccepted: 'provider message to the patient accepted',
  CaseTransportDelivered: 'case webhook delivered (transport only: not a clinical review)',
  PatientNotified: 'patient notified of a provider message',
  // Conversations
  ConversationStarted: 'conversation started',
  ConversationMessageAppended: 'message added to the conversation',
  'clinical_case.patient_message_created': 'clinical_case.patient_message_created — the patient wrote',
  MessageDeliveryReported: 'message delivery state reported',
  CaseThreadClosing: 'case thread closing (the case is being resolved)',
  CaseThreadClosed: 'case thread closed',
  CaseThreadReopened: 'case thread reopened (the resolve was refused)',
  // Patient pathway
  PatientEnrolled: 'patient.created — patient enrolled',
  PatientUpdated: 'patient.updated — profile changed',
  PatientCancelled: 'patient.cancelled — pathway stopped',
  PatientIdentityAssigned: 'external patient ID (keyed hash) given its patientId',
  EventIdClaimed: 'lifecycle eventId claimed',
  EventIdReleased: 'lifecycle eventId released',
  ProgramKeyClaimed: 'programKey claimed',
  ProtocolCreated: 'protocol created',
  ProtocolActivated: 'protocol activated',
  ProtocolDeactivated: 'protocol deactivated',
  CheckInIssued: 'check-in issued',
  CheckInSendClaimed: 'check-in email being sent',
  'check_in.sent': 'check_in.sent — check-in email sent',
  CheckInSent: 'check-in sent',
  CheckInSkipped: 'scheduled check-in skipped',
  AnswerRecorded: 'check-in answer recorded',
  CheckInStoppedEarly: 'check-in stopped early (red flag)',
  CheckInCompleted: 'check-in completed',
  CaseLinked: 'clinical case opened from the check-in',
  CaseOpenFailed: 'clinical case could not be opened from the check-in',
  CheckInVoided: 'check-in voided',
  // Organizations and access (gateway)
  OrganizationCreated: 'organization created',
  MemberAdded: 'member added',
  MemberRoleChanged: "member's role changed",
  MemberRemoved: 'member removed',
  BaaSigned: 'business associate agreement (BAA) signed',
  EnvironmentProvisioned: 'environment provisioned',
  SecretRotated: 'signing secret rotated',
  ApiKeyCreated: 'API key created',
  ApiKeyRevoked: 'API key revoked',
  IdentityTokenUsed: 'widget identity token used (a widget session opened)',
  // Webhooks and billing
  AccountOpened: 'billing account opened',
  BillingEventReceived: 'billing event received',
  PlanChanged: 'subscription.updated — plan changed',
  CreditUsed: 'credit used',
  WebhookEndpointCreated: 'webhook endpoint created',
  WebhookEndpointDeleted: 'webhook endpoint deleted',
  WebhookEndpointSecretRotated: 'webhook endpoint secret rotated',
  WebhookDeliveryCreated: 'webhook delivery created',
  WebhookAttemptStarted: 'webhook delivery attempt started',
  WebhookAttemptRecorded: 'webhook delivery attempt recorded',
  WebhookRetryRequested: 'webhook retry requested',
  WebhookDeliveryReleased: 'webhook delivery released (held until the BAA)',
  WebhookDeliveryAbandoned: 'webhook delivery abandoned',
  // Workflows
  WorkflowCreated: 'workflow created (first version is a draft)',
  WorkflowRenamed: 'workflow renamed',
  DraftCreated: 'draft created',
  DraftSaved: 'draft saved',
  DraftDiscarded: 'draft discarded',
  VersionTested: 'version tested',
  VersionActivated: 'version switched on',
  WorkflowDeactivated: 'workflow switched off',
  WorkflowArchived: 'workflow archived',
  WorkflowRestored: 'workflow restored',
  WorkflowDeleted: 'workflow deleted',
  KeyClaimed: 'workflow key claimed',
  KeyReleased: 'workflow key released',
  DestinationCreated: 'Destination created',
  DestinationDeleted: 'Destination deleted',
  TestRunStarted: 'test run started',
  TurnStarted: 'workflow run turn started',
  RunAdvanced: 'workflow run advanced',
  WidgetTurnClaimed: 'widget turn taken by the agent',
  WidgetTurnAnswered: 'widget turn answered',
  WidgetTurnReleased: 'widget turn released',
  CaseRequested: 'the agent asked for a clinical case',
  HandOffRequested: 'the agent asked for a hand-off',
  DeliveryCompleted: "the agent's request was carried out",
  DeliveryFailed: "the agent's request failed",
  // The audit CLI itself
  DecryptingReadRecorded: 'decrypting read with the audit CLI',
  ChainCheckpointRecorded: 'checkpoint of the global log',
  ChainAnchored: 'events written before the hash chain anchored (chain migration)',
};

/** The phrase for an event type; an unknown type is spelled out from its name. */
export function phrase(type: string): string {
  return (
    PHRASES[type] ??
    type
      .replace(/([a-z0-9])([A-Z])/g, '$1 $2')
      .replace(/[._]/g, ' ')
      .toLowerCase()
  );
}

/** Fields worth a glance in a timeline, when the payload is open (`--decrypt`). Never free text. */
const DETAIL_FIELDS = [
  'status',
  'sequence',
  'priority',
  'source',
  'kind',
  'sender',
  'resolutionOutcome',
  'outcome',
  'role',
  'programKey',
  'version',
  'revision',
  'attempt',
  'statusCode',
  'reason',
  'errorCode',
  'caseId',
  'patientId',
  'checkInId',
  'workflowId',
  'runId',
];

/** A short `key=value` summary of an open payload (the subject's own id left out). */
export function details(data: unknown, subjectId?: string): string {
  if (!data || typeof data !== 'object' || Array.isArray(data)) return '';
  const d = data as Record<string, unknown>;
  const parts: string[] = [];
  for (const k of DETAIL_FIELDS) {
    const v = d[k];
    if (v === undefined || v === null || typeof v === 'object' || v === subjectId) continue;
    parts.push(`${k}=${String(v)}`);
  }
  return parts.join(' ');
}

export type HistoryKind = 'case' | 'patient' | 'conversation' | 'workflow';
export const HISTORY_KINDS: readonly HistoryKind[] = ['case', 'patient', 'conversation', 'workflow'];

/**
 * For each kind of subject: the categories whose streams concern it when the log links them to
 * it (their whole stream joins the timeline), and whose payloads are searched for the subject's
 * id when `--decrypt` opens them. Shared streams (organization, environment, account, usage) are
 * never pulled in whole.
 */
export const CONCERNS: Record<HistoryKind, readonly string[]> = {
  case: ['case', 'conversation', 'check-in', 'webhook-delivery', 'workflow-request'],
  patient: ['patient', 'check-in', 'case', 'conversation', 'patient-identity', 'lifecycle-event', 'workflow-request'],
  conversation: ['conversation', 'case', 'webhook-delivery', 'workflow-request'],
  workflow: ['workflow', 'workflow-key', 'workflow-run', 'widget-turn', 'workflow-request'],
};

export function concernPrefixes(kind: HistoryKind): string[] {
  return CONCERNS[kind].map((name) => CATEGORIES.find((c) => c.name === name)!.prefix);
}
