import { randomUUID } from 'node:crypto';
import { Inject, Injectable, OnModuleDestroy } from '@nestjs/common';
import { CLOCK, Clock, WALL_CLOCK, WallClock } from '@svc/clock';
import { CommandHandler, EVENT_STORE, EventStore } from '@svc/eventstore';
import { ApiError, ListCursors, TenantDirectory, getLogger } from '@svc/http';
import { IntegrationMessage } from '@svc/messaging';
import { CONFIG, InFlight, PROJECTIONS, ServiceConfig } from '@svc/platform';
import { ProjectionRunner, READ_STORE, ReadStore, TimerScheduler } from '@svc/read-store';
import { KEYRING, Keyring, addressProblem, randomToken, urlProblemMessage, urlSyntaxProblem } from '@svc/security';
import { isAccountEvent, isCaseEvent } from '../domain/catalog';
import { DeliveryCommand, DeliveryEvent, DeliveryState, DeliveryStatus, deliveryDecider, deliveryStream } from '../domain/delivery';
import { EndpointCommand, EndpointEvent, EndpointState, endpointDecider, endpointStream } from '../domain/endpoint';
import { Collections, DISPATCHER_PROJECTION, DeliveryDoc, DeliveryTimer, EndpointDoc, TIMER_PARTITION, deliveryStatusPartition } from '../adapters/projections/dispatcher.projection';
import { stableUuid } from './ids';
import { SendResult } from '../adapters/outbound/send-webhook';
import { WebhookSender } from '../adapters/outbound/webhook-sender';

export interface StaffActor {
  sub: string;
}

const SYSTEM = 'system:webhook-dispatcher';
/**
 * Most first attempts sent straight from the append that created or released their delivery
 * (running at once); past this, new deliveries are created without a lease and wait for the timer
 * worker (which runs at most its batchSize attempts at once), and releases of held deliveries wait
 * for a slot to be given back.
 */
export const MAX_DIRECT_ATTEMPTS = 512;
/**
 * How long (real time) one release of held deliveries may wait for direct slots in all; past it,
 * the rest of the release goes without leases (the timer worker sends them). Bounds how long the
 * BaaSigned hand-off of a large backlog to a slow endpoint stays open on the bus.
 */
export const RELEASE_SLOT_WAIT_MS = 5_000;

/** What an attempt needs of the delivery's creation event. */
type Created = Pick<Extract<DeliveryEvent, { type: 'WebhookDeliveryCreated' }>, 'eventId' | 'eventType' | 'payload'>;
type Leased = { state: DeliveryState; revision: number };

/**
 * An attempt of this process from just before it reads the endpoint (URL, secret, existence) until
 * it has ended (answered, failed, timed out, or not sent). A secret rotation or a deletion answers
 * only once the ones that read the endpoint before the change have ended (see settleAttempts).
 */
interface AttemptInFlight {
  /** The endpoint document's (encrypted) secret it signs with; undefined while it is still reading. */
  secretRef?: string;
  /** Aborted by a deletion: ends the attempt if it is not on the wire yet. */
  readonly controller: AbortController;
}

export const endpointView = (d: EndpointDoc) => ({ id: d.id, url: d.url, events: d.events, description: d.description, createdAt: d.createdAt });
export const deliveryView = (d: DeliveryDoc) => ({ id: d.id, eventId: d.eventId, eventType: d.eventType, status: d.status, attempts: d.attempts, nextAttemptAt: d.nextAttemptAt });

/** Webhook endpoints, deliveries (creation from integration events, BAA hold) and the retry worker. */
@Injectable()
export class WebhooksService implements OnModuleDestroy {
  private readonly endpoints: CommandHandler<EndpointCommand, EndpointEvent, EndpointState>;
  private readonly deliveries: CommandHandler<DeliveryCommand, DeliveryEvent, DeliveryState>;
  private readonly scheduler: TimerScheduler<DeliveryTimer>;
  private readonly log = getLogger();
  /** Attempts go out on a thread of their own (the compiled build), else on the event loop. */
  private readonly sender = new WebhookSender();

