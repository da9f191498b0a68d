import { randomUUID } from 'node:crypto';
import { Inject, Injectable, Optional } from '@nestjs/common';
import type { Leases } from '@svc/eventstore';
import { CLOCK, Clock } from '@svc/clock';
import { getLogger } from '@svc/http';
import { LEASES } from '@svc/platform';
import { READ_STORE, ReadStore, TimerScheduler } from '@svc/read-store';
import { DeliveryEvent, deliveryStream } from '../domain/delivery';
import { Collections, DeliveryTimer, EndpointDoc, TIMER_PARTITION } from '../read-model/dispatcher.projection';
import { AttemptRunner } from './attempt-runner';
import { AttemptSlots } from './attempt-slots';
import { DeliveryCommands, SYSTEM } from './delivery-commands';

/**
 * The retry worker: fires the durable timers of due attempts (the projection keeps one timer
 * document per pending delivery, at its next attempt time), takes each attempt's lease and sends
 * it. Every attempt that is not a direct first attempt goes out from here: retries, manual
 * retries, and first attempts created or released without a direct slot. It runs in one replica at
 * a time, the one holding the lease `timers:webhook-dispatcher-retries` (docs/scaling.md); the
 * attempt's lease in the delivery stream keeps two senders of one attempt apart in any case.
 */
@Injectable()
export class RetryWorker {
  private readonly scheduler: TimerScheduler<DeliveryTimer>;
  private readonly log = getLogger();
  private stopping = false;
  private kickScheduled = false;
  /** This replica holds the scheduler's lease (always, without leases). */
  private leading = false;

  constructor(
    private readonly deliveries: DeliveryCommands,
    @Inject(CLOCK) clock: Clock,
    @Inject(READ_STORE) private readonly readStore: ReadStore,
    private readonly slots: AttemptSlots,
    private readonly attempts: AttemptRunner,
    @Optional() @Inject(LEASES) private readonly leases?: Leases,
  ) {
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

  start(): void {
    if (!this.leases) {
      this.leading = true;
      this.scheduler.start();
      return;
    }
    this.leases.run('timers:webhook-dispatcher-retries', {
      start: () => {
        if (this.stopping) return;
        this.leading = true;
        this.scheduler.start();
      },
      stop: async () => {
        this.leading = false;
        await this.scheduler.stop();
      },
    });
  }

  /** Stops polling and waits for the attempts the worker is running; kick() does nothing from then on. */
  async stop(): Promise<void> {
    this.stopping = true;
    await this.scheduler.stop();
  }

  /** Fires due attempts now instead of at the next poll (not awaited by callers). */
  kick(): void {
    // Not once shutdown began: the worker is stopped and the stores are about to close.
    if (this.stopping || !this.leading) return;
    // Coalesced: the events of one tick (a relay delivers many at once) share one timer read.
    if (this.kickScheduled) return;
    this.kickScheduled = true;
    setImmediate(() => {
      this.kickScheduled = false;
      if (this.stopping) return;
      this.scheduler.tick().catch(() => undefined);
    });
  }

  /**
   * One attempt for a due timer; a stale timer (already attempted, released, retried) does nothing,
   * nor does a timer whose attempt another sender holds the lease of.
   */
  private async attempt(timer: DeliveryTimer): Promise<void> {
    // A direct first attempt of this delivery still out (a manual retry moved the timer): the
    // retry waits for its answer, as one the worker itself runs would (a late 2xx then delivers
    // and nothing more is sent).
    const running = this.slots.running(timer.deliveryId);
    if (running) await running;
    const stream = deliveryStream(timer.deliveryId);
    const { state, events, revision } = await this.deliveries.load(stream);
    if (state.status !== 'pending' || state.nextAttemptAt !== timer.dueAt) return;
    const created = events.find((e) => e.type === 'WebhookDeliveryCreated')!.data as Extract<DeliveryEvent, { type: 'WebhookDeliveryCreated' }>;
    const ctx = { actor: SYSTEM, organizationId: state.organizationId, environmentId: state.environmentId };
    // A first look (no lease taken for a deleted endpoint); the runner reads it again just before sending.
    const ep = await this.readStore.get<EndpointDoc>(Collections.endpoints, created.endpointId);
    if (!ep || ep.deletedAt) {
      await this.deliveries.handle(stream, { type: 'AbandonDelivery', reason: 'endpoint_deleted' }, ctx);
      return;
    }
    // The lease: appended with the revision read above, before anything is sent. Of several
    // senders of this due attempt (replicas, a re-fired timer) one appends it; the others conflict,
    // re-read, find it taken (or the attempt not due any more) and send nothing.
    const leaseId = randomUUID();
    const lease = await this.deliveries.handle(stream, { type: 'StartAttempt', dueAt: timer.dueAt, leaseId }, ctx, { state, revision });
    if (lease.newEvents.length === 0) return;
    await this.attempts.send(stream, leaseId, { state: lease.state, revision: lease.revision }, created, ep.id);
  }
}
