import { Body, Controller, Get, Headers, HttpCode, Param, Post, Query, Res, UseGuards } from '@nestjs/common';
import type { FastifyReply } from 'fastify';
import {
  ApiError,
  ApiKeyGuard,
  ApiTenant,
  MESSAGE_PAGE_LIMIT,
  Tenant,
  idempotencyKeyHeader,
  pageLimit,
  WidgetSession,
  WidgetSessionContext,
  WidgetSessionGuard,
} from '@svc/http';
import { ConversationService } from '../../application/conversation.service';
import { DeliveryReportDto, InboundMessageDto, WidgetReplyDto } from './dto';

/** The `afterSequence` query parameter: absent → 0; else an integer of at least 0, or 400 naming it. */
function afterSequenceOf(afterSequence: unknown): number {
  if (afterSequence === undefined) return 0;
  if (typeof afterSequence !== 'string' || !/^\d+$/.test(afterSequence)) {
    throw ApiError.validation([{ path: 'afterSequence', message: 'afterSequence must be an integer of at least 0' }]);
  }
  // Any size of integer is valid; past the largest exact one it means "after everything".
  return Math.min(Number(afterSequence), Number.MAX_SAFE_INTEGER);
}

/** Caller-facing conversation endpoints (API key). */
@Controller('v1/conversations')
@UseGuards(ApiKeyGuard)
export class ConversationsController {
  constructor(private readonly conversations: ConversationService) {}

  @Get(':conversationId/messages')
  list(
    @Param('conversationId') conversationId: string,
    @Query('afterSequence') afterSequence: unknown,
    @Query('limit') limit: unknown,
    @Tenant() tenant: ApiTenant,
  ) {
    return this.conversations.messages(tenant, conversationId, afterSequenceOf(afterSequence), pageLimit(limit, MESSAGE_PAGE_LIMIT));
  }

  @Post(':conversationId/messages')
  async inbound(
    @Param('conversationId') conversationId: string,
    @Body() body: InboundMessageDto,
    @Tenant() tenant: ApiTenant,
    @Res({ passthrough: true }) reply: FastifyReply,
  ) {
    const r = await this.conversations.inbound(tenant, `api-key:${tenant.keyId}`, conversationId, body);
    reply.status(201);
    return { id: r.id, conversationId: r.conversationId, sequence: r.sequence, duplicate: r.duplicate, createdAt: r.createdAt };
  }

  @Post(':conversationId/messages/:messageId/delivery')
  @HttpCode(201)
  delivery(
    @Param('conversationId') conversationId: string,
    @Param('messageId') messageId: string,
    @Body() body: DeliveryReportDto,
    @Tenant() tenant: ApiTenant,
  ) {
    return this.conversations.reportDelivery(tenant, `api-key:${tenant.keyId}`, conversationId, messageId, body);
  }
}

/** The patient's replies in a case thread, from the widget (session token). */
@Controller('widget/v1/cases')
@UseGuards(WidgetSessionGuard)
export class WidgetCaseMessagesController {
  constructor(private readonly conversations: ConversationService) {}

  /**
   * The case's thread as the patient sees it (docs/decisions.md, "Pages for patients"): the
   * messages after `afterSequence` (1-500, 100 by default), without the service's internal
   * summaries, and whether the thread is closed to replies (the case was resolved).
   */
  @Get(':caseId/messages')
  thread(
    @Param('caseId') caseId: string,
    @Query('afterSequence') afterSequence: unknown,
    @Query('limit') limit: unknown,
    @WidgetSession() session: WidgetSessionContext,
  ) {
    return this.conversations.widgetThread(session, caseId, afterSequenceOf(afterSequence), pageLimit(limit, MESSAGE_PAGE_LIMIT));
  }

  @Post(':caseId/messages')
  @HttpCode(201)
  reply(
    @Param('caseId') caseId: string,
    @Body() body: WidgetReplyDto,
    @Headers('idempotency-key') idempotencyKey: string | undefined,
    @WidgetSession() session: WidgetSessionContext,
  ) {
    return this.conversations.widgetReply(session, caseId, body.message, idempotencyKeyHeader(idempotencyKey));
  }
}