  constructor(
    @Inject(EVENT_STORE) store: EventStore,
    @Inject(CLOCK) private readonly clock: Clock,
    @Inject(PROJECTIONS) private readonly projections: ProjectionRunner,
    @Inject(READ_STORE) private readonly readStore: ReadStore,
    @Inject(KEYRING) private readonly keyring: Keyring,
    @Inject(CONFIG) private readonly config: ServiceConfig,
    private readonly tenants: TenantDirectory,
    /** Real time, for the signature timestamp of each attempt only. */
    @Inject(WALL_CLOCK) private readonly wallClock: WallClock,
  ) {
    const now = () => clock.now();
    this.endpoints = new CommandHandler(store, endpointDecider, now);
    this.deliveries = new CommandHandler(store, deliveryDecider, now);
    this.scheduler = new TimerScheduler<DeliveryTimer>({
      readStore,
      clock,
      collection: Collections.timers,
      partition: TIMER_PARTITION,
      handler: (t) => this.attempt(t),
      pollMs: 250,
      batchSize: 200,
      logger: this.log,
    });
  }

  startWorker(): void {
    this.scheduler.start();
  }

  async onModuleDestroy(): Promise<void> {
    this.stopping = true;
    // Releases waiting for a direct slot stop waiting (and fail: the relay redelivers BaaSigned).
    for (const wake of this.slotWaiters.splice(0)) wake();
    await this.scheduler.stop();
    // Direct attempts: a slot reserved before stopping may still be waiting for its lease append
    // and start its send after this began; wait until every slot is given back.
    while (this.directSlots > 0 || this.direct.size > 0) {
      if (this.direct.size > 0) await Promise.allSettled([...this.direct.values()]);
      else await new Promise((r) => setTimeout(r, 10));
    }
    await this.sender.close();
  }

  /** First attempts running outside the timer worker (sent by the append that leased them). */
  private readonly direct = new Map<string, Promise<void>>();
  /**
   * Direct slots reserved (synchronously, in directLease) and not yet given back: from before the
   * lease append until the attempt is recorded. Bounded by MAX_DIRECT_ATTEMPTS.
   */
  private directSlots = 0;
  private stopping = false;

  /** Refuses new work once shutdown began: the caller (a relay) fails and redelivers after a restart. */
  private assertRunning(): void {
    if (this.stopping) throw new Error('webhook dispatcher stopping: not dispatched');
  }

  /**
   * A lease id if a first attempt may be sent directly now (bounded), else undefined (timer
   * worker). The slot is reserved here, before any await: the caller gives it back with
   * releaseSlot() unless it hands it to sendDirect (which gives it back when the attempt ends).
   */
  private directLease(): string | undefined {
    this.assertRunning();
    if (this.directSlots >= MAX_DIRECT_ATTEMPTS) return undefined;
    this.directSlots++;
    return randomUUID();
  }

  private releaseSlot(): void {
    this.directSlots--;
    this.slotWaiters.shift()?.();
  }

  /** Releases of held deliveries waiting for a direct slot (woken one per slot given back). */
  private readonly slotWaiters: (() => void)[] = [];

  /**
   * As directLease, but waits (until `until`, real time) for a slot to be given back instead of
   * answering undefined at once: a released held delivery is then sent by the releasing process
   * (its lease in the release append) rather than by the timer worker, whose path costs one more
   * read, append and timer scan per delivery. `waited`: whether it had to wait (what was read
   * before may be stale by then). Throws once shutdown began.
   */
  private async directLeaseWhenFree(until: number): Promise<{ leaseId: string | undefined; waited: boolean }> {
    let waited = false;
    for (;;) {
      const leaseId = this.directLease();
      if (leaseId) return { leaseId, waited };
      const left = until - performance.now();
      if (left <= 0) return { leaseId: undefined, waited };
      waited = true;
      await new Promise<void>((resolve) => {
        const wake = () => {
          clearTimeout(timer);
          resolve();
        };
        const timer = setTimeout(() => {
          const i = this.slotWaiters.indexOf(wake);
          if (i >= 0) this.slotWaiters.splice(i, 1);
          resolve();
        }, left);
        this.slotWaiters.push(wake);
      });
    }
  }

