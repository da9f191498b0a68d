import { Inject, Injectable } from '@nestjs/common';
import { TenantDirectory } from '@svc/access';
import { getLogger } from '@svc/http';
import { IntegrationMessage } from '@svc/messaging';
import { PROJECTIONS } from '@svc/platform';
import { ProjectionRunner, READ_STORE, ReadStore } from '@svc/read-store';
import { isAccountEvent, isCaseEvent } from '../domain/catalog';
import { deliveryStream } from '../domain/delivery';
import { Collections, DISPATCHER_PROJECTION, EndpointDoc } from '../read-model/dispatcher.projection';
import { AttemptRunner, Created, Leased } from './attempt-runner';
import { AttemptSlots } from './attempt-slots';
import { DeliveryCommands, SYSTEM } from './delivery-commands';
import { stableUuid } from './ids';
import { RetryWorker } from './retry-worker';

/**
 * How long (real time) one release of held deliveries may wait for direct slots in all; past it,
 * the rest of the release goes without leases (the timer worker sends them). Bounds how long the
 * BaaSigned hand-off of a large backlog to a slow endpoint stays open on the bus.
 */
export const RELEASE_SLOT_WAIT_MS = 5_000;

/**
 * Integration events become deliveries: one per subscribed endpoint, held while the organization
 * has no signed BAA and released when BaaSigned arrives. A delivery created or released with a
 * direct slot carries its first attempt's lease in the same append and is sent by this process at
 * once; the others wait for the retry worker.
 */
@Injectable()
export class DispatchService {
  private readonly log = getLogger();

  constructor(
    private readonly deliveries: DeliveryCommands,
    @Inject(PROJECTIONS) private readonly projections: ProjectionRunner,
    @Inject(READ_STORE) private readonly readStore: ReadStore,
    private readonly tenants: TenantDirectory,
    private readonly slots: AttemptSlots,
    private readonly attempts: AttemptRunner,
    private readonly worker: RetryWorker,
  ) {}

  private async applied(position: number): Promise<void> {
    if (position > 0) await this.projections.waitFor([DISPATCHER_PROJECTION], position);
  }

  private async baaSigned(organizationId: string): Promise<boolean> {
    const org = await this.tenants.organization(organizationId);
    if (org?.baaSignedAt) return true;
    return (await this.readStore.get(Collections.baa, organizationId)) !== null;
  }

  /** Sends a leased first attempt (its slot taken) and records it, tracked for shutdown; never rejects. */
  private sendDirect(stream: string, leaseId: string, leased: Leased, created: Created, endpointId: string): void {
    const run = this.attempts.send(stream, leaseId, leased, created, endpointId).catch((err) => {
      // The lease is in the stream: the timer (moved to the lease's expiry) fires it again then.
      this.log.warn({ deliveryId: leased.state.deliveryId, error: (err as Error)?.name }, 'webhook attempt not recorded; the timer retries it after the lease');
    });
    this.slots.track(leased.state.deliveryId!, run);
  }

  /** Creates one delivery per subscribed endpoint (idempotent: delivery id = f(endpoint, event)). */
  async dispatch(m: IntegrationMessage): Promise<void> {
    this.slots.assertRunning();
    const orgId = m.metadata.organizationId;
    if (!orgId) return;
    let environments: string[];
    let data: unknown = m.data;
    let held = false;
    if (isCaseEvent(m.type)) {
      if (!m.metadata.environmentId) return;
      environments = [m.metadata.environmentId];
      held = !(await this.baaSigned(orgId));
    } else if (isAccountEvent(m.type)) {
      const org = await this.tenants.organization(orgId);
      // Not there yet (the directory's read model lags, or a read failed): fail, so the relay
      // redelivers it later, rather than dropping the event for every environment.
      if (!org) throw new Error('organization not found in the tenant directory: account event not dispatched yet');
      environments = org.environments.map((e) => e.id);
      data = accountData(m.type, m.data as Record<string, unknown>);
    } else return;

    const eventId = m.metadata.eventId;
    // Serialized once: these bytes are stored, signed and sent on every attempt.
    const payload = JSON.stringify({ id: eventId, type: m.type, createdAt: m.metadata.recordedAt, data });
    const caseId = typeof (m.data as { caseId?: unknown })?.caseId === 'string' ? (m.data as { caseId: string }).caseId : null;
    let position = 0;
    let createdHeld = false;
    const recordedAt = Date.parse(m.metadata.recordedAt);
    for (const environmentId of environments) {
      const endpoints = await this.readStore.list<EndpointDoc>(Collections.endpoints, environmentId);
      for (const ep of endpoints) {
        if (ep.deletedAt || !ep.events.includes(m.type)) continue;
        // An endpoint gets the events recorded from its creation on, never older ones: a relay
        // that replays the log (after its checkpoint was lost) must not send a new endpoint's
        // owner the history (with its PHI) of events from before it subscribed.
        if (Date.parse(ep.createdAt) > recordedAt) continue;
        const deliveryId = stableUuid('delivery', ep.id, eventId);
        const stream = deliveryStream(deliveryId);
        // Not held: the first attempt's lease goes in the creating append and this process sends
        // it now (no wait for the read model, the timer document or the poll).
        this.slots.assertRunning();
        const leaseId = held ? undefined : this.slots.take();
        let r;
        try {
          r = await this.deliveries.handle(
            stream,
            {
              type: 'CreateDelivery',
              deliveryId,
              endpointId: ep.id,
              organizationId: orgId,
              environmentId,
              eventId,
              eventType: m.type,
              caseId,
              payload,
              held,
              ...(leaseId ? { leaseId } : {}),
            },
            { actor: SYSTEM, organizationId: orgId, environmentId, causationId: eventId, correlationId: m.metadata.correlationId },
          );
        } catch (err) {
          if (leaseId) this.slots.giveBack();
          throw err;
        }
        if (leaseId && r.newEvents.some((e) => e.type === 'WebhookAttemptStarted')) {
          this.sendDirect(stream, leaseId, { state: r.state, revision: r.revision }, { eventId, eventType: m.type, payload }, ep.id);
        } else {
          if (leaseId) this.slots.giveBack();
          position = Math.max(position, r.position);
        }
        createdHeld ||= held && r.newEvents.length > 0;
      }
    }
    if (createdHeld) {
      // The BAA may have been signed while these were being held: the BaaSigned handler writes
      // the signature before it lists held deliveries, and we re-read it once ours are listed.
      await this.applied(position);
      if (await this.baaSigned(orgId)) await this.releaseHeld(orgId);
    } else if (position > 0) {
      // Not awaited: the timer doc exists once the projection applied the delivery; fire it then
      // (the poll would within 250 ms anyway). The bus handler does not wait for the read model.
      this.applied(position).then(
        () => this.worker.kick(),
        () => undefined,
      );
    }
  }

