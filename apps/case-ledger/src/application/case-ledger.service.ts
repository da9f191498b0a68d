// Over 400 lines: the case-ledger's one command-handler path: every case command, its checks and its read-your-writes wait.
import { randomBytes, randomUUID } from 'node:crypto';
import { Inject, Injectable } from '@nestjs/common';
import { v5 as uuidv5 } from 'uuid';
import { CLOCK, Clock } from '@svc/clock';
import { CommandContext, CommandHandler, DomainError, EVENT_STORE, EventStore, HandleResult } from '@svc/eventstore';
import { ApiError, ListCursors, PagePosition, WidgetSessionContext, currentPatientLink, getLogger, isUuid, toRfc3339 } from '@svc/http';
import {
  AnyClientProxy,
  AppendConversationMessageCommand,
  AppendConversationMessageReply,
  BUS_CLIENT,
  CaseStatusReply,
  CaseThreadClosedFact,
  CaseThreadCommand,
  CaseThreadFacts,
  IntegrationMessage,
  OpenClinicalCaseCommand,
  OpenClinicalCaseReply,
  PatientContactReply,
  Patterns,
  ask,
} from '@svc/messaging';
import { CONFIG, MAILER, Mailer, PROJECTIONS, ServiceConfig } from '@svc/platform';
import { ProjectionRunner, READ_STORE, ReadStore } from '@svc/read-store';
import { KEYRING, Keyring } from '@svc/security';
import { CASES, CASE_PROJECTION, CaseDoc, NotifyTimerDoc } from '../read-model/case.projection';
import { PATIENT_CASES, PATIENT_CASES_PROJECTION, PatientCaseDoc, patientCasesPartition } from '../read-model/patient-cases.projection';
import { CaseCommand, CaseEvent, CaseState, ResolutionOutcome, UpdateResult, UpdateStatus, caseDecider, caseStream, referenceFrom } from '../domain/case';
import { emergencyKinds } from '@svc/clinical';
import { bodyHash } from '@svc/security';

/** Namespace of case ids derived from (environmentId, requestId): first writer wins. */
const CASE_ID_NAMESPACE = '8f0c3a8e-6a0e-4f53-9a53-4c6f1f1a2b10';
/**
 * Namespace of the thread requestId of a provider message: uuid v5 of `provider:<messageId>`, so
 * a provider messageId can never collide with a caller's inbound requestId in the same thread.
 */
const PROVIDER_REQUEST_NAMESPACE = '3b6f2d4c-91a7-5e02-8c4d-7a1e9f0b6c35';
export const providerRequestId = (messageId: string) => uuidv5(`provider:${messageId}`, PROVIDER_REQUEST_NAMESPACE);

/**
 * How long (real time: an operational wait) a `resolved` update waits for the conversation app's
 * fact that the case's thread is closed (it closes the thread when the relayed clinical_case.resolved
 * reaches it, normally within milliseconds) before it answers 503: the resolution stays recorded,
 * the thread keeps holding patient messages, and an identical retry waits again.
 */
const THREAD_CLOSE_WAIT_MS = 3_000;

/** A resolve of this process between its hold on the case thread and its recorded outcome. */
interface ResolveInFlight {
  done: Promise<void>;
  finish(): void;
}

/** Resolves when the case's thread is noted closed (or is cancelled). */
interface CloseSignal {
  closed: Promise<void>;
  cancel(): void;
}

export interface CaseUpdateInput {
  updateId: string;
  sequence: number;
  status: UpdateStatus;
  externalReference: string;
  scheduledFor?: string | null;
  resolutionOutcome?: ResolutionOutcome | null;
  resolutionNote?: string | null;
}

export interface ProviderMessageInput {
  messageId: string;
  message: string;
  externalReference: string;
}

/** GET progress body (spec "Case progress"). */
export interface ProgressView {
  caseId: string;
  status: CaseDoc['status'];
  sequence: number;
  nextSequence: number;
  confirmationOverdue: boolean;
  confirmationDueAt: string;
  transportDelivered: boolean;
  scheduledFor: string | null;
  externalReference: string | null;
  updatedAt: string;
}

export interface Tenant {
  organizationId: string;
  environmentId: string;
}

