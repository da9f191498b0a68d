import { Body, Controller, Get, HttpCode, Param, Post, UseGuards } from '@nestjs/common';
import { RequiresPermission, Staff, StaffContext, StaffGuard } from '@svc/http';
import { CheckInsService } from '../../application/check-ins.service';
import { PathwayService } from '../../application/pathway.service';
import { ProtocolDefinition } from '../../domain/protocol';
import { CreateProtocolDto } from './dto';

const tenancy = (s: StaffContext) => ({ organizationId: s.organization!.id, environmentId: s.environment!.id });
const actor = (s: StaffContext) => `staff:${s.principal.sub}`;

/** Staff API of decisions 3: protocols and on-demand check-ins. */
@Controller('organizations/:orgId/environments/:envId')
@UseGuards(StaffGuard)
@RequiresPermission('integrations.manage')
export class PathwayStaffController {
  constructor(
    private readonly pathway: PathwayService,
    private readonly checkIns: CheckInsService,
  ) {}

  @Post('protocols')
  create(@Body() body: CreateProtocolDto, @Staff() staff: StaffContext) {
    return this.pathway.createProtocol(tenancy(staff), JSON.parse(JSON.stringify(body)) as ProtocolDefinition, actor(staff));
  }

  @Get('protocols')
  async list(@Staff() staff: StaffContext) {
    return { protocols: await this.pathway.listProtocols(staff.environment!.id) };
  }

  @Post('protocols/:protocolId/activate')
  @HttpCode(200)
  activate(@Param('protocolId') protocolId: string, @Staff() staff: StaffContext) {
    return this.pathway.setProtocolActive(tenancy(staff), protocolId, true, actor(staff));
  }

  @Post('protocols/:protocolId/deactivate')
  @HttpCode(200)
  deactivate(@Param('protocolId') protocolId: string, @Staff() staff: StaffContext) {
    return this.pathway.setProtocolActive(tenancy(staff), protocolId, false, actor(staff));
  }

  @Post('patients/:patientId/check-ins')
  sendCheckIn(@Param('patientId') patientId: string, @Staff() staff: StaffContext) {
    return this.checkIns.sendNow(tenancy(staff), patientId, actor(staff));
  }
}
