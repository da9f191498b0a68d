import { Type } from 'class-transformer';
import {
  ArrayMaxSize,
  ArrayMinSize,
  IsArray,
  IsBoolean,
  IsDefined,
  IsEmail,
  IsIn,
  IsInt,
  IsObject,
  IsString,
  IsUUID,
  Length,
  Matches,
  Max,
  MaxLength,
  Min,
  Validate,
  ValidateIf,
  ValidateNested,
  ValidationArguments,
  ValidatorConstraint,
  ValidatorConstraintInterface,
} from 'class-validator';
import { PROGRAM_KEY, QUESTION_KEY } from '../../domain/protocol';
import type { Tier } from '../../domain/red-flags';
import { IfPresent, LowercaseUuid } from '@svc/http';

@ValidatorConstraint({ name: 'realDate' })
class RealDate implements ValidatorConstraintInterface {
  validate(value: unknown): boolean {
    if (typeof value !== 'string' || !/^\d{4}-\d{2}-\d{2}$/.test(value)) return false;
    const [y, m, d] = value.split('-').map(Number);
    const date = new Date(Date.UTC(y, m - 1, d));
    return date.getUTCFullYear() === y && date.getUTCMonth() === m - 1 && date.getUTCDate() === d;
  }
  defaultMessage(): string {
    return 'must be a real date in the form YYYY-MM-DD';
  }
}

@ValidatorConstraint({ name: 'notBoth' })
class NotBoth implements ValidatorConstraintInterface {
  validate(_value: unknown, args: ValidationArguments): boolean {
    const o = args.object as Record<string, unknown>;
    return !(o.protocolId !== undefined && o.programKey !== undefined);
  }
  defaultMessage(): string {
    return 'send protocolId or programKey, not both';
  }
}

const TYPES = ['patient.created', 'patient.updated', 'patient.cancelled'] as const;

/** Patient lifecycle event (contracts/openapi.yaml, `PatientLifecycleEvent`). */
export class PatientEventDto {
  @LowercaseUuid() @IsUUID() eventId!: string;
  @IsIn(TYPES) type!: (typeof TYPES)[number];
  @IsString() @Length(1, 200) externalPatientId!: string;
  @IfPresent() @IsString() @Length(1, 80) firstName?: string;
  @IfPresent() @IsString() @Length(1, 80) lastName?: string;
  @IfPresent() @IsString() @Validate(RealDate) dateOfBirth?: string;
  @IfPresent() @IsString() @Length(7, 30) phone?: string;
  @ValidateIf((o: PatientEventDto, v) => v !== undefined || o.type === 'patient.created') @IsString() @IsEmail() @MaxLength(254) email?: string;
  @IfPresent() @LowercaseUuid() @IsUUID() protocolId?: string;
  @IfPresent() @IsString() @Matches(PROGRAM_KEY) @Validate(NotBoth) programKey?: string;
  @IfPresent() @IsInt() @Min(1) @Max(30) checkInCadenceDays?: number;
}

const TIER_VALUES: Tier[] = ['emergency', 'urgent', 'routine'];

export class QuestionDto {
  @IsString() @Matches(QUESTION_KEY) key!: string;
  @IsString() @Length(1, 500) text!: string;
  @IsIn(['scale', 'yes_no', 'text']) type!: 'scale' | 'yes_no' | 'text';
  @IfPresent() @IsInt() @Min(-1000) @Max(1000) min?: number;
  @IfPresent() @IsInt() @Min(-1000) @Max(1000) max?: number;
  @IfPresent() @IsBoolean() higherIsBetter?: boolean;
}

export class ScoreRuleDto {
  @IsString() @Matches(QUESTION_KEY) question!: string;
  @IsIn(TIER_VALUES) tier!: Tier;
  @IsIn(['>=', '<=']) op!: '>=' | '<=';
  @IsInt() @Min(-1000) @Max(1000) value!: number;
}

export class PhraseRuleDto {
  @IsString() @Length(1, 200) phrase!: string;
  @IsIn(TIER_VALUES) tier!: Tier;
}

export class RedFlagsDto {
  @IfPresent() @IsArray() @ArrayMaxSize(100) @IsObject({ each: true }) @ValidateNested({ each: true }) @Type(() => ScoreRuleDto) scores?: ScoreRuleDto[];
  @IfPresent() @IsArray() @ArrayMaxSize(100) @IsObject({ each: true }) @ValidateNested({ each: true }) @Type(() => PhraseRuleDto) phrases?: PhraseRuleDto[];
  @IfPresent()
  @IsArray()
  @ArrayMaxSize(100)
  @IsObject({ each: true })
  @ValidateNested({ each: true })
  @Type(() => PhraseRuleDto)
  semanticPhrases?: PhraseRuleDto[];
  @IfPresent() @IsBoolean() emergencyTerms?: boolean;
}

/** Protocol body (docs/decisions.md, "Patient pathway"). */
export class CreateProtocolDto {
  @IsString() @Matches(PROGRAM_KEY) programKey!: string;
  @IsString() @Length(1, 120) name!: string;
  @IsInt() @Min(1) @Max(30) defaultCadenceDays!: number;
  @IsArray() @ArrayMinSize(1) @ArrayMaxSize(50) @IsObject({ each: true }) @ValidateNested({ each: true }) @Type(() => QuestionDto) questions!: QuestionDto[];
  @IsDefined() @IsObject() @ValidateNested() @Type(() => RedFlagsDto) redFlags!: RedFlagsDto;
}

export class CheckInAnswerDto {
  @IsString() @Length(1, 200) token!: string;
  @IsString() @Matches(QUESTION_KEY) questionKey!: string;
  /** Checked against the question's type (docs/decisions.md, "Patient pathway") by the check-in decider. */
  @IsDefined() value!: unknown;
}

export class CheckInCompleteDto {
  @IsString() @Length(1, 200) token!: string;
  @IfPresent() @IsString() @MaxLength(2000) notes?: string;
}
