import { Body, Controller, Get, Headers, HttpCode, Param, Post, Query, Res } from '@nestjs/common';
import type { FastifyReply } from 'fastify';
import { ApiError, ChecksOwnPathIds, uuidParamProblem } from '@svc/http';
import { pageHeaders, prefersHtml, webPages } from '@svc/platform';
import { CheckInsService } from '../../application/check-ins.service';
import { CheckInAnswerDto, CheckInCompleteDto } from './dto';

/**
 * Patient side of a check-in (docs/decisions.md, "Patient pathway"). The link's token is the credential: unknown check-in
 * 404 NOT_FOUND; a wrong or already used token 401 INVALID_CHECK_IN_TOKEN.
 */
@Controller()
export class WidgetCheckInsController {
  constructor(private readonly checkIns: CheckInsService) {}

  @Get('widget/v1/check-ins/:checkInId')
  view(@Param('checkInId') checkInId: string, @Query('token') token?: string) {
    return this.checkIns.view(checkInId, typeof token === 'string' ? token : undefined);
  }

  /**
   * The email's link itself, `${WIDGET_BASE_URL}/check-ins/{id}?token=` with `WIDGET_BASE_URL`
   * defaulting to the service's own base URL (docs/decisions.md, "Check-in links"). A browser (its Accept prefers
   * text/html) gets the check-in page (docs/decisions.md, "Pages for people"), which then works through the widget routes
   * below; an API client keeps the JSON answer of `GET /widget/v1/check-ins/{id}`. A link that
   * does not open (wrong, used, unknown) gets the same page with the same status as the JSON
   * answer, marked so that the page says so kindly (docs/decisions.md, "Pages for patients").
   */
  @Get('check-ins/:checkInId')
  @ChecksOwnPathIds()
  async link(
    @Param('checkInId') checkInId: string,
    @Query('token') token: unknown,
    @Headers('accept') accept: string | undefined,
    @Res({ passthrough: true }) reply: FastifyReply,
  ) {
    const given = typeof token === 'string' ? token : undefined;
    const malformed = uuidParamProblem({ checkInId });
    if (!prefersHtml(accept)) {
      if (malformed) throw malformed;
      return this.checkIns.view(checkInId, given);
    }
    const html = webPages()?.page('checkin');
    if (!html) throw new ApiError(503, 'UNAVAILABLE', 'The check-in page is not built (npm run build)', undefined, { 'retry-after': '60' });
    let status = 200;
    let state = '';
    try {
      // A mangled link (its id cut or altered): the page's "link does not work" answer, status 400.
      if (malformed) throw malformed;
      await this.checkIns.view(checkInId, given);
    } catch (err) {
      if (!given) {
        // The address without its token (copied in part, or reloaded elsewhere): ask for the email's link.
        reply.status(401).headers(pageHeaders('no-store'));
        return html.replace('data-link=""', 'data-link="missing"');
      }
      const s = (err as { status?: unknown }).status;
      if (typeof s !== 'number' || s >= 500 || s < 400) throw err;
      status = s;
      state = s === 401 ? 'used' : s === 429 ? 'busy' : 'unknown';
    }
    reply.status(status).headers(pageHeaders('no-store'));
    return html.replace('data-link=""', `data-link="${state}"`);
  }

  @Post('widget/v1/check-ins/:checkInId/answers')
  @HttpCode(200)
  answer(@Param('checkInId') checkInId: string, @Body() body: CheckInAnswerDto) {
    return this.checkIns.answer(checkInId, body.token, body.questionKey, body.value);
  }

  @Post('widget/v1/check-ins/:checkInId/complete')
  @HttpCode(200)
  complete(@Param('checkInId') checkInId: string, @Body() body: CheckInCompleteDto) {
    return this.checkIns.complete(checkInId, body.token, body.notes);
  }
}