/** Case-ledger use cases: every write through the case decider, answered after the read model has it. */
@Injectable()
export class CaseLedgerService {
  private readonly cases: CommandHandler<CaseCommand, CaseEvent, CaseState>;
  private readonly log = getLogger();
  /** Decrypted progress views by `environmentId:caseId`, valid while the case document's read-store generation is unchanged. */
  private readonly progressViews = new Map<string, { gen: number; processed: boolean; dueAtMs: number; view: ProgressView }>();
  private static readonly MAX_PROGRESS_VIEWS = 10_000;
  constructor(
    @Inject(EVENT_STORE) private readonly store: EventStore,
    @Inject(CLOCK) private readonly clock: Clock,
    @Inject(PROJECTIONS) private readonly projections: ProjectionRunner,
    @Inject(READ_STORE) private readonly readStore: ReadStore,
    @Inject(KEYRING) private readonly keyring: Keyring,
    @Inject(BUS_CLIENT) private readonly bus: AnyClientProxy,
    @Inject(MAILER) private readonly mailer: Mailer,
    @Inject(CONFIG) private readonly config: ServiceConfig,
  ) {
    this.cases = new CommandHandler(store, caseDecider, () => clock.now(), { maxRetries: 100, rememberStates: 10_000 });
    this.cursors = new ListCursors(keyring);
  }

  private readonly cursors: ListCursors;

  /**
   * Every write to a case stream: the generic command handler, which remembers the folded state of
   * the streams it wrote last (`rememberStates`: no read and no fold of the whole stream per
   * update; a guess the append's revision check confirms, see CommandHandlerOptions).
   */
  private handleCase(caseId: string, command: CaseCommand, ctx: CommandContext): Promise<HandleResult<CaseEvent, CaseState>> {
    return this.cases.handle(caseStream(caseId), command, ctx);
  }

  private async applied(position: number): Promise<void> {
    if (position > 0) await this.projections.waitFor([CASE_PROJECTION], position);
  }

  /** A command decided nothing (a duplicate): make sure the read model has what the stream has. */
  private async caughtUp(): Promise<void> {
    await this.applied(await this.store.headPosition());
  }

  async open(cmd: OpenClinicalCaseCommand): Promise<OpenClinicalCaseReply> {
    const caseId = uuidv5(`${cmd.environmentId}:${cmd.requestId}`, CASE_ID_NAMESPACE);
    const r = await this.handleCase(
      caseId,
      {
        type: 'OpenCase',
        caseId,
        requestId: cmd.requestId,
        // Idempotency fingerprint of the whole command (the "idempotency lives in the streams" rule): the same requestId with another body is 409.
        bodyHash: bodyHash({ ...cmd, internalNote: cmd.internalNote ?? null }),
        organizationId: cmd.organizationId,
        environmentId: cmd.environmentId,
        patientId: cmd.patientId,
        reference: referenceFrom(randomBytes(8)),
        priority: cmd.priority,
        source: cmd.source,
        patientNotes: cmd.source === 'staff_chat' ? '' : cmd.patientNotes,
        symptomScores: cmd.source === 'staff_chat' ? {} : (cmd.symptomScores ?? {}),
        matchedRules: cmd.matchedRules ?? [],
        stoppedEarly: cmd.stoppedEarly ?? false,
        internalNote: cmd.internalNote ?? null,
        actor: cmd.actor,
      },
      { actor: cmd.actor, organizationId: cmd.organizationId, environmentId: cmd.environmentId },
    );
    if (r.newEvents.length) await this.applied(r.position);
    else await this.caughtUp();
    // The case's thread is the conversation app's: it starts it when the relayed clinical_case.opened
    // reaches it, and a request for the thread before that starts it from caseStatus(), so the thread
    // works as soon as this answers without the open asking the conversation app anything.
    return { caseId, reference: r.state.reference!, priority: r.state.priority!, duplicate: r.newEvents.length === 0 };
  }

