import { RecordedEvent } from '@svc/eventstore';
import { Projection, ProjectionTx, cancelTimer, scheduleTimer } from '@svc/read-store';
import { Keyring } from '@svc/security';
import { AccountEvent, DEFAULT_MONTHLY_CREDITS, SUBSCRIPTION_UPDATED, SubscriptionStatus } from '../domain/account';
import { STREAM_PREFIX } from '../domain/catalog';
import { Attempt, DeliveryEvent, DeliveryStatus, WEBHOOK_DELIVERED } from '../domain/delivery';
import { EndpointEvent } from '../domain/endpoint';
import { USAGE_THRESHOLD_REACHED, UsageEvent } from '../domain/usage';

/**
 * The name carries the read model's layout version (`-v3`: the delivery log scored by negated
 * creation time, newest first, and deliveries also indexed by status); a new name rebuilds the
 * read model from the streams once.
 */
export const DISPATCHER_PROJECTION = 'webhook-dispatcher-v3';

export const Collections = {
  endpoints: 'webhooks.endpoints',
  deliveries: 'webhooks.deliveries',
  /** The same documents, partitioned by `${endpointId}|${status}` (the deliveries list's status filter). */
  deliveriesByStatus: 'webhooks.deliveries-by-status',
  held: 'webhooks.held',
  timers: 'webhooks.timers',
  accounts: 'webhooks.accounts',
  usage: 'webhooks.usage',
  baa: 'webhooks.baa',
} as const;
export const TIMER_PARTITION = 'due';

export interface EndpointDoc {
  id: string;
  organizationId: string;
  environmentId: string;
  url: string;
  events: string[];
  description: string | null;
  /** Signing secret, encrypted with the environment key (KEYRING). */
  secret: string;
  createdAt: string;
  deletedAt: string | null;
}

export interface DeliveryDoc {
  id: string;
  endpointId: string;
  organizationId: string;
  environmentId: string;
  eventId: string;
  eventType: string;
  status: DeliveryStatus;
  attempts: Attempt[];
  nextAttemptAt: string | null;
  createdAt: string;
}

export interface DeliveryTimer {
  id: string;
  dueAt: string;
  deliveryId: string;
  [k: string]: unknown;
}

export interface AccountDoc {
  organizationId: string;
  monthlyCredits: number;
  status: SubscriptionStatus;
}

export interface UsageDoc {
  organizationId: string;
  periodStart: string;
  creditsUsed: number;
}

type DispatcherEvent = EndpointEvent | DeliveryEvent | AccountEvent | UsageEvent;

export const deliveryStatusPartition = (endpointId: string, status: DeliveryStatus) => `${endpointId}|${status}`;

/** `previous`: the document's status before this event (null: a new document). */
function putDelivery(tx: ProjectionTx, doc: DeliveryDoc, previous: DeliveryStatus | null): void {
  // Negated creation time: a partition lists newest first, so `limit` keeps the most recent.
  tx.put(Collections.deliveries, doc.id, doc, { partition: doc.endpointId, score: -Date.parse(doc.createdAt) });
  tx.put(Collections.deliveriesByStatus, doc.id, doc, { partition: deliveryStatusPartition(doc.endpointId, doc.status), score: -Date.parse(doc.createdAt) });
  if (doc.status === 'pending' && doc.nextAttemptAt) {
    scheduleTimer(tx, Collections.timers, TIMER_PARTITION, { id: doc.id, dueAt: doc.nextAttemptAt, deliveryId: doc.id });
  } else {
    cancelTimer(tx, Collections.timers, doc.id);
  }
  if (doc.status === 'held') tx.put(Collections.held, doc.id, { id: doc.id, organizationId: doc.organizationId }, { partition: doc.organizationId });
  // A held document exists only while the delivery document says `held` (both written here).
  else if (previous === 'held') tx.delete(Collections.held, doc.id);
}

