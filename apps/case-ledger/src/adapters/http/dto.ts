import { IsIn, IsInt, IsString, IsUUID, Length, Matches, Max, Min, ValidateBy, ValidateIf, ValidationOptions } from 'class-validator';
import type { ResolutionOutcome, UpdateStatus } from '../../domain/case';

/** ISO 8601 date-time with a time zone (spec "date-time"). */
export const DATE_TIME_RE = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d{1,9})?)?(Z|[+-]\d{2}:\d{2})$/;

/** A real date-time: the DATE_TIME_RE shape, and every part in range (month, day of that month, hour, minute, second, offset). */
export function isRealDateTime(v: unknown): boolean {
  if (typeof v !== 'string' || !DATE_TIME_RE.test(v) || !Number.isFinite(Date.parse(v))) return false;
  const m = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2})(?::(\d{2}))?/.exec(v)!;
  const [y, mo, d, h, mi, sec] = [m[1], m[2], m[3], m[4], m[5], m[6] ?? '0'].map(Number);
  const utc = new Date(Date.UTC(y, mo - 1, d, h, mi, sec));
  const roundTrip = utc.getUTCFullYear() === y && utc.getUTCMonth() === mo - 1 && utc.getUTCDate() === d && utc.getUTCHours() === h && utc.getUTCMinutes() === mi && utc.getUTCSeconds() === sec;
  const off = /([+-])(\d{2}):(\d{2})$/.exec(v);
  return roundTrip && (!off || (Number(off[2]) <= 23 && Number(off[3]) <= 59));
}

export const IsRealDateTime = (options?: ValidationOptions) =>
  ValidateBy({ name: 'isRealDateTime', validator: { validate: isRealDateTime, defaultMessage: () => '$property must be a real ISO 8601 date-time with a time zone' } }, options);

/** Optional but never null: present means a value of the declared type (null is refused with 400). */
export const IsPresentIfGiven = (property: string) => ValidateIf((o: Record<string, unknown>) => o[property] !== undefined);

export const UPDATE_STATUSES: UpdateStatus[] = ['processed', 'scheduled', 'clinician_responded', 'patient_contacted', 'resolved'];
export const RESOLUTION_OUTCOMES: ResolutionOutcome[] = ['patient_contacted', 'provider_follow_up', 'medication_adjusted', 'emergency_referral', 'no_further_action', 'other'];

/** Case update (spec "Case update"); cross-field rules are checked in the controller. */
export class CaseUpdateDto {
  @IsUUID() updateId!: string;
  @IsInt() @Min(1) @Max(1_000_000) sequence!: number;
  @IsIn(UPDATE_STATUSES) status!: UpdateStatus;
  @IsString() @Length(1, 200) externalReference!: string;
  @IsPresentIfGiven('scheduledFor') @IsString() @Matches(DATE_TIME_RE, { message: 'scheduledFor must be an ISO 8601 date-time with a time zone' }) @IsRealDateTime() scheduledFor?: string;
  @IsPresentIfGiven('resolutionOutcome') @IsIn(RESOLUTION_OUTCOMES) resolutionOutcome?: ResolutionOutcome;
  @IsPresentIfGiven('resolutionNote') @IsString() @Length(10, 2000) resolutionNote?: string;
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