  /**
   * The resolve's hold on the case thread and its release (request/reply, only from the resolve's
   * HTTP request: it waits for the hold before it records the resolution; the conversation's
   * handler asks the case-ledger nothing). Never sent from a bus handler of this app.
   */
  private async caseThread(
    control: Extract<CaseThreadCommand['control'], 'begin_close_case_thread' | 'cancel_close_case_thread'>,
    tenant: Tenant,
    caseId: string,
    patientId: string | null,
    lease?: string | null,
  ): Promise<AppendConversationMessageReply> {
    const cmd: CaseThreadCommand = {
      control,
      organizationId: tenant.organizationId,
      environmentId: tenant.environmentId,
      conversationId: caseId,
      kind: 'case',
      patientId,
      ...(lease ? { lease } : {}),
    };
    return ask<AppendConversationMessageReply>(this.bus, Patterns.caseThread, cmd, { timeoutMs: 10_000 });
  }

  /** A clinical request from the team chat channel (source staff_chat). */
  /**
   * A staff clinical request (docs/decisions.md, "Staff cases need a known patient"). The patient must exist in the environment (enrolled
   * now or earlier, cancelled included): asked of the patient-pathway before anything is written.
   * Unknown there (or another environment's): 404. The pathway not answering (bus error, timeout,
   * no handler): 503 with retry-after, nothing written. Cases opened over the bus by other
   * contexts carry a patientId those contexts already know and are not asked again.
   */
  async openFromStaff(tenant: Tenant, staffSub: string, input: { patientId: string; request: string }) {
    const contact = await ask<PatientContactReply | null, never>(
      this.bus,
      Patterns.patientContact,
      { environmentId: tenant.environmentId, patientId: input.patientId },
      {
        timeoutMs: 5000,
        onError: (err) => {
          this.log.warn(
            { environmentId: tenant.environmentId, error: (err as { code?: string })?.code ?? (err as Error)?.name },
            'staff case: patient lookup failed',
          );
          throw new ApiError(503, 'UNAVAILABLE', 'The patient directory is not reachable; retry shortly', undefined, { 'retry-after': '1' });
        },
      },
    );
    if (typeof contact?.known !== 'boolean') {
      this.log.warn({ environmentId: tenant.environmentId }, 'staff case: patient lookup gave no answer');
      throw new ApiError(503, 'UNAVAILABLE', 'The patient directory is not reachable; retry shortly', undefined, { 'retry-after': '1' });
    }
    if (!contact.known) throw ApiError.notFound('Patient');
    const kinds = emergencyKinds(input.request);
    const r = await this.open({
      requestId: randomUUID(),
      organizationId: tenant.organizationId,
      environmentId: tenant.environmentId,
      patientId: input.patientId,
      source: 'staff_chat',
      priority: kinds.length ? 'emergency' : 'urgent',
      patientNotes: '',
      symptomScores: {},
      matchedRules: ['staff_request:chat', ...kinds.map((k) => `emergency_terms:${k}`)],
      stoppedEarly: false,
      internalNote: input.request,
      actor: `staff:${staffSub}`,
    });
    return { caseId: r.caseId, reference: r.reference, priority: r.priority };
  }

  private async doc(environmentId: string, caseId: string): Promise<CaseDoc> {
    if (!isUuid(caseId)) throw ApiError.notFound('Clinical case');
    const doc = await this.readStore.get<CaseDoc>(CASES, caseId);
    if (!doc || doc.environmentId !== environmentId || !doc.patientId) throw ApiError.notFound('Clinical case');
    return doc;
  }

  private dec(env: string, v: string | null): string | null {
    return v === null ? null : this.keyring.decrypt(env, v);
  }

  private overdue(doc: CaseDoc): boolean {
    return doc.processedAt === null && this.clock.now().getTime() > Date.parse(doc.confirmationDueAt);
  }

