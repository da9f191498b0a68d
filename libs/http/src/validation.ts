import { ArgumentMetadata, ValidationError, ValidationPipe } from '@nestjs/common';
import { Transform } from 'class-transformer';
import type { MetadataStorage as TransformerMetadataStorage } from 'class-transformer/types/MetadataStorage';
import { ValidateIf, ValidatorOptions, getMetadataStorage } from 'class-validator';
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
    declared = new Set(
      getMetadataStorage()
        .getTargetValidationMetadatas(type, '', false, false, undefined)
        .map((m) => m.propertyName),
    );
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

/** A free-form member of a DTO value: where it sits (keys and array indexes) and a copy of the value as it arrived. */
export interface FreeFormMember {
  path: (string | number)[];
  value: unknown;
}

const isPlainObject = (v: unknown): v is Record<string, unknown> => {
  if (v === null || typeof v !== 'object') return false;
  const proto = Object.getPrototypeOf(v);
  return proto === Object.prototype || proto === null;
};

/** Sets an own data property, whatever its name (`__proto__` included: never a prototype change). */
function setOwn(target: object, key: string | number, value: unknown): void {
  Object.defineProperty(target, key, { value, writable: true, enumerable: true, configurable: true });
}

/**
 * A deep copy of a JSON value: arrays and plain objects copied with every own key (`constructor`,
 * `toString`, `prototype`, ... included), anything else as it is.
 */
export function jsonCopy<T>(value: T): T {
  if (Array.isArray(value)) return value.map((v) => jsonCopy(v)) as T;
  if (!isPlainObject(value)) return value;
  const out: Record<string, unknown> = {};
  for (const key of Object.keys(value)) setOwn(out, key, jsonCopy(value[key]));
  return out as T;
}

/** A property left to class-transformer's plain-object handling: no `@Type` (other than Object), no `@Transform`. */
function isFreeForm(type: DtoClass, property: string, owner: object): boolean {
  const meta = transformerStorage.findTypeMetadata(type, property);
  if (meta?.typeFunction && meta.typeFunction({ newObject: {}, object: owner as Record<string, unknown>, property }) !== Object) return false;
  return transformerStorage.findTransformMetadatas(type, property, 0 /* PLAIN_TO_CLASS */).length === 0;
}

/**
 * The free-form members of a DTO value, at any depth of nested DTOs: declared properties without a
 * nested DTO type (`@IsObject()` without `@Type`, e.g. a workflow `definition` or a Destination's
 * `headers`, and arrays without `@Type`) whose value is an object or an array, each with a deep copy
 * of the value as it arrived. Nest's pipe deletes `constructor` and `prototype` at any depth of the
 * value, and class-transformer drops every key named like an Object.prototype member from the plain
 * objects it copies, so these members would otherwise reach the controller with keys missing.
 */
export function freeFormMembers(value: unknown, type: DtoClass, path: (string | number)[] = []): FreeFormMember[] {
  if (!isPlainObject(value)) return [];
  const declared = declaredProperties(type);
  if (declared.size === 0) return [];
  const out: FreeFormMember[] = [];
  for (const key of Object.keys(value)) {
    if (!declared.has(key)) continue;
    const v = value[key];
    if (v === null || typeof v !== 'object') continue;
    const nested = nestedDto(type, key, value);
    if (nested) {
      if (Array.isArray(v)) v.forEach((item, i) => out.push(...freeFormMembers(item, nested, [...path, key, i])));
      else out.push(...freeFormMembers(v, nested, [...path, key]));
    } else if (isFreeForm(type, key, value)) {
      out.push({ path: [...path, key], value: jsonCopy(v) });
    }
  }
  return out;
}

/** Puts each free-form member back into the transformed value (where the same path exists). */
function restoreFreeForm(entity: unknown, members: FreeFormMember[]): void {
  for (const { path, value } of members) {
    let target: unknown = entity;
    for (const key of path.slice(0, -1)) {
      target = target !== null && typeof target === 'object' ? (target as Record<string | number, unknown>)[key] : undefined;
    }
    if (target !== null && typeof target === 'object') setOwn(target, path[path.length - 1], value);
  }
}

/**
 * Nest's ValidationPipe, plus:
 * - the unknown keys it cannot see (see `undeclaredFields`): they are looked for in the value before
 *   it is transformed and reported with the other errors;
 * - free-form members exactly as the caller sent them (see `freeFormMembers`): copied before the
 *   transform, put back into the instance before class-validator runs (so validators of the member
 *   see every key) and again on the instance returned.
 */