  /** Direct slots reserved now (tests). */
  get directSlotsInUse(): number {
    return this.directSlots;
  }

  /** Sends a leased first attempt (its slot reserved) and records it, tracked for shutdown; never rejects. */
  private sendDirect(stream: string, leaseId: string, leased: Leased, created: Created, endpointId: string): void {
    const run = this.sendLeased(stream, leaseId, leased, created, endpointId).catch((err) => {
      // The lease is in the stream: the timer (moved to the lease's expiry) fires it again then.
      this.log.warn({ deliveryId: leased.state.deliveryId, error: (err as Error)?.name }, 'webhook attempt not recorded; the timer retries it after the lease');
    });
    const id = leased.state.deliveryId!;
    this.direct.set(id, run);
    void run.finally(() => {
      this.direct.delete(id);
      this.releaseSlot();
    });
  }

  /** Fires due attempts now instead of at the next poll (not awaited by callers). */
  kick(): void {
    // Not once shutdown began: the worker is stopped and the stores are about to close.
    if (this.stopping) return;
    // Coalesced: the events of one tick (a relay delivers many at once) share one timer read.
    if (this.kickScheduled) return;
    this.kickScheduled = true;
    setImmediate(() => {
      this.kickScheduled = false;
      if (this.stopping) return;
      this.scheduler.tick().catch(() => undefined);
    });
  }

  private kickScheduled = false;

  private async applied(position: number): Promise<void> {
    if (position > 0) await this.projections.waitFor([DISPATCHER_PROJECTION], position);
  }

  // ---- endpoints (staff API) ----

  async createEndpoint(organizationId: string, environmentId: string, input: { url: string; events: string[]; description?: string }, actor: StaffActor) {
    const syntax = urlSyntaxProblem(input.url, this.config.production);
    const problem = syntax ?? (await addressProblem(input.url, this.config.production));
    if (problem) throw ApiError.validation([{ path: 'url', message: urlProblemMessage(problem) }]);
    const endpointId = randomUUID();
    const secret = `whsec_${randomToken(32)}`;
    const events = [...new Set(input.events)];
    const r = await this.endpoints.handle(
      endpointStream(endpointId),
      { type: 'CreateEndpoint', endpointId, organizationId, environmentId, url: input.url, events, description: input.description ?? null, secret, by: actor.sub },
      { actor: `staff:${actor.sub}`, organizationId, environmentId },
    );
    await this.applied(r.position);
    const created = r.newEvents[0] as Extract<EndpointEvent, { type: 'WebhookEndpointCreated' }>;
    return { id: endpointId, url: input.url, events, description: input.description ?? null, secret, createdAt: created.createdAt };
  }

  async listEndpoints(environmentId: string) {
    const docs = await this.readStore.list<EndpointDoc>(Collections.endpoints, environmentId);
    return docs.filter((d) => !d.deletedAt).map(endpointView);
  }

  async endpoint(environmentId: string, endpointId: string): Promise<EndpointDoc> {
    const doc = await this.readStore.get<EndpointDoc>(Collections.endpoints, endpointId);
    if (!doc || doc.deletedAt || doc.environmentId !== environmentId) throw ApiError.notFound('Webhook endpoint');
    return doc;
  }

  /**
   * 204 once no attempt to the endpoint can be sent any more: the deletion is in the read model
   * (every later attempt reads it there and is not sent) and the attempts of this process that
   * read the endpoint before have ended (those not yet on the wire are aborted, never sent).
   */
  async deleteEndpoint(organizationId: string, environmentId: string, endpointId: string, actor: StaffActor): Promise<void> {
    await this.endpoint(environmentId, endpointId);
    const r = await this.endpoints.handle(endpointStream(endpointId), { type: 'DeleteEndpoint', environmentId, by: actor.sub }, { actor: `staff:${actor.sub}`, organizationId, environmentId });
    await this.applied(r.position);
    await this.settleAttempts(endpointId, 'deleted');
  }