  async progress(tenant: Tenant, caseId: string): Promise<ProgressView> {
    // In-memory progress views (decrypted), each tagged with the read store's generation of the
    // case document read before the document: used only while that generation is unchanged.
    // The case projection's commit bumps it before any update is answered (the "read-your-writes" rule), so a view is
    // never older than the last answered write. Only with a read store that can tell (SQLite);
    // keyed by environment and case (the "tenancy in every key" rule); refusals (404) are not cached.
    const store = this.readStore.documentGeneration ? this.readStore : null;
    const gen = store ? store.documentGeneration!(CASES, caseId) : 0;
    const key = `${tenant.environmentId}:${caseId}`;
    let hit = store ? this.progressViews.get(key) : undefined;
    if (hit && hit.gen !== gen) {
      this.progressViews.delete(key);
      hit = undefined;
    }
    if (!hit) {
      const doc = await this.doc(tenant.environmentId, caseId);
      hit = {
        gen,
        processed: doc.processedAt !== null,
        dueAtMs: Date.parse(doc.confirmationDueAt),
        view: {
          caseId: doc.caseId,
          status: doc.status,
          sequence: doc.sequence,
          nextSequence: doc.sequence + 1,
          confirmationOverdue: false,
          confirmationDueAt: doc.confirmationDueAt,
          transportDelivered: doc.transportDelivered,
          scheduledFor: doc.scheduledFor,
          externalReference: this.dec(doc.environmentId, doc.encExternalReference),
          updatedAt: doc.updatedAt,
        },
      };
      if (store) {
        if (this.progressViews.size >= CaseLedgerService.MAX_PROGRESS_VIEWS) this.progressViews.delete(this.progressViews.keys().next().value as string);
        this.progressViews.set(key, hit);
      }
    }
    // The clock is read on every request (the "one clock" rule): overdue is never cached.
    return { ...hit.view, confirmationOverdue: !hit.processed && this.clock.now().getTime() > hit.dueAtMs };
  }

  private ctx(tenant: Tenant, actor: string) {
    return { actor, organizationId: tenant.organizationId, environmentId: tenant.environmentId };
  }

  private notFoundIfBadId(caseId: string): void {
    if (!isUuid(caseId)) throw ApiError.notFound('Clinical case');
  }

  async update(tenant: Tenant, actor: string, caseId: string, input: CaseUpdateInput): Promise<UpdateResult & { duplicate: boolean }> {
    this.notFoundIfBadId(caseId);
    const hash = bodyHash(input);
    const command: CaseCommand = {
      type: 'UpdateCase',
      environmentId: tenant.environmentId,
      updateId: input.updateId,
      bodyHash: hash,
      sequence: input.sequence,
      status: input.status,
      externalReference: input.externalReference,
      scheduledFor: input.scheduledFor == null ? null : toRfc3339(input.scheduledFor),
      resolutionOutcome: input.resolutionOutcome ?? null,
      resolutionNote: input.resolutionNote ?? null,
    };
    const ctx = this.ctx(tenant, actor);
    const { result: r, closing } =
      input.status === 'resolved' ? await this.resolve(tenant, caseId, command, ctx) : { result: await this.handleUpdate(caseId, command, ctx), closing: null };
    const duplicate = r.newEvents.length === 0;
    if (duplicate) await this.caughtUp();
    else await this.applied(r.position);
    if (r.state.status === 'resolved' && r.state.updates.get(input.updateId)!.result.status === 'resolved') {
      // The resolve answers only once the thread refuses patient messages for good (an identical
      // retry waits again): the conversation app closes it and reports it (onConversationEvent).
      if (!(await this.threadClosed(caseId, r.state, closing))) {
        this.log.warn({ caseId }, 'case resolve: thread not reported closed in time');
        throw new ApiError(503, 'UNAVAILABLE', 'The case is resolved but its thread could not be closed yet; retry with the same updateId', undefined, {
          'retry-after': '1',
        });
      }
    } else closing?.cancel();
    return { ...r.state.updates.get(input.updateId)!.result, duplicate };
  }

  /** Resolves in flight in this process, by case id (docs/decisions.md, "Case threads without synchronous cycles"). */
  private readonly resolvesInFlight = new Map<string, ResolveInFlight>();
  /** Waiting for a case's thread to be noted closed, by case id. */
  private readonly closeWaiters = new Map<string, Set<() => void>>();

  /**
   * Any update but a resolving one: decided after a resolve of the case in flight here has its
   * outcome (updates of a case are decided in the order they came, a resolve's steps included).
   */
  private async handleUpdate(caseId: string, command: CaseCommand, ctx: CommandContext): Promise<HandleResult<CaseEvent, CaseState>> {
    for (;;) {
      const r = await this.cases.exclusive(caseStream(caseId), (turn) =>
        this.resolvesInFlight.has(caseId) ? Promise.resolve(null) : turn.handle(command, ctx),
      );
      if (r) return r;
      await this.resolvesInFlight.get(caseId)?.done;
    }
  }

