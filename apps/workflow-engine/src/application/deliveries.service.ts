import { Inject, Injectable } from '@nestjs/common';
import type { ClientProxy } from '@nestjs/microservices';
import { CLOCK, Clock } from '@svc/clock';
import { CommandHandler, EVENT_STORE, EventStore } from '@svc/eventstore';
import { getLogger } from '@svc/http';
import {
  AppendConversationMessageCommand,
  AppendConversationMessageReply,
  BUS_CLIENT,
  OpenClinicalCaseCommand,
  OpenClinicalCaseReply,
  Patterns,
  ask,
} from '@svc/messaging';
import { CaseRequest, DeliveryState, HandOffRequest, deliveryDecider, deliveryStream } from '../domain/delivery';

export type DeliveryResult = { status: 'delivered'; reference: string | null } | { status: 'pending' } | { status: 'failed' };

/** A 4xx answer is a refusal that no retry changes. */
function permanent(err: unknown): { status: number; code: string } | null {
  const e = err as { status?: unknown; code?: unknown } | null;
  if (e && typeof e === 'object' && typeof e.status === 'number' && e.status >= 400 && e.status < 500)
    return { status: e.status, code: typeof e.code === 'string' ? e.code : 'REFUSED' };
  return null;
}

/**
 * Records cases and hand-offs before delivering them, then delivers with the recorded request id
 * (idempotent on the receiving side). The projection keeps a timer per undelivered request, so a
 * failed or interrupted delivery is retried by the TimerScheduler of the module.
 */
@Injectable()
export class DeliveriesService {
  private readonly deliveries;
  private readonly log = getLogger();

  constructor(
    @Inject(EVENT_STORE) store: EventStore,
    @Inject(CLOCK) clock: Clock,
    @Inject(BUS_CLIENT) private readonly bus: ClientProxy,
  ) {
    this.deliveries = new CommandHandler(store, deliveryDecider, () => clock.now());
  }

  async requestCase(request: CaseRequest, actor: string): Promise<number> {
    const r = await this.deliveries.handle(
      deliveryStream(request.requestId),
      { type: 'RequestCase', request },
      { actor, organizationId: request.organizationId, environmentId: request.environmentId },
    );
    return r.position;
  }

  async requestHandOff(request: HandOffRequest, actor: string): Promise<number> {
    const r = await this.deliveries.handle(
      deliveryStream(request.requestId),
      { type: 'RequestHandOff', request },
      { actor, organizationId: request.organizationId, environmentId: request.environmentId },
    );
    return r.position;
  }

  /** One delivery attempt; never throws (a transient failure stays pending for the timer). */
  async tryDeliver(requestId: string): Promise<DeliveryResult> {
    try {
      return await this.deliver(requestId);
    } catch (err) {
      this.log.warn({ error: (err as { code?: string; name?: string })?.code ?? (err as Error)?.name ?? 'error' }, 'delivery failed; will retry');
      return { status: 'pending' };
    }
  }

  /** Delivers a recorded request; throws on a transient failure (the timer retries), records a 4xx for good. */
  async deliver(requestId: string): Promise<DeliveryResult> {
    const { state } = await this.deliveries.load(deliveryStream(requestId));
    if (!state.request) return { status: 'failed' };
    if (state.outcome) return state.outcome.status === 'delivered' ? { status: 'delivered', reference: state.outcome.reference } : { status: 'failed' };
    const meta = { actor: 'system', organizationId: state.request.organizationId, environmentId: state.request.environmentId };
    let done: { caseId: string | null; reference: string | null };
    try {
      done = await this.send(state.request);
    } catch (err) {
      const refused = permanent(err);
      if (!refused) throw err;
      this.log.warn({ status: refused.status, code: refused.code }, 'delivery refused; not retried');
      await this.deliveries.handle(deliveryStream(requestId), { type: 'Fail', ...refused }, meta);
      return { status: 'failed' };
    }
    await this.deliveries.handle(deliveryStream(requestId), { type: 'Complete', ...done }, meta);
    return { status: 'delivered', reference: done.reference };
  }

  private async send(req: NonNullable<DeliveryState['request']>): Promise<{ caseId: string | null; reference: string | null }> {
    if (req.kind === 'case') {
      const cmd: OpenClinicalCaseCommand = {
        requestId: req.requestId,
        organizationId: req.organizationId,
        environmentId: req.environmentId,
        patientId: req.patientId,
        source: 'patient_concern',
        priority: req.priority,
        patientNotes: req.notes,
        symptomScores: {},
        matchedRules: req.matchedRules,
        stoppedEarly: false,
        actor: `patient:${req.patientId}`,
      };
      const r = await ask<OpenClinicalCaseReply>(this.bus, Patterns.openClinicalCase, cmd, { timeoutMs: 10_000 });
      if (req.summary) {
        // The case thread exists once the open has answered. If this append fails, the delivery stays
        // pending and the retry opens the same case again (same requestId) and appends again (same id).
        const note: AppendConversationMessageCommand = {
          requestId: req.summary.requestId,
          organizationId: req.organizationId,
          environmentId: req.environmentId,
          conversationId: r.caseId,
          kind: 'case',
          patientId: req.patientId,
          sender: 'system',
          message: req.summary.message,
        };
        await ask<AppendConversationMessageReply>(this.bus, Patterns.appendConversationMessage, note, { timeoutMs: 10_000 });
      }
      return { caseId: r.caseId, reference: r.reference };
    }
    const cmd: AppendConversationMessageCommand = {
      requestId: req.requestId,
      organizationId: req.organizationId,
      environmentId: req.environmentId,
      conversationId: req.conversationId,
      kind: 'work_item',
      patientId: req.patientId,
      sender: 'system',
      message: req.message,
    };
    await ask<AppendConversationMessageReply>(this.bus, Patterns.appendConversationMessage, cmd, { timeoutMs: 10_000 });
    return { caseId: null, reference: null };
  }
}
