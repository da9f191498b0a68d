import { Decider, DomainError } from '@svc/decider';

/** Default plan of a new organization (documented in docs/decisions.md). */
export const DEFAULT_MONTHLY_CREDITS = 1000;

export type SubscriptionStatus = 'active' | 'grace_period' | 'restricted' | 'canceled';
export type BillingEventType = 'payment_failed' | 'payment_succeeded' | 'grace_period_expired' | 'subscription_canceled';
export const BillingEventTypes: BillingEventType[] = ['payment_failed', 'payment_succeeded', 'grace_period_expired', 'subscription_canceled'];
export const SUBSCRIPTION_UPDATED = 'subscription.updated';

export interface SubscriptionUpdatedData {
  status: SubscriptionStatus;
  previousStatus: SubscriptionStatus;
  reason?: 'PAYMENT_GRACE_PERIOD_EXPIRED';
  recovered?: true;
}

/** The organization's account: plan and subscription state (stream per organization). */
export type AccountEvent =
  | { type: 'AccountOpened'; organizationId: string; monthlyCredits: number; status: 'active'; openedAt: string }
  | { type: 'PlanChanged'; organizationId: string; monthlyCredits: number; previousMonthlyCredits: number; changedBy: string; changedAt: string }
  | {
      type: 'BillingEventReceived';
      organizationId: string;
      eventId: string;
      billingType: BillingEventType;
      invoiceId: string | null;
      occurredAt: string | null;
      bodyHash: string;
      receivedAt: string;
    }
  | ({ type: typeof SUBSCRIPTION_UPDATED } & SubscriptionUpdatedData);

export type AccountCommand =
  | { type: 'OpenAccount'; organizationId: string }
  | { type: 'ChangePlan'; organizationId: string; monthlyCredits: number; by: string }
  | {
      type: 'RecordBillingEvent';
      organizationId: string;
      eventId: string;
      billingType: BillingEventType;
      invoiceId: string | null;
      occurredAt: string | null;
      bodyHash: string;
    };

export interface AccountState {
  opened: boolean;
  monthlyCredits: number;
  status: SubscriptionStatus;
  /**
   * eventId -> body hash and the subscription status right after that event (idempotency of
   * billing events, docs/decisions.md, "Billing": a retry answers with the original result). A Map: eventIds are
   * the payment provider's strings, and a plain object would answer `constructor`, `toString` or
   * `__proto__` from its prototype.
   */
  billingEvents: ReadonlyMap<string, { bodyHash: string; status: SubscriptionStatus }>;
  /** The billing event just received, whose status a following subscription.updated sets. */
  lastBillingEventId: string | null;
  /** When the billing event just received happened (its occurredAt, else when it was received), ms. */
  lastBillingEventAt: number | null;
  /**
   * When the notice that set the current status happened (ms), or null. A later-arriving notice
   * that happened before it is recorded but changes nothing: payment providers deliver out of
   * order, and a day-old `payment_failed` must not undo today's `payment_succeeded`.
   */
  statusSetAt: number | null;
}

/**
 * When a billing notice happened: its own occurredAt, else when the service received it; never
 * later than its receipt (a notice dated in the future would otherwise make every real one stale).
 */
const happenedAt = (occurredAt: string | null, receivedAt: string): number => {
  const received = Date.parse(receivedAt);
  const occurred = occurredAt === null ? NaN : Date.parse(occurredAt);
  // An unreadable occurredAt (the command carries RFC 3339; older events as sent) counts as its receipt.
  return Number.isFinite(occurred) ? Math.min(occurred, received) : received;
};

function subscriptionChange(status: SubscriptionStatus, type: BillingEventType): SubscriptionUpdatedData | null {
  switch (type) {
    case 'payment_failed':
      return status === 'active' ? { status: 'grace_period', previousStatus: status } : null;
    case 'grace_period_expired':
      return status === 'grace_period' ? { status: 'restricted', previousStatus: status, reason: 'PAYMENT_GRACE_PERIOD_EXPIRED' } : null;
    case 'payment_succeeded':
      if (status === 'grace_period' || status === 'restricted') return { status: 'active', previousStatus: status, recovered: true };
      return status === 'active' ? { status: 'active', previousStatus: 'active' } : null; // an ordinary charge: no `recovered`
    case 'subscription_canceled':
      return status === 'canceled' ? null : { status: 'canceled', previousStatus: status };
    default: {
      const never: never = type;
      return never;
    }
  }
}

