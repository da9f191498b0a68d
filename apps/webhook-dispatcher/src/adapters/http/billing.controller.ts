import { Body, Controller, HttpCode, Param, Post, Put, UseGuards } from '@nestjs/common';
import { ApiError, Staff, StaffContext, StaffGuard, membership } from '@svc/http';
import { BillingService } from '../../application/billing.service';
import { BillingEventDto, ChangePlanDto } from './dto';

function ownerOrAdmin(staff: StaffContext): string {
  const role = staff.organization ? membership(staff.organization, staff.principal.sub)?.role : undefined;
  if (role !== 'owner' && role !== 'admin') throw new ApiError(403, 'ROLE_REQUIRED', 'Only an owner or admin may change billing');
  return staff.principal.sub;
}

/** Billing (decisions 3): the plan and the payment provider's notices. Owner or admin. */
@Controller('organizations/:orgId')
@UseGuards(StaffGuard)
export class BillingController {
  constructor(private readonly billing: BillingService) {}

  @Put('plan')
  plan(@Param('orgId') orgId: string, @Body() body: ChangePlanDto, @Staff() staff: StaffContext) {
    return this.billing.changePlan(orgId, body.monthlyCredits, ownerOrAdmin(staff));
  }

  @Post('billing-events')
  @HttpCode(202)
  event(@Param('orgId') orgId: string, @Body() body: BillingEventDto, @Staff() staff: StaffContext) {
    return this.billing.recordBillingEvent(orgId, body, ownerOrAdmin(staff));
  }
}
