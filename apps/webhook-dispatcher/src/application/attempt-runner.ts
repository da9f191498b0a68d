import { Inject, Injectable } from '@nestjs/common';
import { CLOCK, Clock, WALL_CLOCK, WallClock } from '@svc/clock';
import { getLogger } from '@svc/http';
import { CONFIG, InFlight, ServiceConfig } from '@svc/platform';
import { READ_STORE, ReadStore } from '@svc/read-store';
import { KEYRING, Keyring } from '@svc/security';
import { DeliveryEvent, DeliveryState } from '../domain/delivery';
import { Collections, EndpointDoc } from '../read-model/dispatcher.projection';
import { DeliveryCommands, SYSTEM } from './delivery-commands';
import { SendResult, WEBHOOK_SENDER, WebhookSenderPort } from './webhook-sender.port';

/** What an attempt needs of the delivery's creation event. */
export type Created = Pick<Extract<DeliveryEvent, { type: 'WebhookDeliveryCreated' }>, 'eventId' | 'eventType' | 'payload'>;
/** The delivery's state and revision right after this process appended the attempt's lease. */
export type Leased = { state: DeliveryState; revision: number };

/**
 * An attempt of this process from just before it reads the endpoint (URL, secret, existence) until
 * it has ended (answered, failed, timed out, or not sent). A secret rotation or a deletion answers
 * only once the ones that read the endpoint before the change have ended (see settle).
 */
interface AttemptInFlight {
  /** The endpoint document's (encrypted) secret it signs with; undefined while it is still reading. */
  secretRef?: string;
  /** Aborted by a deletion: ends the attempt if it is not on the wire yet. */
  readonly controller: AbortController;
}

/**
 * Sends the attempts this process holds the lease of (direct first attempts and the retry
 * worker's) and records them; keeps the attempts under way by endpoint, so that a secret rotation
 * or an endpoint deletion answers only once no attempt with the old state can be sent.
 */
@Injectable()
export class AttemptRunner {
  private readonly log = getLogger();
  /** Attempts of this process under way, by endpoint id (see AttemptInFlight). */
  private readonly inFlight = new InFlight<AttemptInFlight>();

  constructor(
    private readonly deliveries: DeliveryCommands,
    @Inject(CLOCK) private readonly clock: Clock,
    @Inject(READ_STORE) private readonly readStore: ReadStore,
    @Inject(KEYRING) private readonly keyring: Keyring,
    @Inject(CONFIG) private readonly config: ServiceConfig,
    /** Real time, for the signature timestamp of each attempt only. */
    @Inject(WALL_CLOCK) private readonly wallClock: WallClock,
    /** Sends the attempts (the module binds `WebhookSender`: a thread of their own in the compiled build, else the event loop). */
    @Inject(WEBHOOK_SENDER) private readonly sender: WebhookSenderPort,
  ) {}

  /**
   * Sends the attempt this process holds the lease of, then records it on the state after the lease.
   * The endpoint (URL, secret, existence) is read here, at the last moment before signing, by an
   * attempt already registered in `inFlight`: a rotation or deletion that answers after its change
   * reached the read model either is seen by this read or finds this attempt registered and waits
   * for it (settle). An endpoint found deleted (or a deletion's abort before the request was on
   * the wire) sends nothing: the delivery is abandoned, as the timer would when due.
   */
  async send(stream: string, leaseId: string, lease: Leased, created: Created, endpointId: string): Promise<void> {
    const ctx = { actor: SYSTEM, organizationId: lease.state.organizationId, environmentId: lease.state.environmentId };
    const entry: AttemptInFlight = { controller: new AbortController() };
    const result = await this.inFlight.run(endpointId, entry, async (): Promise<SendResult | null> => {
      const ep = await this.readStore.get<EndpointDoc>(Collections.endpoints, endpointId);
      if (!ep || ep.deletedAt || entry.controller.signal.aborted) return null;
      entry.secretRef = ep.secret;
      const secret = this.keyring.decrypt(ep.environmentId, ep.secret);
      return this.sender.send(
        {
          url: ep.url,
          payload: created.payload,
          secret,
          eventId: created.eventId,
          eventType: created.eventType,
          at: this.clock.now(),
          signedAt: this.wallClock.now(),
          production: this.config.production,
        },
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
    const r = await this.deliveries.handle(stream, { type: 'RecordAttempt', leaseId, attempt, jitter: drawJitter() }, ctx, {
      state: lease.state,
      revision: lease.revision,
    });
    this.log.info(
      {
        deliveryId: lease.state.deliveryId,
        eventType: created.eventType,
        statusCode: attempt.statusCode,
        error: attempt.error,
        durationMs: attempt.durationMs,
        status: r.state.status,
      },
      'webhook attempt',
    );
    // Not waiting for the projection: until it moves the timer doc, a re-fire finds the stream
    // not due at this time any more and does nothing.
  }

  /**
   * Called once an endpoint change is in the read model: every attempt that starts reading the
   * endpoint from now on sees it, so only the attempts registered now can still carry the old
   * state. A rotation waits for those that signed with another secret than the one now in force
   * (or are still reading: conservatively); a deletion aborts them all (an attempt not yet on the
   * wire ends unsent; one already written runs to its answer) and waits for each to end. Bounded
   * by the attempt's one 15 s deadline (DELIVERY_TIMEOUT_MS).
   */
  async settle(endpointId: string, change: 'rotated' | 'deleted'): Promise<void> {
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

  /** Stops the sender thread: for after every attempt of this process has ended (see DispatcherLifecycle). */
  close(): Promise<void> {
    return this.sender.close();
  }
}

/** The jitter of the next pause: uniform in [0, 1) (the decider scales it to at most +20%). */
export function drawJitter(): number {
  return Math.random();
}
