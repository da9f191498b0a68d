import { Map as PersistentMap } from 'immutable';
import { Decider, DomainError } from '@svc/decider';

export type Sender = 'patient' | 'provider' | 'agent' | 'staff' | 'system';
export type ConversationKind = 'case' | 'work_item';
export type DeliveryStatus = 'delivered' | 'read' | 'failed';

export interface Attachment {
  id: string;
  fileName: string;
  contentType: string;
  sha256: string;
}

export interface AppendResult {
  id: string;
  conversationId: string;
  sequence: number;
  createdAt: string;
}

export type ConversationEvent =
  | {
      type: 'ConversationStarted';
      conversationId: string;
      kind: ConversationKind;
      organizationId: string;
      environmentId: string;
      patientId: string | null;
      startedAt: string;
    }
  | {
      type: 'ConversationMessageAppended';
      conversationId: string;
      id: string;
      requestId: string;
      bodyHash: string;
      sequence: number;
      sender: Sender;
      message: string;
      externalMessageId: string | null;
      attachments: Attachment[];
      createdAt: string;
    }
  /** Exactly the spec's webhook data; relayed to the case events topic as is. */
  | {
      type: 'clinical_case.patient_message_created';
      caseId: string;
      messageId: string;
      patientId: string;
      sender: 'patient';
      message: string;
      sentAt: string;
      replyPath: string;
    }
  | {
      type: 'MessageDeliveryReported';
      conversationId: string;
      messageId: string;
      status: DeliveryStatus;
      errorCode: string | null;
      externalMessageId: string;
      reportedAt: string;
    }
  | { type: 'CaseThreadClosed'; conversationId: string; closedAt: string }
  /** The case is being resolved: patient messages wait until the close is final or called off (or `until` passes). */
  | { type: 'CaseThreadClosing'; conversationId: string; until: string; at: string }
  /** The resolve that began closing the thread was refused: the thread takes patient messages again. */
  | { type: 'CaseThreadReopened'; conversationId: string; at: string };

export type ConversationCommand =
  | { type: 'StartConversation'; conversationId: string; kind: ConversationKind; organizationId: string; environmentId: string; patientId: string | null }
  | {
      type: 'AppendMessage';
      conversationId: string;
      /** Create the conversation when it does not exist (bus appends); HTTP inbound needs it to exist. */
      start: { kind: ConversationKind; organizationId: string; patientId: string | null } | null;
      environmentId: string;
      id: string;
      requestId: string;
      bodyHash: string;
      sender: Sender;
      message: string;
      externalMessageId: string | null;
      attachments: Attachment[];
    }
  | { type: 'ReportDelivery'; environmentId: string; messageId: string; status: DeliveryStatus; errorCode: string | null; externalMessageId: string }
  /** `start` given: a thread not started yet is started and closed at once (the close must never be lost). */
  | { type: 'CloseCaseThread'; environmentId: string; start?: CaseThreadStart | null }
  /**
   * Before a resolve is recorded: patient messages wait from now on (see CASE_THREAD_CLOSE_LEASE_MS),
   * so none is accepted between the resolution and the final close. Starts a thread not started yet.
   */
  | { type: 'BeginCaseThreadClose'; environmentId: string; start: CaseThreadStart }
  /**
   * The resolve was not recorded: patient messages are taken again. `lease`: only while the hold is
   * still the one with this lease (a resolve begun since holds the thread with a lease of its own,
   * which this must not lift: a late delivery of the command, or a settle of an older hold);
   * `onlyIfExpired`: only once the lease has run out (a hold a crashed resolve left).
   */
  | { type: 'CancelCaseThreadClose'; environmentId: string; lease: string | null; onlyIfExpired: boolean };

export interface ConversationState {
  conversationId: string | null;
  kind: ConversationKind | null;
  environmentId: string | null;
  patientId: string | null;
  closed: boolean;
  /** A close begun and neither final nor called off: patient messages wait (until `until`, service clock). */
  closing: { until: string } | null;
  lastSequence: number;
  /**
   * Persistent maps (`immutable`): each event adds one entry to a structure shared with the state
   * before it, so folding a thread of n messages is O(n log n), not O(n^2) copies of plain objects.
   */
  requests: PersistentMap<string, { bodyHash: string; result: AppendResult }>;
  messages: PersistentMap<string, { sender: Sender; delivery: { status: DeliveryStatus; reportedAt: string } | null }>;
}