  /**
   * A `resolved` update. Decided first in the case stream's turn, on the stream as it stands (the
   * decider is pure): a resolve that is refused, or a retry, is answered at once and never holds the
   * thread. One that resolves the case is in flight from that turn on (other updates of the case
   * wait for its outcome; caseStatus() answers `resolving`), and outside any turn the thread is held
   * (`begin_close_case_thread`, request/reply: this HTTP request waits for the hold before it records
   * anything), then the resolution is recorded, so no patient message is taken after it. The close
   * itself is the conversation app's reaction to the relayed clinical_case.resolved; update()
   * answers once its fact is noted. Holding the thread fails: 503, nothing recorded. The in-flight
   * record lives in this process: one case-ledger process writes the case streams (deploy runs one
   * replica).
   */
  private async resolve(
    tenant: Tenant,
    caseId: string,
    command: CaseCommand,
    ctx: CommandContext,
  ): Promise<{ result: HandleResult<CaseEvent, CaseState>; closing: CloseSignal | null }> {
    for (;;) {
      const earlier = this.resolvesInFlight.get(caseId);
      if (earlier) {
        await earlier.done;
        continue;
      }
      const first = await this.cases.exclusive(caseStream(caseId), async (turn) => {
        if (this.resolvesInFlight.has(caseId)) return null;
        const { state } = await turn.load();
        let resolves = false;
        try {
          resolves = caseDecider.decide(command, state, this.clock.now()).some((e) => e.type === 'clinical_case.resolved');
        } catch {
          // Refused: the handler decides again and answers the refusal.
        }
        if (!resolves) return { result: await turn.handle(command, ctx), flight: null, patientId: null };
        let finish!: () => void;
        const flight: ResolveInFlight = { done: new Promise<void>((r) => (finish = r)), finish: () => finish() };
        this.resolvesInFlight.set(caseId, flight);
        return { result: null, flight, patientId: state.patientId };
      });
      if (!first) continue;
      if (!first.flight) return { result: first.result!, closing: null };
      try {
        return await this.holdAndRecord(tenant, caseId, command, ctx, first.patientId);
      } finally {
        if (this.resolvesInFlight.get(caseId) === first.flight) this.resolvesInFlight.delete(caseId);
        first.flight.finish();
      }
    }
  }

  private async holdAndRecord(tenant: Tenant, caseId: string, command: CaseCommand, ctx: CommandContext, patientId: string | null) {
    let hold: string | null = null;
    try {
      hold = (await this.caseThread('begin_close_case_thread', tenant, caseId, patientId)).holdUntil ?? null;
    } catch (err) {
      this.log.warn({ caseId, error: (err as { code?: string })?.code ?? (err as Error)?.name }, 'case resolve: thread hold failed');
      throw new ApiError(
        503,
        'UNAVAILABLE',
        'The case thread could not be held for the resolution; nothing was recorded; retry with the same updateId',
        undefined,
        { 'retry-after': '1' },
      );
    }
    // Listening before the resolution exists: the close's fact cannot come before it.
    const closing = this.closeSignal(caseId);
    try {
      return { result: await this.handleCase(caseId, command, ctx), closing };
    } catch (err) {
      closing.cancel();
      // Not recorded (a writer this process does not see, a store failure): lift the hold, unless
      // the case is resolved after all (the relayed resolution closes the thread). If that fails,
      // the hold's lease runs out and the next patient message settles it (caseStatus()). The
      // refusal is answered either way. The cancel names this resolve's hold: delivered late (a bus
      // retry), it lifts no other.
      try {
        if ((await this.cases.load(caseStream(caseId))).state.status !== 'resolved') {
          await this.caseThread('cancel_close_case_thread', tenant, caseId, patientId, hold);
        }
      } catch (e) {
        this.log.warn({ caseId, error: (e as { code?: string })?.code ?? (e as Error)?.name }, 'case resolve not recorded: lifting the thread hold failed');
      }
      throw err;
    }
  }

