import { Inject, Module, OnModuleInit } from '@nestjs/common';
import { CaseThreadFacts, IntegrationEventTypes, Topics } from '@svc/messaging';
import { BackgroundWork, PROJECTIONS } from '@svc/platform';
import { ProjectionRunner } from '@svc/read-store';
import { KEYRING, Keyring } from '@svc/security';
import { ConversationService } from './application/conversation.service';
import { ConversationBusController } from './adapters/bus/conversation-bus.controller';
import { ConversationsController, WidgetCaseMessagesController } from './adapters/http/conversations.controller';
import { conversationProjections } from './read-model';
import { CONVERSATION_STREAM_PREFIX, ConversationEvent } from './domain/conversation';

/** The conversation bounded context: one ordered thread per clinical case or work item. */
@Module({
  controllers: [ConversationsController, WidgetCaseMessagesController, ConversationBusController],
  providers: [ConversationService],
  exports: [ConversationService],
})
export class ConversationModule implements OnModuleInit {
  constructor(
    @Inject(PROJECTIONS) private readonly projections: ProjectionRunner,
    @Inject(KEYRING) private readonly keyring: Keyring,
    private readonly background: BackgroundWork,
  ) {}

  onModuleInit(): void {
    for (const projection of conversationProjections(this.keyring)) this.projections.register(projection);
    // Patient messages of case threads go out on the case topic, beside the ledger's own case events.
    this.background.relay({
      name: 'conversation-case-relay',
      topic: Topics.caseEvents,
      streamPrefixes: [CONVERSATION_STREAM_PREFIX],
      eventTypes: [IntegrationEventTypes.casePatientMessageCreated],
    });
    // Case-thread facts for the case-ledger (a thread closed for good: a resolve answers once it has
    // it), on this app's own topic (docs/decisions.md, "Case threads without synchronous cycles").
    this.background.relay({
      name: 'conversation-thread-relay',
      topic: Topics.conversationEvents,
      streamPrefixes: [CONVERSATION_STREAM_PREFIX],
      eventTypes: [CaseThreadFacts.closed satisfies ConversationEvent['type']],
    });
  }
}
