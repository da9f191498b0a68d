import 'reflect-metadata';
import { runService } from '@svc/platform';
import { ConversationModule } from './conversation.module';

void runService('conversation', [ConversationModule]);
