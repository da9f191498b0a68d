import { Inject, Module, OnApplicationBootstrap, OnModuleDestroy, OnModuleInit } from '@nestjs/common';
import { EVENT_STORE, EventStore } from '@svc/eventstore';
import { getLogger } from '@svc/http';
import { AnyClientProxy, BUS_CLIENT, IntegrationEventRelay, IntegrationEventTypes, Topics } from '@svc/messaging';
import { PROJECTIONS } from '@svc/platform';
import { ProjectionRunner, READ_STORE, ReadStore } from '@svc/read-store';
import { KEYRING, Keyring } from '@svc/security';
import { ConversationService } from './application/conversation.service';
import { ConversationBusController } from './adapters/bus/conversation-bus.controller';
import { ConversationsController, WidgetCaseMessagesController } from './adapters/http/conversations.controller';
import { conversationProjection } from './adapters/projections/conversation.projection';
import { CONVERSATION_STREAM_PREFIX } from './domain/conversation';

/** The conversation bounded context: one ordered thread per clinical case or work item. */
@Module({
  controllers: [ConversationsController, WidgetCaseMessagesController, ConversationBusController],
  providers: [ConversationService],
  exports: [ConversationService],
})
export class ConversationModule implements OnModuleInit, OnApplicationBootstrap, OnModuleDestroy {
  private relay: IntegrationEventRelay | null = null;

  constructor(
    @Inject(PROJECTIONS) private readonly projections: ProjectionRunner,
    @Inject(KEYRING) private readonly keyring: Keyring,
    @Inject(EVENT_STORE) private readonly store: EventStore,
    @Inject(READ_STORE) private readonly readStore: ReadStore,
    @Inject(BUS_CLIENT) private readonly client: AnyClientProxy,
  ) {}

  onModuleInit(): void {
    this.projections.register(conversationProjection(this.keyring));
  }

  async onApplicationBootstrap(): Promise<void> {
    const log = getLogger();
    // Patient messages of case threads go out on the case topic, beside the ledger's own case events.
    this.relay = new IntegrationEventRelay({
      name: 'conversation-case-relay',
      store: this.store,
      readStore: this.readStore,
      client: this.client,
      topic: Topics.caseEvents,
      streamPrefixes: [CONVERSATION_STREAM_PREFIX],
      eventTypes: [IntegrationEventTypes.casePatientMessageCreated],
      logger: { warn: (msg: string) => log.warn({ relay: 'conversation-case-relay' }, msg) },
    });
    await this.relay.start();
  }

  async onModuleDestroy(): Promise<void> {
    await this.relay?.stop();
    this.relay = null;
  }
}
