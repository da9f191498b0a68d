import { Module } from '@nestjs/common';

/** The webhook-dispatcher bounded context. */
@Module({})
export class WebhookDispatcherModule {}
