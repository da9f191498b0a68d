import { randomUUID } from 'node:crypto';
import { Inject, Injectable } from '@nestjs/common';
import { HttpAdapterHost } from '@nestjs/core';
import { CLOCK, Clock } from '@svc/clock';
import { CommandHandler, DomainError, EVENT_STORE, EventStore, toDomainEvent } from '@svc/eventstore';
import { getLogger } from '@svc/http';
import { AnyClientProxy, BUS_CLIENT, OpenClinicalCaseCommand, OpenClinicalCaseReply, Patterns, ask, creditRefused } from '@svc/messaging';
import { CONFIG, MAILER, Mailer, ServiceConfig } from '@svc/platform';
import { KEYRING, Keyring, safeEqual, sha256Hex } from '@svc/security';
import { CaseOpenDoc, CheckInTimerDoc, DispatchDoc } from '../read-model/pathway.projection';
import { CheckInState, EMERGENCY_GUIDANCE, checkInDecider, nextQuestion, tokenRefused } from '../domain/check-in';
import { PatientEvent, PatientState } from '../domain/patient';
import { Question } from '../domain/protocol';
import { checkInStream, patientStream, protocolStream } from '../domain/streams';
import { PathwayService, Tenancy } from './pathway.service';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
/** How long a billing usage query may take before the check-in goes out as not paused. */
const USAGE_TIMEOUT_MS = 1000;
/** How long a check-in answer waits for the case-ledger before answering without the reference. */
const CASE_TIMEOUT_MS = 5000;

/** How long a staff "send now" waits for its email before answering anyway (the send is recorded either way). */
const SEND_NOW_WAIT_MS = 5000;

/** Check-in scheduling, dispatch (email), the patient-side flow and opening cases. */
@Injectable()
export class CheckInsService {
  readonly checkIns: CommandHandler<Parameters<typeof checkInDecider.decide>[0], Parameters<typeof checkInDecider.evolve>[1], CheckInState>;
  private readonly log = getLogger();

  constructor(
    @Inject(EVENT_STORE) store: EventStore,
    @Inject(CLOCK) private readonly clock: Clock,
    @Inject(KEYRING) private readonly keyring: Keyring,
    @Inject(MAILER) private readonly mailer: Mailer,
    @Inject(BUS_CLIENT) private readonly bus: AnyClientProxy,
    @Inject(CONFIG) private readonly config: ServiceConfig,
    private readonly pathway: PathwayService,
    private readonly adapterHost: HttpAdapterHost,
  ) {
    this.checkIns = new CommandHandler(store, checkInDecider, () => clock.now(), { maxRetries: 50 });
  }

  /**
   * The single-use token of a check-in, derived with a key of its own (only its hash is stored):
   * not the external-ID keyed hash, which an API key holder could make appear in a stream name by
   * enrolling a chosen external ID.
   */
  token(environmentId: string, checkInId: string): string {
    return this.keyring.purposeHash('check-in-token', environmentId, checkInId);
  }

  /** The earlier derivation: only to re-send the link of a check-in issued with it. */
  private legacyToken(environmentId: string, checkInId: string): string {
    return this.keyring.keyedHash(environmentId, `check-in-token:${checkInId}`);
  }

  /**
   * `${WIDGET_BASE_URL}` or, by default, the service's own base URL (`http://localhost:<port>/api`,
   * docs/decisions.md, "Check-in links"), where `GET /check-ins/{checkInId}?token=` answers the link.
   */
  widgetBaseUrl(): string {
    if (this.config.widgetBaseUrl) return this.config.widgetBaseUrl.replace(/\/$/, '');
    let port = this.config.port;
    try {
      const address = this.adapterHost.httpAdapter?.getHttpServer()?.address() as { port?: number } | null;
      if (address?.port) port = address.port;
    } catch {
      /* not listening (yet) */
    }
    return `http://localhost:${port}/api`;
  }

  /**
   * Reserves the credit of a check-in about to be sent (Patterns.reserveCredit): true when usage is
   * paused (no credit left in the month). Reservations are decided one at a time in billing, so
   * check-ins sent at the same moment cannot together go past the plan.
   */
  usagePaused(organizationId: string, environmentId: string | null, checkInId: string): Promise<boolean> {
    return creditRefused(this.bus, { organizationId, environmentId, source: 'check_in', sourceId: checkInId }, USAGE_TIMEOUT_MS);
  }

  // ---- scheduling ----