  /**
   * 201 once no attempt signed with an older secret can be sent any more: the new secret is in the
   * read model (every later attempt reads it there) and the attempts of this process that signed
   * with an older one have ended.
   */
  async rotateSecret(organizationId: string, environmentId: string, endpointId: string, actor: StaffActor) {
    await this.endpoint(environmentId, endpointId);
    const secret = `whsec_${randomToken(32)}`;
    const r = await this.endpoints.handle(endpointStream(endpointId), { type: 'RotateSecret', environmentId, secret, by: actor.sub }, { actor: `staff:${actor.sub}`, organizationId, environmentId });
    await this.applied(r.position);
    await this.settleAttempts(endpointId, 'rotated');
    return { secret };
  }

  /** Attempts of this process under way, by endpoint id (see AttemptInFlight). */
  private readonly inFlight = new InFlight<AttemptInFlight>();

  /**
   * Called once the change is in the read model: every attempt that starts reading the endpoint
   * from now on sees it, so only the attempts registered now can still carry the old state. A
   * rotation waits for those that signed with another secret than the one now in force (or are
   * still reading: conservatively); a deletion aborts them all (an attempt not yet on the wire
   * ends unsent; one already written runs to its answer) and waits for each to end. Bounded by
   * the attempt's one 15 s deadline (DELIVERY_TIMEOUT_MS).
   */
  private async settleAttempts(endpointId: string, change: 'rotated' | 'deleted'): Promise<void> {
    const entries = this.inFlight.current(endpointId);
    if (entries.length === 0) return;
    if (change === 'deleted') {
      for (const e of entries) e.data.controller.abort();
      await Promise.all(entries.map((e) => e.ended));
      return;
    }
    const current = (await this.readStore.get<EndpointDoc>(Collections.endpoints, endpointId))?.secret;
    await Promise.all(entries.filter((e) => e.data.secretRef === undefined || e.data.secretRef !== current).map((e) => e.ended));
  }

  private cursorCodec: ListCursors | undefined;
  private get cursors(): ListCursors {
    return (this.cursorCodec ??= new ListCursors(this.keyring));
  }

  /**
   * One page of the endpoint's delivery log, of one status if given: newest first (the read model's
   * score is the negated creation time; deliveries created in the same millisecond follow by id),
   * at most `limit`, after the position sealed in `cursor`; read as a range of the endpoint's (or
   * the endpoint and status's) partition. `nextCursor` is null at the end.
   */
  async listDeliveries(environmentId: string, endpointId: string, page: { limit: number; cursor?: unknown; status?: DeliveryStatus }) {
    const scope = `webhook-deliveries|${environmentId}|${endpointId}|${page.status ?? '*'}`;
    const after = this.cursors.open(page.cursor, scope);
    await this.endpoint(environmentId, endpointId);
    const read = page.status
      ? await this.readStore.page<DeliveryDoc>(Collections.deliveriesByStatus, deliveryStatusPartition(endpointId, page.status), { limit: page.limit, after })
      : await this.readStore.page<DeliveryDoc>(Collections.deliveries, endpointId, { limit: page.limit, after });
    const last = read.entries.at(-1);
    return { deliveries: read.entries.map((e) => deliveryView(e.doc)), nextCursor: read.hasMore && last ? this.cursors.seal(scope, { score: last.score, key: last.key }) : null };
  }

  async retryDelivery(organizationId: string, environmentId: string, endpointId: string, deliveryId: string, actor: StaffActor) {
    await this.endpoint(environmentId, endpointId);
    const doc = await this.readStore.get<DeliveryDoc>(Collections.deliveries, deliveryId);
    if (!doc || doc.endpointId !== endpointId) throw ApiError.notFound('Delivery');
    const r = await this.deliveries.handle(deliveryStream(deliveryId), { type: 'RequestRetry', by: actor.sub }, { actor: `staff:${actor.sub}`, organizationId, environmentId });
    await this.applied(r.position);
    this.kick();
    return { id: deliveryId, status: r.state.status, nextAttemptAt: r.state.nextAttemptAt };
  }

