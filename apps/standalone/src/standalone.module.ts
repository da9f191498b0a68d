import { DynamicModule, Module } from '@nestjs/common';
import { CaseLedgerModule } from '@apps/case-ledger';
import { ConversationModule } from '@apps/conversation';
import { GatewayModule } from '@apps/gateway';
import { PatientPathwayModule } from '@apps/patient-pathway';
import { WebhookDispatcherModule } from '@apps/webhook-dispatcher';
import { WorkflowEngineModule } from '@apps/workflow-engine';
import { PlatformModule, ServiceConfig } from '@svc/platform';

/** Composition root of standalone mode: all six apps in one process on embedded adapters. */
@Module({})
export class StandaloneModule {
  static forRoot(config: ServiceConfig): DynamicModule {
    return {
      module: StandaloneModule,
      imports: [
        PlatformModule.forRoot(config),
        GatewayModule.forRoot({ devTools: config.devTools }),
        PatientPathwayModule,
        CaseLedgerModule,
        ConversationModule,
        WorkflowEngineModule,
        WebhookDispatcherModule,
      ],
    };
  }
}
