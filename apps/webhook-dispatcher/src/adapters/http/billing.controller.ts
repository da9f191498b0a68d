import { Body, Controller, HttpCode, Param, Post, Put, UseGuards } from '@nestjs/common';
import { OwnerOrAdmin, Staff, StaffContext, StaffGuard } from '@svc/http';
import { BillingService } from '../../application/billing.service';
import { BillingEventDto, ChangePlanDto } from './dto';

/** Billing (docs/decisions.md, "Billing"): the plan and the payment provider's notices. Owner or admin. */
@Controller('organizations/:orgId')
@UseGuards(StaffGuard)
@OwnerOrAdmin()
export class BillingController {
  constructor(private readonly billing: BillingService) {}

  @Put('plan')
  plan(@Param('orgId') orgId: string, @Body() body: ChangePlanDto, @Staff() staff: StaffContext) {
    return this.billing.changePlan(orgId, body.monthlyCredits, staff.principal.sub);
  }

  @Post('billing-events')
  @HttpCode(202)
  event(@Param('orgId') orgId: string, @Body() body: BillingEventDto, @Staff() staff: StaffContext) {
    return this.billing.recordBillingEvent(orgId, body, staff.principal.sub);
  }
}
