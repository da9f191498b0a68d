/** The app's public surface (@apps/webhook-dispatcher): its root module, for the standalone composition root. */
export { WebhookDispatcherModule } from './webhook-dispatcher.module';
