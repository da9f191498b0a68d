/** The app's public surface (@apps/gateway): its root module, for the standalone composition root. */
export { GatewayModule } from './gateway.module';
