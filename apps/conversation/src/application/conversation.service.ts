// Over 400 lines: the conversation app's one command-handler path.
import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { Inject, Injectable } from '@nestjs/common';
import { v5 as uuidv5 } from 'uuid';
import { CLOCK, Clock } from '@svc/clock';
import { CommandHandler, DomainError, EVENT_STORE, EventStore } from '@svc/eventstore';
import { ApiError, WidgetSessionContext, currentPatientLink, getLogger, isUuid } from '@svc/http';
import {
  AnyClientProxy,
  BUS_CLIENT,
  AppendConversationMessageCommand,
  AppendConversationMessageReply,
  CaseStatusQuery,
  CaseStatusReply,
  CaseThreadCommand,
  IntegrationEventTypes,
  IntegrationMessage,
  Patterns,
  ask,
} from '@svc/messaging';
import { PROJECTIONS } from '@svc/platform';
import { ProjectionRunner, READ_STORE, ReadStore } from '@svc/read-store';
import { KEYRING, Keyring, bodyHash } from '@svc/security';
import { CONVERSATION_PROJECTION, MESSAGES, MessageDoc, THREADS, ThreadDoc } from '../read-model/conversation.projection';
import {
  Attachment,
  CASE_THREAD_CLOSE_EXPIRED,
  CASE_THREAD_CLOSING,
  ConversationCommand,
  ConversationEvent,
  ConversationState,
  DeliveryStatus,
  Sender,
  conversationDecider,
  conversationStream,
} from '../domain/conversation';

/** Namespace of the requestIds derived from widget replies' idempotency keys (uuid v5). */
const WIDGET_REPLY_NAMESPACE = '5b0f3c2e-8f7d-4d55-9a57-2f1f8e0c6a41';
export const widgetReplyRequestId = (patientId: string, idempotencyKey: string) =>
  uuidv5(`widget-reply:${patientId}:${idempotencyKey.toLowerCase()}`, WIDGET_REPLY_NAMESPACE);

const hashOf = bodyHash;

/**
 * How long (real time: an operational wait) a patient message waits for a begun close of its case
 * thread to become final or be called off before it is answered 503 with Retry-After. The resolve
 * that began the close normally ends it within milliseconds.
 */
const CLOSING_WAIT_MS = 5_000;
/** How long (real time) a case-status question to the case-ledger may take before the request answers 503. */
const CASE_STATUS_TIMEOUT_MS = 5_000;
const caseBeingResolved = () =>
  new ApiError(503, 'UNAVAILABLE', 'The clinical case is being resolved; retry the message shortly with the same requestId', undefined, { 'retry-after': '1' });

export interface Tenant {
  organizationId: string;
  environmentId: string;
}

export type CaseThreadControl = CaseThreadCommand;

export interface InboundInput {
  requestId: string;
  message: string;
  externalMessageId?: string | null;
  attachments?: Attachment[] | null;
}

/** Conversation use cases: one ordered thread per case or work item. */
@Injectable()
export class ConversationService {
  private readonly conversations: CommandHandler<ConversationCommand, ConversationEvent, ConversationState>;

  constructor(
    @Inject(EVENT_STORE) private readonly store: EventStore,
    @Inject(CLOCK) private readonly clock: Clock,
    @Inject(PROJECTIONS) private readonly projections: ProjectionRunner,
    @Inject(READ_STORE) private readonly readStore: ReadStore,
    @Inject(KEYRING) private readonly keyring: Keyring,
    @Inject(BUS_CLIENT) private readonly bus: AnyClientProxy,
  ) {
    this.conversations = new CommandHandler(store, conversationDecider, () => clock.now(), { maxRetries: 100, rememberStates: 10_000 });
  }

  private async applied(position: number): Promise<void> {
    await this.projections.waitFor([CONVERSATION_PROJECTION], position > 0 ? position : await this.store.headPosition());
  }

  private async thread(environmentId: string, conversationId: string): Promise<ThreadDoc> {
    if (!isUuid(conversationId)) throw ApiError.notFound('Conversation');
    const doc = (await this.readStore.get<ThreadDoc>(THREADS, conversationId)) ?? (await this.startCaseThread(environmentId, conversationId));
    if (!doc || doc.environmentId !== environmentId) throw ApiError.notFound('Conversation');
    return doc;
  }

