import { Module } from '@nestjs/common';

/** The conversation bounded context. */
@Module({})
export class ConversationModule {}
