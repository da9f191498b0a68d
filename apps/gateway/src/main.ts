import 'reflect-metadata';
import { loadConfig, runService } from '@svc/platform';
import { GatewayModule } from './gateway.module';

void runService('gateway', [GatewayModule.forRoot({ devTools: loadConfig(process.env, 'distributed').devTools })]);