/** Endpoints (secret re-encrypted), the delivery log, held deliveries, retry timers, plan and usage. */
export function dispatcherProjection(keyring: Keyring): Projection {
  return {
    name: DISPATCHER_PROJECTION,
    // Every collection but the BAA records, which the dispatch service writes itself.
    collections: Object.values(Collections).filter((c) => c !== Collections.baa),
    streamPrefixes: [STREAM_PREFIX],
    async apply(recorded: RecordedEvent, tx: ProjectionTx) {
      const event = { type: recorded.type, ...(recorded.data as object) } as DispatcherEvent;
      const orgId = recorded.metadata.organizationId;
      switch (event.type) {
        case 'WebhookEndpointCreated': {
          const doc: EndpointDoc = {
            id: event.endpointId,
            organizationId: event.organizationId,
            environmentId: event.environmentId,
            url: event.url,
            events: event.events,
            description: event.description,
            secret: keyring.encrypt(event.environmentId, event.secret),
            createdAt: event.createdAt,
            deletedAt: null,
          };
          tx.put(Collections.endpoints, doc.id, doc, { partition: doc.environmentId, score: Date.parse(doc.createdAt) });
          return;
        }
        case 'WebhookEndpointSecretRotated': {
          const doc = await tx.get<EndpointDoc>(Collections.endpoints, event.endpointId);
          if (!doc) return;
          tx.put(
            Collections.endpoints,
            doc.id,
            { ...doc, secret: keyring.encrypt(doc.environmentId, event.secret) },
            { partition: doc.environmentId, score: Date.parse(doc.createdAt) },
          );
          return;
        }
        case 'WebhookEndpointDeleted': {
          const doc = await tx.get<EndpointDoc>(Collections.endpoints, event.endpointId);
          if (!doc) return;
          // Out of the environment's listing; kept (without partition) so its deliveries answer 404 cleanly.
          tx.put(Collections.endpoints, doc.id, { ...doc, deletedAt: event.deletedAt });
          return;
        }
        case 'WebhookDeliveryCreated':
          putDelivery(
            tx,
            {
              id: event.deliveryId,
              endpointId: event.endpointId,
              organizationId: event.organizationId,
              environmentId: event.environmentId,
              eventId: event.eventId,
              eventType: event.eventType,
              status: event.status,
              attempts: [],
              nextAttemptAt: event.nextAttemptAt,
              createdAt: event.createdAt,
            },
            null,
          );
          return;
        case 'WebhookDeliveryReleased':
        case 'WebhookRetryRequested': {
          const doc = await tx.get<DeliveryDoc>(Collections.deliveries, event.deliveryId);
          if (doc) putDelivery(tx, { ...doc, status: 'pending', nextAttemptAt: event.nextAttemptAt }, doc.status);
          return;
        }
        case 'WebhookAttemptRecorded': {
          const doc = await tx.get<DeliveryDoc>(Collections.deliveries, event.deliveryId);
          if (doc)
            putDelivery(tx, { ...doc, status: event.status, attempts: [...doc.attempts, event.attempt], nextAttemptAt: event.nextAttemptAt }, doc.status);
          return;
        }
        case 'WebhookDeliveryAbandoned': {
          const doc = await tx.get<DeliveryDoc>(Collections.deliveries, event.deliveryId);
          if (doc) putDelivery(tx, { ...doc, status: 'failed', nextAttemptAt: null }, doc.status);
          return;
        }
        case 'WebhookAttemptStarted':
          // A sender's lease: nothing to show until the attempt is recorded, but the timer waits
          // until the lease expires (same dueAt, so a sender that died is replaced then), instead
          // of firing into a lease that is held.
          tx.put(Collections.timers, event.deliveryId, { id: event.deliveryId, dueAt: event.dueAt, deliveryId: event.deliveryId } satisfies DeliveryTimer, {
            partition: TIMER_PARTITION,
            score: Date.parse(event.leaseUntil),
          });
          return;
        case WEBHOOK_DELIVERED:
          return;
        case 'AccountOpened':
          tx.put(Collections.accounts, event.organizationId, {
            organizationId: event.organizationId,
            monthlyCredits: event.monthlyCredits,
            status: event.status,
          } satisfies AccountDoc);
          return;
        case 'PlanChanged': {
          const doc = (await tx.get<AccountDoc>(Collections.accounts, event.organizationId)) ?? {
            organizationId: event.organizationId,
            monthlyCredits: DEFAULT_MONTHLY_CREDITS,
            status: 'active',
          };
          tx.put(Collections.accounts, event.organizationId, { ...doc, monthlyCredits: event.monthlyCredits });
          return;
        }
        case 'BillingEventReceived':
          return;
        case SUBSCRIPTION_UPDATED: {
          if (!orgId) return;
          const doc = (await tx.get<AccountDoc>(Collections.accounts, orgId)) ?? {
            organizationId: orgId,
            monthlyCredits: DEFAULT_MONTHLY_CREDITS,
            status: 'active',
          };
          tx.put(Collections.accounts, orgId, { ...doc, status: event.status });
          return;
        }
        case 'CreditUsed': {
          const doc = await tx.get<UsageDoc>(Collections.usage, event.organizationId);
          // Only forward in time: an older period's late credit does not move the current count.
          if (doc && doc.periodStart > event.periodStart) return;
          tx.put(Collections.usage, event.organizationId, {
            organizationId: event.organizationId,
            periodStart: event.periodStart,
            creditsUsed: event.creditsUsed,
          } satisfies UsageDoc);
          return;
        }
        case USAGE_THRESHOLD_REACHED:
          return;
        default: {
          const never: never = event;
          return never;
        }
      }
    },
  };
}
