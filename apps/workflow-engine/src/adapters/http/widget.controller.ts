import { Body, Controller, Post, UseGuards } from '@nestjs/common';
import { WidgetSession, WidgetSessionContext, WidgetSessionGuard } from '@svc/http';
import { RunnerService } from '../../application/runner.service';
import { WidgetMessageDto } from './dto';

/** The patient agent (decisions 7): POST /widget/v1/messages. */
@Controller('widget/v1/messages')
@UseGuards(WidgetSessionGuard)
export class WidgetMessagesController {
  constructor(private readonly runner: RunnerService) {}

  @Post()
  send(@Body() body: WidgetMessageDto, @WidgetSession() session: WidgetSessionContext) {
    return this.runner.message(session, body.message, body.attachments?.length ?? 0);
  }
}
