// Over 400 lines: the workflow engine's one command-handler path for runs, turns and deliveries.
import { createHash, randomUUID } from 'node:crypto';
import { Inject, Injectable } from '@nestjs/common';
import type { ClientProxy } from '@nestjs/microservices';
import { CLOCK, Clock, WALL_CLOCK, WallClock } from '@svc/clock';
import { CommandHandler, DomainError, EVENT_STORE, EventStore } from '@svc/eventstore';
import { TenantDirectory } from '@svc/access';
import { ApiError, CurrentWidgetLink, WidgetSessionContext, currentPatientLink, getLogger } from '@svc/http';
import { BUS_CLIENT, creditRefused } from '@svc/messaging';
import { CONFIG, ServiceConfig } from '@svc/platform';
import { READ_STORE, ReadStore } from '@svc/read-store';
import { bodyHash } from '@svc/security';
import { EMERGENCY_ALERTED, EMERGENCY_GUIDANCE, GENERIC_REPLY, emergencyKinds, healthQuestion, triggerMatches } from '../domain/agent';
import { Definition } from '../domain/definition';
import {
  Advance,
  CallRequest,
  CallResult,
  Patient,
  Reply,
  RunContext,
  RunState,
  advance,
  giveCallResult,
  giveInput,
  startRun,
  switchedOff,
} from '../domain/engine';
import { runDecider, runStream } from '../domain/run';
import { widgetTurnDecider, widgetTurnStream } from '../domain/widget-turn';
import { WorkflowState, workflowStream } from '../domain/workflow';
import { WorkflowCollections } from '../read-model/workflow.projection';
import { DESTINATION_CLIENT, DestinationClientPort } from './destination-client.port';
import { DeliveriesService, DeliveryResult } from './deliveries.service';
import { CaseRequest } from '../domain/delivery';
import { Actor, Scope, WorkflowsService } from './workflows.service';
import { SwitchOffGate } from './switch-off-gate';

