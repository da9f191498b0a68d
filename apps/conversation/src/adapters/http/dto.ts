import { Type } from 'class-transformer';
import { ArrayMaxSize, IsArray, IsIn, IsObject, IsString, IsUUID, Length, MaxLength, ValidateNested } from 'class-validator';
import type { DeliveryStatus } from '../../domain/conversation';
import { AttachmentDto, IfPresent, LowercaseUuid } from '@svc/http';

/** Attachment item (docs/decisions.md, "Attachment items are one class"): the shared class of @svc/http (fileName and contentType at least one character). */
export { AttachmentDto };

/** Most attachments per message (no spec limit; ours, see docs/decisions.md). */
export const MAX_ATTACHMENTS = 20;

/** Inbound conversation message (spec). */
export class InboundMessageDto {
  @LowercaseUuid() @IsUUID() requestId!: string;
  @IsString() @Length(1, 10000) message!: string;
  @IfPresent() @IsString() @MaxLength(200) externalMessageId?: string;
  @IfPresent()
  @IsArray()
  @ArrayMaxSize(MAX_ATTACHMENTS)
  @IsObject({ each: true })
  @ValidateNested({ each: true })
  @Type(() => AttachmentDto)
  attachments?: AttachmentDto[];
}

/** Delivery state report (spec). */
export class DeliveryReportDto {
  @IsString() @MaxLength(200) externalMessageId!: string;
  @IsIn(['delivered', 'read', 'failed']) status!: DeliveryStatus;
  @IfPresent() @IsString() @MaxLength(80) errorCode?: string;
}

/** The patient's reply from the widget (docs/decisions.md, "Widget sessions and identity tokens"). */
export class WidgetReplyDto {
  @IsString() @Length(1, 10000) message!: string;
}
