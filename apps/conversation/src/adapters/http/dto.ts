import { Type } from 'class-transformer';
import { ArrayMaxSize, IsArray, IsIn, IsOptional, IsString, IsUUID, Length, Matches, MaxLength, ValidateNested } from 'class-validator';
import type { DeliveryStatus } from '../../domain/conversation';

/** Attachment item (decisions 8): four required members. */
export class AttachmentDto {
  @IsUUID() id!: string;
  @IsString() @MaxLength(200) fileName!: string;
  @IsString() @MaxLength(160) contentType!: string;
  @IsString() @Matches(/^[a-f0-9]{64}$/) sha256!: string;
}

/** Inbound conversation message (spec). */
export class InboundMessageDto {
  @IsUUID() requestId!: string;
  @IsString() @Length(1, 10000) message!: string;
  @IsOptional() @IsString() @MaxLength(200) externalMessageId?: string | null;
  @IsOptional() @IsArray() @ArrayMaxSize(20) @ValidateNested({ each: true }) @Type(() => AttachmentDto) attachments?: AttachmentDto[] | null;
}

/** Delivery state report (spec). */
export class DeliveryReportDto {
  @IsString() @MaxLength(200) externalMessageId!: string;
  @IsIn(['delivered', 'read', 'failed']) status!: DeliveryStatus;
  @IsOptional() @IsString() @MaxLength(80) errorCode?: string | null;
}

/** The patient's reply from the widget (decisions 7). */
export class WidgetReplyDto {
  @IsString() @Length(1, 10000) message!: string;
}
