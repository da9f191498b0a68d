import { Controller } from '@nestjs/common';
import { EventPattern, MessagePattern, Payload } from '@nestjs/microservices';
import { DomainError } from '@svc/eventstore';
import { IntegrationEventTypes, IntegrationMessage, OpenClinicalCaseCommand, OpenClinicalCaseReply, Patterns, Topics } from '@svc/messaging';
import { CaseLedgerService } from '../../application/case-ledger.service';
import { isUuid } from '../../application/canonical';
import { rpc } from './rpc';

const SOURCES = ['check_in', 'patient_concern', 'staff_chat'];
const PRIORITIES = ['emergency', 'urgent', 'routine'];

/** Bus side of the case-ledger: the open-case command and the dispatcher's delivery facts. */
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
    if (typeof cmd?.actor !== 'string') bad.push('actor');
    if (bad.length) throw new DomainError(400, 'VALIDATION_FAILED', 'Invalid open-case command', bad.map((path) => ({ path, message: 'invalid' })));
    return this.cases.open(cmd);
    });
  }

  @EventPattern(Topics.dispatcherEvents)
  async dispatcherEvent(@Payload() m: IntegrationMessage<{ eventType?: string; caseId?: string; environmentId?: string; deliveredAt?: string }>): Promise<void> {
    if (m?.type !== IntegrationEventTypes.webhookDelivered) return;
    // Idempotent in the case stream (a second delivery of any clinical_case.opened changes nothing).
    await this.cases.markTransportDelivered(m);
  }
}
