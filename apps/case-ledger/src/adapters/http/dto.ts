import { IsIn, IsInt, IsOptional, IsString, IsUUID, Length, Matches, Max, Min } from 'class-validator';
import type { ResolutionOutcome, UpdateStatus } from '../../domain/case';

/** ISO 8601 date-time with a time zone (spec "date-time"). */
export const DATE_TIME_RE = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d{1,9})?)?(Z|[+-]\d{2}:\d{2})$/;

export const UPDATE_STATUSES: UpdateStatus[] = ['processed', 'scheduled', 'clinician_responded', 'patient_contacted', 'resolved'];
export const RESOLUTION_OUTCOMES: ResolutionOutcome[] = ['patient_contacted', 'provider_follow_up', 'medication_adjusted', 'emergency_referral', 'no_further_action', 'other'];

/** Case update (spec "Case update"); cross-field rules are checked in the controller. */
export class CaseUpdateDto {
  @IsUUID() updateId!: string;
  @IsInt() @Min(1) @Max(1_000_000) sequence!: number;
  @IsIn(UPDATE_STATUSES) status!: UpdateStatus;
  @IsString() @Length(1, 200) externalReference!: string;
  @IsOptional() @IsString() @Matches(DATE_TIME_RE, { message: 'scheduledFor must be an ISO 8601 date-time with a time zone' }) scheduledFor?: string | null;
  @IsOptional() @IsIn(RESOLUTION_OUTCOMES) resolutionOutcome?: ResolutionOutcome | null;
  @IsOptional() @IsString() @Length(10, 2000) resolutionNote?: string | null;
}

/** Provider message to the patient (spec "Provider message"). */
export class ProviderMessageDto {
  @IsUUID() messageId!: string;
  @IsString() @Length(1, 4000) message!: string;
  @IsString() @Length(1, 200) externalReference!: string;
}

/** Staff chat request (decisions 3). */
export class StaffCaseDto {
  @IsUUID() patientId!: string;
  @IsString() @Length(1, 4000) request!: string;
}
