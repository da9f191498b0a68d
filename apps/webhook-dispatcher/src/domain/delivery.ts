import { Decider, DomainError } from '@svc/decider';

/**
 * One delivery = one event to one endpoint (stream per delivery). The envelope is serialized
 * once, at creation, and kept in the event data (encrypted at rest by the event store); every
 * attempt sends exactly those bytes.
 */
export type DeliveryStatus = 'pending' | 'held' | 'delivered' | 'failed';

export interface Attempt {
  at: string;
  statusCode: number | null;
  durationMs: number;
  error: string | null;
}

/** Pauses after attempt n (1-based) before attempt n+1 (docs/decisions.md, "Endpoints, deliveries and retries"): 8 attempts in all. */
export const RETRY_DELAYS_MS = [5_000, 300_000, 1_800_000, 7_200_000, 18_000_000, 36_000_000, 36_000_000];
export const MAX_ATTEMPTS = RETRY_DELAYS_MS.length + 1;
/** Up to +20% on each pause. */
export const MAX_JITTER = 0.2;

export const WEBHOOK_DELIVERED = 'webhook.delivered';
/**
 * How long an attempt's lease keeps other senders off the same due attempt (service clock). An
 * attempt is bounded by the sender's one overall 15 s deadline (DELIVERY_TIMEOUT_MS, counted from
 * the request's creation, so a wait for a pooled socket is inside it), then one append records
 * it: 60 s is four times that deadline, comfortably above the longest attempt (a sender test
 * checks it stays above 2 x the deadline plus a margin). A sender that died mid-attempt leaves a
 * lease that expires; then the timer (still due) fires again and another sender takes a new lease.
 */
export const ATTEMPT_LEASE_MS = 60_000;

export type DeliveryEvent =
  | {
      type: 'WebhookDeliveryCreated';
      deliveryId: string;
      endpointId: string;
      organizationId: string;
      environmentId: string;
      eventId: string;
      eventType: string;
      caseId: string | null;
      /** The serialized envelope: the exact bytes signed and sent. */
      payload: string;
      status: 'pending' | 'held';
      nextAttemptAt: string | null;
      createdAt: string;
    }
  | { type: 'WebhookDeliveryReleased'; deliveryId: string; nextAttemptAt: string; releasedAt: string }
  | { type: 'WebhookAttemptStarted'; deliveryId: string; leaseId: string; dueAt: string; startedAt: string; leaseUntil: string }
  | {
      type: 'WebhookAttemptRecorded';
      deliveryId: string;
      /** The lease the attempt was made under (absent on attempts recorded before leases existed). */
      leaseId?: string;
      attempt: Attempt;
      status: DeliveryStatus;
      nextAttemptAt: string | null;
      /** The attempt was made for a due time that had moved meanwhile (a manual retry): status and schedule kept. */
      stale?: true;
    }
  | { type: 'WebhookRetryRequested'; deliveryId: string; nextAttemptAt: string; requestedBy: string; requestedAt: string }
  | { type: 'WebhookDeliveryAbandoned'; deliveryId: string; reason: 'endpoint_deleted'; abandonedAt: string }
  | {
      type: typeof WEBHOOK_DELIVERED;
      organizationId: string;
      environmentId: string;
      eventId: string;
      eventType: string;
      caseId: string | null;
      deliveredAt: string;
    };

export type DeliveryCommand =
  | {
      type: 'CreateDelivery';
      deliveryId: string;
      endpointId: string;
      organizationId: string;
      environmentId: string;
      eventId: string;
      eventType: string;
      caseId: string | null;
      payload: string;
      held: boolean;
      /**
       * The creator sends the first attempt itself: its lease (AttemptStarted) goes in the same
       * append as the creation, so of several creators (a redelivered event) only the one whose
       * append created the stream sends. Ignored for a held delivery.
       */
      leaseId?: string;
    }
  | {
      type: 'ReleaseDelivery';
      /** As for CreateDelivery: the releaser takes the first attempt's lease in the release append. */
      leaseId?: string;
    }
  | {
      /** Taken before sending, appended with the revision read: the one sender of a due attempt. */
      type: 'StartAttempt';
      /** The nextAttemptAt this attempt is for. */
      dueAt: string;
      leaseId: string;
    }
  | {
      type: 'RecordAttempt';
      /** The lease of StartAttempt: each attempt made is recorded once. */
      leaseId: string;
      attempt: Attempt;
      /** Random in [0, 1): the jitter of the next pause. */
      jitter: number;
    }
  | { type: 'RequestRetry'; by: string }
  | { type: 'AbandonDelivery'; reason: 'endpoint_deleted' };

