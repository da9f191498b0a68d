import 'reflect-metadata';
import { runService } from '@svc/platform';
import { WebhookDispatcherModule } from './webhook-dispatcher.module';

void runService('webhook-dispatcher', [WebhookDispatcherModule]);