  private closeSignal(caseId: string): CloseSignal {
    let waiters = this.closeWaiters.get(caseId);
    if (!waiters) this.closeWaiters.set(caseId, (waiters = new Set()));
    const set = waiters;
    let wake!: () => void;
    const closed = new Promise<void>((r) => (wake = r));
    const waiter = () => wake();
    set.add(waiter);
    return {
      closed,
      cancel: () => {
        set.delete(waiter);
        if (set.size === 0 && this.closeWaiters.get(caseId) === set) this.closeWaiters.delete(caseId);
      },
    };
  }

  /**
   * Whether the case's thread is closed to patient messages, waiting up to THREAD_CLOSE_WAIT_MS for
   * the conversation app's fact (`closing`: a signal taken before the resolution was recorded).
   */
  private async threadClosed(caseId: string, state: CaseState, closing: CloseSignal | null): Promise<boolean> {
    if (state.threadClosed) {
      closing?.cancel();
      return true;
    }
    const signal = closing ?? this.closeSignal(caseId);
    let timer: NodeJS.Timeout | undefined;
    try {
      // A retry: the fact may have been noted after `state` was read, before the signal was taken.
      if (!closing && (await this.cases.load(caseStream(caseId))).state.threadClosed) return true;
      return await Promise.race([signal.closed.then(() => true), new Promise<boolean>((r) => (timer = setTimeout(() => r(false), THREAD_CLOSE_WAIT_MS)))]);
    } finally {
      clearTimeout(timer);
      signal.cancel();
    }
  }

  /**
   * Topics.conversationEvents: the conversation app's fact that a case's thread is closed, recorded
   * in the case stream (CaseThreadClosedNoted, idempotent there) and handed to the resolves waiting
   * for it. Asks the conversation app nothing and waits for nothing but the case's turn (whose
   * commands never wait for the conversation app). A thread that is not a case here is passed over.
   */
  async onConversationEvent(m: IntegrationMessage<Partial<CaseThreadClosedFact>>): Promise<void> {
    if (m?.type !== CaseThreadFacts.closed) return;
    const environmentId = m.metadata?.environmentId;
    const caseId = m.data?.conversationId;
    if (!environmentId || !isUuid(caseId)) return;
    try {
      const r = await this.handleCase(
        caseId,
        { type: 'NoteThreadClosed', environmentId },
        { actor: 'system', organizationId: m.metadata.organizationId, environmentId, causationId: m.metadata.eventId, correlationId: m.metadata.correlationId },
      );
      if (r.state.threadClosed) for (const wake of [...(this.closeWaiters.get(caseId) ?? [])]) wake();
    } catch (err) {
      if (err instanceof DomainError && err.status === 404) return; // a work item's thread, or another environment's
      throw err;
    }
  }

  /**
   * Patterns.caseStatus (asked by the conversation app from its HTTP paths): whether the case
   * exists in the environment (and what its thread starts with), is resolved, or is being resolved
   * by a resolve in flight here. Answered in the case stream's turn (after every command given
   * earlier for it), whose commands never wait for the conversation app: this never waits for it.
   */
  caseStatus(environmentId: string, caseId: string): Promise<CaseStatusReply> {
    return this.cases.exclusive(caseStream(caseId), async (turn) => {
      const { state } = await turn.load();
      if (!state.caseId || state.environmentId !== environmentId || !state.patientId || !state.organizationId) return { resolved: false, thread: null };
      const thread = { organizationId: state.organizationId, patientId: state.patientId };
      if (state.status === 'resolved') return { resolved: true, thread };
      return { resolved: false, resolving: this.resolvesInFlight.has(caseId), thread };
    });
  }

