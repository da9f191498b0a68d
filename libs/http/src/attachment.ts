import { IsString, IsUUID, Length, Matches } from 'class-validator';
import { LowercaseUuid } from './validation';

/**
 * An attachment item (docs/decisions.md, "Attachment items are one class"): `{ id (uuid), fileName (≤200), contentType (≤160), sha256 (64
 * lowercase hex) }`, all four required. An empty `fileName` or `contentType` names no file and no
 * type, so both are at least one character. One class for every body that carries attachments
 * (an inbound conversation message, a widget message), so the two accept the same items.
 */
export class AttachmentDto {
  @LowercaseUuid() @IsUUID() id!: string;
  @IsString() @Length(1, 200) fileName!: string;
  @IsString() @Length(1, 160) contentType!: string;
  @IsString() @Matches(/^[a-f0-9]{64}$/) sha256!: string;
}
