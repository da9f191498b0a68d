import { DynamicModule, Module } from '@nestjs/common';
import { CaseLedgerModule } from '../../case-ledger/src/case-ledger.module';
import { ConversationModule } from '../../conversation/src/conversation.module';
import { GatewayModule } from '../../gateway/src/gateway.module';
import { PatientPathwayModule } from '../../patient-pathway/src/patient-pathway.module';
import { WebhookDispatcherModule } from '../../webhook-dispatcher/src/webhook-dispatcher.module';
import { WorkflowEngineModule } from '../../workflow-engine/src/workflow-engine.module';
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
