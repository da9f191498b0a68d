import { Body, Controller, Delete, Get, HttpCode, Param, Post, UseGuards } from '@nestjs/common';
import { RequiresPermission, Staff, StaffContext, StaffGuard } from '@svc/http';
import { WebhooksService } from '../../application/webhooks.service';
import { CreateWebhookEndpointDto } from './dto';

const actor = (s: StaffContext) => ({ sub: s.principal.sub });

/** Staff API of decisions section 3: webhook endpoints of one environment and their delivery log. */
@Controller('organizations/:orgId/environments/:envId/webhook-endpoints')
@UseGuards(StaffGuard)
@RequiresPermission('integrations.manage')
export class WebhookEndpointsController {
  constructor(private readonly webhooks: WebhooksService) {}

  @Post()
  create(@Param('orgId') orgId: string, @Param('envId') envId: string, @Body() body: CreateWebhookEndpointDto, @Staff() staff: StaffContext) {
    return this.webhooks.createEndpoint(orgId, envId, body, actor(staff));
  }

  @Get()
  async list(@Param('envId') envId: string) {
    return { webhookEndpoints: await this.webhooks.listEndpoints(envId) };
  }

  @Delete(':endpointId')
  @HttpCode(204)
  async remove(@Param('orgId') orgId: string, @Param('envId') envId: string, @Param('endpointId') endpointId: string, @Staff() staff: StaffContext) {
    await this.webhooks.deleteEndpoint(orgId, envId, endpointId, actor(staff));
  }

  @Post(':endpointId/rotate-secret')
  rotate(@Param('orgId') orgId: string, @Param('envId') envId: string, @Param('endpointId') endpointId: string, @Staff() staff: StaffContext) {
    return this.webhooks.rotateSecret(orgId, envId, endpointId, actor(staff));
  }

  @Get(':endpointId/deliveries')
  async deliveries(@Param('envId') envId: string, @Param('endpointId') endpointId: string) {
    return { deliveries: await this.webhooks.listDeliveries(envId, endpointId) };
  }

  @Post(':endpointId/deliveries/:deliveryId/retry')
  @HttpCode(202)
  retry(@Param('orgId') orgId: string, @Param('envId') envId: string, @Param('endpointId') endpointId: string, @Param('deliveryId') deliveryId: string, @Staff() staff: StaffContext) {
    return this.webhooks.retryDelivery(orgId, envId, endpointId, deliveryId, actor(staff));
  }
}