  async providerMessage(tenant: Tenant, actor: string, caseId: string, input: ProviderMessageInput) {
    this.notFoundIfBadId(caseId);
    const r = await this.handleCase(
      caseId,
      {
        type: 'SendProviderMessage',
        environmentId: tenant.environmentId,
        messageId: input.messageId,
        bodyHash: bodyHash(input),
        message: input.message,
        externalReference: input.externalReference,
      },
      this.ctx(tenant, actor),
    );
    const createdAt = r.state.messages.get(input.messageId)!.createdAt;
    // The thread append and the email are idempotent (requestId derived from messageId, email id
    // from it), so an identical retry completes whatever an interrupted first attempt left undone.
    const append: AppendConversationMessageCommand = {
      requestId: providerRequestId(input.messageId),
      organizationId: tenant.organizationId,
      environmentId: tenant.environmentId,
      conversationId: caseId,
      kind: 'case',
      patientId: r.state.patientId,
      sender: 'provider',
      message: input.message,
      externalMessageId: input.externalReference,
    };
    await ask<AppendConversationMessageReply, never>(this.bus, Patterns.appendConversationMessage, append, {
      timeoutMs: 10_000,
      onError: (err) => {
        this.log.warn({ caseId, error: (err as { code?: string })?.code ?? (err as Error)?.name }, 'provider message: thread append failed');
        throw new ApiError(503, 'UNAVAILABLE', 'The message could not be added to the case thread; retry with the same messageId', undefined, {
          'retry-after': '1',
        });
      },
    });
    // The patient's email is a durable follow-up: ProviderMessageAccepted put a notification timer
    // (case projection) that notifyDue fires until PatientNotified removes it.
    return { caseId, messageId: input.messageId, duplicate: r.newEvents.length === 0, createdAt };
  }

  /**
   * Fires a provider message's notification timer: the patient's email (idempotent by its id
   * `case-message-<messageId>`), then PatientNotified, which removes the timer. Any failure
   * (patient-pathway not answering, mailer error, crash) throws or stops before PatientNotified,
   * so the timer fires again. A patient without an email address is recorded as `no_email`.
   */
  async notifyDue(timer: NotifyTimerDoc): Promise<void> {
    const tenant = { organizationId: timer.organizationId, environmentId: timer.environmentId };
    const contact = await ask<PatientContactReply>(
      this.bus,
      Patterns.patientContact,
      { environmentId: timer.environmentId, patientId: timer.patientId },
      { timeoutMs: 5000 },
    );
    if (contact?.email) {
      const base = (this.config.widgetBaseUrl ?? `http://localhost:${this.config.port}/api`).replace(/\/$/, '');
      const link = `${base}/cases/${timer.caseId}`;
      await this.mailer.send(
        {
          id: `case-message-${timer.messageId}`,
          to: contact.email,
          subject: 'You have a new message from your care team',
          text: `Your care team sent you a new message. Read it in your secure care portal: ${link}\n`,
          html: `<p>Your care team sent you a new message.</p><p><a href="${link}">Read it in your secure care portal</a></p>`,
        },
        this.clock.now(),
      );
    }
    const r = await this.handleCase(
      timer.caseId,
      { type: 'RecordPatientNotified', environmentId: timer.environmentId, messageId: timer.messageId, outcome: contact?.email ? 'sent' : 'no_email' },
      this.ctx(tenant, 'system'),
    );
    if (r.newEvents.length) await this.applied(r.position);
  }

  async acknowledge(tenant: Tenant, staffSub: string, caseId: string) {
    await this.doc(tenant.environmentId, caseId);
    const r = await this.handleCase(
      caseId,
      { type: 'AcknowledgeCase', environmentId: tenant.environmentId, by: staffSub },
      this.ctx(tenant, `staff:${staffSub}`),
    );
    if (r.newEvents.length) await this.applied(r.position);
    else await this.caughtUp();
    const doc = await this.doc(tenant.environmentId, caseId);
    return { caseId, status: doc.status, acknowledgedAt: doc.acknowledgedAt };
  }

  async markTransportDelivered(m: IntegrationMessage<{ environmentId?: string; eventType?: string; caseId?: string; deliveredAt?: string }>): Promise<void> {
    const d = m.data ?? {};
    if (d.eventType !== 'clinical_case.opened' || !isUuid(d.caseId)) return;
    const environmentId = d.environmentId ?? m.metadata.environmentId;
    if (!environmentId) return;
    try {
      await this.handleCase(
        d.caseId,
        { type: 'MarkTransportDelivered', environmentId, webhookEventId: m.metadata.eventId, deliveredAt: d.deliveredAt ?? this.clock.now().toISOString() },
        { actor: 'system', organizationId: m.metadata.organizationId, environmentId, causationId: m.metadata.eventId, correlationId: m.metadata.correlationId },
      );
    } catch (err) {
      if (err instanceof DomainError && err.status === 404) return; // not one of ours
      throw err;
    }
  }