  // ---- deliveries from integration events ----

  private async baaSigned(organizationId: string): Promise<boolean> {
    const org = await this.tenants.organization(organizationId);
    if (org?.baaSignedAt) return true;
    return (await this.readStore.get(Collections.baa, organizationId)) !== null;
  }

  /** Creates one delivery per subscribed endpoint (idempotent: delivery id = f(endpoint, event)). */
  async dispatch(m: IntegrationMessage): Promise<void> {
    this.assertRunning();
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
        this.assertRunning();
        const leaseId = held ? undefined : this.directLease();
        let r;
        try {
          r = await this.deliveries.handle(
            stream,
            { type: 'CreateDelivery', deliveryId, endpointId: ep.id, organizationId: orgId, environmentId, eventId, eventType: m.type, caseId, payload, held, ...(leaseId ? { leaseId } : {}) },
            { actor: SYSTEM, organizationId: orgId, environmentId, causationId: eventId, correlationId: m.metadata.correlationId },
          );
        } catch (err) {
          if (leaseId) this.releaseSlot();
          throw err;
        }
        if (leaseId && r.newEvents.some((e) => e.type === 'WebhookAttemptStarted')) {
          this.sendDirect(stream, leaseId, { state: r.state, revision: r.revision }, { eventId, eventType: m.type, payload }, ep.id);
        } else {
          if (leaseId) this.releaseSlot();
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
        () => this.kick(),
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
    this.assertRunning();
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
          if (created && ep && !ep.deletedAt && loaded.state.status === 'held') ({ leaseId, waited } = await this.directLeaseWhenFree(slotWaitUntil));
          const ctx = { actor: SYSTEM, organizationId, environmentId: loaded.state.environmentId };
          let r;
          try {
            if (leaseId && waited) {
              // The endpoint may have been deleted or its secret rotated while this waited.
              ep = await this.readStore.get<EndpointDoc>(Collections.endpoints, created!.endpointId);
              if (!ep || ep.deletedAt) {
                this.releaseSlot();
                leaseId = undefined;
              }
            }
            r = await this.deliveries.handle(stream, { type: 'ReleaseDelivery', ...(leaseId ? { leaseId } : {}) }, ctx, { state: loaded.state, revision: loaded.revision });
          } catch (err) {
            if (leaseId) this.releaseSlot();
            throw err;
          }
          batchPosition = Math.max(batchPosition, r.newEvents.length > 0 ? r.position : (loaded.events.at(-1)?.position ?? 0));
          if (leaseId && created && r.newEvents.some((e) => e.type === 'WebhookAttemptStarted')) this.sendDirect(stream, leaseId, { state: r.state, revision: r.revision }, created, created.endpointId);
          else {
            if (leaseId) this.releaseSlot();
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
        () => this.kick(),
        () => undefined,
      );
    }
  }

  // ---- the retry worker (durable timers) ----