  /** Timer handler: a scheduled check-in is due. */
  async fireScheduled(timer: CheckInTimerDoc): Promise<void> {
    const stream = patientStream(timer.patientId);
    const { state } = await this.pathway.patients.load(stream);
    // A stale timer (cancelled, fired or replaced) is left alone: the event that made it stale
    // removes its document through the projection (a rebuild gives the same documents).
    if (state.status !== 'active' || state.scheduled?.checkInId !== timer.id) return;
    const paused = await this.usagePaused(state.organizationId!, state.environmentId, timer.id);
    const r = await this.pathway.patients.handle(
      stream,
      { type: 'FireScheduledCheckIn', checkInId: timer.id, paused, nextCheckInId: randomUUID() },
      { actor: 'system', organizationId: state.organizationId, environmentId: state.environmentId },
    );
    if (r.newEvents.length === 0) return;
    // The email goes out through the dispatch timer the projection puts for CheckInSent (one sending path).
    await this.pathway.applied(r.position);
  }

  /** Staff: a check-in now, outside the cadence. */
  async sendNow(tenancy: Tenancy, patientId: string, actor: string): Promise<{ checkInId: string }> {
    if (!UUID.test(patientId)) throw new DomainError(404, 'NOT_FOUND', 'Patient not found');
    const stream = patientStream(patientId);
    const { state } = await this.pathway.patients.load(stream);
    if (state.status === 'none' || state.environmentId !== tenancy.environmentId) throw new DomainError(404, 'NOT_FOUND', 'Patient not found');
    const checkInId = randomUUID();
    // Only a check-in that would be sent reserves a credit: for a patient who is not active the
    // decider refuses it (409 OUT_OF_ORDER) and nothing may be charged.
    if (state.status === 'active' && (await this.usagePaused(tenancy.organizationId, tenancy.environmentId, checkInId)))
      throw new DomainError(409, 'USAGE_PAUSED', 'Check-ins are paused: the month’s credits are used up');
    const r = await this.pathway.patients.handle(stream, { type: 'SendCheckInNow', checkInId }, { actor, ...tenancy });
    await this.pathway.applied(r.position);
    // The dispatch timer (due now) is the durable sending path; the answer runs the same dispatch
    // itself, so that when the 201 is sent the email is out and the check-in's link works. Of this
    // and a timer tick, the claim in the check-in stream lets one mail. If it fails here, the send
    // is recorded all the same and the timer retries it: still 201.
    // Bounded (SEND_NOW_WAIT_MS): a slow mail server must not hold the staff request for minutes;
    // past it the answer goes and the send finishes behind it. If a timer tick won the claim, this
    // waits (within the same bound) for that tick's send to be recorded.
    const until = Date.now() + SEND_NOW_WAIT_MS;
    const sent = async (): Promise<void> => {
      await this.dispatch({ id: checkInId, dueAt: this.clock.now().toISOString(), patientId });
      while (Date.now() < until && !(await this.checkIns.load(checkInStream(checkInId))).state.sent) await new Promise((r) => setTimeout(r, 20));
    };
    let timer: NodeJS.Timeout | undefined;
    try {
      await Promise.race([sent(), new Promise<void>((resolve) => (timer = setTimeout(resolve, SEND_NOW_WAIT_MS)))]);
    } catch (err) {
      this.log.warn({ checkInId, error: (err as Error)?.name }, 'check-in dispatch failed; the dispatch timer retries it');
    } finally {
      clearTimeout(timer);
    }
    return { checkInId };
  }

  /**
   * Dispatch of a sent check-in, the handler of the dispatch timer (the only sending path, so a crash
   * never loses it): opens the check-in stream with the protocol's questions and the token hash,
   * claims the send, emails the link (same id on every attempt), then records `check_in.sent` (which
   * removes the dispatch document).
   */
  async dispatch(doc: DispatchDoc): Promise<void> {
    // In the patient stream's turn: a cancellation is decided either before this dispatch (and the
    // check-in is voided, never mailed) or after the email went out, never while it is on its way;
    // so no check-in email follows a cancellation's 202.
    await this.pathway.patients.exclusive(patientStream(doc.patientId), async (turn) => {
      const { state, events } = await turn.load();
      const history = events.map((e) => toDomainEvent<PatientEvent>(e));
      const at = history.findIndex((e) => e.type === 'CheckInSent' && e.checkInId === doc.id);
      if (at < 0) return;
      const sent = history[at] as Extract<PatientEvent, { type: 'CheckInSent' }>;
      const ctx = { actor: 'system', organizationId: sent.organizationId, environmentId: sent.environmentId };
      if (history.slice(at + 1).some((e) => e.type === 'PatientCancelled')) {
        // Cancelled after the check-in was decided and before it was mailed (or while a crashed
        // dispatch held the claim): it is not sent now (VoidCheckIn is a no-op once it was).
        const r = await this.checkIns.handle(checkInStream(sent.checkInId), { type: 'VoidCheckIn' }, ctx);
        await this.pathway.applied(r.position);
        return;
      }
      await this.mailCheckIn(state, sent, ctx);
    });
  }

