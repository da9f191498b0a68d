/** The app's public surface (@apps/conversation): its root module, for the standalone composition root. */
export { ConversationModule } from './conversation.module';
/** Its projections, for the composition roots that rebuild read models (`svc rebuild`). */
export { conversationProjections } from './read-model';
