import { Body, Controller, Delete, Get, HttpCode, Param, Post, Query, UseGuards } from '@nestjs/common';
import { ApiError, IntegrationSetup, Staff, StaffContext, StaffGuard } from '@svc/http';
import { DEFAULT_DELIVERY_LIMIT, MAX_DELIVERY_LIMIT, WebhooksService } from '../../application/webhooks.service';
import { DeliveryStatus } from '../../domain/delivery';
import { CreateWebhookEndpointDto } from './dto';

const DELIVERY_STATUSES: readonly DeliveryStatus[] = ['pending', 'held', 'delivered', 'failed'];

const actor = (s: StaffContext) => ({ sub: s.principal.sub });

/** Staff API of decisions section 3: webhook endpoints of one environment and their delivery log. */
@Controller('organizations/:orgId/environments/:envId/webhook-endpoints')
@UseGuards(StaffGuard)
@IntegrationSetup()
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
  async deliveries(@Param('envId') envId: string, @Param('endpointId') endpointId: string, @Query('limit') limit: unknown, @Query('status') status: unknown) {
    if (status !== undefined && !(typeof status === 'string' && (DELIVERY_STATUSES as readonly string[]).includes(status))) {
      throw ApiError.validation([{ path: 'status', message: `status must be one of ${DELIVERY_STATUSES.join(', ')}` }]);
    }
    let n = DEFAULT_DELIVERY_LIMIT;
    if (limit !== undefined) {
      if (typeof limit !== 'string' || !/^\d{1,4}$/.test(limit) || Number(limit) < 1 || Number(limit) > MAX_DELIVERY_LIMIT) {
        throw ApiError.validation([{ path: 'limit', message: `limit must be an integer from 1 to ${MAX_DELIVERY_LIMIT}` }]);
      }
      n = Number(limit);
    }
    return { deliveries: await this.webhooks.listDeliveries(envId, endpointId, n, status as DeliveryStatus | undefined) };
  }

  @Post(':endpointId/deliveries/:deliveryId/retry')
  @HttpCode(202)
  retry(@Param('orgId') orgId: string, @Param('envId') envId: string, @Param('endpointId') endpointId: string, @Param('deliveryId') deliveryId: string, @Staff() staff: StaffContext) {
    return this.webhooks.retryDelivery(orgId, envId, endpointId, deliveryId, actor(staff));
  }
}
