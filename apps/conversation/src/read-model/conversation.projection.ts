import { RecordedEvent } from '@svc/eventstore';
import { Projection, ProjectionTx } from '@svc/read-store';
import { Keyring } from '@svc/security';
import { Attachment, CONVERSATION_STREAM_PREFIX, ConversationEvent, ConversationKind, DeliveryStatus, Sender } from '../domain/conversation';

export const CONVERSATION_PROJECTION = 'conversation-messages';
export const THREADS = 'conversation-threads';
export const MESSAGES = 'conversation-messages';

export interface ThreadDoc {
  conversationId: string;
  kind: ConversationKind;
  organizationId: string;
  environmentId: string;
  patientId: string | null;
  closed: boolean;
  startedAt: string;
}

/** Message record of docs/decisions.md, "Threads and messages", with the body (and attachment names) keyring-encrypted. */
export interface MessageDoc {
  id: string;
  conversationId: string;
  environmentId: string;
  sequence: number;
  sender: Sender;
  encMessage: string;
  encExternalMessageId: string | null;
  /** JSON of the attachments, encrypted (file names may hold PHI). */
  encAttachments: string;
  createdAt: string;
  /** The last recorded report; `encExternalMessageId` is the report's own (encrypted; absent in documents written before it was kept). */
  delivery: {
    status: DeliveryStatus;
    /** Caller's free text: encrypted (`encErrorCode`); `errorCode` in clear only in documents written before that. */
    encErrorCode?: string | null;
    errorCode?: string | null;
    encExternalMessageId?: string;
    reportedAt: string;
  } | null;
}

export function conversationProjection(keyring: Keyring): Projection {
  return {
    name: CONVERSATION_PROJECTION,
    collections: [THREADS, MESSAGES],
    streamPrefixes: [CONVERSATION_STREAM_PREFIX],
    async apply(recorded: RecordedEvent, tx: ProjectionTx) {
      const event = { type: recorded.type, ...(recorded.data as object) } as ConversationEvent;
      const env = recorded.metadata.environmentId!;
      switch (event.type) {
        case 'ConversationStarted': {
          const doc: ThreadDoc = {
            conversationId: event.conversationId,
            kind: event.kind,
            organizationId: event.organizationId,
            environmentId: event.environmentId,
            patientId: event.patientId,
            closed: false,
            startedAt: event.startedAt,
          };
          tx.put(THREADS, event.conversationId, doc);
          return;
        }
        case 'ConversationMessageAppended': {
          const doc: MessageDoc = {
            id: event.id,
            conversationId: event.conversationId,
            environmentId: env,
            sequence: event.sequence,
            sender: event.sender,
            encMessage: keyring.encrypt(env, event.message),
            encExternalMessageId: event.externalMessageId === null ? null : keyring.encrypt(env, event.externalMessageId),
            encAttachments: keyring.encrypt(env, JSON.stringify(event.attachments ?? ([] as Attachment[]))),
            createdAt: event.createdAt,
            delivery: null,
          };
          tx.put(MESSAGES, event.id, doc, { partition: event.conversationId, score: event.sequence });
          return;
        }
        case 'MessageDeliveryReported': {
          const doc = await tx.get<MessageDoc>(MESSAGES, event.messageId);
          if (!doc) return;
          const delivery = {
            status: event.status,
            encErrorCode: event.errorCode === null ? null : keyring.encrypt(env, event.errorCode),
            encExternalMessageId: keyring.encrypt(env, event.externalMessageId),
            reportedAt: event.reportedAt,
          };
          tx.put(MESSAGES, doc.id, { ...doc, delivery }, { partition: doc.conversationId, score: doc.sequence });
          return;
        }
        case 'CaseThreadClosed': {
          const doc = await tx.get<ThreadDoc>(THREADS, event.conversationId);
          if (doc) tx.put(THREADS, event.conversationId, { ...doc, closed: true });
          return;
        }
        case 'clinical_case.patient_message_created':
        case 'CaseThreadClosing':
        case 'CaseThreadReopened':
          return;
        default: {
          const never: never = event;
          return never;
        }
      }
    },
  };
}
