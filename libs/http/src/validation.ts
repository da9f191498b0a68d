import { ArgumentMetadata, Injectable, PipeTransform, ValidationPipe } from '@nestjs/common';
import type { MetadataStorage as TransformerMetadataStorage } from 'class-transformer/types/MetadataStorage';
import { getMetadataStorage } from 'class-validator';
import { ApiError, ErrorDetail, flattenValidationErrors } from './errors';

// class-transformer's registry of @Type() metadata (the nested DTO class of a property). Not in its
// public index, but the same module instance the DTO decorators register into.
// eslint-disable-next-line @typescript-eslint/no-require-imports
const transformerStorage = (require('class-transformer/cjs/storage') as { defaultMetadataStorage: TransformerMetadataStorage }).defaultMetadataStorage;

const declaredCache = new WeakMap<object, Set<string>>();

/** The properties a DTO class declares: those with any class-validator metadata (what `whitelist` keeps), inherited ones included. */
function declaredProperties(type: new (...args: never[]) => unknown): Set<string> {
  let declared = declaredCache.get(type);
  if (!declared) {
    declared = new Set(getMetadataStorage().getTargetValidationMetadatas(type, '', false, false, undefined).map((m) => m.propertyName));
    declaredCache.set(type, declared);
  }
  return declared;
}

type DtoClass = new (...args: never[]) => unknown;

/** The DTO class of a property declared with `@Type(() => Dto)`, when that class has validation rules. */
function nestedDto(type: DtoClass, property: string, owner: object): DtoClass | undefined {
  const meta = transformerStorage.findTypeMetadata(type, property);
  const nested = meta?.typeFunction ? meta.typeFunction({ newObject: {}, object: owner as Record<string, unknown>, property }) : undefined;
  return typeof nested === 'function' && declaredProperties(nested as DtoClass).size > 0 ? (nested as DtoClass) : undefined;
}

const childPath = (parent: string, key: string) => (parent ? `${parent}.${key}` : key);

/**
 * Every key of a plain value that its DTO class does not declare, at any depth of nested DTOs
 * (`@Type(() => Dto)`, objects and array items), as `{ path, message: 'unknown field' }`.
 * Read from the value as it arrived: class-transformer silently drops keys named like
 * Object.prototype members (`constructor`, `toString`, `valueOf`, `__defineGetter__`, ...) and Nest's
 * pipe deletes `constructor` and `prototype` before class-validator's `forbidNonWhitelisted` could see them.
 * Free-form members (`@IsObject()` without `@Type`) are not looked into.
 */
export function undeclaredFields(value: unknown, type: DtoClass, path = ''): ErrorDetail[] {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return [];
  const declared = declaredProperties(type);
  if (declared.size === 0) return [];
  const out: ErrorDetail[] = [];
  for (const key of Object.keys(value)) {
    const p = childPath(path, key);
    if (!declared.has(key)) {
      out.push({ path: p, message: 'unknown field' });
      continue;
    }
    const nested = nestedDto(type, key, value);
    if (!nested) continue;
    const v = (value as Record<string, unknown>)[key];
    if (Array.isArray(v)) v.forEach((item, i) => out.push(...undeclaredFields(item, nested, `${p}[${i}]`)));
    else out.push(...undeclaredFields(v, nested, p));
  }
  return out;
}

/**
 * Nest's ValidationPipe, plus the unknown keys it cannot see (see `undeclaredFields`): they are
 * looked for in the value before it is transformed and reported with the other errors.
 */
export class StrictValidationPipe extends ValidationPipe {
  override async transform(value: unknown, metadata: ArgumentMetadata): Promise<unknown> {
    const metatype = metadata.metatype;
    const unknown = metatype && this.toValidate(metadata) ? undeclaredFields(value, metatype as DtoClass) : [];
    let result: unknown;
    try {
      result = await super.transform(value, metadata);
    } catch (err) {
      if (!unknown.length) throw err;
      if (err instanceof ApiError && err.code === 'VALIDATION_FAILED') {
        const details = [...(err.details ?? [])];
        for (const d of unknown) if (!details.some((e) => e.path === d.path && e.message === d.message)) details.push(d);
        throw ApiError.validation(details, err.message);
      }
      throw ApiError.validation(unknown);
    }
    if (unknown.length) throw ApiError.validation(unknown);
    return result;
  }
}

/** Validation at the edge (architecture rule 10): unknown fields are refused, not stripped. */
export function createValidationPipe(): ValidationPipe {
  return new StrictValidationPipe({
    whitelist: true,
    forbidNonWhitelisted: true,
    forbidUnknownValues: true,
    transform: true,
    transformOptions: { enableImplicitConversion: false },
    validationError: { target: false, value: false },
    exceptionFactory: (errors) => ApiError.validation(flattenValidationErrors(errors)),
  });
}

const UUID_ANY_CASE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/**
 * A path id that is a uuid, in lower case (`@Param('caseId', LowercaseUuidPipe)`): uuids are
 * case-insensitive and every id the service mints is lower case, so `…/CASE-UUID-IN-CAPITALS/…`
 * finds the same resource (and still only in the caller's own tenant). Anything else is left as
 * it came (and is then not found).
 */
@Injectable()
export class LowercaseUuidPipe implements PipeTransform<unknown, unknown> {
  transform(value: unknown): unknown {
    return typeof value === 'string' && UUID_ANY_CASE.test(value) ? value.toLowerCase() : value;
  }
}