  private async mailCheckIn(
    state: PatientState,
    sent: Extract<PatientEvent, { type: 'CheckInSent' }>,
    ctx: { actor: string; organizationId: string; environmentId: string },
  ): Promise<void> {
    const { state: protocolState } = await this.pathway.protocols.load(protocolStream(sent.protocolId));
    const protocol = protocolState.protocol;
    if (!protocol) throw new Error('protocol of a check-in is missing');
    const fresh = this.token(sent.environmentId, sent.checkInId);
    const issued = await this.checkIns.handle(
      checkInStream(sent.checkInId),
      {
        type: 'IssueCheckIn',
        checkInId: sent.checkInId,
        patientId: sent.patientId,
        organizationId: sent.organizationId,
        environmentId: sent.environmentId,
        protocolId: sent.protocolId,
        questions: protocol.questions,
        redFlags: protocol.redFlags,
        tokenHash: sha256Hex(fresh),
      },
      ctx,
    );
    // A check-in issued before the derivation changed keeps its token (its hash is what is stored).
    const legacy = this.legacyToken(sent.environmentId, sent.checkInId);
    const token = issued.state.tokenHash === sha256Hex(legacy) ? legacy : fresh;
    // Claim the send in the check-in stream (expected revision): of two dispatchers (two ticks, two
    // replicas) only one mails. A crash after the claim and before check_in.sent means the email is
    // sent again once the claim's lease ends, with the same id (at least once, deduped by Message-ID).
    const emailId = `check-in-${sent.checkInId}`;
    const claim = await this.checkIns.handle(checkInStream(sent.checkInId), { type: 'ClaimSend', emailId }, ctx);
    if (claim.newEvents.length === 0) return;
    const email = state.profile.email;
    const sentAt = this.clock.now();
    if (email) {
      const link = `${this.widgetBaseUrl()}/check-ins/${sent.checkInId}?token=${token}`;
      // No clinical content, no name: a link only.
      const text = `Hello,\n\nIt is time for your regular check-in with your care team. It takes a minute:\n\n${link}\n\nThe link works once. If you need urgent help, call your local emergency number.\n`;
      const html = `<p>Hello,</p><p>It is time for your regular check-in with your care team. It takes a minute:</p><p><a href="${link}">Start my check-in</a></p><p>The link works once. If you need urgent help, call your local emergency number.</p>`;
      await this.mailer.send({ id: emailId, to: email, subject: 'Your check-in is ready', text, html }, sentAt);
    }
    const r = await this.checkIns.handle(checkInStream(sent.checkInId), { type: 'MarkSent', sentAt: sentAt.toISOString() }, ctx);
    await this.pathway.applied(r.position);
  }

  // ---- patient side ----

  /**
   * The check-in, for the holder of its token. Only an open one unless `closedToo`: answers and
   * completions go on to the decider, which recognises a retry of the request that closed the
   * check-in and refuses anything else (401, the link was used).
   */
  private async loadForPatient(checkInId: string, token: string | undefined, closedToo = false): Promise<CheckInState> {
    if (!UUID.test(checkInId)) throw new DomainError(404, 'NOT_FOUND', 'Check-in not found');
    const { state } = await this.checkIns.load(checkInStream(checkInId));
    if (state.status === 'none') throw new DomainError(404, 'NOT_FOUND', 'Check-in not found');
    // A check-in voided before it was issued has no token at all: every link to it is refused.
    if (state.status === 'voided' || state.tokenHash === null) throw tokenRefused();
    if (typeof token !== 'string' || !token || !safeEqual(sha256Hex(token), state.tokenHash)) throw tokenRefused();
    if (state.status !== 'open' && !closedToo) throw tokenRefused();
    return state;
  }

  async view(checkInId: string, token: string | undefined): Promise<{ checkInId: string; questions: Question[]; answered: Record<string, unknown> }> {
    const state = await this.loadForPatient(checkInId, token);
    return { checkInId, questions: state.questions, answered: state.answers };
  }

