import { Controller } from '@nestjs/common';
import { EventPattern, MessagePattern, Payload } from '@nestjs/microservices';
import { DomainError } from '@svc/eventstore';
import {
  CaseStatusQuery,
  CaseStatusReply,
  IntegrationEventTypes,
  IntegrationMessage,
  OpenClinicalCaseCommand,
  OpenClinicalCaseReply,
  Patterns,
  Topics,
  rpc,
} from '@svc/messaging';
import { CaseLedgerService } from '../../application/case-ledger.service';
import { isUuid } from '@svc/http';

const SOURCES = ['check_in', 'patient_concern', 'staff_chat'];
const PRIORITIES = ['emergency', 'urgent', 'routine'];

/**
 * Bus side of the case-ledger: the open-case command, the case-status query, the dispatcher's
 * delivery facts and the conversation's case-thread facts. No handler here sends a request to the
 * conversation app (docs/decisions.md, "Case threads without synchronous cycles").
 */
@Controller()
export class CaseBusController {
  constructor(private readonly cases: CaseLedgerService) {}

  @MessagePattern(Patterns.openClinicalCase)
  open(@Payload() cmd: OpenClinicalCaseCommand): Promise<OpenClinicalCaseReply> {
    return rpc(async () => {
      const bad: string[] = [];
      for (const k of ['requestId', 'organizationId', 'environmentId', 'patientId'] as const) if (!isUuid(cmd?.[k])) bad.push(k);
      if (!SOURCES.includes(cmd?.source)) bad.push('source');
      if (!PRIORITIES.includes(cmd?.priority)) bad.push('priority');
      if (typeof cmd?.actor !== 'string' || cmd.actor.length < 1 || cmd.actor.length > 300) bad.push('actor');
      if (cmd?.patientNotes !== null && (typeof cmd?.patientNotes !== 'string' || cmd.patientNotes.length > 4000)) bad.push('patientNotes');
      const scores = cmd?.symptomScores as unknown;
      if (
        scores === null ||
        typeof scores !== 'object' ||
        Array.isArray(scores) ||
        Object.values(scores as object).some((v) => !(typeof v === 'string' || typeof v === 'boolean' || (typeof v === 'number' && Number.isFinite(v))))
      )
        bad.push('symptomScores');
      if (!Array.isArray(cmd?.matchedRules) || cmd.matchedRules.some((r) => typeof r !== 'string')) bad.push('matchedRules');
      if (typeof cmd?.stoppedEarly !== 'boolean') bad.push('stoppedEarly');
      if (cmd?.internalNote !== undefined && cmd.internalNote !== null && (typeof cmd.internalNote !== 'string' || cmd.internalNote.length > 4000))
        bad.push('internalNote');
      if (bad.length)
        throw new DomainError(
          400,
          'VALIDATION_FAILED',
          'Invalid open-case command',
          bad.map((path) => ({ path, message: 'invalid' })),
        );
      return this.cases.open(cmd);
    });
  }

  @MessagePattern(Patterns.caseStatus)
  caseStatus(@Payload() q: CaseStatusQuery): Promise<CaseStatusReply> {
    return rpc(async () => {
      const bad = (['environmentId', 'caseId'] as const).filter((k) => !isUuid(q?.[k]));
      if (bad.length)
        throw new DomainError(
          400,
          'VALIDATION_FAILED',
          'Invalid case-status query',
          bad.map((path) => ({ path, message: 'invalid' })),
        );
      return this.cases.caseStatus(q.environmentId, q.caseId.toLowerCase());
    });
  }

  /** The conversation app's case-thread facts (a thread closed to patient messages), recorded in the case stream. */
  @EventPattern(Topics.conversationEvents)
  async conversationEvent(@Payload() m: IntegrationMessage<{ conversationId?: string }>): Promise<void> {
    await this.cases.onConversationEvent(m);
  }

  @EventPattern(Topics.dispatcherEvents)
  async dispatcherEvent(
    @Payload() m: IntegrationMessage<{ eventType?: string; caseId?: string; environmentId?: string; deliveredAt?: string }>,
  ): Promise<void> {
    if (m?.type !== IntegrationEventTypes.webhookDelivered) return;
    // Idempotent in the case stream (a second delivery of any clinical_case.opened changes nothing).
    await this.cases.markTransportDelivered(m);
  }
}
