import { Inject, Module, OnApplicationBootstrap, OnModuleDestroy, OnModuleInit } from '@nestjs/common';
import { EVENT_STORE, EventStore } from '@svc/eventstore';
import { AnyClientProxy, BUS_CLIENT, IntegrationEventRelay, Topics } from '@svc/messaging';
import { PROJECTIONS } from '@svc/platform';
import { ProjectionRunner, READ_STORE, ReadStore } from '@svc/read-store';
import { KEYRING, Keyring } from '@svc/security';
import { getLogger } from '@svc/http';
import { BillingService } from './application/billing.service';
import { WebhooksService } from './application/webhooks.service';
import { BillingController } from './adapters/http/billing.controller';
import { WebhookEndpointsController } from './adapters/http/webhook-endpoints.controller';
import { DispatcherEventsController } from './adapters/bus/events.controller';
import { dispatcherProjection } from './adapters/projections/dispatcher.projection';
import { SUBSCRIPTION_UPDATED } from './domain/account';
import { WEBHOOK_DELIVERED } from './domain/delivery';
import { USAGE_THRESHOLD_REACHED } from './domain/usage';

/** The webhook-dispatcher bounded context: endpoints, signed deliveries with retries, usage and billing. */
@Module({
  controllers: [WebhookEndpointsController, BillingController, DispatcherEventsController],
  providers: [WebhooksService, BillingService],
})
export class WebhookDispatcherModule implements OnModuleInit, OnApplicationBootstrap, OnModuleDestroy {
  private relay: IntegrationEventRelay | null = null;

  constructor(
    @Inject(PROJECTIONS) private readonly projections: ProjectionRunner,
    @Inject(KEYRING) private readonly keyring: Keyring,
    @Inject(EVENT_STORE) private readonly store: EventStore,
    @Inject(READ_STORE) private readonly readStore: ReadStore,
    @Inject(BUS_CLIENT) private readonly client: AnyClientProxy,
    private readonly webhooks: WebhooksService,
  ) {}

  onModuleInit(): void {
    this.projections.register(dispatcherProjection(this.keyring));
  }

  async onApplicationBootstrap(): Promise<void> {
    // Outbox: webhook.delivered for the case-ledger, and our account events (which we consume
    // ourselves to turn them into deliveries, exactly like the case events).
    this.relay = new IntegrationEventRelay({
      name: 'webhook-dispatcher-relay',
      store: this.store,
      readStore: this.readStore,
      client: this.client,
      topic: Topics.dispatcherEvents,
      streamPrefixes: ['webhook-dispatcher-delivery-', 'webhook-dispatcher-account-', 'webhook-dispatcher-usage-'],
      eventTypes: [WEBHOOK_DELIVERED, USAGE_THRESHOLD_REACHED, SUBSCRIPTION_UPDATED],
      logger: { warn: (msg) => getLogger().warn({ relay: 'webhook-dispatcher-relay' }, msg) },
    });
    await this.relay.start();
    this.webhooks.startWorker();
  }

  async onModuleDestroy(): Promise<void> {
    await this.relay?.stop();
    this.relay = null;
  }
}