  async answer(checkInId: string, token: string, questionKey: string, value: unknown) {
    const state = await this.loadForPatient(checkInId, token, true);
    const r = await this.checkIns.handle(
      checkInStream(checkInId),
      { type: 'RecordAnswer', questionKey, value },
      { actor: `patient:${state.patientId}`, organizationId: state.organizationId, environmentId: state.environmentId },
    );
    await this.pathway.applied(r.position);
    if (r.state.status === 'stopped') {
      const caseReference = await this.openCase(checkInId);
      return { next: null, emergency: true, guidance: EMERGENCY_GUIDANCE, ...(caseReference ? { caseReference } : {}) };
    }
    return { next: nextQuestion(r.state), emergency: false };
  }

  async complete(checkInId: string, token: string, notes: string | undefined) {
    const state = await this.loadForPatient(checkInId, token, true);
    const r = await this.checkIns.handle(
      checkInStream(checkInId),
      { type: 'CompleteCheckIn', notes },
      { actor: `patient:${state.patientId}`, organizationId: state.organizationId, environmentId: state.environmentId },
    );
    await this.pathway.applied(r.position);
    if (r.state.outcome !== 'case_opened') return { outcome: 'no_action' as const };
    const caseReference = await this.openCase(checkInId);
    return { outcome: 'case_opened' as const, ...(caseReference ? { caseReference } : {}) };
  }

  /**
   * Asks the case-ledger to open the check-in's case (requestId = checkInId: idempotent) and links
   * it. Never throws: on failure the case-open timer (kept until CaseLinked) retries.
   */
  async openCase(checkInId: string): Promise<string | null> {
    try {
      return await this.openCaseOrThrow(checkInId);
    } catch (err) {
      this.log.warn(
        { error: (err as { code?: string; name?: string })?.code ?? (err as Error)?.name ?? 'error' },
        'opening a check-in case failed; will retry',
      );
      return null;
    }
  }

  async openCaseOrThrow(checkInId: string): Promise<string | null> {
    const { state } = await this.checkIns.load(checkInStream(checkInId));
    if (state.caseLink) return state.caseLink.reference;
    const req = state.caseRequest;
    if (!req) return null;
    const command: OpenClinicalCaseCommand = {
      requestId: checkInId,
      organizationId: state.organizationId!,
      environmentId: state.environmentId!,
      patientId: state.patientId!,
      source: 'check_in',
      priority: req.priority,
      patientNotes: req.patientNotes,
      symptomScores: req.symptomScores,
      matchedRules: req.matchedRules,
      stoppedEarly: req.stoppedEarly,
      actor: `patient:${state.patientId}`,
    };
    const reply = await ask<OpenClinicalCaseReply>(this.bus, Patterns.openClinicalCase, command, { timeoutMs: CASE_TIMEOUT_MS });
    const r = await this.checkIns.handle(
      checkInStream(checkInId),
      { type: 'LinkCase', caseId: reply.caseId, reference: reply.reference },
      { actor: 'system', organizationId: state.organizationId, environmentId: state.environmentId },
    );
    await this.pathway.applied(r.position);
    return reply.reference;
  }

  /** Timer handler of the case-open documents. */
  async retryCaseOpen(doc: CaseOpenDoc): Promise<void> {
    try {
      await this.openCaseOrThrow(doc.id);
    } catch (err) {
      const refusal = permanentRefusal(err);
      if (!refusal) throw err; // transient (5xx, NO_HANDLER, timeout): the timer fires again
      // A 4xx will not change by retrying: record it (the event removes the timer) and stop.
      this.log.warn({ status: refusal.status, error: refusal.code }, 'the case-ledger refused a check-in case; not retrying');
      const { state } = await this.checkIns.load(checkInStream(doc.id));
      const r = await this.checkIns.handle(
        checkInStream(doc.id),
        { type: 'RecordCaseOpenFailure', ...refusal },
        { actor: 'system', organizationId: state.organizationId, environmentId: state.environmentId },
      );
      await this.pathway.applied(r.position);
    }
  }
}

/** A refusal from the case-ledger that retrying cannot fix: a 4xx (a 503 NO_HANDLER or a 5xx is transient). */
export function permanentRefusal(err: unknown): { status: number; code: string } | null {
  const e = err as { status?: unknown; code?: unknown } | null;
  if (!e || typeof e.status !== 'number') return null;
  if (e.status < 400 || e.status >= 500) return null;
  return { status: e.status, code: typeof e.code === 'string' ? e.code : 'ERROR' };
}