const RANK: Record<DeliveryStatus, number> = { failed: 0, delivered: 1, read: 2 };

/**
 * How long a begun close holds patient messages (service clock). The resolve that began it makes
 * it final or calls it off within milliseconds; the lease only matters when that resolve never
 * finishes (a crash): a patient message after the lease asks the case-ledger whether the case is
 * resolved (`CASE_THREAD_CLOSE_EXPIRED`), and the thread is closed or opened again accordingly.
 */
export const CASE_THREAD_CLOSE_LEASE_MS = 10_000;
/** Internal refusals of a patient message while a close is begun (never answered to a client as such). */
export const CASE_THREAD_CLOSING = 'CASE_THREAD_CLOSING';
export const CASE_THREAD_CLOSE_EXPIRED = 'CASE_THREAD_CLOSE_EXPIRED';
const notFound = () => new DomainError(404, 'NOT_FOUND', 'Conversation not found');

/** What starts a case thread that a close (or the hold before it) finds not started yet. */
export interface CaseThreadStart {
  organizationId: string;
  conversationId: string;
  patientId: string | null;
}

/** The ConversationStarted of a case thread started by a close or the hold before it. */
function caseThreadStarted(s: CaseThreadStart, environmentId: string, at: string): ConversationEvent {
  return {
    type: 'ConversationStarted',
    conversationId: s.conversationId,
    kind: 'case',
    organizationId: s.organizationId,
    environmentId,
    patientId: s.patientId,
    startedAt: at,
  };
}

