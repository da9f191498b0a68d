import { Controller } from '@nestjs/common';
import { MessagePattern, Payload } from '@nestjs/microservices';
import { FindPatientQuery, FindPatientReply, PatientContactQuery, PatientContactReply, Patterns } from '@svc/messaging';
import { PathwayService } from '../../application/pathway.service';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** Bus queries owned by the patient-pathway (request/reply). Payloads hold PHI: never logged. */
@Controller()
export class PathwayQueriesController {
  constructor(private readonly pathway: PathwayService) {}

  @MessagePattern(Patterns.findPatient)
  async findPatient(@Payload() q: FindPatientQuery): Promise<FindPatientReply> {
    if (typeof q?.environmentId !== 'string' || typeof q?.externalPatientId !== 'string' || !q.externalPatientId) return { patientId: null };
    return { patientId: await this.pathway.findPatient(q.environmentId, q.externalPatientId) };
  }

  @MessagePattern(Patterns.patientContact)
  async patientContact(@Payload() q: PatientContactQuery): Promise<PatientContactReply> {
    if (typeof q?.environmentId !== 'string' || typeof q?.patientId !== 'string' || !UUID.test(q.patientId))
      return { known: false, email: null, externalPatientId: null };
    const { known, email } = await this.pathway.patientContact(q.environmentId, q.patientId);
    return { known, email, externalPatientId: null };
  }
}
