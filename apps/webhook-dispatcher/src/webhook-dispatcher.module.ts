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
import { WEBHOOK_SENDER } from './application/webhook-sender.port';
import { BillingController } from './adapters/http/billing.controller';
import { WebhookEndpointsController } from './adapters/http/webhook-endpoints.controller';
import { DispatcherEventsController } from './adapters/bus/events.controller';
import { WebhookSender } from './adapters/outbound/webhook-sender';
import { webhookDispatcherProjections } from './read-model';
import { SUBSCRIPTION_UPDATED } from './domain/account';
import { WEBHOOK_DELIVERED } from './domain/delivery';
import { USAGE_THRESHOLD_REACHED } from './domain/usage';

/** The webhook-dispatcher bounded context: endpoints, signed deliveries with retries, usage and billing. */
@Module({
  controllers: [WebhookEndpointsController, BillingController, DispatcherEventsController],
  providers: [
    DeliveryCommands,
    AttemptSlots,
    AttemptRunner,
    RetryWorker,
    DispatchService,
    EndpointsService,
    DispatcherLifecycle,
    BillingService,
    // Attempts go out on a thread of their own (the compiled build), else on the event loop; closed by AttemptRunner.close.
    { provide: WEBHOOK_SENDER, useFactory: () => new WebhookSender() },
  ],
})
export class WebhookDispatcherModule implements OnModuleInit {
  constructor(
    @Inject(PROJECTIONS) private readonly projections: ProjectionRunner,
    @Inject(KEYRING) private readonly keyring: Keyring,
    private readonly background: BackgroundWork,
  ) {}

  onModuleInit(): void {
    for (const projection of webhookDispatcherProjections(this.keyring)) this.projections.register(projection);
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
