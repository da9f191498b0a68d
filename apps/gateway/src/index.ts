/** The app's public surface (@apps/gateway): its root module, for the standalone composition root. */
export { GatewayModule } from './gateway.module';
/** Its projections, for the composition roots that rebuild read models (`svc rebuild`). */
export { gatewayProjections } from './read-model';
