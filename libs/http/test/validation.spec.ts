import { ArgumentMetadata } from '@nestjs/common';
import { Type } from 'class-transformer';
import { ArrayMaxSize, IsArray, IsInt, IsObject, IsOptional, IsString, ValidateNested } from 'class-validator';
import { ApiError, LowercaseUuidPipe, createValidationPipe, undeclaredFields } from '../src';

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

describe('LowercaseUuidPipe', () => {
  it('lower-cases uuid path ids only', () => {
    const pipe = new LowercaseUuidPipe();
    expect(pipe.transform('3F2504E0-4F89-41D3-9A0C-0305E82C3301')).toBe('3f2504e0-4f89-41d3-9a0c-0305e82c3301');
    expect(pipe.transform('3f2504e0-4f89-41d3-9a0c-0305e82c3301')).toBe('3f2504e0-4f89-41d3-9a0c-0305e82c3301');
    expect(pipe.transform('CC-ABCDEFGH')).toBe('CC-ABCDEFGH');
    expect(pipe.transform(undefined)).toBeUndefined();
  });
});
