import { ArgumentMetadata } from '@nestjs/common';
import { Type } from 'class-transformer';
import { ArrayMaxSize, IsArray, IsInt, IsNotEmptyObject, IsObject, IsOptional, IsString, ValidateNested } from 'class-validator';
import { ApiError, createValidationPipe, freeFormMembers, jsonCopy, lowercaseUuidParams, undeclaredFields } from '../src';

class ItemDto {
  @IsString() name!: string;
}

class BodyDto {
  @IsString() title!: string;
  @IsOptional() @IsInt() count?: number;
  @IsOptional() @IsArray() @ArrayMaxSize(5) @ValidateNested({ each: true }) @Type(() => ItemDto) items?: ItemDto[];
  @IsOptional() @IsObject() @ValidateNested() @Type(() => ItemDto) main?: ItemDto;
  @IsOptional() @IsObject() free?: Record<string, unknown>;
}

const body: ArgumentMetadata = { type: 'body', metatype: BodyDto, data: undefined };

/** Names of Object.prototype members (and the keys Nest's pipe deletes) that class-transformer drops silently. */
const PROTOTYPE_NAMES = [
  'constructor',
  'toString',
  'valueOf',
  'hasOwnProperty',
  'isPrototypeOf',
  'toLocaleString',
  'propertyIsEnumerable',
  '__defineGetter__',
  '__defineSetter__',
  '__lookupGetter__',
  '__lookupSetter__',
  'prototype',
];

async function refusal(value: unknown): Promise<ApiError> {
  const err = await createValidationPipe()
    .transform(value, body)
    .then(
      () => undefined,
      (e: unknown) => e,
    );
  expect(err).toBeInstanceOf(ApiError);
  expect((err as ApiError).status).toBe(400);
  expect((err as ApiError).code).toBe('VALIDATION_FAILED');
  return err as ApiError;
}

describe('validation pipe: unknown fields', () => {
  it('passes a valid body, with nested DTOs and free-form members, as an instance', async () => {
    const value = { title: 't', count: 2, items: [{ name: 'a' }, { name: 'b' }], main: { name: 'm' }, free: { anything: 1 } };
    const out = await createValidationPipe().transform(JSON.parse(JSON.stringify(value)), body);
    expect(out).toBeInstanceOf(BodyDto);
    expect(out).toEqual(value);
    expect((out as BodyDto).items![0]).toBeInstanceOf(ItemDto);
  });

  it.each(PROTOTYPE_NAMES)('refuses a top-level %s (400, path names it)', async (key) => {
    const err = await refusal(JSON.parse(`{"title":"t",${JSON.stringify(key)}:{"x":1}}`));
    expect(err.details).toEqual([{ path: key, message: 'unknown field' }]);
  });

  it.each(PROTOTYPE_NAMES)('refuses %s in nested DTOs: array items and single objects', async (key) => {
    const inItem = await refusal(JSON.parse(`{"title":"t","items":[{"name":"a"},{"name":"b",${JSON.stringify(key)}:1}]}`));
    expect(inItem.details).toEqual([{ path: `items[1].${key}`, message: 'unknown field' }]);
    const inMain = await refusal(JSON.parse(`{"title":"t","main":{"name":"m",${JSON.stringify(key)}:"x"}}`));
    expect(inMain.details).toEqual([{ path: `main.${key}`, message: 'unknown field' }]);
  });

  it('reports prototype-named keys together with the other errors, each path once', async () => {
    const err = await refusal(JSON.parse('{"title":5,"extra":1,"toString":1,"items":[{"valueOf":2}]}'));
    expect([...err.details!].sort((a, b) => a.path.localeCompare(b.path))).toEqual([
      { path: 'extra', message: 'unknown field' },
      { path: 'items[0].name', message: expect.any(String) },
      { path: 'items[0].valueOf', message: 'unknown field' },
      { path: 'title', message: expect.any(String) },
      { path: 'toString', message: 'unknown field' },
    ]);
  });

  it('leaves free-form members alone and is not fooled by a value of the wrong type', () => {
    expect(undeclaredFields({ title: 't', free: { constructor: 1 } }, BodyDto)).toEqual([]);
    expect(undeclaredFields({ title: 't', items: 'x', main: [1] }, BodyDto)).toEqual([]);
    expect(undeclaredFields([{ constructor: 1 }], BodyDto)).toEqual([]);
    expect(undeclaredFields(null, BodyDto)).toEqual([]);
  });
});

describe('lowercaseUuidParams', () => {
  it('lower-cases uuid path ids only', () => {
    const params: Record<string, unknown> = {
      caseId: '3F2504E0-4F89-41D3-9A0C-0305E82C3301',
      orgId: '3f2504e0-4f89-41d3-9a0c-0305e82c3301',
      reference: 'CC-ABCDEFGH',
      n: undefined,
    };
    lowercaseUuidParams(params);
    expect(params).toEqual({
      caseId: '3f2504e0-4f89-41d3-9a0c-0305e82c3301',
      orgId: '3f2504e0-4f89-41d3-9a0c-0305e82c3301',
      reference: 'CC-ABCDEFGH',
      n: undefined,
    });
    expect(() => lowercaseUuidParams(undefined)).not.toThrow();
  });
});

class FreeItemDto {
  @IsString() name!: string;
  @IsOptional() @IsObject() meta?: Record<string, unknown>;
}

class FreeDto {
  @IsString() title!: string;
  @IsOptional() @IsObject() free?: Record<string, unknown>;
  @IsOptional() @IsArray() list?: unknown[];
  @IsOptional() @IsArray() @ValidateNested({ each: true }) @Type(() => FreeItemDto) items?: FreeItemDto[];
  @IsOptional() @IsObject() @ValidateNested() @Type(() => FreeItemDto) main?: FreeItemDto;
}

