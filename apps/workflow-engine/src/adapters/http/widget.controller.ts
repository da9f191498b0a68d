import { Body, Controller, Headers, Post, UseGuards } from '@nestjs/common';
import { WidgetSession, WidgetSessionContext, WidgetSessionGuard, idempotencyKeyHeader } from '@svc/http';
import { RunnerService } from '../../application/runner.service';
import { WidgetMessageDto } from './dto';

/** The patient agent (docs/decisions.md, "Widget sessions and identity tokens"): POST /widget/v1/messages. */
@Controller('widget/v1/messages')
@UseGuards(WidgetSessionGuard)
export class WidgetMessagesController {
  constructor(private readonly runner: RunnerService) {}

  @Post()
  send(@Body() body: WidgetMessageDto, @Headers('idempotency-key') idempotencyKey: string | undefined, @WidgetSession() session: WidgetSessionContext) {
    return this.runner.message(session, body.message, body.attachments ?? [], idempotencyKeyHeader(idempotencyKey));
  }
}
