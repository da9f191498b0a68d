/** The app's public surface (@apps/webhook-dispatcher): its root module, for the standalone composition root. */
export { WebhookDispatcherModule } from './webhook-dispatcher.module';
/** Its projections, for the composition roots that rebuild read models (`svc rebuild`). */
export { webhookDispatcherProjections } from './read-model';