export interface DeliveryState {
  deliveryId: string | null;
  organizationId: string | null;
  environmentId: string | null;
  eventId: string | null;
  eventType: string | null;
  caseId: string | null;
  status: DeliveryStatus;
  /**
   * Attempts made on the schedule: the count the retry limit (MAX_ATTEMPTS) and the next pause
   * read. A stale attempt (made for a due time that moved meanwhile) is logged but not counted.
   */
  attempts: number;
  nextAttemptAt: string | null;
  delivered: boolean;
  /** Attempts started and not yet recorded. */
  leases: { leaseId: string; dueAt: string; leaseUntil: string }[];
}

const after = (at: string, ms: number) => new Date(Date.parse(at) + ms).toISOString();

/** The first 2xx of a clinical_case.opened delivery: WEBHOOK_DELIVERED once (none for other events, none again). */
function caseDelivered(state: DeliveryState, at: string): DeliveryEvent[] {
  if (state.delivered || state.eventType !== 'clinical_case.opened') return [];
  return [
    {
      type: WEBHOOK_DELIVERED,
      organizationId: state.organizationId!,
      environmentId: state.environmentId!,
      eventId: state.eventId!,
      eventType: state.eventType,
      caseId: state.caseId,
      deliveredAt: at,
    },
  ];
}

/** The retry policy of docs/decisions.md, "Endpoints, deliveries and retries": 2xx delivered; 410 stops; anything else retries on the schedule. */
export function outcomeOf(statusCode: number | null): 'delivered' | 'gone' | 'retry' {
  if (statusCode !== null && statusCode >= 200 && statusCode < 300) return 'delivered';
  if (statusCode === 410) return 'gone';
  return 'retry';
}