  /**
   * A thread this app has not started: a case whose clinical_case.opened has not reached it yet (its
   * open answered moments ago; read your writes). Started from the case as the case-ledger answers
   * for it (Patterns.caseStatus: asked only from an HTTP request's path, and the case-ledger's
   * handler asks this app nothing), closed at once if the case is resolved. Null when no case has
   * this id in the environment; 503 when the case-ledger does not answer.
   */
  private async startCaseThread(environmentId: string, caseId: string): Promise<ThreadDoc | null> {
    const query: CaseStatusQuery = { environmentId, caseId };
    const status = await ask<CaseStatusReply, never>(this.bus, Patterns.caseStatus, query, {
      timeoutMs: CASE_STATUS_TIMEOUT_MS,
      onError: (err) => {
        getLogger().warn({ conversationId: caseId, error: (err as { code?: string })?.code ?? (err as Error)?.name }, 'conversation: case status unavailable');
        throw new ApiError(503, 'UNAVAILABLE', 'The clinical case could not be looked up; retry shortly', undefined, { 'retry-after': '1' });
      },
    });
    if (!status?.thread) return null;
    const { organizationId, patientId } = status.thread;
    const command: ConversationCommand = status.resolved
      ? { type: 'CloseCaseThread', environmentId, start: { organizationId, conversationId: caseId, patientId } }
      : { type: 'StartConversation', conversationId: caseId, kind: 'case', organizationId, environmentId, patientId };
    const r = await this.conversations.handle(conversationStream(caseId), command, { actor: 'system', organizationId, environmentId });
    await this.applied(r.position);
    return this.readStore.get<ThreadDoc>(THREADS, caseId);
  }

  /**
   * One page of the thread: the messages after `afterSequence`, in sequence order, at most `limit`
   * (read as a range of the thread's partition, so only the page is read and decrypted), and
   * whether more follow.
   */
  async messages(tenant: Tenant, conversationId: string, afterSequence: number, limit: number) {
    await this.thread(tenant.environmentId, conversationId);
    const page = await this.readStore.page<MessageDoc>(MESSAGES, conversationId, { limit, ...(afterSequence > 0 ? { after: { score: afterSequence } } : {}) });
    const env = tenant.environmentId;
    return {
      conversationId,
      messages: page.entries.map(({ doc: d }) => ({
        id: d.id,
        conversationId: d.conversationId,
        sequence: d.sequence,
        sender: d.sender,
        message: this.keyring.decrypt(env, d.encMessage),
        externalMessageId: d.encExternalMessageId === null ? null : this.keyring.decrypt(env, d.encExternalMessageId),
        attachments: JSON.parse(this.keyring.decrypt(env, d.encAttachments)) as Attachment[],
        createdAt: d.createdAt,
        delivery: d.delivery && {
          status: d.delivery.status,
          errorCode: d.delivery.encErrorCode ? this.keyring.decrypt(env, d.delivery.encErrorCode) : (d.delivery.errorCode ?? null),
          externalMessageId: d.delivery.encExternalMessageId === undefined ? null : this.keyring.decrypt(env, d.delivery.encExternalMessageId),
          reportedAt: d.delivery.reportedAt,
        },
      })),
      hasMore: page.hasMore,
    };
  }

