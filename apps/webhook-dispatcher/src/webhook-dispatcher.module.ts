import { Inject, Module, OnModuleInit } from '@nestjs/common';
import { Topics } from '@svc/messaging';
import { BackgroundWork, PROJECTIONS } from '@svc/platform';
import { ProjectionRunner } from '@svc/read-store';
import { KEYRING, Keyring } from '@svc/security';
import { BillingService } from './application/billing.service';
import { AttemptRunner } from './application/attempt-runner';
import { AttemptSlots } from './application/attempt-slots';
import { DeliveryCommands } from './application/delivery-commands';
import { DispatchService } from './application/dispatch.service';
import { DispatcherLifecycle } from './application/dispatcher-lifecycle';
import { EndpointsService } from './application/endpoints.service';
import { RetryWorker } from './application/retry-worker';
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
  providers: [DeliveryCommands, AttemptSlots, AttemptRunner, RetryWorker, DispatchService, EndpointsService, DispatcherLifecycle, BillingService],
})
export class WebhookDispatcherModule implements OnModuleInit {
  constructor(
    @Inject(PROJECTIONS) private readonly projections: ProjectionRunner,
    @Inject(KEYRING) private readonly keyring: Keyring,
    private readonly background: BackgroundWork,
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
}