  /** BaaSigned: remember it, then release every held delivery of the organization. */
  async onBaaSigned(organizationId: string, baaSignedAt: string | null): Promise<void> {
    await this.readStore.write([{ op: 'put', collection: Collections.baa, key: organizationId, doc: { organizationId, baaSignedAt } }]);
    await this.releaseHeld(organizationId);
  }

  private async releaseHeld(organizationId: string): Promise<void> {
    this.slots.assertRunning();
    const slotWaitUntil = performance.now() + RELEASE_SLOT_WAIT_MS;
    let position = 0;
    for (;;) {
      const held = await this.readStore.list<{ id: string }>(Collections.held, organizationId, { limit: 500 });
      if (held.length === 0) break;
      // One stream per delivery: the releases run together and share group commits. Each release
      // takes the first attempt's lease in the same append and this process sends it at once; past
      // the bound of direct attempts a release waits for a slot to be given back (the deliveries
      // stay held meanwhile), for RELEASE_SLOT_WAIT_MS in all; after that the rest are released
      // without a lease and the timer worker sends them.
      // The page's high-water mark: the position of each release appended or, for a release that
      // was a no-op (released already, its held document not yet taken out by the projection),
      // of the stream's last event, which takes it out once applied.
      let batchPosition = 0;
      // A page's deliveries mostly share a few endpoints: each is read once per page.
      const endpoints = new Map<string, Promise<EndpointDoc | null>>();
      const endpointOf = (id: string) => {
        let ep = endpoints.get(id);
        if (!ep) endpoints.set(id, (ep = this.readStore.get<EndpointDoc>(Collections.endpoints, id)));
        return ep;
      };
      await Promise.all(
        held.map(async (h) => {
          const stream = deliveryStream(h.id);
          // The stream has what the release needs (endpoint, environment, the signed payload).
          const loaded = await this.deliveries.load(stream);
          const created = loaded.events.find((e) => e.type === 'WebhookDeliveryCreated')?.data as (Created & { endpointId: string }) | undefined;
          let ep = created ? await endpointOf(created.endpointId) : null;
          let leaseId: string | undefined;
          let waited = false;
          if (created && ep && !ep.deletedAt && loaded.state.status === 'held') ({ leaseId, waited } = await this.slots.takeWhenFree(slotWaitUntil));
          const ctx = { actor: SYSTEM, organizationId, environmentId: loaded.state.environmentId };
          let r;
          try {
            if (leaseId && waited) {
              // The endpoint may have been deleted or its secret rotated while this waited.
              ep = await this.readStore.get<EndpointDoc>(Collections.endpoints, created!.endpointId);
              if (!ep || ep.deletedAt) {
                this.slots.giveBack();
                leaseId = undefined;
              }
            }
            r = await this.deliveries.handle(stream, { type: 'ReleaseDelivery', ...(leaseId ? { leaseId } : {}) }, ctx, {
              state: loaded.state,
              revision: loaded.revision,
            });
          } catch (err) {
            if (leaseId) this.slots.giveBack();
            throw err;
          }
          batchPosition = Math.max(batchPosition, r.newEvents.length > 0 ? r.position : (loaded.events.at(-1)?.position ?? 0));
          if (leaseId && created && r.newEvents.some((e) => e.type === 'WebhookAttemptStarted'))
            this.sendDirect(stream, leaseId, { state: r.state, revision: r.revision }, created, created.endpointId);
          else {
            if (leaseId) this.slots.giveBack();
            position = Math.max(position, r.position);
          }
        }),
      );
      if (held.length < 500) break;
      // The next page must not list these again: wait until the projection has taken them out
      // (a page of no-ops waits for the events that released them, rather than re-listing it).
      if (batchPosition === 0) {
        this.log.warn({ count: held.length }, 'held deliveries without a stream: release stopped');
        break;
      }
      await this.applied(batchPosition);
    }
    // Released without a lease (endpoint deleted, or no slot in time): their timers fire once the projection has them.
    if (position > 0) {
      this.applied(position).then(
        () => this.worker.kick(),
        () => undefined,
      );
    }
  }
}

/** The webhook `data` of an account event (the stored event carries the organization too). */
function accountData(type: string, d: Record<string, unknown>): Record<string, unknown> {
  if (type === 'billing.usage_threshold_reached') {
    const { threshold, creditsUsed, monthlyCredits, remaining, paused, periodStart } = d;
    return { threshold, creditsUsed, monthlyCredits, remaining, paused, periodStart };
  }
  const { status, previousStatus, reason, recovered } = d;
  return { status, previousStatus, ...(reason !== undefined ? { reason } : {}), ...(recovered !== undefined ? { recovered } : {}) };
}
