import { Body, Controller, Get, HttpCode, Inject, Post, Query } from '@nestjs/common';
import { CLOCK, Clock, DevClock } from '@svc/clock';
import { ApiError } from '@svc/http';
import { DEV_CLOCK_SYNC, DEV_IDP, DevClockSync, MAILER, Mailer } from '@svc/platform';
import { DevIdentityProvider } from '@svc/security';
import { AdvanceClockDto, StaffTokenDto } from './dto';

/** Dev tools of docs/decisions.md, "Dev tools and the dev clock"; only registered when dev tools are on (never in production mode). */
@Controller('dev')
export class DevController {
  constructor(
    @Inject(DEV_IDP) private readonly idp: DevIdentityProvider | null,
    @Inject(CLOCK) private readonly clock: Clock,
    @Inject(MAILER) private readonly mailer: Mailer,
    @Inject(DEV_CLOCK_SYNC) private readonly shared: DevClockSync | null,
  ) {}

  @Post('staff-tokens')
  async staffToken(@Body() body: StaffTokenDto) {
    if (!this.idp) throw ApiError.notFound('Route');
    const idToken = await this.idp.mint(
      { sub: body.sub, email: body.email, permissions: body.permissions ?? ['integrations.manage'], mfa: body.mfa ?? true },
      this.clock.now(),
    );
    return { idToken };
  }

  @Get('outbox')
  async outbox(@Query('to') to?: string) {
    return { emails: await this.mailer.list(typeof to === 'string' && to ? to : undefined) };
  }

  /**
   * Standalone: this process's clock. Distributed mode: the clock every app shares, answered once
   * every running app has taken the new time (libs/platform dev-clock-sync.ts).
   */
  @Post('clock')
  @HttpCode(200)
  async advance(@Body() body: AdvanceClockDto) {
    if (!(this.clock instanceof DevClock)) throw ApiError.notFound('Route');
    if (this.shared) return { now: (await this.shared.advance(body.advanceSeconds)).toISOString() };
    return { now: this.clock.advance(body.advanceSeconds).toISOString() };
  }
}
