import { IsIn, IsInt, IsString, IsUUID, Length, Matches, Max, Min } from 'class-validator';
import type { ResolutionOutcome, UpdateStatus } from '../../domain/case';
import { DATE_TIME_RE, IfPresent, IsRealDateTime, LowercaseUuid } from '@svc/http';

export const UPDATE_STATUSES: UpdateStatus[] = ['processed', 'scheduled', 'clinician_responded', 'patient_contacted', 'resolved'];
export const RESOLUTION_OUTCOMES: ResolutionOutcome[] = [
  'patient_contacted',
  'provider_follow_up',
  'medication_adjusted',
  'emergency_referral',
  'no_further_action',
  'other',
];

/** Case update (spec "Case update"); cross-field rules are checked in the controller. */
export class CaseUpdateDto {
  @LowercaseUuid() @IsUUID() updateId!: string;
  @IsInt() @Min(1) @Max(1_000_000) sequence!: number;
  @IsIn(UPDATE_STATUSES) status!: UpdateStatus;
  @IsString() @Length(1, 200) externalReference!: string;
  @IfPresent()
  @IsString()
  @Matches(DATE_TIME_RE, { message: 'scheduledFor must be an ISO 8601 date-time with a time zone' })
  @IsRealDateTime()
  scheduledFor?: string;
  @IfPresent() @IsIn(RESOLUTION_OUTCOMES) resolutionOutcome?: ResolutionOutcome;
  @IfPresent() @IsString() @Length(10, 2000) resolutionNote?: string;
}

/** Provider message to the patient (spec "Provider message"). */
export class ProviderMessageDto {
  @LowercaseUuid() @IsUUID() messageId!: string;
  @IsString() @Length(1, 4000) message!: string;
  @IsString() @Length(1, 200) externalReference!: string;
}

/** Staff chat request (docs/decisions.md, "Staff chat"). */
export class StaffCaseDto {
  @LowercaseUuid() @IsUUID() patientId!: string;
  @IsString() @Length(1, 4000) request!: string;
}
