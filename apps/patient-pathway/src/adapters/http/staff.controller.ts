import { Body, Controller, Get, HttpCode, Param, Post, UseGuards } from '@nestjs/common';
import { IntegrationSetup, Staff, StaffContext, StaffGuard } from '@svc/http';
import { CheckInsService } from '../../application/check-ins.service';
import { PathwayService } from '../../application/pathway.service';
import { ProtocolDefinition } from '../../domain/protocol';
import { CreateProtocolDto } from './dto';

const tenancy = (s: StaffContext) => ({ organizationId: s.organization!.id, environmentId: s.environment!.id });
const actor = (s: StaffContext) => `staff:${s.principal.sub}`;

/** Staff API: protocols (integration set-up) and on-demand check-ins (clinical work: any member). */
@Controller('organizations/:orgId/environments/:envId')
@UseGuards(StaffGuard)
export class PathwayStaffController {
  constructor(
    private readonly pathway: PathwayService,
    private readonly checkIns: CheckInsService,
  ) {}

  @Post('protocols')
  @IntegrationSetup()
  create(@Body() body: CreateProtocolDto, @Staff() staff: StaffContext) {
    return this.pathway.createProtocol(tenancy(staff), JSON.parse(JSON.stringify(body)) as ProtocolDefinition, actor(staff));
  }

  @Get('protocols')
  @IntegrationSetup()
  async list(@Staff() staff: StaffContext) {
    return { protocols: await this.pathway.listProtocols(staff.environment!.id) };
  }

  @Post('protocols/:protocolId/activate')
  @IntegrationSetup()
  @HttpCode(200)
  activate(@Param('protocolId') protocolId: string, @Staff() staff: StaffContext) {
    return this.pathway.setProtocolActive(tenancy(staff), protocolId, true, actor(staff));
  }

  @Post('protocols/:protocolId/deactivate')
  @IntegrationSetup()
  @HttpCode(200)
  deactivate(@Param('protocolId') protocolId: string, @Staff() staff: StaffContext) {
    return this.pathway.setProtocolActive(tenancy(staff), protocolId, false, actor(staff));
  }

  @Post('patients/:patientId/check-ins')
  sendCheckIn(@Param('patientId') patientId: string, @Staff() staff: StaffContext) {
    return this.checkIns.sendNow(tenancy(staff), patientId, actor(staff));
  }
}
