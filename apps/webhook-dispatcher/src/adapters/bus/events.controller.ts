import { Controller, Inject } from '@nestjs/common';
import { EventPattern, MessagePattern, Payload } from '@nestjs/microservices';
import {
  IntegrationEventTypes,
  IntegrationMessage,
  Patterns,
  ProcessedEvents,
  ReserveCreditCommand,
  ReserveCreditReply,
  Topics,
  UsageStatusQuery,
  UsageStatusReply,
} from '@svc/messaging';
import { READ_STORE, ReadStore } from '@svc/read-store';
import { BillingService } from '../../application/billing.service';
import { DispatchService } from '../../application/dispatch.service';
import { isAccountEvent } from '../../domain/catalog';

const CONSUMER = 'webhook-dispatcher';

/** Integration events in (deduped by metadata.eventId) and the usage-status query. */
@Controller()
export class DispatcherEventsController {
  private readonly processed: ProcessedEvents;

  constructor(
    private readonly webhooks: DispatchService,
    private readonly billing: BillingService,
    @Inject(READ_STORE) readStore: ReadStore,
  ) {
    this.processed = new ProcessedEvents(readStore);
  }

  /**
   * Deduped by event id in the streams themselves: a delivery's id is f(endpoint, eventId) and is
   * created first-writer-wins, a credit is keyed by its case id in the stream of the month the
   * case was opened in (metadata.recordedAt, so a redelivery after the month rolled over finds it). That is
   * atomic with the effect (a processed-events mark would be a second write and an fsync on the
   * path that the case-ledger's relay waits for). The two appends run together (group commit).
   */
  @EventPattern(Topics.caseEvents)
  async onCaseEvent(@Payload() m: IntegrationMessage) {
    if (!m?.metadata?.eventId || !m.type?.startsWith('clinical_case.')) return;
    const orgId = m.metadata.organizationId;
    const caseId = (m.data as { caseId?: string })?.caseId;
    const credit =
      m.type === IntegrationEventTypes.caseOpened && orgId && caseId
        ? this.billing.useCredit(orgId, m.metadata.environmentId, 'clinical_case', caseId, m.metadata.recordedAt)
        : Promise.resolve();
    await Promise.all([credit, this.webhooks.dispatch(m)]);
  }

  @EventPattern(Topics.gatewayEvents)
  async onGatewayEvent(@Payload() m: IntegrationMessage) {
    if (!m?.metadata?.eventId) return;
    if (m.type !== IntegrationEventTypes.baaSigned && m.type !== IntegrationEventTypes.organizationCreated) return;
    await this.processed.once(CONSUMER, m.metadata.eventId, async () => {
      if (m.type === IntegrationEventTypes.organizationCreated) {
        const orgId = (m.data as { organizationId?: string }).organizationId ?? m.metadata.organizationId;
        if (orgId) await this.billing.openAccount(orgId);
      } else if (m.metadata.organizationId) {
        await this.webhooks.onBaaSigned(m.metadata.organizationId, (m.data as { baaSignedAt?: string }).baaSignedAt ?? null);
      }
    });
  }

  @EventPattern(Topics.pathwayEvents)
  async onPathwayEvent(@Payload() m: IntegrationMessage) {
    if (m?.type !== IntegrationEventTypes.checkInSent) return;
    const d = m.data as { organizationId?: string; environmentId?: string; checkInId?: string };
    const orgId = d.organizationId ?? m.metadata.organizationId;
    if (!orgId || !d.checkInId) return;
    await this.processed.once(CONSUMER, m.metadata.eventId, () =>
      this.billing.useCredit(orgId, d.environmentId ?? m.metadata.environmentId, 'check_in', d.checkInId!, m.metadata.recordedAt),
    );
  }

  @EventPattern(Topics.workflowEvents)
  async onWorkflowEvent(@Payload() m: IntegrationMessage) {
    if (m?.type !== IntegrationEventTypes.workflowRunStarted) return;
    const d = m.data as { organizationId?: string; environmentId?: string; runId?: string };
    const orgId = d.organizationId ?? m.metadata.organizationId;
    if (!orgId || !d.runId) return;
    await this.processed.once(CONSUMER, m.metadata.eventId, () =>
      this.billing.useCredit(orgId, d.environmentId ?? m.metadata.environmentId, 'workflow_run', d.runId!, m.metadata.recordedAt),
    );
  }

  /** Our own account events (relayed from our streams) become webhooks like the case events. */
  @EventPattern(Topics.dispatcherEvents)
  async onOwnEvent(@Payload() m: IntegrationMessage) {
    if (!m?.metadata?.eventId || !isAccountEvent(m.type)) return;
    await this.processed.once(CONSUMER, m.metadata.eventId, () => this.webhooks.dispatch(m));
  }

  @MessagePattern(Patterns.usageStatus)
  async usageStatus(@Payload() q: UsageStatusQuery): Promise<UsageStatusReply> {
    const s = await this.billing.status(q.organizationId);
    return { paused: s.paused };
  }

  @MessagePattern(Patterns.reserveCredit)
  async reserveCredit(@Payload() c: ReserveCreditCommand): Promise<ReserveCreditReply> {
    return { reserved: await this.billing.reserveCredit(c.organizationId, c.environmentId, c.source, c.sourceId) };
  }
}
