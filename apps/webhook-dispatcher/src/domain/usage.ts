import { Decider } from '@svc/eventstore';

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
  | { type: 'CreditUsed'; organizationId: string; environmentId: string | null; source: CreditSource; sourceId: string; periodStart: string; creditsUsed: number; usedAt: string }
  | ({ type: typeof USAGE_THRESHOLD_REACHED; organizationId: string } & UsageThresholdData);

export type UsageCommand = {
  type: 'UseCredit';
  organizationId: string;
  environmentId: string | null;
  source: CreditSource;
  /** The id of what used the credit (check-in, run, case): one credit each. */
  sourceId: string;
  periodStart: string;
  /** The plan in force now (from the account). */
  monthlyCredits: number;
};

export interface UsageState {
  creditsUsed: number;
  sources: Record<string, true>;
  /** threshold -> plan size it was reported for (a larger plan re-arms it). */
  reported: Partial<Record<Threshold, number>>;
}

export const usageDecider: Decider<UsageCommand, UsageEvent, UsageState> = {
  initialState: () => ({ creditsUsed: 0, sources: {}, reported: {} }),
  evolve(state, event) {
    switch (event.type) {
      case 'CreditUsed': {
        // The source set is extended in place: copying it per event made folding a month's
        // stream quadratic (measured: most of the CPU at 1000 credits). States are only ever
        // folded forward from initialState() (a fresh object), so no earlier state is observed.
        state.sources[`${event.source}:${event.sourceId}`] = true;
        return { ...state, creditsUsed: event.creditsUsed };
      }
      case USAGE_THRESHOLD_REACHED:
        return { ...state, reported: { ...state.reported, [event.threshold]: event.monthlyCredits } };
      default: {
        const never: never = event;
        return never;
      }
    }
  },
  decide(command, state, now) {
    if (state.sources[`${command.source}:${command.sourceId}`]) return [];
    const creditsUsed = state.creditsUsed + 1;
    const monthly = command.monthlyCredits;
    const events: UsageEvent[] = [
      { type: 'CreditUsed', organizationId: command.organizationId, environmentId: command.environmentId, source: command.source, sourceId: command.sourceId, periodStart: command.periodStart, creditsUsed, usedAt: now.toISOString() },
    ];
    for (const threshold of THRESHOLDS) {
      const reached = creditsUsed * 100 >= threshold * monthly;
      const reportedFor = state.reported[threshold];
      if (reached && (reportedFor === undefined || reportedFor < monthly)) {
        events.push({
          type: USAGE_THRESHOLD_REACHED,
          organizationId: command.organizationId,
          threshold,
          creditsUsed,
          monthlyCredits: monthly,
          remaining: Math.max(0, monthly - creditsUsed),
          paused: creditsUsed >= monthly,
          periodStart: command.periodStart,
        });
      }
    }
    return events;
  },
};

export const usageStream = (organizationId: string, periodStart: string) => `webhook-dispatcher-usage-${organizationId}-${periodStart.slice(0, 7)}`;
