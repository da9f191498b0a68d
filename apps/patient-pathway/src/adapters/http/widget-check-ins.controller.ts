import { Body, Controller, Get, HttpCode, Param, Post, Query } from '@nestjs/common';
import { CheckInsService } from '../../application/check-ins.service';
import { CheckInAnswerDto, CheckInCompleteDto } from './dto';

/**
 * Patient side of a check-in (decisions 6). The link's token is the credential: unknown check-in
 * 404 NOT_FOUND; a wrong or already used token 401 INVALID_CHECK_IN_TOKEN.
 */
@Controller()
export class WidgetCheckInsController {
  constructor(private readonly checkIns: CheckInsService) {}

  /**
   * Also at `check-ins/{checkInId}`: the email's link itself, `${WIDGET_BASE_URL}/check-ins/{id}?token=`
   * with `WIDGET_BASE_URL` defaulting to the service's own base URL (decisions 12), so the default
   * link opens the check-in; a caller's own widget page takes over once `WIDGET_BASE_URL` points at it.
   */
  @Get(['widget/v1/check-ins/:checkInId', 'check-ins/:checkInId'])
  view(@Param('checkInId') checkInId: string, @Query('token') token?: string) {
    return this.checkIns.view(checkInId, typeof token === 'string' ? token : undefined);
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