  private async append(
    tenant: Tenant,
    conversationId: string,
    actor: string,
    input: { requestId: string; sender: Sender; message: string; externalMessageId: string | null; attachments: Attachment[]; bodyHash: string },
    start: { kind: 'case' | 'work_item'; patientId: string | null } | null,
    /** Wait for a hold on the thread (HTTP callers); a bus append must not (it could wait on a close queued behind it). */
    wait = true,
  ): Promise<AppendConversationMessageReply> {
    const command: ConversationCommand = {
      type: 'AppendMessage',
      conversationId,
      start: start ? { ...start, organizationId: tenant.organizationId } : null,
      environmentId: tenant.environmentId,
      id: randomUUID(),
      requestId: input.requestId,
      bodyHash: input.bodyHash,
      sender: input.sender,
      message: input.message,
      externalMessageId: input.externalMessageId,
      attachments: input.attachments,
    };
    const ctx = { actor, organizationId: tenant.organizationId, environmentId: tenant.environmentId };
    const giveUpAt = Date.now() + CLOSING_WAIT_MS;
    for (;;) {
      // A patient message to a case thread whose case is being resolved waits for the outcome
      // (then it is refused 409 CASE_RESOLVED or taken, never taken after the resolution): on the
      // hold's release (no read of the thread meanwhile), or until its lease runs out.
      const hold = input.sender === 'patient' ? this.holds.get(conversationId) : undefined;
      if (hold && this.clock.now().getTime() < hold.until) {
        if (!wait || Date.now() >= giveUpAt) throw caseBeingResolved();
        await Promise.race([hold.released, sleep(Math.max(0, Math.min(250, giveUpAt - Date.now())))]);
        continue;
      }
      try {
        const r = await this.conversations.handle(conversationStream(conversationId), command, ctx);
        await this.applied(r.position);
        return { ...r.state.requests.get(input.requestId)!.result, duplicate: r.newEvents.length === 0 };
      } catch (err) {
        const code = err instanceof DomainError ? err.code : null;
        if (code !== CASE_THREAD_CLOSING && code !== CASE_THREAD_CLOSE_EXPIRED) throw err;
        if (!wait || Date.now() >= giveUpAt) throw caseBeingResolved();
        const lease = ((err as DomainError).details as { until: string }).until;
        if (code === CASE_THREAD_CLOSE_EXPIRED) await this.settleUnfinishedClose(tenant, conversationId, lease, giveUpAt);
        // A hold this process did not place (before a restart): from now on waited on like its own
        // (released by the close or cancel that ends it here, or by its lease running out).
        else this.noteHold(conversationId, { closing: { until: lease }, closed: false });
      }
    }
  }

  /**
   * Holds on case threads placed by this process (the conversation app is the one writer of its
   * streams), released when the close is made final or called off: patient messages wait on them
   * instead of reading the thread again and again.
   */
  private readonly holds = new Map<string, { until: number; released: Promise<void>; release: () => void }>();

  /** Records the hold state of a thread after a command on it: held (with its lease) or not. */
  private noteHold(conversationId: string, state: Pick<ConversationState, 'closing' | 'closed'>): void {
    const current = this.holds.get(conversationId);
    if (state.closing && !state.closed) {
      const until = Date.parse(state.closing.until);
      if (current) current.until = until;
      else {
        let release!: () => void;
        const released = new Promise<void>((r) => (release = r));
        this.holds.set(conversationId, { until, released, release });
      }
    } else if (current) {
      this.holds.delete(conversationId);
      current.release();
    }
  }

  /**
   * A close of the case thread was begun and its lease ran out without it being made final or
   * called off (the resolve that began it did not finish: a crash, or the relayed resolution has not
   * reached this app). Only from an HTTP request's path: the case-ledger answers whether the case is
   * resolved (or still being resolved) once every command given earlier for the case has been
   * decided, without asking this app anything; the thread is closed for good or opened again
   * accordingly (the reopen only while the lease is still the expired one: a resolve begun meanwhile
   * keeps its hold).
   */
  private async settleUnfinishedClose(tenant: Tenant, caseId: string, lease: string, giveUpAt: number): Promise<void> {
    const query: CaseStatusQuery = { environmentId: tenant.environmentId, caseId };
    const status = await ask<CaseStatusReply, never>(this.bus, Patterns.caseStatus, query, {
      timeoutMs: Math.max(500, giveUpAt - Date.now()),
      onError: () => {
        throw caseBeingResolved();
      },
    });
    if (status.resolving) {
      // A resolve of the case is under way (this hold may be its own, slow): neither reopen nor
      // close; the message waits and asks again (its own bound still applies).
      await sleep(Math.max(0, Math.min(250, giveUpAt - Date.now())));
      return;
    }
    const command: ConversationCommand = status.resolved
      ? { type: 'CloseCaseThread', environmentId: tenant.environmentId, start: null }
      : { type: 'CancelCaseThreadClose', environmentId: tenant.environmentId, lease, onlyIfExpired: true };
    const r = await this.conversations.handle(conversationStream(caseId), command, {
      actor: 'system',
      organizationId: tenant.organizationId,
      environmentId: tenant.environmentId,
    });
    this.noteHold(caseId, r.state);
    await this.applied(r.position);
  }

  /** Inbound (a patient's message relayed by the caller): sender patient; the conversation must exist. */
  async inbound(tenant: Tenant, actor: string, conversationId: string, input: InboundInput) {
    await this.thread(tenant.environmentId, conversationId);
    return this.append(
      tenant,
      conversationId,
      actor,
      {
        requestId: input.requestId,
        sender: 'patient',
        message: input.message,
        externalMessageId: input.externalMessageId ?? null,
        attachments: input.attachments ?? [],
        bodyHash: hashOf(input),
      },
      null,
    );
  }

