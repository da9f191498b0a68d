import { Inject, Injectable } from '@nestjs/common';
import { CLOCK, Clock } from '@svc/clock';
import { CommandHandler, DomainError, EVENT_STORE, EventStore } from '@svc/eventstore';
import { toRfc3339 } from '@svc/http';
import { PROJECTIONS } from '@svc/platform';
import { ProjectionRunner, READ_STORE, ReadStore } from '@svc/read-store';
import { sha256Hex } from '@svc/security';
import { AccountCommand, AccountEvent, AccountState, BillingEventType, DEFAULT_MONTHLY_CREDITS, accountDecider, accountStream } from '../domain/account';
import { CreditSource, UsageCommand, UsageEvent, UsageState, periodStartOf, usageDecider, usageStream } from '../domain/usage';
import { AccountDoc, Collections, DISPATCHER_PROJECTION, UsageDoc } from '../read-model/dispatcher.projection';

const SYSTEM = 'system:webhook-dispatcher';

/** Plan, credits, usage thresholds and subscription state (docs/decisions.md, "Billing"). */
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

  /**
   * One credit per source (idempotent in the month's stream of the source event). Credits of the same organization and
   * month that arrive while one write is under way are decided together and appended in one write
   * (one read and fold of the month's stream, one append, no revision conflicts between them):
   * the relays deliver events concurrently, and every credit of an organization goes to one stream.
   */
  useCredit(
    organizationId: string,
    environmentId: string | null,
    source: CreditSource,
    sourceId: string,
    recordedAt: string | undefined,
    withinPlan = false,
  ): Promise<void> {
    // The month of the fact (the source event's service-clock time), not of its processing: a
    // redelivery or a late delivery after the month rolled over lands in the same month's stream,
    // where the source id dedupes it. The processing time stands in only for a message without one.
    const at = recordedAt !== undefined ? new Date(recordedAt) : null;
    const periodStart = periodStartOf(at && Number.isFinite(at.getTime()) ? at : this.clock.now());
    const stream = usageStream(organizationId, periodStart);
    return new Promise<void>((resolve, reject) => {
      const item = { organizationId, environmentId, source, sourceId, periodStart, withinPlan, resolve, reject };
      const queued = this.creditQueues.get(stream);
      if (queued) {
        queued.push(item); // taken by the drain loop of this stream
        return;
      }
      this.creditQueues.set(stream, [item]);
      void this.drainCredits(stream, organizationId);
    });
  }

  /**
   * Reserves the credit of work about to be done (Patterns.reserveCredit): true when it is recorded
   * within the plan (or was already), false when the period's credits are used up. Reservations
   * of one organization are decided one after another in its month's stream, so work started at
   * the same moment can never together go past the plan; the credit the work's own event brings
   * later has the same source id and counts once.
   */
  async reserveCredit(organizationId: string, environmentId: string | null, source: CreditSource, sourceId: string): Promise<boolean> {
    try {
      await this.useCredit(organizationId, environmentId, source, sourceId, undefined, true);
      return true;
    } catch (err) {
      if (err instanceof DomainError && err.code === 'USAGE_PAUSED') return false;
      throw err;
    }
  }

  private readonly creditQueues = new Map<
    string,
    {
      organizationId: string;
      environmentId: string | null;
      source: CreditSource;
      sourceId: string;
      periodStart: string;
      withinPlan: boolean;
      resolve(): void;
      reject(err: unknown): void;
    }[]
  >();

  /**
   * The month's usage state after our last write, per stream: the next batch decides on it
   * without re-reading and re-folding the month. If anything else wrote the stream meanwhile
   * (another instance), the append's expected revision fails and the batch re-reads.
   */
  private readonly usageStates = new Map<string, { state: UsageState; revision: number }>();

  private async drainCredits(stream: string, organizationId: string): Promise<void> {
    for (;;) {
      const queue = this.creditQueues.get(stream)!;
      if (queue.length === 0) {
        this.creditQueues.delete(stream);
        return;
      }
      const items = queue.splice(0);
      try {
        const { state } = await this.accounts.load(accountStream(organizationId));
        const known = this.usageStates.get(stream);
        this.usageStates.delete(stream); // kept again only on success (a failed batch re-reads)
        const results = await this.usage.handleAll(
          stream,
          items.map((i) => ({
            command: {
              type: 'UseCredit' as const,
              organizationId,
              environmentId: i.environmentId,
              source: i.source,
              sourceId: i.sourceId,
              periodStart: i.periodStart,
              monthlyCredits: state.monthlyCredits,
              withinPlan: i.withinPlan,
            },
            ctx: { actor: SYSTEM, organizationId },
          })),
          known,
        );
        const last = [...results].reverse().find((r) => r.ok);
        if (last?.ok) {
          if (this.usageStates.size >= 1000) this.usageStates.clear();
          this.usageStates.set(stream, { state: last.result.state, revision: last.result.revision });
        }
        // No reader waits on these writes (usage status is read from the projection as it goes).
        results.forEach((r, n) => (r.ok ? items[n].resolve() : items[n].reject(r.error)));
      } catch (err) {
        for (const i of items) i.reject(err);
      }
    }
  }

  async changePlan(organizationId: string, monthlyCredits: number, by: string) {
    const r = await this.accounts.handle(
      accountStream(organizationId),
      { type: 'ChangePlan', organizationId, monthlyCredits, by },
      { actor: `staff:${by}`, organizationId },
    );
    // The thresholds the period's usage has reached under the new plan (a smaller plan can pause
    // the organization at once): reported before the answer, once each per period. Run on every
    // PUT, also one that changes nothing, so a retry of a request cut off between the two writes
    // still reports them.
    const periodStart = periodStartOf(this.clock.now());
    const stream = usageStream(organizationId, periodStart);
    this.usageStates.delete(stream);
    const u = await this.usage.handle(stream, { type: 'ApplyPlan', organizationId, periodStart, monthlyCredits }, { actor: `staff:${by}`, organizationId });
    await this.applied(Math.max(r.position, u.position));
    return this.status(organizationId);
  }

  async recordBillingEvent(organizationId: string, input: { eventId: string; type: BillingEventType; invoiceId?: string; occurredAt?: string }, by: string) {
    const canonical = { eventId: input.eventId, type: input.type, invoiceId: input.invoiceId ?? null, occurredAt: input.occurredAt ?? null };
    const r = await this.accounts.handle(
      accountStream(organizationId),
      // occurredAt in RFC 3339 form for the decider (`+02`, `t`/`z` are valid ISO 8601 that Date.parse
      // cannot read); the body hash stays over what was sent, so earlier retries still match.
      {
        type: 'RecordBillingEvent',
        organizationId,
        eventId: input.eventId,
        billingType: input.type,
        invoiceId: canonical.invoiceId,
        occurredAt: canonical.occurredAt === null ? null : toRfc3339(canonical.occurredAt),
        bodyHash: sha256Hex(JSON.stringify(canonical)),
      },
      { actor: `staff:${by}`, organizationId },
    );
    await this.applied(r.position);
    // A retry answers with the status the event left (its original result), not today's.
    const duplicate = r.newEvents.length === 0;
    return { eventId: input.eventId, duplicate, subscriptionStatus: (duplicate && r.state.billingEvents.get(input.eventId)?.status) || r.state.status };
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