export const accountDecider: Decider<AccountCommand, AccountEvent, AccountState> = {
  initialState: () => ({
    opened: false,
    monthlyCredits: DEFAULT_MONTHLY_CREDITS,
    status: 'active',
    billingEvents: new Map(),
    lastBillingEventId: null,
    lastBillingEventAt: null,
    statusSetAt: null,
  }),
  evolve(state, event) {
    switch (event.type) {
      case 'AccountOpened':
        return { ...state, opened: true, monthlyCredits: event.monthlyCredits, status: event.status, lastBillingEventId: null };
      case 'PlanChanged':
        return { ...state, monthlyCredits: event.monthlyCredits, lastBillingEventId: null };
      case 'BillingEventReceived':
        return {
          ...state,
          billingEvents: new Map(state.billingEvents).set(event.eventId, { bodyHash: event.bodyHash, status: state.status }),
          lastBillingEventId: event.eventId,
          lastBillingEventAt: happenedAt(event.occurredAt, event.receivedAt),
        };
      case SUBSCRIPTION_UPDATED: {
        // Appended right after the billing event that caused it: that event's result is this status.
        const last = state.lastBillingEventId === null ? undefined : state.billingEvents.get(state.lastBillingEventId);
        const billingEvents = last ? new Map(state.billingEvents).set(state.lastBillingEventId!, { ...last, status: event.status }) : state.billingEvents;
        return { ...state, status: event.status, billingEvents, lastBillingEventId: null, statusSetAt: state.lastBillingEventAt ?? state.statusSetAt };
      }
      default: {
        const never: never = event;
        return never;
      }
    }
  },
  decide(command, state, now) {
    const nowIso = now.toISOString();
    const open = (orgId: string): AccountEvent[] =>
      state.opened ? [] : [{ type: 'AccountOpened', organizationId: orgId, monthlyCredits: DEFAULT_MONTHLY_CREDITS, status: 'active', openedAt: nowIso }];
    switch (command.type) {
      case 'OpenAccount':
        return open(command.organizationId);
      case 'ChangePlan':
        if (command.monthlyCredits === state.monthlyCredits && state.opened) return [];
        return [
          ...open(command.organizationId),
          {
            type: 'PlanChanged',
            organizationId: command.organizationId,
            monthlyCredits: command.monthlyCredits,
            previousMonthlyCredits: state.monthlyCredits,
            changedBy: command.by,
            changedAt: nowIso,
          },
        ];
      case 'RecordBillingEvent': {
        const seen = state.billingEvents.get(command.eventId);
        if (seen !== undefined) {
          if (seen.bodyHash !== command.bodyHash) throw new DomainError(409, 'IDEMPOTENCY_KEY_REUSED', 'eventId was used with a different body');
          return [];
        }
        const events: AccountEvent[] = [
          ...open(command.organizationId),
          {
            type: 'BillingEventReceived',
            organizationId: command.organizationId,
            eventId: command.eventId,
            billingType: command.billingType,
            invoiceId: command.invoiceId,
            occurredAt: command.occurredAt,
            bodyHash: command.bodyHash,
            receivedAt: nowIso,
          },
        ];
        // A notice older than the one that set the current status changes nothing (recorded, and
        // answered with the current status); a cancellation always applies.
        const stale =
          command.billingType !== 'subscription_canceled' && state.statusSetAt !== null && happenedAt(command.occurredAt, nowIso) < state.statusSetAt;
        const change = stale ? null : subscriptionChange(state.status, command.billingType);
        if (change) events.push({ type: SUBSCRIPTION_UPDATED, ...change });
        return events;
      }
      default: {
        const never: never = command;
        return never;
      }
    }
  },
};

export const accountStream = (organizationId: string) => `webhook-dispatcher-account-${organizationId}`;
