import 'reflect-metadata';
import { loadConfig, runService } from '@svc/platform';
import { GatewayModule } from './gateway.module';

// The one public address: routes of the other apps are forwarded to them (libs/platform gateway-proxy.ts).
void runService('gateway', [GatewayModule.forRoot({ devTools: loadConfig(process.env, 'distributed').devTools })], { gatewayProxy: true });
