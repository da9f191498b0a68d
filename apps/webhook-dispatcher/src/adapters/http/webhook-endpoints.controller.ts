import { Body, Controller, Delete, Get, HttpCode, Param, Post, Query, UseGuards } from '@nestjs/common';
import { ApiError, IntegrationSetup, STAFF_PAGE_LIMIT, Staff, StaffContext, StaffGuard, pageLimit } from '@svc/http';
import { EndpointsService } from '../../application/endpoints.service';
import { DeliveryStatus } from '../../domain/delivery';
import { CreateWebhookEndpointDto } from './dto';

const DELIVERY_STATUSES: readonly DeliveryStatus[] = ['pending', 'held', 'delivered', 'failed'];

const actor = (s: StaffContext) => ({ sub: s.principal.sub });

/** Staff API of docs/decisions.md, "Endpoints, deliveries and retries": webhook endpoints of one environment and their delivery log. */
@Controller('organizations/:orgId/environments/:envId/webhook-endpoints')
@UseGuards(StaffGuard)
@IntegrationSetup()
export class WebhookEndpointsController {
  constructor(private readonly webhooks: EndpointsService) {}

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
  /** One page of the delivery log, newest first: `limit` 1-200 (50), `cursor` the previous page's `nextCursor`, `status` (docs/webhooks.md). */
  deliveries(
    @Param('envId') envId: string,
    @Param('endpointId') endpointId: string,
    @Query('limit') limit: unknown,
    @Query('cursor') cursor: unknown,
    @Query('status') status: unknown,
  ) {
    if (status !== undefined && !(typeof status === 'string' && (DELIVERY_STATUSES as readonly string[]).includes(status))) {
      throw ApiError.validation([{ path: 'status', message: `status must be one of ${DELIVERY_STATUSES.join(', ')}` }]);
    }
    return this.webhooks.listDeliveries(envId, endpointId, { limit: pageLimit(limit, STAFF_PAGE_LIMIT), cursor, status: status as DeliveryStatus | undefined });
  }

  @Post(':endpointId/deliveries/:deliveryId/retry')
  @HttpCode(202)
  retry(
    @Param('orgId') orgId: string,
    @Param('envId') envId: string,
    @Param('endpointId') endpointId: string,
    @Param('deliveryId') deliveryId: string,
    @Staff() staff: StaffContext,
  ) {
    return this.webhooks.retryDelivery(orgId, envId, endpointId, deliveryId, actor(staff));
  }
}