  /**
   * One attempt for a due timer; a stale timer (already attempted, released, retried) does nothing,
   * nor does a timer whose attempt another sender holds the lease of.
   */
  private async attempt(timer: DeliveryTimer): Promise<void> {
    // A direct first attempt of this delivery still out (a manual retry moved the timer): the
    // retry waits for its answer, as one the worker itself runs would (a late 2xx then delivers
    // and nothing more is sent).
    const running = this.direct.get(timer.deliveryId);
    if (running) await running;
    const stream = deliveryStream(timer.deliveryId);
    const { state, events, revision } = await this.deliveries.load(stream);
    if (state.status !== 'pending' || state.nextAttemptAt !== timer.dueAt) return;
    const created = events.find((e) => e.type === 'WebhookDeliveryCreated')!.data as Extract<DeliveryEvent, { type: 'WebhookDeliveryCreated' }>;
    const ctx = { actor: SYSTEM, organizationId: state.organizationId, environmentId: state.environmentId };
    // A first look (no lease taken for a deleted endpoint); sendLeased reads it again just before sending.
    const ep = await this.readStore.get<EndpointDoc>(Collections.endpoints, created.endpointId);
    if (!ep || ep.deletedAt) {
      await this.deliveries.handle(stream, { type: 'AbandonDelivery', reason: 'endpoint_deleted' }, ctx);
      return;
    }
    // The lease: appended with the revision read above, before anything is sent. Of several
    // senders of this due attempt (replicas, a re-fired timer) one appends it; the others conflict,
    // re-read, find it taken (or the attempt no longer due) and send nothing.
    const leaseId = randomUUID();
    const lease = await this.deliveries.handle(stream, { type: 'StartAttempt', dueAt: timer.dueAt, leaseId }, ctx, { state, revision });
    if (lease.newEvents.length === 0) return;
    await this.sendLeased(stream, leaseId, { state: lease.state, revision: lease.revision }, created, ep.id);
  }

  /**
   * Sends the attempt this process holds the lease of, then records it on the state after the lease.
   * The endpoint (URL, secret, existence) is read here, at the last moment before signing, by an
   * attempt already registered in `inFlight`: a rotation or deletion that answers after its change
   * reached the read model either is seen by this read or finds this attempt registered and waits
   * for it (settleAttempts). An endpoint found deleted (or a deletion's abort before the request
   * was on the wire) sends nothing: the delivery is abandoned, as the timer would when due.
   */
  private async sendLeased(stream: string, leaseId: string, lease: Leased, created: Created, endpointId: string): Promise<void> {
    const ctx = { actor: SYSTEM, organizationId: lease.state.organizationId, environmentId: lease.state.environmentId };
    const entry: AttemptInFlight = { controller: new AbortController() };
    const result = await this.inFlight.run(endpointId, entry, async (): Promise<SendResult | null> => {
      const ep = await this.readStore.get<EndpointDoc>(Collections.endpoints, endpointId);
      if (!ep || ep.deletedAt || entry.controller.signal.aborted) return null;
      entry.secretRef = ep.secret;
      const secret = this.keyring.decrypt(ep.environmentId, ep.secret);
      return this.sender.send(
        { url: ep.url, payload: created.payload, secret, eventId: created.eventId, eventType: created.eventType, at: this.clock.now(), signedAt: this.wallClock.now(), production: this.config.production },
        entry.controller.signal,
      );
    });
    if (!result || result.notSent) {
      await this.deliveries.handle(stream, { type: 'AbandonDelivery', reason: 'endpoint_deleted' }, ctx, { state: lease.state, revision: lease.revision });
      this.log.info({ deliveryId: lease.state.deliveryId, eventType: created.eventType }, 'webhook attempt not sent: endpoint deleted');
      return;
    }
    const { attempt } = result;
    // Decided on the state after the lease (no second read of the payload-carrying stream); if
    // anything appended meanwhile (a manual retry), the revision check fails and the handler
    // re-reads: the attempt is then recorded as stale (logged; schedule and status kept unless 2xx).
    const r = await this.deliveries.handle(stream, { type: 'RecordAttempt', leaseId, attempt, jitter: drawJitter() }, ctx, { state: lease.state, revision: lease.revision });
    this.log.info({ deliveryId: lease.state.deliveryId, eventType: created.eventType, statusCode: attempt.statusCode, error: attempt.error, durationMs: attempt.durationMs, status: r.state.status }, 'webhook attempt');
    // Not waiting for the projection: until it moves the timer doc, a re-fire finds the stream
    // no longer due for this time and does nothing.
  }
}

/** The jitter of the next pause: uniform in [0, 1) (the decider scales it to at most +20%). */
export function drawJitter(): number {
  return Math.random();
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