/** A uuid-shaped id derived from a value (stable ids for idempotent bus commands). */
export function derivedUuid(value: string): string {
  const h = createHash('sha256').update(value).digest('hex');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-5${h.slice(13, 16)}-${((parseInt(h[16], 16) & 0x3) | 0x8).toString(16)}${h.slice(17, 20)}-${h.slice(20, 32)}`;
}

interface CallTrace {
  request: { method: string; url: string; headers: Record<string, string>; body: unknown };
  response: { status: number | null; body?: unknown; error?: string };
}

const HEALTH_REPLY =
  'Thank you. I have passed your question to your care team; a clinician will get back to you. If it gets worse or feels urgent, call your local emergency number.';
const HEALTH_DIRECT_REPLY =
  "I couldn't pass your question to your care team from here; please contact your care team directly. If it feels urgent, call your local emergency number.";
const HEALTH_ANON_REPLY =
  'For questions about your health, please sign in so I can pass them to your care team, or contact your care team directly. If it feels urgent, call your local emergency number.';
export const BUSY_REPLY =
  "I'm still working on your previous message; please wait a moment for my answer. / Todavía estoy atendiendo su mensaje anterior; espere un momento.";
/**
 * How long a claimed widget turn keeps a retry from answering it again (service clock): longer
 * than any turn can take (a run's calls are at most 5 s each), so only a sender that died leaves
 * a turn to be answered again, and not before this.
 */
const TURN_LEASE_MS = 15 * 60_000;
/** How long (real time) a retry waits for the first sender's answer before 409 TURN_IN_PROGRESS. */
const TURN_WAIT_MS = 10_000;
const PAUSED_REPLY = "I can't look that up right now. Would you like me to connect you with our team?";
/** How long an emergency message waits for the patient directory to confirm the session's link (then the token's link is used). */
const EMERGENCY_LINK_TIMEOUT_MS = 1500;
/** A run stopped before a Destination call because its workflow was switched off (or archived) meanwhile. */
export const SWITCHED_OFF_REPLY =
  "I can't continue with that here right now. Would you like me to connect you with our team? / No puedo continuar con eso ahora. ¿Quiere que le comunique con nuestro equipo?";

/** Runs workflows: the pure machine plus the I/O (calls, runs' streams, hand-offs, credits). */
@Injectable()
export class RunnerService {
  private readonly runs;
  private readonly log = getLogger();

  constructor(
    @Inject(EVENT_STORE) store: EventStore,
    @Inject(CLOCK) private readonly clock: Clock,
    @Inject(READ_STORE) private readonly readStore: ReadStore,
    @Inject(BUS_CLIENT) private readonly bus: ClientProxy,
    @Inject(CONFIG) private readonly config: ServiceConfig,
    private readonly tenants: TenantDirectory,
    private readonly workflows: WorkflowsService,
    private readonly deliveries: DeliveriesService,
    private readonly gate: SwitchOffGate,
    /** Real time, for the signature timestamp of each Destination call only. */
    @Inject(WALL_CLOCK) private readonly wallClock: WallClock,
    @Inject(DESTINATION_CLIENT) private readonly destinations: DestinationClientPort,
  ) {
    this.runs = new CommandHandler(store, runDecider, () => clock.now());
    this.turns = new CommandHandler(store, widgetTurnDecider, () => clock.now());
  }

  private readonly turns;

  // ---------- calls ----------

  private async call(envId: string, req: CallRequest, traces?: CallTrace[]): Promise<CallResult> {
    const dest = await this.workflows.destinationForCall(envId, req.destinationStableKey);
    const secret = await this.tenants.secret(envId, 'widget_signing');
    if (!dest || !secret) {
      traces?.push({
        request: { method: req.method, url: req.path, headers: {}, body: req.body ? JSON.parse(req.body) : undefined },
        response: { status: null, error: 'destination_missing' },
      });
      return { kind: 'failed', reason: 'destination_missing' };
    }
    // Signed with the real time of the call (receivers compare it with their own clocks), never the service clock.
    const nowS = Math.floor(this.wallClock.now().getTime() / 1000);
    const out = await this.destinations.call({
      baseUrl: dest.baseUrl,
      path: req.path,
      method: req.method,
      body: req.body,
      headers: dest.headers,
      secret,
      nowS,
      timeoutMs: dest.timeoutMs,
      production: this.config.production,
    });
    this.log.info({ destination: dest.id, method: req.method, outcome: out.kind === 'response' ? out.status : out.reason }, 'destination call');
    if (traces) {
      const redacted = Object.fromEntries(Object.keys(dest.headers).map((k) => [k, '[redacted]']));
      traces.push({
        request: {
          method: req.method,
          url: `${new URL(dest.baseUrl).origin}${out.pathAndQuery}`,
          headers: { ...redacted, 'x-svc-timestamp': String(nowS), 'x-svc-signature': '[redacted]' },
          body: req.body ? JSON.parse(req.body) : undefined,
        },
        response: out.kind === 'response' ? { status: out.status, body: out.body } : { status: null, error: out.reason },
      });
    }
    return out.kind === 'response' ? { kind: 'response', status: out.status, body: out.body } : { kind: 'failed', reason: out.reason };
  }

  /**
   * Drives the machine through its calls until it waits for the patient or ends. `makeCall` makes
   * each one; null means it was not made because the workflow was switched off meanwhile: the run
   * ends where it stood as `switched_off` and the patient is offered the team.
   */
  private async drive(def: Definition, ctx: RunContext, first: Advance, makeCall: (request: CallRequest) => Promise<CallResult | null>): Promise<Advance> {
    let r = first;
    const replies: Reply[] = [...first.replies];
    while (r.next.kind === 'call') {
      const result = await makeCall(r.next.request);
      if (result === null) {
        replies.push({ type: 'text', text: SWITCHED_OFF_REPLY });
        return { state: switchedOff(r.state), replies, next: { kind: 'ended' } };
      }
      r = giveCallResult(def, r.state, ctx, result);
      replies.push(...r.replies);
    }
    return { ...r, replies };
  }

  /**
   * Drives a patient's run of `workflowId`: each Destination call goes through the SwitchOffGate,
   * which makes it only while the workflow is still live (read from its stream after the call is
   * registered, so a switch-off's 200 waits for it or it is not made).
   */
  private driveLive(workflowId: string, envId: string, def: Definition, ctx: RunContext, first: Advance): Promise<Advance> {
    return this.drive(def, ctx, first, (request) =>
      this.gate.call(
        workflowId,
        () => this.workflows.isLive(workflowId),
        () => this.call(envId, request),
      ),
    );
  }

  // ---------- test runs ----------

  async test(
    scope: Scope,
    versionId: string,
    body: { expectedRevision: number; opening: string; replies: string[]; patientEmail?: string; patientId?: string },
    actor: Actor,
    baaSigned: boolean,
  ) {
    const { state: viewed } = await this.workflows.byVersion(scope.environmentId, versionId);
    // The revision is checked on the workflow's stream (not a read model) before any call is made.
    const { state } = await this.workflows.workflows.load(workflowStream(viewed.id!));
    const version = state.versions.find((v) => v.id === versionId);
    if (!version || version.state === 'discarded' || state.deleted) throw ApiError.notFound('Workflow version');
    if (body.expectedRevision !== version.revision) throw new DomainError(409, 'STALE_REVISION', `The version is at revision ${version.revision}`);
    const def = version.definition;
    // Refused when the run reaches a Destination call (spec: "when a test run would call a real
    // Destination before the BAA is signed"), before the call is made and before anything is recorded.
    const beforeCall = baaSigned
      ? undefined
      : () => {
          throw new ApiError(403, 'BAA_REQUIRED', 'A test run that calls a Destination needs a signed business associate agreement');
        };
    const runId = randomUUID();
    const ctx: RunContext = { runId, patient: { email: body.patientEmail ?? null, externalId: body.patientId ?? null } };
    const transcript: { from: 'patient' | 'agent'; text: string }[] = [{ from: 'patient', text: body.opening }];
    const traces: CallTrace[] = [];
    const say = (replies: Reply[]) => {
      for (const r of replies) {
        if (r.type === 'text') transcript.push({ from: 'agent', text: r.text });
        else if (r.type === 'orders')
          transcript.push({
            from: 'agent',
            text: r.orders.map((o) => `Order ${o.id}: ${o.statusLabel ?? o.status}${o.trackingUrl ? ` (track: ${o.trackingUrl})` : ''}`).join('\n'),
          });
        else transcript.push({ from: 'agent', text: `[upload: ${r.variable}]` });
      }
    };
    // A test run calls whatever its version names, live or not (never through the switch-off gate).
    const testCall = (request: CallRequest) => {
      beforeCall?.();
      return this.call(scope.environmentId, request, traces);
    };
    let r = await this.drive(def, ctx, advance(def, startRun(def), ctx), testCall);
    say(r.replies);
    for (const reply of body.replies) {
      if (r.next.kind !== 'await') break;
      transcript.push({ from: 'patient', text: reply });
      r = await this.drive(def, ctx, giveInput(def, r.state, ctx, reply, 0), testCall);
      say(r.replies);
    }
    const s = r.state;
    const passed = s.status === 'ended' && !s.stepError && s.outcome !== 'sign_in_required' && s.outcome !== 'error';
    // The version may have changed while the calls ran: RecordTest answers 409 STALE_REVISION
    // then, and the run is recorded only once the test result is.
    const recorded = await this.workflows.workflows.handle(
      workflowStream(state.id!),
      { type: 'RecordTest', versionId, expectedRevision: body.expectedRevision, passed, runId, by: actor.sub },
      { actor: `staff:${actor.sub}`, organizationId: scope.organizationId, environmentId: scope.environmentId },
    );
    const started = await this.runs.handle(
      runStream(runId),
      {
        type: 'Start',
        header: { organizationId: scope.organizationId, environmentId: scope.environmentId, runId, workflowId: state.id!, versionId, conversationId: null },
        test: true,
        state: s,
      },
      { actor: `staff:${actor.sub}`, organizationId: scope.organizationId, environmentId: scope.environmentId },
    );
    await this.workflows.applied(Math.max(started.position, recorded.position));
    let callIndex = 0;
    const steps = s.steps.map((t) => {
      const base = { stepId: t.stepId, type: t.type, outcome: t.outcome };
      if (t.type === 'call_api' && ['call_ok', 'not_found', 'call_failed', 'contract_broken'].includes(t.outcome) && traces[callIndex])
        return { ...base, ...traces[callIndex++] };
      return base;
    });
    return { runId, passed, transcript, steps };
  }

  // ---------- the patient agent ----------

  /** Reserves the credit of a run about to start (Patterns.reserveCredit): true when usage is paused. */
  private usagePaused(organizationId: string, environmentId: string, runId: string): Promise<boolean> {
    return creditRefused(this.bus, { organizationId, environmentId, source: 'workflow_run', sourceId: runId }, 1000);
  }

  /** Records a case for an identified (enrolled) patient, then tries to deliver it at once. */
  private async requestCase(
    session: WidgetSessionContext,
    requestId: string,
    priority: CaseRequest['priority'],
    notes: string,
    matchedRules: string[],
    reason: CaseRequest['reason'],
  ): Promise<DeliveryResult | null> {
    if (!session.patientId) return null;
    await this.deliveries.requestCase(
      {
        requestId,
        organizationId: session.organizationId,
        environmentId: session.environmentId,
        patientId: session.patientId,
        priority,
        notes,
        matchedRules,
        reason,
      },
      this.actor(session),
    );
    return this.deliveries.tryDeliver(requestId);
  }

  /** Records a run's hand-off (a case for `clinical` with an enrolled patient, else a work item); returns its request id. */
  private async requestHandOff(session: WidgetSessionContext, runId: string, s: RunState, message: string): Promise<string> {
    const h = s.handOff!;
    const lines = [
      `Patient answers:`,
      ...h.answers.map((a) => `- ${a}`),
      ...(h.summary ? ['', `Summary: ${h.summary}`] : []),
      ...(h.teamAsk ? ['', `Team ask: ${h.teamAsk}`] : []),
    ];
    if (h.category === 'clinical' && session.patientId) {
      const requestId = derivedUuid(`handoff:${runId}`);
      await this.deliveries.requestCase(
        {
          requestId,
          organizationId: session.organizationId,
          environmentId: session.environmentId,
          patientId: session.patientId,
          priority: 'routine',
          notes: [message, '', ...lines].join('\n'),
          matchedRules: [],
          reason: 'hand_off',
          summary: { requestId: derivedUuid(`handoff-case-summary:${runId}`), message: [`Hand-off (${h.category})`, ...lines].join('\n') },
        },
        this.actor(session),
      );
      return requestId;
    }
    const requestId = derivedUuid(`handoff-summary:${runId}`);
    await this.deliveries.requestHandOff(
      {
        requestId,
        organizationId: session.organizationId,
        environmentId: session.environmentId,
        conversationId: derivedUuid(`work-item:${runId}`),
        patientId: session.patientId,
        category: h.category,
        message: [`Hand-off (${h.category})`, ...lines].join('\n'),
      },
      this.actor(session),
    );
    return requestId;
  }

  /** Records the run's hand-off, if it handed off, before the run's turn is written (B3). */
  private async recordHandOff(session: WidgetSessionContext, runId: string, r: Advance): Promise<string | null> {
    if (r.state.outcome !== 'handed_off' || !r.state.handOff) return null;
    return this.requestHandOff(
      session,
      runId,
      r.state,
      r.replies
        .filter((x) => x.type === 'text')
        .map((x) => (x as { text: string }).text)
        .join('\n'),
    );
  }

  /**
   * A patient's message to the agent. With an `Idempotency-Key` (the widget makes one per message
   * it sends), the turn is claimed first in its own stream (the patient's, or the anonymous
   * session's, and the key): a retry of the same message gets the recorded answer (`duplicate:
   * true`) instead of a second case, run or credit; the same key with another message is 409
   * `IDEMPOTENCY_KEY_REUSED`; a retry that arrives while the first is still being answered waits
   * for it (up to TURN_WAIT_MS, then 409 `TURN_IN_PROGRESS` with Retry-After).
   */
  /**
   * `emergency` is true on the answer to a message with emergency terms (its guidance is the reply),
   * so that a widget can show it as such (docs/decisions.md, "Pages for patients").
   */
  async message(session: WidgetSessionContext, message: string, attachments: unknown[], idempotencyKey?: string) {
    const answered = await this.answerOnce(session, message, attachments, idempotencyKey);
    return { ...answered, emergency: (answered as { emergency?: boolean }).emergency === true };
  }

  private async answerOnce(session: WidgetSessionContext, message: string, attachments: unknown[], idempotencyKey?: string) {
    if (idempotencyKey === undefined) return { ...(await this.answerMessage(session, message, attachments.length)), duplicate: false };
    // A signed-in patient's keys are the patient's (as for case replies: a retry from a new session
    // after signing in again is still the same message); an anonymous visitor's, the session's.
    const scope = session.patientId ? `patient:${session.patientId}` : `session:${session.sessionId}`;
    const stream = widgetTurnStream(derivedUuid(`widget-turn:${session.environmentId}:${scope}:${idempotencyKey.toLowerCase()}`));
    const hash = bodyHash({ message, attachments });
    const meta = { actor: this.actor(session), organizationId: session.organizationId, environmentId: session.environmentId };
    const until = Date.now() + TURN_WAIT_MS;
    const claimId = randomUUID();
    for (;;) {
      let claimed;
      try {
        claimed = await this.turns.handle(stream, { type: 'Claim', claimId, bodyHash: hash, leaseMs: TURN_LEASE_MS }, meta);
      } catch (err) {
        if (!(err instanceof DomainError && err.code === 'TURN_IN_PROGRESS')) throw err;
        // Still being answered: say so in a way the widget can act on (retry with the same key).
        if (Date.now() >= until)
          throw new ApiError(409, 'TURN_IN_PROGRESS', 'This message is still being answered; retry with the same Idempotency-Key', undefined, {
            'retry-after': '2',
          });
        await new Promise((r) => setTimeout(r, 50));
        continue;
      }
      if (claimed.newEvents.length === 0 && claimed.state.answer) return { ...claimed.state.answer.answer, duplicate: true };
      break;
    }
    let answer;
    try {
      answer = await this.answerMessage(session, message, attachments.length);
    } catch (err) {
      // Not answered: the claim goes, so that a retry is answered now rather than after the lease.
      await this.turns.handle(stream, { type: 'Release', claimId }, meta).catch(() => undefined);
      throw err;
    }
    // "Still working on your previous message" is not this message's answer: the claim goes, and a
    // retry is answered for real once the other message is done.
    const busy = answer.replies.length === 1 && (answer.replies[0] as { text?: string }).text === BUSY_REPLY;
    await this.turns.handle(stream, busy ? { type: 'Release', claimId } : { type: 'Answer', claimId, bodyHash: hash, answer }, meta);
    return { ...answer, duplicate: false };
  }

  private async answerMessage(session: WidgetSessionContext, message: string, attachments: number) {
    const conversationId = derivedUuid(`widget-conversation:${session.sessionId}`);
    const envId = session.environmentId;
    // The session's patient link as it stands now, asked once per message and only when the answer
    // needs it (a case, a run): after patient.cancelled the token's link no longer holds.
    let asked: Promise<CurrentWidgetLink> | undefined;
    const link = () => (asked ??= currentPatientLink(this.bus, session));
    const kinds = emergencyKinds(message);
    if (kinds.length) {
      let current: WidgetSessionContext;
      try {
        // Asked briefly: the guidance must not wait on a slow patient directory.
        current = (await currentPatientLink(this.bus, session, EMERGENCY_LINK_TIMEOUT_MS)).session;
      } catch (err) {
        if (!(err instanceof ApiError && err.status === 503)) throw err;
        // The pathway did not answer: an emergency still gets its guidance, and the case the
        // token's link asks for (a missed alert is the riskier failure).
        this.log.warn({ environmentId: envId }, 'widget emergency: patient link not confirmed (pathway unreachable); using the session token');
        current = session;
      }
      const requestId = derivedUuid(`emergency:${session.sessionId}:${this.clock.now().toISOString()}:${message}`);
      const d = await this.requestCase(
        current,
        requestId,
        'emergency',
        message,
        kinds.map((k) => `emergency_terms:${k}`),
        'emergency',
      );
      // Only a case requested for an identified patient (and not refused) lets us say the team was alerted.
      const alerted = !!d && d.status !== 'failed';
      const caseReference = d?.status === 'delivered' ? d.reference : null;
      return {
        conversationId,
        replies: [{ type: 'text', text: alerted ? `${EMERGENCY_GUIDANCE} ${EMERGENCY_ALERTED}` : EMERGENCY_GUIDANCE }] as Reply[],
        handedOff: alerted,
        emergency: true,
        ...(caseReference ? { caseReference } : {}),
      };
    }
    // A health question goes to the care team before anything else, even the answer a waiting run
    // expects: no workflow (and so no order lookup) ever gets it (spec order_lookup.requested,
    // docs/decisions.md, "Widget conversation"). The waiting run stays as it is.
    const health = healthQuestion(message);
    if (health.matched) {
      const { session: current, revoked } = await link();
      const d = await this.requestCase(
        current,
        derivedUuid(`health:${session.sessionId}:${this.clock.now().toISOString()}:${message}`),
        health.priority,
        message,
        [],
        'health_question',
      );
      const passed = !!d && d.status !== 'failed';
      const caseReference = d?.status === 'delivered' ? d.reference : null;
      // "Please sign in" only for an anonymous visitor; a signed-in patient is never asked to (M2),
      // nor one whose link ended with a cancellation (signing in again would not pass it on).
      const text = passed ? HEALTH_REPLY : session.externalPatientId || revoked ? HEALTH_DIRECT_REPLY : HEALTH_ANON_REPLY;
      return { conversationId, replies: [{ type: 'text', text }] as Reply[], handedOff: passed, ...(caseReference ? { caseReference } : {}) };
    }
    // One workflow message of a conversation at a time in this process: a message that arrives
    // while another is being answered is told to wait (as a second answer to a turn is, B1), so
    // a double-sent opening starts one run, not several that then take each other's messages as
    // answers (each with its credit). Emergencies and health questions above are never held.
    if (this.answering.has(conversationId)) return { conversationId, replies: [{ type: 'text', text: BUSY_REPLY }] as Reply[], handedOff: false };
    this.answering.add(conversationId);
    try {
      return await this.workflowMessage(link, conversationId, envId, message, attachments);
    } finally {
      this.answering.delete(conversationId);
    }
  }

  /** Conversations with a workflow message being answered in this process. */
  private readonly answering = new Set<string>();

  /** The waiting run's next turn, or a new run of the live workflow the message triggers. */
  private async workflowMessage(link: () => Promise<CurrentWidgetLink>, conversationId: string, envId: string, message: string, attachments: number) {
    /** The session as it stands now (asked before anything is claimed or reserved). */
    const current = async (): Promise<{ session: WidgetSessionContext; patient: Patient }> => {
      const { session } = await link();
      return { session, patient: { email: session.email ?? null, externalId: session.externalPatientId ?? null } };
    };
    const pending = await this.readStore.get<{ runId: string; workflowId: string; versionId: string }>(WorkflowCollections.pending, conversationId);
    if (pending) {
      const loaded = await this.runs.load(runStream(pending.runId));
      const wf = await this.readStore.get<WorkflowState>(WorkflowCollections.workflows, pending.workflowId);
      const version = wf?.versions.find((v) => v.id === pending.versionId);
      if (loaded.state.state && version && wf && (loaded.state.state.status === 'waiting' || loaded.state.openTurn)) {
        const { session, patient } = await current();
        const meta = { actor: this.actor(session), organizationId: session.organizationId, environmentId: envId };
        // Claim the turn before any call: of replies that arrive together, one answers the turn
        // and makes its calls; the others are told to wait (B1).
        const turn = loaded.state.turn + 1;
        let claimed;
        try {
          claimed = await this.runs.handle(runStream(pending.runId), { type: 'StartTurn', turn }, meta);
        } catch (err) {
          if (err instanceof DomainError && err.code === 'TURN_IN_PROGRESS')
            return { conversationId, replies: [{ type: 'text', text: BUSY_REPLY }] as Reply[], handedOff: false };
          throw err;
        }
        if (!wf.active || wf.archivedAt || !(await this.workflows.isLive(pending.workflowId))) {
          // Switched off (or archived) since the run started: off means off, also for a run that
          // waits for its next answer. The run ends where it stood; this message is a new one.
          // (Read again from the workflow's stream once the turn is ours: the read model above may
          // be older than a switch-off answered meanwhile. Calls are checked again one by one.)
          const ended = await this.runs.handle(runStream(pending.runId), { type: 'Advance', turn, state: switchedOff(claimed.state.state!) }, meta);
          await this.workflows.applied(ended.position);
        } else {
          const ctx: RunContext = { runId: pending.runId, patient };
          const def = version.definition;
          const r = await this.driveLive(pending.workflowId, envId, def, ctx, giveInput(def, claimed.state.state!, ctx, message, attachments));
          const handOff = await this.recordHandOff(session, pending.runId, r);
          const w = await this.runs.handle(runStream(pending.runId), { type: 'Advance', turn, state: r.state }, meta);
          await this.workflows.applied(w.position);
          return this.finish(conversationId, r, handOff);
        }
      }
    }
    const live = await this.workflows.liveWorkflows(envId);
    const match = live.map((w) => ({ w, v: w.versions.find((v) => v.id === w.liveVersionId)! })).find(({ v }) => v && triggerMatches(v.definition, message));
    if (!match) return { conversationId, replies: [{ type: 'text', text: GENERIC_REPLY }] as Reply[], handedOff: false };
    const { session, patient } = await current();
    const runId = randomUUID();
    if (await this.usagePaused(session.organizationId, envId, runId))
      return { conversationId, replies: [{ type: 'text', text: PAUSED_REPLY }] as Reply[], handedOff: false };
    const ctx: RunContext = { runId, patient };
    const def = match.v.definition;
    const r = await this.driveLive(match.w.id!, envId, def, ctx, advance(def, startRun(def), ctx));
    const handOff = await this.recordHandOff(session, runId, r);
    const w = await this.runs.handle(
      runStream(runId),
      {
        type: 'Start',
        header: { organizationId: session.organizationId, environmentId: envId, runId, workflowId: match.w.id!, versionId: match.v.id, conversationId },
        test: false,
        state: r.state,
      },
      { actor: this.actor(session), organizationId: session.organizationId, environmentId: envId },
    );
    await this.workflows.applied(w.position);
    return this.finish(conversationId, r, handOff);
  }

  private actor(session: WidgetSessionContext): string {
    return session.patientId ? `patient:${session.patientId}` : `widget-session:${session.sessionId}`;
  }

  private async finish(conversationId: string, r: Advance, handOff: string | null) {
    const handedOff = r.state.outcome === 'handed_off';
    // Recorded already (before the run's turn): deliver now; the timer retries if this fails.
    const d = handOff ? await this.deliveries.tryDeliver(handOff) : null;
    const caseReference = d?.status === 'delivered' ? d.reference : null;
    return { conversationId, replies: r.replies, handedOff, ...(caseReference ? { caseReference } : {}) };
  }
}
