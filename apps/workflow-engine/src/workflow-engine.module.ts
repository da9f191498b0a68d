import { Inject, Module, OnModuleInit } from '@nestjs/common';
import { IntegrationEventTypes, Topics } from '@svc/messaging';
import { BackgroundWork, PROJECTIONS } from '@svc/platform';
import { ProjectionRunner, TimerDoc } from '@svc/read-store';
import { KEYRING, Keyring } from '@svc/security';
import { DeliveriesService } from './application/deliveries.service';
import { DESTINATION_CLIENT } from './application/destination-client.port';
import { RunnerService } from './application/runner.service';
import { SwitchOffGate } from './application/switch-off-gate';
import { WorkflowsService } from './application/workflows.service';
import { DestinationsController, WorkflowsController } from './adapters/http/workflows.controller';
import { destinationClient } from './adapters/outbound/destination-client';
import { WidgetMessagesController } from './adapters/http/widget.controller';
import { workflowEngineProjections } from './read-model';
import { DELIVERY_PARTITION, WorkflowCollections } from './read-model/workflow.projection';

/** The workflow-engine bounded context: conversation workflows, destinations, runs, the patient agent. */
@Module({
  controllers: [WorkflowsController, DestinationsController, WidgetMessagesController],
  providers: [WorkflowsService, RunnerService, DeliveriesService, SwitchOffGate, { provide: DESTINATION_CLIENT, useValue: destinationClient }],
})
export class WorkflowEngineModule implements OnModuleInit {
  constructor(
    @Inject(PROJECTIONS) private readonly projections: ProjectionRunner,
    @Inject(KEYRING) private readonly keyring: Keyring,
    private readonly background: BackgroundWork,
    private readonly deliveries: DeliveriesService,
  ) {}

  onModuleInit(): void {
    for (const projection of workflowEngineProjections(this.keyring)) this.projections.register(projection);
    // Retries cases and hand-offs recorded but not delivered yet.
    this.background.timers<TimerDoc>({
      collection: WorkflowCollections.deliveries,
      partition: DELIVERY_PARTITION,
      pollMs: 5000,
      refireAfterMs: 5000,
      handler: async (t) => {
        await this.deliveries.deliver(t.id);
      },
    });
    // Credits (workflow_run.started) leave through the relay that follows the run streams.
    this.background.relay({
      name: 'workflow-engine-relay',
      topic: Topics.workflowEvents,
      streamPrefixes: ['workflow-engine-run-'],
      eventTypes: [IntegrationEventTypes.workflowRunStarted],
    });
  }
}