export const conversationDecider: Decider<ConversationCommand, ConversationEvent, ConversationState> = {
  initialState: () => ({
    conversationId: null,
    kind: null,
    environmentId: null,
    patientId: null,
    closed: false,
    closing: null,
    lastSequence: 0,
    requests: PersistentMap(),
    messages: PersistentMap(),
  }),

  evolve(state, event) {
    switch (event.type) {
      case 'ConversationStarted':
        return { ...state, conversationId: event.conversationId, kind: event.kind, environmentId: event.environmentId, patientId: event.patientId };
      case 'ConversationMessageAppended':
        return {
          ...state,
          lastSequence: event.sequence,
          requests: state.requests.set(event.requestId, {
            bodyHash: event.bodyHash,
            result: { id: event.id, conversationId: event.conversationId, sequence: event.sequence, createdAt: event.createdAt },
          }),
          messages: state.messages.set(event.id, { sender: event.sender, delivery: null }),
        };
      case 'MessageDeliveryReported': {
        const m = state.messages.get(event.messageId);
        if (!m) return state;
        return { ...state, messages: state.messages.set(event.messageId, { ...m, delivery: { status: event.status, reportedAt: event.reportedAt } }) };
      }
      case 'CaseThreadClosed':
        return { ...state, closed: true, closing: null };
      case 'CaseThreadClosing':
        return { ...state, closing: { until: event.until } };
      case 'CaseThreadReopened':
        return { ...state, closing: null };
      case 'clinical_case.patient_message_created':
        return state;
      default: {
        const never: never = event;
        return never;
      }
    }
  },

  decide(command, state, now) {
    const at = now.toISOString();
    switch (command.type) {
      case 'StartConversation': {
        if (state.conversationId) return [];
        return [
          {
            type: 'ConversationStarted',
            conversationId: command.conversationId,
            kind: command.kind,
            organizationId: command.organizationId,
            environmentId: command.environmentId,
            patientId: command.patientId,
            startedAt: at,
          },
        ];
      }
      case 'AppendMessage': {
        const events: ConversationEvent[] = [];
        let kind = state.kind;
        let patientId = state.patientId;
        if (!state.conversationId) {
          if (!command.start) throw notFound();
          kind = command.start.kind;
          patientId = command.start.patientId;
          events.push({
            type: 'ConversationStarted',
            conversationId: command.conversationId,
            kind,
            organizationId: command.start.organizationId,
            environmentId: command.environmentId,
            patientId,
            startedAt: at,
          });
        } else if (state.environmentId !== command.environmentId) {
          throw notFound();
        }
        const seen = state.requests.get(command.requestId);
        if (seen) {
          if (seen.bodyHash === command.bodyHash) return [];
          throw new DomainError(409, 'IDEMPOTENCY_KEY_REUSED', 'This requestId was used with a different body');
        }
        if (state.closed && command.sender === 'patient') throw new DomainError(409, 'CASE_RESOLVED', 'The clinical case of this conversation is resolved');
        if (state.closing && command.sender === 'patient') {
          if (now.getTime() < Date.parse(state.closing.until))
            throw new DomainError(409, CASE_THREAD_CLOSING, 'The clinical case of this conversation is being resolved', { until: state.closing.until });
          throw new DomainError(409, CASE_THREAD_CLOSE_EXPIRED, 'A close of this thread was begun and never finished', { until: state.closing.until });
        }
        const sequence = state.lastSequence + 1;
        events.push({
          type: 'ConversationMessageAppended',
          conversationId: command.conversationId,
          id: command.id,
          requestId: command.requestId,
          bodyHash: command.bodyHash,
          sequence,
          sender: command.sender,
          message: command.message,
          externalMessageId: command.externalMessageId,
          attachments: command.attachments,
          createdAt: at,
        });
        if (kind === 'case' && command.sender === 'patient' && patientId) {
          events.push({
            type: 'clinical_case.patient_message_created',
            caseId: command.conversationId,
            messageId: command.id,
            patientId,
            sender: 'patient',
            message: command.message,
            sentAt: at,
            replyPath: `/v1/clinical-cases/${command.conversationId}/messages`,
          });
        }
        return events;
      }
      case 'ReportDelivery': {
        if (!state.conversationId || state.environmentId !== command.environmentId) throw notFound();
        const m = state.messages.get(command.messageId);
        if (!m || m.sender === 'patient') throw new DomainError(404, 'NOT_FOUND', 'No message sent by the service with this id in the conversation');
        if (m.delivery && RANK[m.delivery.status] >= RANK[command.status]) return [];
        return [
          {
            type: 'MessageDeliveryReported',
            conversationId: state.conversationId,
            messageId: command.messageId,
            status: command.status,
            errorCode: command.errorCode,
            externalMessageId: command.externalMessageId,
            reportedAt: at,
          },
        ];
      }
      case 'CloseCaseThread': {
        if (!state.conversationId) {
          const s = command.start;
          if (!s) return [];
          return [caseThreadStarted(s, command.environmentId, at), { type: 'CaseThreadClosed', conversationId: s.conversationId, closedAt: at }];
        }
        if (state.environmentId !== command.environmentId || state.closed) return [];
        return [{ type: 'CaseThreadClosed', conversationId: state.conversationId, closedAt: at }];
      }
      case 'BeginCaseThreadClose': {
        const until = new Date(now.getTime() + CASE_THREAD_CLOSE_LEASE_MS).toISOString();
        if (!state.conversationId) {
          const s = command.start;
          return [caseThreadStarted(s, command.environmentId, at), { type: 'CaseThreadClosing', conversationId: s.conversationId, until, at }];
        }
        if (state.environmentId !== command.environmentId || state.closed) return [];
        return [{ type: 'CaseThreadClosing', conversationId: state.conversationId, until, at }];
      }
      case 'CancelCaseThreadClose': {
        if (!state.conversationId || state.environmentId !== command.environmentId || state.closed || !state.closing) return [];
        if (command.lease !== null && state.closing.until !== command.lease) return [];
        if (command.onlyIfExpired && now.getTime() < Date.parse(state.closing.until)) return [];
        return [{ type: 'CaseThreadReopened', conversationId: state.conversationId, at }];
      }
      default: {
        const never: never = command;
        return never;
      }
    }
  },
};

export const CONVERSATION_STREAM_PREFIX = 'conversation-conversation-';
export const conversationStream = (conversationId: string) => `${CONVERSATION_STREAM_PREFIX}${conversationId}`;