class NonEmptyDto {
  @IsNotEmptyObject() free!: Record<string, unknown>;
}

const freeBody: ArgumentMetadata = { type: 'body', metatype: FreeDto, data: undefined };

/** Own keys at every depth, in order, so a dropped or added key shows (JSON.stringify alone would not tell `{}` from a missing member). */
const shape = (v: unknown): string =>
  JSON.stringify(v, (_k, x: unknown) =>
    x !== null && typeof x === 'object' && !Array.isArray(x) ? Object.fromEntries(Object.keys(x).map((k) => [`#${k}`, (x as Record<string, unknown>)[k]])) : x,
  );

describe('validation pipe: free-form members arrive exactly as sent', () => {
  it.each(PROTOTYPE_NAMES)('keeps %s keys at any depth of a free-form object, a free-form array and free-form members of nested DTOs', async (key) => {
    const k = JSON.stringify(key);
    const text = `{"title":"t","free":{${k}:{"x":1},"a":{${k}:"v","deep":[{${k}:1},{"b":{${k}:null}}]}},"list":[{${k}:2},[{${k}:{}}],"s"],"items":[{"name":"a","meta":{${k}:3,"y":[{${k}:4}]}}],"main":{"name":"m","meta":{${k}:true}}}`;
    const sent = JSON.parse(text);
    const out = (await createValidationPipe().transform(JSON.parse(text), freeBody)) as FreeDto;
    expect(out).toBeInstanceOf(FreeDto);
    expect(out.items![0]).toBeInstanceOf(FreeItemDto);
    expect(out.main).toBeInstanceOf(FreeItemDto);
    expect(shape(out.free)).toBe(shape(sent.free));
    expect(shape(out.list)).toBe(shape(sent.list));
    expect(shape(out.items![0].meta)).toBe(shape(sent.items[0].meta));
    expect(shape(out.main!.meta)).toBe(shape(sent.main.meta));
    expect(JSON.stringify(out)).toBe(text);
    // the members are plain data: own properties, never a prototype or an instance
    expect(Object.getPrototypeOf(out.free)).toBe(Object.prototype);
    expect(Object.prototype.hasOwnProperty.call(out.free, key)).toBe(true);
  });

  it('still refuses prototype-named unknown fields of the DTO itself next to a free-form member', async () => {
    const err = await createValidationPipe()
      .transform(JSON.parse('{"title":"t","free":{"constructor":1},"constructor":{"x":1},"items":[{"name":"a","toString":1,"meta":{"toString":2}}]}'), freeBody)
      .then(
        () => undefined,
        (e: unknown) => e as ApiError,
      );
    expect(err).toBeInstanceOf(ApiError);
    expect([...err!.details!].sort((a, b) => a.path.localeCompare(b.path))).toEqual([
      { path: 'constructor', message: 'unknown field' },
      { path: 'items[0].toString', message: 'unknown field' },
    ]);
  });

  it('lets the validators of a free-form member see every key', async () => {
    const pipe = createValidationPipe();
    const meta: ArgumentMetadata = { type: 'body', metatype: NonEmptyDto, data: undefined };
    // `{ constructor: 1 }` is not empty: before, the member reached the validator as `{}` and was refused
    const out = (await pipe.transform(JSON.parse('{"free":{"constructor":1}}'), meta)) as NonEmptyDto;
    expect(Object.keys(out.free)).toEqual(['constructor']);
    expect(out.free.constructor).toBe(1);
    const err = await pipe.transform(JSON.parse('{"free":{}}'), meta).then(
      () => undefined,
      (e: unknown) => e as ApiError,
    );
    expect(err?.details?.map((d) => d.path)).toEqual(['free']);
  });

  it('gives each concurrent request its own members', async () => {
    const pipe = createValidationPipe();
    const values = Array.from({ length: 20 }, (_, i) => ({ title: `t${i}`, free: { constructor: i, [`k${i}`]: { valueOf: i } } }));
    const outs = (await Promise.all(values.map((v) => pipe.transform(JSON.parse(JSON.stringify(v)), freeBody)))) as FreeDto[];
    outs.forEach((out, i) => expect(JSON.stringify(out)).toBe(JSON.stringify(values[i])));
  });

  it('finds free-form members only where the DTO declares them without a nested DTO type', () => {
    const value = JSON.parse('{"title":"t","free":{"a":1},"list":[1],"items":[{"name":"a","meta":{"b":2}},{"name":"b"}],"main":{"name":"m"},"extra":{"c":3}}');
    expect(freeFormMembers(value, FreeDto)).toEqual([
      { path: ['free'], value: { a: 1 } },
      { path: ['list'], value: [1] },
      { path: ['items', 0, 'meta'], value: { b: 2 } },
    ]);
    expect(freeFormMembers({ title: 't', free: 'x', list: null }, FreeDto)).toEqual([]);
    expect(freeFormMembers([{ free: {} }], FreeDto)).toEqual([]);
  });

  it('copies JSON deeply, every own key kept (__proto__ as an own key, never a prototype)', () => {
    const sent = JSON.parse('{"a":[{"constructor":1}],"__proto__":{"polluted":true},"toString":"x"}');
    const copy = jsonCopy(sent);
    expect(copy).not.toBe(sent);
    expect(copy.a).not.toBe(sent.a);
    expect(Object.keys(copy)).toEqual(['a', '__proto__', 'toString']);
    expect(Object.getPrototypeOf(copy)).toBe(Object.prototype);
    expect((copy as { polluted?: boolean }).polluted).toBeUndefined();
    expect(JSON.stringify(copy)).toBe(JSON.stringify(sent));
  });
});
