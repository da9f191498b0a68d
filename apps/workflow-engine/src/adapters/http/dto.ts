import { Type } from 'class-transformer';
import { ArrayMaxSize, IsArray, IsInt, IsObject, IsString, Length, Matches, Max, MaxLength, Min, ValidateNested } from 'class-validator';
import { AttachmentDto, IfPresent } from '@svc/http';

const STABLE_KEY = /^[a-z][a-z0-9_]{1,79}$/;

/** The definition itself is checked by the domain validator (paths like definition.steps[2].next). */
export class CreateWorkflowDto {
  @IsString() @Matches(STABLE_KEY) stableKey!: string;
  @IsString() @Length(1, 120) name!: string;
  @IsObject() definition!: Record<string, unknown>;
}

export class RenameWorkflowDto {
  @IsString() @Length(1, 120) name!: string;
}

export class SaveDraftDto {
  @IsInt() @Min(1) expectedRevision!: number;
  @IsObject() definition!: Record<string, unknown>;
}

export class ActivateDto {
  @IsInt() @Min(1) expectedRevision!: number;
}

export class TestVersionDto {
  @IsInt() @Min(1) expectedRevision!: number;
  @IsString() @Length(1, 2000) opening!: string;
  @IsArray() @ArrayMaxSize(20) @IsString({ each: true }) @Length(1, 500, { each: true }) replies!: string[];
  @IfPresent() @IsString() @MaxLength(200) patientEmail?: string;
  @IfPresent() @IsString() @MaxLength(200) patientId?: string;
}

export class FromTemplateDto {
  @IsString() @Length(1, 80) templateKey!: string;
  @IfPresent() @IsString() @Matches(STABLE_KEY) stableKey?: string;
  @IfPresent() @IsString() @Length(1, 120) name?: string;
  @IfPresent() @IsString() @Matches(STABLE_KEY) destinationStableKey?: string;
}

export class CreateDestinationDto {
  @IsString() @Matches(STABLE_KEY) stableKey!: string;
  @IsString() @Length(1, 120) name!: string;
  @IsString() @MaxLength(2000) @Matches(/^https?:\/\/[^\s]+$/i, { message: 'baseUrl must be an http(s) URL' }) baseUrl!: string;
  @IfPresent() @IsObject() headers?: Record<string, string>;
  @IfPresent() @IsInt() @Min(1) @Max(5000) timeoutMs?: number;
}

/** Attachment item (docs/decisions.md, "Attachment items are one class"): the shared class of @svc/http, the same as an inbound conversation message's. */
export { AttachmentDto };

export class WidgetMessageDto {
  @IsString() @Length(1, 4000) message!: string;
  @IfPresent() @IsArray() @ArrayMaxSize(20) @IsObject({ each: true }) @ValidateNested({ each: true }) @Type(() => AttachmentDto) attachments?: AttachmentDto[];
}
