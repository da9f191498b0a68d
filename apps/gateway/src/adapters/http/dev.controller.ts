import { Body, Controller, Get, HttpCode, Inject, Post, Query } from '@nestjs/common';
import { CLOCK, Clock, DevClock } from '@svc/clock';
import { ApiError } from '@svc/http';
import { DEV_IDP, MAILER, Mailer } from '@svc/platform';
import { DevIdentityProvider } from '@svc/security';
import { AdvanceClockDto, StaffTokenDto } from './dto';

/** Dev tools of decisions section 2; only registered when dev tools are on (never in production mode). */
@Controller('dev')
export class DevController {
  constructor(
    @Inject(DEV_IDP) private readonly idp: DevIdentityProvider | null,
    @Inject(CLOCK) private readonly clock: Clock,
    @Inject(MAILER) private readonly mailer: Mailer,
  ) {}

  @Post('staff-tokens')
  async staffToken(@Body() body: StaffTokenDto) {
    if (!this.idp) throw ApiError.notFound('Route');
    const idToken = await this.idp.mint({ sub: body.sub, email: body.email, permissions: body.permissions ?? ['integrations.manage'], mfa: body.mfa ?? true }, this.clock.now());
    return { idToken };
  }

  @Get('outbox')
  async outbox(@Query('to') to?: string) {
    return { emails: await this.mailer.list(typeof to === 'string' && to ? to : undefined) };
  }

  @Post('clock')
  @HttpCode(200)
  advance(@Body() body: AdvanceClockDto) {
    if (!(this.clock instanceof DevClock)) throw ApiError.notFound('Route');
    return { now: this.clock.advance(body.advanceSeconds).toISOString() };
  }
}
