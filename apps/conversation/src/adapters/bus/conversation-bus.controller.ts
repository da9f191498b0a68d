import { Controller } from '@nestjs/common';
import { EventPattern, MessagePattern, Payload } from '@nestjs/microservices';
import { DomainError } from '@svc/eventstore';
import { AppendConversationMessageCommand, AppendConversationMessageReply, IntegrationMessage, Patterns, Topics, rpc } from '@svc/messaging';
import { CaseThreadControl, ConversationService } from '../../application/conversation.service';
import { isUuid } from '@svc/http';

const SENDERS = ['patient', 'provider', 'agent', 'staff', 'system'];
const CASE_THREAD_CONTROLS: string[] = [
  'start_case_thread',
  'close_case_thread',
  'begin_close_case_thread',
  'cancel_close_case_thread',
] satisfies CaseThreadControl['control'][];

/** Bus side of the conversation service: appends from other apps, case facts. */
@Controller()
export class ConversationBusController {
  constructor(private readonly conversations: ConversationService) {}

  @MessagePattern(Patterns.appendConversationMessage)
  append(@Payload() cmd: AppendConversationMessageCommand): Promise<AppendConversationMessageReply> {
    return rpc(async () => {
      const bad: string[] = [];
      for (const k of ['requestId', 'organizationId', 'environmentId', 'conversationId'] as const) if (!isUuid(cmd?.[k])) bad.push(k);
      if (cmd?.kind !== 'case' && cmd?.kind !== 'work_item') bad.push('kind');
      if (cmd?.patientId !== null && !isUuid(cmd?.patientId)) bad.push('patientId');
      if (!SENDERS.includes(cmd?.sender)) bad.push('sender');
      if (typeof cmd?.message !== 'string' || cmd.message.length < 1) bad.push('message');
      if (bad.length)
        throw new DomainError(
          400,
          'VALIDATION_FAILED',
          'Invalid append-message command',
          bad.map((path) => ({ path, message: 'invalid' })),
        );
      return this.conversations.appendFromBus(cmd);
    });
  }

  @MessagePattern(Patterns.caseThread)
  caseThread(@Payload() cmd: CaseThreadControl): Promise<AppendConversationMessageReply> {
    return rpc(async () => {
      const bad: string[] = [];
      if (!CASE_THREAD_CONTROLS.includes(cmd?.control)) bad.push('control');
      if (cmd?.lease !== undefined && cmd.lease !== null && (typeof cmd.lease !== 'string' || Number.isNaN(Date.parse(cmd.lease)))) bad.push('lease');
      for (const k of ['organizationId', 'environmentId', 'conversationId'] as const) if (!isUuid(cmd?.[k])) bad.push(k);
      if (cmd?.kind !== 'case') bad.push('kind');
      if (cmd?.patientId !== null && !isUuid(cmd?.patientId)) bad.push('patientId');
      if (bad.length)
        throw new DomainError(
          400,
          'VALIDATION_FAILED',
          'Invalid case-thread control command',
          bad.map((path) => ({ path, message: 'invalid' })),
        );
      return this.conversations.controlCaseThread(cmd);
    });
  }

  /** clinical_case.opened starts the case thread; clinical_case.resolved closes it to patient messages (idempotent in the stream). */
  @EventPattern(Topics.caseEvents)
  async caseEvent(@Payload() m: IntegrationMessage<{ caseId?: string; patientId?: string }>): Promise<void> {
    await this.conversations.onCaseEvent(m);
  }
}
