import { ArrayMaxSize, ArrayMinSize, IsArray, IsIn, IsInt, IsString, Length, Max, MaxLength, Min } from 'class-validator';
import { BillingEventTypes, BillingEventType } from '../../domain/account';
import { SubscribableEvents } from '../../domain/catalog';
import { IfPresent, IsRealDateTime } from '@svc/http';

export class CreateWebhookEndpointDto {
  @IsString() @Length(1, 2000) url!: string;
  @IsArray() @ArrayMinSize(1) @ArrayMaxSize(SubscribableEvents.length) @IsIn(SubscribableEvents as unknown as string[], { each: true }) events!: string[];
  @IfPresent() @IsString() @Length(1, 300) description?: string;
}

export class ChangePlanDto {
  @IsInt() @Min(1) @Max(100_000_000) monthlyCredits!: number;
}

export class BillingEventDto {
  @IsString() @Length(1, 200) eventId!: string;
  @IsIn(BillingEventTypes) type!: BillingEventType;
  @IfPresent() @IsString() @MaxLength(200) invoiceId?: string;
  /** Spec "date-time": ISO 8601 with a time zone (a local time names no instant). */
  @IfPresent() @IsRealDateTime() occurredAt?: string;
}
