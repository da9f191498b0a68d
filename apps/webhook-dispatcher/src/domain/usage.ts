import { Decider, DomainError } from '@svc/decider';

export const USAGE_THRESHOLD_REACHED = 'billing.usage_threshold_reached';
export const THRESHOLDS = [80, 95, 100] as const;
export type Threshold = (typeof THRESHOLDS)[number];
export type CreditSource = 'check_in' | 'workflow_run' | 'clinical_case';

/** Start of the monthly usage period (calendar month, UTC) holding `now`. */
export function periodStartOf(now: Date): string {
  return new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), 1)).toISOString();
}

export interface UsageThresholdData {
  threshold: Threshold;
  creditsUsed: number;
  monthlyCredits: number;
  remaining: number;
  paused: boolean;
  periodStart: string;
}

/** Credits of one organization in one monthly period (stream per organization and period). */
export type UsageEvent =
  | {
      type: 'CreditUsed';
      organizationId: string;
      environmentId: string | null;
      source: CreditSource;
      sourceId: string;
      periodStart: string;
      creditsUsed: number;
      usedAt: string;
    }
  | ({ type: typeof USAGE_THRESHOLD_REACHED; organizationId: string } & UsageThresholdData);

export type UsageCommand =
  | {
      type: 'UseCredit';
      organizationId: string;
      environmentId: string | null;
      source: CreditSource;
      /** The id of what used the credit (check-in, run, case): one credit each. */
      sourceId: string;
      periodStart: string;
      /** The plan in force now (from the account). */
      monthlyCredits: number;
      /**
       * A reservation before the work is done (a check-in about to be sent, a run about to start):
       * refused with 409 USAGE_PAUSED when the period's credits are used up, so that work started
       * at the same moment cannot together go past the plan. Without it, a credit is recorded
       * whatever the count (a fact that already happened).
       */
      withinPlan?: boolean;
    }
  | {
      /** A plan change (or a repeat of it): report what the period's usage has reached under the new plan. */
      type: 'ApplyPlan';
      organizationId: string;
      periodStart: string;
      monthlyCredits: number;
    };

/**
 * The sources already credited, as a persistent set: an append-only log (source key -> its
 * index) shared by the states of one fold, of which a state sees the first `count` entries.
 * Adding to the newest state appends in place (no earlier state can see an entry at or past its
 * own count); adding to an older state (a branch) copies that state's prefix first. So `evolve`
 * never changes what its input state holds, and folding a month stays linear (copying a set per
 * event made it quadratic: most of the CPU at 1000 credits).
 */
export interface SourceSet {
  readonly log: { readonly index: Map<string, number>; length: number };
  readonly count: number;
}

const emptySources = (): SourceSet => ({ log: { index: new Map(), length: 0 }, count: 0 });

export function hasSource(set: SourceSet, key: string): boolean {
  const i = set.log.index.get(key);
  return i !== undefined && i < set.count;
}

function withSource(set: SourceSet, key: string): SourceSet {
  if (hasSource(set, key)) return set;
  let log = set.log;
  if (log.length !== set.count) {
    // A later state already extended this log: branch off with a copy of our own prefix.
    const index = new Map<string, number>();
    for (const [k, i] of log.index) if (i < set.count) index.set(k, i);
    log = { index, length: set.count };
  }
  log.index.set(key, log.length);
  log.length++;
  return { log, count: set.count + 1 };
}

export interface UsageState {
  creditsUsed: number;
  sources: SourceSet;
  /** threshold -> plan size it was reported for (once per period: a reported threshold is never sent again). */
  reported: Partial<Record<Threshold, number>>;
}

export const usageDecider: Decider<UsageCommand, UsageEvent, UsageState> = {
  initialState: () => ({ creditsUsed: 0, sources: emptySources(), reported: {} }),
  evolve(state, event) {
    switch (event.type) {
      case 'CreditUsed':
        return { ...state, sources: withSource(state.sources, `${event.source}:${event.sourceId}`), creditsUsed: event.creditsUsed };
      case USAGE_THRESHOLD_REACHED:
        return { ...state, reported: { ...state.reported, [event.threshold]: event.monthlyCredits } };
      default: {
        const never: never = event;
        return never;
      }
    }
  },
  decide(command, state, now) {
    switch (command.type) {
      case 'UseCredit': {
        if (hasSource(state.sources, `${command.source}:${command.sourceId}`)) return [];
        if (command.withinPlan && state.creditsUsed >= command.monthlyCredits) throw new DomainError(409, 'USAGE_PAUSED', 'The month’s credits are used up');
        const creditsUsed = state.creditsUsed + 1;
        return [
          {
            type: 'CreditUsed',
            organizationId: command.organizationId,
            environmentId: command.environmentId,
            source: command.source,
            sourceId: command.sourceId,
            periodStart: command.periodStart,
            creditsUsed,
            usedAt: now.toISOString(),
          },
          ...thresholdsReached(state, command.organizationId, command.periodStart, creditsUsed, command.monthlyCredits),
        ];
      }
      case 'ApplyPlan':
        return thresholdsReached(state, command.organizationId, command.periodStart, state.creditsUsed, command.monthlyCredits);
      default: {
        const never: never = command;
        return never;
      }
    }
  },
};

/**
 * The spec (docs/decisions.md, "Billing"): "sent once each ... as use reaches 80%, 95% and 100% of the month's credits".
 * Each threshold is reported at most once per period, the first time the period's usage is at or
 * above it under the plan in force: on the credit that reaches it, or on a plan change that puts
 * usage past it (a smaller plan can cross several at once). A larger plan later in the period
 * re-arms nothing. `creditsUsed` is the count at that moment.
 */
function thresholdsReached(state: UsageState, organizationId: string, periodStart: string, creditsUsed: number, monthly: number): UsageEvent[] {
  const events: UsageEvent[] = [];
  if (creditsUsed <= 0) return events;
  for (const threshold of THRESHOLDS) {
    if (state.reported[threshold] !== undefined || creditsUsed * 100 < threshold * monthly) continue;
    events.push({
      type: USAGE_THRESHOLD_REACHED,
      organizationId,
      threshold,
      creditsUsed,
      monthlyCredits: monthly,
      remaining: Math.max(0, monthly - creditsUsed),
      paused: creditsUsed >= monthly,
      periodStart,
    });
  }
  return events;
}

export const usageStream = (organizationId: string, periodStart: string) => `webhook-dispatcher-usage-${organizationId}-${periodStart.slice(0, 7)}`;
