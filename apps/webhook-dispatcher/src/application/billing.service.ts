import { Inject, Injectable } from '@nestjs/common';
import { CLOCK, Clock } from '@svc/clock';
import { CommandHandler, EVENT_STORE, EventStore } from '@svc/eventstore';
import { PROJECTIONS } from '@svc/platform';
import { ProjectionRunner, READ_STORE, ReadStore } from '@svc/read-store';
import { sha256Hex } from '@svc/security';
import { AccountCommand, AccountEvent, AccountState, BillingEventType, DEFAULT_MONTHLY_CREDITS, accountDecider, accountStream } from '../domain/account';
import { CreditSource, UsageCommand, UsageEvent, UsageState, periodStartOf, usageDecider, usageStream } from '../domain/usage';
import { AccountDoc, Collections, DISPATCHER_PROJECTION, UsageDoc } from '../adapters/projections/dispatcher.projection';

const SYSTEM = 'system:webhook-dispatcher';

/** Plan, credits, usage thresholds and subscription state (decisions 9). */
@Injectable()
export class BillingService {
  private readonly accounts: CommandHandler<AccountCommand, AccountEvent, AccountState>;
  private readonly usage: CommandHandler<UsageCommand, UsageEvent, UsageState>;

  constructor(
    @Inject(EVENT_STORE) store: EventStore,
    @Inject(CLOCK) private readonly clock: Clock,
    @Inject(PROJECTIONS) private readonly projections: ProjectionRunner,
    @Inject(READ_STORE) private readonly readStore: ReadStore,
  ) {
    const now = () => clock.now();
    this.accounts = new CommandHandler(store, accountDecider, now);
    this.usage = new CommandHandler(store, usageDecider, now);
  }

  private async applied(position: number): Promise<void> {
    if (position > 0) await this.projections.waitFor([DISPATCHER_PROJECTION], position);
  }

  async openAccount(organizationId: string): Promise<void> {
    const r = await this.accounts.handle(accountStream(organizationId), { type: 'OpenAccount', organizationId }, { actor: SYSTEM, organizationId });
    await this.applied(r.position);
  }

  async useCredit(organizationId: string, environmentId: string | null, source: CreditSource, sourceId: string): Promise<void> {
    const { state } = await this.accounts.load(accountStream(organizationId));
    const periodStart = periodStartOf(this.clock.now());
    const r = await this.usage.handle(
      usageStream(organizationId, periodStart),
      { type: 'UseCredit', organizationId, environmentId, source, sourceId, periodStart, monthlyCredits: state.monthlyCredits },
      { actor: SYSTEM, organizationId },
    );
    void r; // no reader waits on this write (usage status is read from the projection as it goes)
  }

  async changePlan(organizationId: string, monthlyCredits: number, by: string) {
    const r = await this.accounts.handle(accountStream(organizationId), { type: 'ChangePlan', organizationId, monthlyCredits, by }, { actor: `staff:${by}`, organizationId });
    await this.applied(r.position);
    return this.status(organizationId);
  }

  async recordBillingEvent(organizationId: string, input: { eventId: string; type: BillingEventType; invoiceId?: string; occurredAt?: string }, by: string) {
    const canonical = { eventId: input.eventId, type: input.type, invoiceId: input.invoiceId ?? null, occurredAt: input.occurredAt ?? null };
    const r = await this.accounts.handle(
      accountStream(organizationId),
      { type: 'RecordBillingEvent', organizationId, eventId: input.eventId, billingType: input.type, invoiceId: canonical.invoiceId, occurredAt: canonical.occurredAt, bodyHash: sha256Hex(JSON.stringify(canonical)) },
      { actor: `staff:${by}`, organizationId },
    );
    await this.applied(r.position);
    return { eventId: input.eventId, duplicate: r.newEvents.length === 0, subscriptionStatus: r.state.status };
  }

  /** Plan, usage of the current period and subscription state (read model). */
  async status(organizationId: string) {
    const account = await this.readStore.get<AccountDoc>(Collections.accounts, organizationId);
    const usage = await this.readStore.get<UsageDoc>(Collections.usage, organizationId);
    const monthlyCredits = account?.monthlyCredits ?? DEFAULT_MONTHLY_CREDITS;
    const periodStart = periodStartOf(this.clock.now());
    const creditsUsed = usage && usage.periodStart === periodStart ? usage.creditsUsed : 0;
    return {
      organizationId,
      monthlyCredits,
      periodStart,
      creditsUsed,
      remaining: Math.max(0, monthlyCredits - creditsUsed),
      paused: creditsUsed >= monthlyCredits,
      subscriptionStatus: account?.status ?? 'active',
    };
  }
}