  private listItem(doc: CaseDoc) {
    return {
      caseId: doc.caseId,
      reference: doc.reference,
      patientId: doc.patientId,
      priority: doc.priority,
      source: doc.source,
      status: doc.status,
      sequence: doc.sequence,
      nextSequence: doc.sequence + 1,
      openedAt: doc.openedAt,
      confirmationDueAt: doc.confirmationDueAt,
      confirmationOverdue: this.overdue(doc),
      transportDelivered: doc.transportDelivered,
      scheduledFor: doc.scheduledFor,
      acknowledgedAt: doc.acknowledgedAt,
      resolvedAt: doc.resolvedAt,
      updatedAt: doc.updatedAt,
    };
  }

  /**
   * One page of the staff case list: newest first (opening time descending, then case id
   * descending, so cases opened in the same millisecond keep one order), at most `limit`, after
   * the position sealed in `cursor`; read as ranges of the environment's partition. `nextCursor` is
   * null at the end.
   */
  async list(tenant: Tenant, page: { limit: number; cursor?: unknown }) {
    const scope = `clinical-cases|${tenant.environmentId}`;
    let after: PagePosition | undefined = this.cursors.open(page.cursor, scope);
    const clinicalCases: ReturnType<CaseLedgerService['listItem']>[] = [];
    for (;;) {
      const read = await this.readStore.page<CaseDoc>(CASES, tenant.environmentId, { order: 'desc', limit: page.limit - clinicalCases.length, after });
      for (const e of read.entries) {
        after = { score: e.score, key: e.key };
        // A case registered but not opened yet (no patient yet) is not listed: the page reads on past it.
        if (e.doc.patientId) clinicalCases.push(this.listItem(e.doc));
      }
      if (!read.hasMore) return { clinicalCases, nextCursor: null };
      if (clinicalCases.length === page.limit) return { clinicalCases, nextCursor: this.cursors.seal(scope, after!) };
    }
  }

  /**
   * The widget's case list (`GET /widget/v1/cases`): the signed-in patient's own cases, newest
   * first, what the patient may see of each (reference, status, when). The session's patient link
   * is checked as it stands now (after patient.cancelled it links nobody); an anonymous session has
   * no cases. Read after the case read models caught up with the log, so a case whose opening was
   * answered is listed.
   */
  async patientCases(tokenSession: WidgetSessionContext, limit: number) {
    const { session } = await currentPatientLink(this.bus, tokenSession);
    if (!session.patientId) return { clinicalCases: [], hasMore: false };
    await this.projections.waitFor([CASE_PROJECTION, PATIENT_CASES_PROJECTION], await this.store.headPosition());
    const page = await this.readStore.page<PatientCaseDoc>(PATIENT_CASES, patientCasesPartition(session.environmentId, session.patientId), {
      order: 'desc',
      limit,
    });
    const docs = await Promise.all(page.entries.map((e) => this.readStore.get<CaseDoc>(CASES, e.doc.caseId)));
    const clinicalCases = docs
      .filter((d): d is CaseDoc => !!d && d.environmentId === session.environmentId && d.patientId === session.patientId)
      .map((d) => ({ caseId: d.caseId, reference: d.reference, status: d.status, openedAt: d.openedAt, resolvedAt: d.resolvedAt }));
    return { clinicalCases, hasMore: page.hasMore };
  }

  async detail(tenant: Tenant, caseId: string) {
    const doc = await this.doc(tenant.environmentId, caseId);
    const env = doc.environmentId;
    const scores = this.dec(env, doc.encSymptomScores);
    const rules = this.dec(env, doc.encMatchedRules);
    return {
      ...this.listItem(doc),
      patientNotes: this.dec(env, doc.encPatientNotes),
      symptomScores: scores ? JSON.parse(scores) : {},
      matchedRules: rules ? (JSON.parse(rules) as string[]) : [],
      stoppedEarly: doc.stoppedEarly,
      internalNote: this.dec(env, doc.encInternalNote),
      externalReference: this.dec(env, doc.encExternalReference),
      resolutionOutcome: doc.resolutionOutcome,
      resolutionNote: this.dec(env, doc.encResolutionNote),
      conversationId: doc.caseId,
    };
  }
}