  /** Patterns.appendConversationMessage: other apps append (provider messages, hand-offs). */
  async appendFromBus(cmd: AppendConversationMessageCommand): Promise<AppendConversationMessageReply> {
    const { requestId, conversationId, sender, message } = cmd;
    const externalMessageId = cmd.externalMessageId ?? null;
    const attachments = cmd.attachments ?? [];
    return this.append(
      { organizationId: cmd.organizationId, environmentId: cmd.environmentId },
      conversationId,
      sender === 'patient' && cmd.patientId ? `patient:${cmd.patientId}` : 'system',
      { requestId, sender, message, externalMessageId, attachments, bodyHash: hashOf({ sender, message, externalMessageId, attachments }) },
      { kind: cmd.kind, patientId: cmd.patientId },
      false,
    );
  }

  /**
   * The patient's reply in their case thread, from the widget (docs/decisions.md, "Idempotency keys of widget messages"). `idempotencyKey` (the optional `Idempotency-Key`
   * header, a uuid) makes a retry recognisable: the same key with the same message is the first
   * reply again (`duplicate: true`), with another message 409 `IDEMPOTENCY_KEY_REUSED`. The
   * thread's requestId is derived from the patient and the key, so a patient's keys can never
   * meet the caller's inbound requestIds or another patient's keys.
   */
  async widgetReply(tokenSession: WidgetSessionContext, caseId: string, message: string, idempotencyKey?: string) {
    // The token's patient link as it stands now: after patient.cancelled the session is unlinked
    // and its replies are refused like an anonymous session's (404 below).
    const { session } = await currentPatientLink(this.bus, tokenSession);
    // One answer for a case that does not exist and one that is not this patient's: a session
    // (anonymous ones too) must not learn which case ids exist in the environment.
    const thread = await this.thread(session.environmentId, caseId).catch((err) => {
      if (err instanceof ApiError && err.status === 404) return null;
      throw err;
    });
    if (!thread || thread.kind !== 'case' || !session.patientId || thread.patientId !== session.patientId) throw ApiError.notFound('Clinical case');
    const requestId = idempotencyKey === undefined ? randomUUID() : widgetReplyRequestId(session.patientId, idempotencyKey);
    const r = await this.append(
      { organizationId: thread.organizationId, environmentId: thread.environmentId },
      caseId,
      `patient:${session.patientId}`,
      { requestId, sender: 'patient', message, externalMessageId: null, attachments: [], bodyHash: hashOf({ requestId, message }) },
      null,
    );
    return { id: r.id, conversationId: r.conversationId, sequence: r.sequence, duplicate: r.duplicate, createdAt: r.createdAt };
  }

  /**
   * The patient's view of their case thread, from the widget (`GET /widget/v1/cases/{caseId}/messages`):
   * the same 404 for a case that does not exist and one that is not this patient's (as for replies),
   * after the thread's read model caught up with the log. What the patient wrote and what the care
   * team, the assistant and staff sent; the service's own summaries for the team (sender `system`)
   * are left out. `closed` once the case was resolved (replies are then refused).
   */
  async widgetThread(tokenSession: WidgetSessionContext, caseId: string, afterSequence: number, limit: number) {
    const { session } = await currentPatientLink(this.bus, tokenSession);
    await this.applied(0);
    const thread = await this.thread(session.environmentId, caseId).catch(() => null);
    if (!thread || thread.kind !== 'case' || !session.patientId || thread.patientId !== session.patientId) throw ApiError.notFound('Clinical case');
    const page = await this.readStore.page<MessageDoc>(MESSAGES, caseId, { limit, ...(afterSequence > 0 ? { after: { score: afterSequence } } : {}) });
    const env = thread.environmentId;
    return {
      conversationId: caseId,
      messages: page.entries
        .filter(({ doc }) => doc.sender !== 'system')
        .map(({ doc: d }) => ({ id: d.id, sequence: d.sequence, sender: d.sender, message: this.keyring.decrypt(env, d.encMessage), createdAt: d.createdAt })),
      hasMore: page.hasMore,
      closed: thread.closed,
    };
  }

