import { Body, Controller, HttpCode, Post, UseGuards } from '@nestjs/common';
import { ApiKeyGuard, ApiTenant, Tenant } from '@svc/http';
import { PathwayService } from '../../application/pathway.service';
import { PatientEventDto } from './dto';

/** Patient lifecycle (contracts/openapi.yaml, `PatientLifecycleEvent`; docs/decisions.md, "Patient pathway"). Both paths behave the same. */
@Controller('client')
@UseGuards(ApiKeyGuard)
export class PatientEventsController {
  constructor(private readonly pathway: PathwayService) {}

  @Post(['patient-events', 'webhooks/patient-events'])
  @HttpCode(202)
  accept(@Body() body: PatientEventDto, @Tenant() tenant: ApiTenant) {
    return this.pathway.acceptLifecycleEvent(
      { ...body },
      { organizationId: tenant.organizationId, environmentId: tenant.environmentId },
      `api-key:${tenant.keyId}`,
    );
  }
}