export const deliveryDecider: Decider<DeliveryCommand, DeliveryEvent, DeliveryState> = {
  initialState: () => ({
    deliveryId: null,
    organizationId: null,
    environmentId: null,
    eventId: null,
    eventType: null,
    caseId: null,
    status: 'pending',
    attempts: 0,
    nextAttemptAt: null,
    delivered: false,
    leases: [],
  }),
  evolve(state, event) {
    switch (event.type) {
      case 'WebhookDeliveryCreated':
        return {
          ...state,
          deliveryId: event.deliveryId,
          organizationId: event.organizationId,
          environmentId: event.environmentId,
          eventId: event.eventId,
          eventType: event.eventType,
          caseId: event.caseId,
          status: event.status,
          nextAttemptAt: event.nextAttemptAt,
        };
      case 'WebhookDeliveryReleased':
        return { ...state, status: 'pending', nextAttemptAt: event.nextAttemptAt };
      case 'WebhookAttemptStarted':
        return { ...state, leases: [...state.leases, { leaseId: event.leaseId, dueAt: event.dueAt, leaseUntil: event.leaseUntil }] };
      case 'WebhookAttemptRecorded':
        return {
          ...state,
          attempts: event.stale ? state.attempts : state.attempts + 1,
          status: event.status,
          nextAttemptAt: event.nextAttemptAt,
          delivered: state.delivered || event.status === 'delivered',
          leases: event.leaseId === undefined ? state.leases : state.leases.filter((l) => l.leaseId !== event.leaseId),
        };
      case 'WebhookRetryRequested':
        return { ...state, status: 'pending', nextAttemptAt: event.nextAttemptAt };
      case 'WebhookDeliveryAbandoned':
        return { ...state, status: 'failed', nextAttemptAt: null };
      case WEBHOOK_DELIVERED:
        return state;
      default: {
        const never: never = event;
        return never;
      }
    }
  },
  decide(command, state, now) {
    const nowIso = now.toISOString();
    switch (command.type) {
      case 'CreateDelivery': {
        if (state.deliveryId) return []; // first writer wins: the same event for the same endpoint is one delivery
        const { type: _t, held, leaseId, ...rest } = command;
        const created: DeliveryEvent = {
          type: 'WebhookDeliveryCreated',
          ...rest,
          status: held ? 'held' : 'pending',
          nextAttemptAt: held ? null : nowIso,
          createdAt: nowIso,
        };
        if (held || leaseId === undefined) return [created];
        return [
          created,
          {
            type: 'WebhookAttemptStarted',
            deliveryId: command.deliveryId,
            leaseId,
            dueAt: nowIso,
            startedAt: nowIso,
            leaseUntil: after(nowIso, ATTEMPT_LEASE_MS),
          },
        ];
      }
      case 'ReleaseDelivery': {
        if (!state.deliveryId || state.status !== 'held') return [];
        const released: DeliveryEvent = { type: 'WebhookDeliveryReleased', deliveryId: state.deliveryId, nextAttemptAt: nowIso, releasedAt: nowIso };
        if (command.leaseId === undefined) return [released];
        return [
          released,
          {
            type: 'WebhookAttemptStarted',
            deliveryId: state.deliveryId,
            leaseId: command.leaseId,
            dueAt: nowIso,
            startedAt: nowIso,
            leaseUntil: after(nowIso, ATTEMPT_LEASE_MS),
          },
        ];
      }
      case 'StartAttempt': {
        if (!state.deliveryId || state.status !== 'pending' || state.nextAttemptAt !== command.dueAt) return []; // not due (any more)
        if (state.leases.some((l) => l.dueAt === command.dueAt && Date.parse(l.leaseUntil) > now.getTime())) return []; // another sender has it
        return [
          {
            type: 'WebhookAttemptStarted',
            deliveryId: state.deliveryId,
            leaseId: command.leaseId,
            dueAt: command.dueAt,
            startedAt: nowIso,
            leaseUntil: after(nowIso, ATTEMPT_LEASE_MS),
          },
        ];
      }
      case 'RecordAttempt': {
        const lease = state.leases.find((l) => l.leaseId === command.leaseId);
        if (!state.deliveryId || !lease) return []; // recorded already
        const outcome = outcomeOf(command.attempt.statusCode);
        if (state.status !== 'pending' || state.nextAttemptAt !== lease.dueAt) {
          // Made for a due time that moved meanwhile (a manual retry, or another attempt already
          // recorded): it happened, so it is logged, but it does not move the schedule or the
          // status, except that a 2xx means the receiver has the event: delivered.
          const delivered = outcome === 'delivered';
          const events: DeliveryEvent[] = [
            {
              type: 'WebhookAttemptRecorded',
              deliveryId: state.deliveryId,
              leaseId: command.leaseId,
              attempt: command.attempt,
              status: delivered ? 'delivered' : state.status,
              nextAttemptAt: delivered ? null : state.nextAttemptAt,
              stale: true,
            },
          ];
          if (delivered) events.push(...caseDelivered(state, command.attempt.at));
          return events;
        }
        const n = state.attempts + 1;
        let status: DeliveryStatus;
        let nextAttemptAt: string | null = null;
        if (outcome === 'delivered') status = 'delivered';
        else if (outcome === 'gone' || n >= MAX_ATTEMPTS) status = 'failed';
        else {
          status = 'pending';
          const jitter = Math.min(Math.max(command.jitter, 0), 1) * MAX_JITTER;
          // The schedule of docs/decisions.md, "Endpoints, deliveries and retries" only: a receiver's Retry-After does not move it (429 retries on it like 5xx).
          nextAttemptAt = after(command.attempt.at, Math.round(RETRY_DELAYS_MS[n - 1] * (1 + jitter)));
        }
        const events: DeliveryEvent[] = [
          { type: 'WebhookAttemptRecorded', deliveryId: state.deliveryId, leaseId: command.leaseId, attempt: command.attempt, status, nextAttemptAt },
        ];
        if (status === 'delivered') events.push(...caseDelivered(state, command.attempt.at));
        return events;
      }
      case 'RequestRetry':
        if (!state.deliveryId) throw new DomainError(404, 'NOT_FOUND', 'Delivery not found');
        if (state.status === 'held') throw new DomainError(409, 'INVALID_TRANSITION', 'The delivery is held until the organization signs its BAA');
        return [{ type: 'WebhookRetryRequested', deliveryId: state.deliveryId, nextAttemptAt: nowIso, requestedBy: command.by, requestedAt: nowIso }];
      case 'AbandonDelivery':
        if (!state.deliveryId || (state.status !== 'pending' && state.status !== 'held')) return [];
        return [{ type: 'WebhookDeliveryAbandoned', deliveryId: state.deliveryId, reason: command.reason, abandonedAt: nowIso }];
      default: {
        const never: never = command;
        return never;
      }
    }
  },
};

export const deliveryStream = (deliveryId: string) => `webhook-dispatcher-delivery-${deliveryId}`;