export class StrictValidationPipe extends ValidationPipe {
  /** Free-form members of the value being transformed, for `validate` (set and taken in one synchronous stretch). */
  private pendingFreeForm: FreeFormMember[] | undefined;

  override async transform(value: unknown, metadata: ArgumentMetadata): Promise<unknown> {
    const metatype = metadata.metatype;
    const validated = !!metatype && this.toValidate(metadata);
    const unknown = validated ? undeclaredFields(value, metatype as DtoClass) : [];
    const freeForm = validated ? freeFormMembers(value, metatype as DtoClass) : [];
    let result: unknown;
    try {
      // Nest's transform strips and transforms the value and calls `validate` with the instance
      // before its first await; the members are handed over only for that call.
      this.pendingFreeForm = freeForm.length ? freeForm : undefined;
      const transformed = super.transform(value, metadata);
      this.pendingFreeForm = undefined;
      result = await transformed;
    } catch (err) {
      if (!unknown.length) throw err;
      if (err instanceof ApiError && err.code === 'VALIDATION_FAILED') {
        const details = [...(err.details ?? [])];
        // A Set, not a scan per field: a body with 80,000 unknown keys took 7.6 s here (quadratic).
        const listed = new Set(details.map((e) => `${e.path}\u0000${e.message}`));
        for (const d of unknown) if (!listed.has(`${d.path}\u0000${d.message}`)) details.push(d);
        throw ApiError.validation(details, err.message);
      }
      throw ApiError.validation(unknown);
    }
    if (unknown.length) throw ApiError.validation(unknown);
    if (freeForm.length) restoreFreeForm(result, freeForm);
    return result;
  }

  protected override validate(object: object, validatorOptions?: ValidatorOptions): Promise<ValidationError[]> | ValidationError[] {
    const freeForm = this.pendingFreeForm;
    this.pendingFreeForm = undefined;
    if (freeForm) restoreFreeForm(object, freeForm);
    return super.validate(object, validatorOptions);
  }
}

/** Validation at the edge (the "validation at the edge" rule): unknown fields are refused, not stripped. */
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

/** A uuid in lower case (uuids are case-insensitive, and every id the service mints is lower case); anything else as it came. */
const lowercaseUuid = (value: unknown): unknown => (typeof value === 'string' && UUID_ANY_CASE.test(value) ? value.toLowerCase() : value);

/**
 * A uuid in a request body in lower case (`@LowercaseUuid() @IsUUID() eventId`): a caller's id in
 * capitals is the same id, so a retry in other case is recognised and a protocol or environment
 * named in capitals is found. Put it on every uuid member of a DTO.
 */
export const LowercaseUuid = (): PropertyDecorator => Transform(({ value }) => lowercaseUuid(value));

/**
 * Every uuid path parameter of a request, lower-cased in place (the HTTP app runs it before the
 * guards and pipes): a case, conversation, organization, environment or any other path id is the
 * same id in any case. Other parameters are left as they came.
 */
export function lowercaseUuidParams(params: unknown): void {
  if (!params || typeof params !== 'object') return;
  const p = params as Record<string, unknown>;
  for (const k of Object.keys(p)) {
    const v = p[k];
    if (typeof v === 'string' && v.length === 36 && UUID_ANY_CASE.test(v)) p[k] = v.toLowerCase();
  }
}

/** A uuid (versions 1-8, RFC 9562 variant), any case: path ids, idempotency keys, bus ids. */
export const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[1-8][0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/i;
export const isUuid = (v: unknown): v is string => typeof v === 'string' && UUID_RE.test(v);

/**
 * The optional `Idempotency-Key` header of a widget call: absent, or one uuid (a repeated header
 * arrives joined with a comma and is refused); anything else is 400 naming the header.
 */
export function idempotencyKeyHeader(value: string | undefined): string | undefined {
  if (value !== undefined && !isUuid(value)) throw ApiError.validation([{ path: 'Idempotency-Key', message: 'The Idempotency-Key header must be a uuid' }]);
  return value;
}

/**
 * An optional member: validated when present, refused when `null` (the contract types it, and a
 * request that breaks the operation's contract is 400 VALIDATION_FAILED, docs/decisions.md, "Errors and the HTTP edge").
 * class-validator's own `@IsOptional()` would let `null` through as if the member were absent.
 */
export const IfPresent = (): PropertyDecorator => ValidateIf((_o, v) => v !== undefined);