  async reportDelivery(
    tenant: Tenant,
    actor: string,
    conversationId: string,
    messageId: string,
    input: { externalMessageId: string; status: DeliveryStatus; errorCode?: string | null },
  ) {
    await this.thread(tenant.environmentId, conversationId);
    if (!isUuid(messageId)) throw ApiError.notFound('Message');
    const r = await this.conversations.handle(
      conversationStream(conversationId),
      {
        type: 'ReportDelivery',
        environmentId: tenant.environmentId,
        messageId,
        status: input.status,
        errorCode: input.errorCode ?? null,
        externalMessageId: input.externalMessageId,
      },
      { actor, organizationId: tenant.organizationId, environmentId: tenant.environmentId },
    );
    await this.applied(r.position);
    const delivery = r.state.messages.get(messageId)!.delivery!;
    return { messageId, status: delivery.status, recordedAt: delivery.reportedAt };
  }

  /**
   * Patterns.caseThread: a command on a case's thread, answered once the conversation read model
   * has it. The case-ledger's resolve holds the thread with it before it records the resolution
   * (and lifts the hold when it records nothing); start and close are there for operations (threads
   * start on clinical_case.opened and close on clinical_case.resolved, onCaseEvent). Asks the
   * case-ledger nothing. Idempotent.
   */
  async controlCaseThread(cmd: CaseThreadControl): Promise<AppendConversationMessageReply> {
    const ctx = { actor: 'system', organizationId: cmd.organizationId, environmentId: cmd.environmentId };
    const start = { organizationId: cmd.organizationId, conversationId: cmd.conversationId, patientId: cmd.patientId };
    const command: ConversationCommand =
      cmd.control === 'start_case_thread'
        ? {
            type: 'StartConversation',
            conversationId: cmd.conversationId,
            kind: 'case',
            organizationId: cmd.organizationId,
            environmentId: cmd.environmentId,
            patientId: cmd.patientId,
          }
        : cmd.control === 'begin_close_case_thread'
          ? { type: 'BeginCaseThreadClose', environmentId: cmd.environmentId, start }
          : cmd.control === 'cancel_close_case_thread'
            ? { type: 'CancelCaseThreadClose', environmentId: cmd.environmentId, lease: cmd.lease ?? null, onlyIfExpired: false }
            : { type: 'CloseCaseThread', environmentId: cmd.environmentId, start };
    const r = await this.conversations.handle(conversationStream(cmd.conversationId), command, ctx);
    if (r.state.environmentId === cmd.environmentId) this.noteHold(cmd.conversationId, r.state);
    await this.applied(r.position);
    if (r.state.environmentId !== cmd.environmentId) throw new DomainError(404, 'NOT_FOUND', 'Conversation not found');
    return {
      id: cmd.conversationId,
      conversationId: cmd.conversationId,
      sequence: r.state.lastSequence,
      createdAt: new Date(0).toISOString(),
      duplicate: r.newEvents.length === 0,
      holdUntil: r.state.closing && !r.state.closed ? r.state.closing.until : null,
    };
  }

  /**
   * Case facts from the case-ledger (its relayed events): a case opens its thread; a resolution
   * closes it to patients for good, which this app reports on Topics.conversationEvents (the relayed
   * CaseThreadClosed) and the resolve's answer waits for. Asks the case-ledger nothing.
   */
  async onCaseEvent(m: IntegrationMessage<{ caseId?: string; patientId?: string }>): Promise<void> {
    const envId = m.metadata.environmentId;
    const orgId = m.metadata.organizationId;
    const caseId = m.data?.caseId;
    if (!envId || !orgId || !isUuid(caseId)) return;
    const ctx = { actor: 'system', organizationId: orgId, environmentId: envId, causationId: m.metadata.eventId, correlationId: m.metadata.correlationId };
    try {
      if (m.type === IntegrationEventTypes.caseOpened) {
        await this.conversations.handle(
          conversationStream(caseId),
          { type: 'StartConversation', conversationId: caseId, kind: 'case', organizationId: orgId, environmentId: envId, patientId: m.data.patientId ?? null },
          ctx,
        );
      } else if (m.type === IntegrationEventTypes.caseResolved) {
        const r = await this.conversations.handle(
          conversationStream(caseId),
          { type: 'CloseCaseThread', environmentId: envId, start: { organizationId: orgId, conversationId: caseId, patientId: m.data.patientId ?? null } },
          ctx,
        );
        if (r.state.environmentId === envId) this.noteHold(caseId, r.state);
      }
    } catch (err) {
      if (err instanceof DomainError) return;
      throw err;
    }
  }
}
