import { Inject, Module, OnApplicationBootstrap, OnModuleInit } from '@nestjs/common';
import { Topics } from '@svc/messaging';
import { BackgroundWork, PROJECTIONS } from '@svc/platform';
import { ProjectionRunner } from '@svc/read-store';
import { KEYRING, Keyring } from '@svc/security';
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
export class WebhookDispatcherModule implements OnModuleInit, OnApplicationBootstrap {
  constructor(
    @Inject(PROJECTIONS) private readonly projections: ProjectionRunner,
    @Inject(KEYRING) private readonly keyring: Keyring,
    private readonly background: BackgroundWork,
    private readonly webhooks: WebhooksService,
  ) {}

  onModuleInit(): void {
    this.projections.register(dispatcherProjection(this.keyring));
    // Outbox: webhook.delivered for the case-ledger, and our account events (which we consume
    // ourselves to turn them into deliveries, exactly like the case events).
    this.background.relay({
      name: 'webhook-dispatcher-relay',
      topic: Topics.dispatcherEvents,
      streamPrefixes: ['webhook-dispatcher-delivery-', 'webhook-dispatcher-account-', 'webhook-dispatcher-usage-'],
      eventTypes: [WEBHOOK_DELIVERED, USAGE_THRESHOLD_REACHED, SUBSCRIPTION_UPDATED],
    });
  }

  onApplicationBootstrap(): void {
    this.webhooks.startWorker();
  }
}
