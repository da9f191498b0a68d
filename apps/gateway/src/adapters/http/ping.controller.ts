import { Controller, Get, UseGuards } from '@nestjs/common';
import { ApiKeyGuard, ApiTenant, Tenant } from '@svc/http';

/** A credential check for callers: passes the API-key and BAA gates like every API-key call. */
@Controller('v1/ping')
@UseGuards(ApiKeyGuard)
export class PingController {
  @Get()
  ping(@Tenant() tenant: ApiTenant) {
    return { organizationId: tenant.organizationId, environmentId: tenant.environmentId, environmentKind: tenant.environmentKind };
  }
}
