/** The app's public surface (@apps/conversation): its root module, for the standalone composition root. */
export { ConversationModule } from './conversation.module';
