import { IsIn, IsInt, IsString, IsUUID, Length, Matches, Max, Min, ValidateBy, ValidationOptions } from 'class-validator';
import type { ResolutionOutcome, UpdateStatus } from '../../domain/case';
import { toRfc3339 } from '../../application/canonical';
import { IfPresent, LowercaseUuid } from '@svc/http';

/**
 * ISO 8601 date-time with a time zone (spec "date-time"), in the extended format: RFC 3339
 * (`T`/`Z` in either case, any number of fraction digits) and the ISO offsets `±hh` and `±hhmm`.
 */
export const DATE_TIME_RE = /^\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}(:\d{2}(\.\d+)?)?([Zz]|[+-]\d{2}(:?\d{2})?)$/;

/** A real date-time: the DATE_TIME_RE shape, and every part in range (month, day of that month, hour, minute, second, offset). */
export function isRealDateTime(v: unknown): boolean {
  if (typeof v !== 'string' || !DATE_TIME_RE.test(v)) return false;
  const t = toRfc3339(v);
  if (!Number.isFinite(Date.parse(t))) return false;
  const m = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2})(?::(\d{2}))?/.exec(t)!;
  const [y, mo, d, h, mi, sec] = [m[1], m[2], m[3], m[4], m[5], m[6] ?? '0'].map(Number);
  const utc = new Date(Date.UTC(y, mo - 1, d, h, mi, sec));
  const roundTrip = utc.getUTCFullYear() === y && utc.getUTCMonth() === mo - 1 && utc.getUTCDate() === d && utc.getUTCHours() === h && utc.getUTCMinutes() === mi && utc.getUTCSeconds() === sec;
  const off = /([+-])(\d{2}):(\d{2})$/.exec(t);
  return roundTrip && (!off || (Number(off[2]) <= 23 && Number(off[3]) <= 59));
}

export const IsRealDateTime = (options?: ValidationOptions) =>
  ValidateBy({ name: 'isRealDateTime', validator: { validate: isRealDateTime, defaultMessage: () => '$property must be a real ISO 8601 date-time with a time zone' } }, options);


export const UPDATE_STATUSES: UpdateStatus[] = ['processed', 'scheduled', 'clinician_responded', 'patient_contacted', 'resolved'];
export const RESOLUTION_OUTCOMES: ResolutionOutcome[] = ['patient_contacted', 'provider_follow_up', 'medication_adjusted', 'emergency_referral', 'no_further_action', 'other'];

/** Case update (spec "Case update"); cross-field rules are checked in the controller. */
export class CaseUpdateDto {
  @LowercaseUuid() @IsUUID() updateId!: string;
  @IsInt() @Min(1) @Max(1_000_000) sequence!: number;
  @IsIn(UPDATE_STATUSES) status!: UpdateStatus;
  @IsString() @Length(1, 200) externalReference!: string;
  @IfPresent() @IsString() @Matches(DATE_TIME_RE, { message: 'scheduledFor must be an ISO 8601 date-time with a time zone' }) @IsRealDateTime() scheduledFor?: string;
  @IfPresent() @IsIn(RESOLUTION_OUTCOMES) resolutionOutcome?: ResolutionOutcome;
  @IfPresent() @IsString() @Length(10, 2000) resolutionNote?: string;
}

/** Provider message to the patient (spec "Provider message"). */
export class ProviderMessageDto {
  @LowercaseUuid() @IsUUID() messageId!: string;
  @IsString() @Length(1, 4000) message!: string;
  @IsString() @Length(1, 200) externalReference!: string;
}

/** Staff chat request (decisions 3). */
export class StaffCaseDto {
  @LowercaseUuid() @IsUUID() patientId!: string;
  @IsString() @Length(1, 4000) request!: string;
}
