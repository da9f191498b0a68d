/**
 * Message contracts between the apps (request/reply commands and queries, and integration
 * event payloads). Final: each app builds against these shapes. Every message carries its
 * tenant; ids are uuids.
 */

import type { CasePriority, CaseSource } from '@svc/decider';

/** Case source and priority: shared domain types of the dependency-free core. */
export type { CasePriority, CaseSource };

/** Patterns.openClinicalCase: idempotent by (environmentId, requestId). */
export interface OpenClinicalCaseCommand {
  /** Caller-side idempotency id (check-in id, widget message id, staff request id). */
  requestId: string;
  organizationId: string;
  environmentId: string;
  patientId: string;
  source: CaseSource;
  priority: CasePriority;
  /** What the patient wrote; `""` for staff_chat. */
  patientNotes: string | null;
  /** Answers by question key; only answered questions when stoppedEarly. */
  symptomScores: Record<string, number | boolean | string>;
  matchedRules: string[];
  stoppedEarly: boolean;
  /** staff_chat: the teammate's words, kept as an internal note (encrypted, never sent). */
  internalNote?: string;
  /** Who asked: `patient:<id>`, `staff:<sub>`, `system`. */
  actor: string;
}

export interface OpenClinicalCaseReply {
  caseId: string;
  reference: string;
  priority: CasePriority;
  /** True when requestId had already opened this case. */
  duplicate: boolean;
}

/** Patterns.findPatient */
export interface FindPatientQuery {
  environmentId: string;
  externalPatientId: string;
}
export interface FindPatientReply {
  patientId: string | null;
}

/** Patterns.patientContact */
export interface PatientContactQuery {
  environmentId: string;
  patientId: string;
}
export interface PatientContactReply {
  /**
   * True when the patient exists in that environment: enrolled now or earlier (a cancelled
   * pathway included). False for an id the environment does not know (or another environment's).
   */
  known: boolean;
  email: string | null;
  externalPatientId: null;
}

/** Patterns.usageStatus */
export interface UsageStatusQuery {
  organizationId: string;
}
export interface UsageStatusReply {
  paused: boolean;
}

/**
 * Patterns.reserveCredit: the credit of a check-in about to be sent or a workflow run about to
 * start, recorded now if the month's plan has room (idempotent by source and sourceId; the credit
 * the work's own event brings later counts once). `reserved: false`: usage is paused.
 */
export interface ReserveCreditCommand {
  organizationId: string;
  environmentId: string | null;
  source: 'check_in' | 'workflow_run';
  sourceId: string;
}
export interface ReserveCreditReply {
  reserved: boolean;
}

/** Patterns.appendConversationMessage: idempotent by (conversationId, requestId). */
export interface AppendConversationMessageCommand {
  requestId: string;
  organizationId: string;
  environmentId: string;
  conversationId: string;
  /** `case` threads use the case id as conversation id; `work_item` threads come from hand-offs. */
  kind: 'case' | 'work_item';
  /** For case threads: the case's patient; for work items: the patient or null (anonymous). */
  patientId: string | null;
  sender: 'patient' | 'provider' | 'agent' | 'staff' | 'system';
  message: string;
  externalMessageId?: string | null;
  attachments?: { id: string; fileName: string; contentType: string; sha256: string }[];
}
export interface AppendConversationMessageReply {
  id: string;
  conversationId: string;
  sequence: number;
  createdAt: string;
  duplicate: boolean;
  /** Patterns.caseThread only: the lease of the thread's hold after the command (null: not held). */
  holdUntil?: string | null;
}

/**
 * Patterns.caseThread: a command on a case's thread, answered once the conversation read model has
 * it. Idempotent. The case-ledger sends `begin_close_case_thread` (and, when its resolve is not
 * recorded, `cancel_close_case_thread`) from the resolve's HTTP request, which waits for the hold
 * before it records the resolution; it never sends one from a bus handler, and the conversation's
 * handler of this command asks the case-ledger nothing. `start_case_thread` and `close_case_thread`
 * are no part of a flow (threads start on `clinical_case.opened` and close on
 * `clinical_case.resolved`); they stay for operations. docs/decisions.md, "Case threads without
 * synchronous cycles". Reply: AppendConversationMessageReply of the thread's last message
 * (sequence 0 when empty).
 */
export interface CaseThreadCommand {
  /**
   * `begin_close_case_thread`: a resolve is about to be recorded; patient messages wait until the
   * thread is closed (`clinical_case.resolved` reached it) or `cancel_close_case_thread` (the
   * resolve was not recorded), or the hold's lease runs out (then the case's state settles it).
   */
  control: 'start_case_thread' | 'close_case_thread' | 'begin_close_case_thread' | 'cancel_close_case_thread';
  /** `cancel_close_case_thread`: the hold's lease as `begin_close_case_thread` answered it (`holdUntil`); another hold is left alone. */
  lease?: string | null;
  organizationId: string;
  environmentId: string;
  /** The case id. */
  conversationId: string;
  kind: 'case';
  patientId: string | null;
}

/**
 * Patterns.caseStatus: asked by the conversation app from an HTTP request's path only (a patient
 * message meeting a hold whose lease ran out; a case thread it has not started yet). Answered after
 * every command given earlier for the case has been decided, never waiting for the conversation app.
 */
export interface CaseStatusQuery {
  environmentId: string;
  caseId: string;
}
export interface CaseStatusReply {
  /** False also for a case that does not exist in the environment. */
  resolved: boolean;
  /**
   * A resolve of the case is under way (its thread hold was asked for and its outcome is not
   * recorded yet): neither resolved nor open for good; ask again shortly.
   */
  resolving?: boolean;
  /** What the case's thread is started with, when the case exists in that environment (else null). */
  thread?: { organizationId: string; patientId: string } | null;
}

/**
 * Facts of case threads the conversation app publishes on Topics.conversationEvents (its stored
 * events, relayed as they are; keyed by the thread's stream). The case-ledger consumes them.
 */
export const CaseThreadFacts = {
  /** The case's thread refuses patient messages for good: data CaseThreadClosedFact. */
  closed: 'CaseThreadClosed',
} as const;
export interface CaseThreadClosedFact {
  /** The case id. */
  conversationId: string;
  closedAt: string;
}

/** Integration event types on the bus (IntegrationMessage.type): defined in the dependency-free core. */
export { IntegrationEventTypes } from '@svc/decider';
