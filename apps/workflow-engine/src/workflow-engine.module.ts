import { Inject, Module, OnApplicationBootstrap, OnModuleDestroy, OnModuleInit } from '@nestjs/common';
import type { ClientProxy } from '@nestjs/microservices';
import { EVENT_STORE, EventStore } from '@svc/eventstore';
import { BUS_CLIENT, IntegrationEventRelay, IntegrationEventTypes, Topics } from '@svc/messaging';
import { PROJECTIONS } from '@svc/platform';
import { ProjectionRunner, READ_STORE, ReadStore, TimerDoc, TimerScheduler } from '@svc/read-store';
import { CLOCK, Clock } from '@svc/clock';
import { getLogger } from '@svc/http';
import { DeliveriesService } from './application/deliveries.service';
import { KEYRING, Keyring } from '@svc/security';
import { RunnerService } from './application/runner.service';
import { WorkflowsService } from './application/workflows.service';
import { DestinationsController, WorkflowsController } from './adapters/http/workflows.controller';
import { WidgetMessagesController } from './adapters/http/widget.controller';
import { DELIVERY_PARTITION, WorkflowCollections, workflowProjection } from './adapters/projections/workflow.projection';

/** The workflow-engine bounded context: conversation workflows, destinations, runs, the patient agent. */
@Module({
  controllers: [WorkflowsController, DestinationsController, WidgetMessagesController],
  providers: [WorkflowsService, RunnerService, DeliveriesService],
})
export class WorkflowEngineModule implements OnModuleInit, OnApplicationBootstrap, OnModuleDestroy {
  private readonly relay: IntegrationEventRelay;
  /** Retries cases and hand-offs recorded but not delivered yet (B3). */
  private readonly deliveryTimers: TimerScheduler<TimerDoc>;

  constructor(
    @Inject(PROJECTIONS) private readonly projections: ProjectionRunner,
    @Inject(KEYRING) private readonly keyring: Keyring,
    @Inject(EVENT_STORE) store: EventStore,
    @Inject(READ_STORE) readStore: ReadStore,
    @Inject(BUS_CLIENT) client: ClientProxy,
    @Inject(CLOCK) clock: Clock,
    deliveries: DeliveriesService,
  ) {
    this.deliveryTimers = new TimerScheduler<TimerDoc>({
      readStore,
      clock,
      collection: WorkflowCollections.deliveries,
      partition: DELIVERY_PARTITION,
      pollMs: 5000,
      refireAfterMs: 5000,
      logger: getLogger(),
      handler: async (t) => {
        await deliveries.deliver(t.id);
      },
    });
    // Credits (workflow_run.started) leave through the relay that follows the run streams.
    this.relay = new IntegrationEventRelay({
      name: 'workflow-engine-relay',
      store,
      readStore,
      client,
      topic: Topics.workflowEvents,
      streamPrefixes: ['workflow-engine-run-'],
      eventTypes: [IntegrationEventTypes.workflowRunStarted],
    });
  }

  onModuleInit(): void {
    this.projections.register(workflowProjection(this.keyring));
  }

  async onApplicationBootstrap(): Promise<void> {
    await this.relay.start();
    this.deliveryTimers.start();
  }

  async onModuleDestroy(): Promise<void> {
    await this.deliveryTimers.stop();
    await this.relay.stop();
  }
}
