import { IsArray, IsBoolean, IsEmail, IsIn, IsInt, IsString, Length, Max, MaxLength, Min } from 'class-validator';
import { IfPresent } from '@svc/http';

export class CreateOrganizationDto {
  @IsString() @Length(1, 200) name!: string;
}

export class AddMemberDto {
  @IsString() @Length(1, 255) sub!: string;
  @IsEmail() @MaxLength(254) email!: string;
  @IsIn(['admin', 'member']) role!: 'admin' | 'member';
}

export class SignBaaDto {
  @IsString() @Length(1, 200) signerName!: string;
  @IsString() @Length(1, 200) signerTitle!: string;
}

export class CreateApiKeyDto {
  @IsString() @Length(1, 120) name!: string;
}

export class RotateSecretDto {
  @IsIn(['widget_signing', 'identity_token']) kind!: 'widget_signing' | 'identity_token';
}

export class StaffTokenDto {
  @IsString() @Length(1, 255) sub!: string;
  @IsEmail() @MaxLength(254) email!: string;
  @IfPresent() @IsArray() @IsString({ each: true }) @MaxLength(100, { each: true }) permissions?: string[];
  @IfPresent() @IsBoolean() mfa?: boolean;
}

/** At most ten years a step: the dev clock must stay a valid date. */
export const MAX_ADVANCE_SECONDS = 10 * 366 * 86_400;

export class AdvanceClockDto {
  @IsInt() @Min(0) @Max(MAX_ADVANCE_SECONDS) advanceSeconds!: number;
}
