import { CanActivate, ExecutionContext, UseGuards } from '@nestjs/common';
import { ModuleRef, Reflector } from '@nestjs/core';
import { ApiError, BodyProblemGuard, bodyProblemOf, deferBodyProblem } from '../src';

/** A guard that records its calls and answers as told. */
class Gate implements CanActivate {
  calls = 0;
  constructor(private readonly answer: () => boolean | Promise<boolean>) {}
  canActivate(): boolean | Promise<boolean> {
    this.calls++;
    return this.answer();
  }
}

class ClassGuard extends Gate {}
class MethodGuard extends Gate {}
class UnknownGuard extends Gate {}

function setup(instances: Map<unknown, CanActivate>) {
  const moduleRef = {
    get: (token: unknown) => {
      const found = instances.get(token);
      if (!found) throw new Error('unknown element');
      return found;
    },
  } as unknown as ModuleRef;
  return new BodyProblemGuard(new Reflector(), moduleRef);
}

function contextFor(controller: new () => object, handler: string, request: object, type = 'http'): ExecutionContext {
  return {
    getType: () => type,
    getClass: () => controller,
    getHandler: () => (controller.prototype as Record<string, unknown>)[handler],
    switchToHttp: () => ({ getRequest: () => request }),
  } as unknown as ExecutionContext;
}

const malformed = () => {
  const req = {};
  deferBodyProblem(req, Object.assign(new Error('bad'), { code: 'FST_ERR_CTP_INVALID_JSON_BODY' }));
  return req;
};

@UseGuards(ClassGuard)
class Guarded {
  @UseGuards(MethodGuard)
  both() {}
  classOnly() {}
}

class Open {
  route() {}
  @UseGuards(UnknownGuard)
  odd() {}
}

async function outcome(p: boolean | Promise<boolean>): Promise<boolean | ApiError> {
  try {
    return await p;
  } catch (e) {
    return e as ApiError;
  }
}

describe('body problems: recorded by the parsers, answered after the route guards', () => {
  it('records the problem as the filter answers it (status, code, details)', () => {
    const req = malformed();
    expect(bodyProblemOf(req)).toMatchObject({ status: 400, code: 'VALIDATION_FAILED', details: [{ path: '', message: 'malformed JSON' }] });
    const other = {};
    deferBodyProblem(other, Object.assign(new Error('x'), { code: 'FST_ERR_CTP_INVALID_MEDIA_TYPE' }));
    expect(bodyProblemOf(other)).toMatchObject({ status: 415, code: 'UNSUPPORTED_MEDIA_TYPE' });
    expect(bodyProblemOf({})).toBeUndefined();
  });

  it('lets a request without a problem through at once, without touching the route guards', () => {
    const classGuard = new ClassGuard(() => false);
    const guard = setup(new Map([[ClassGuard, classGuard]]));
    expect(guard.canActivate(contextFor(Guarded, 'both', {}))).toBe(true);
    expect(classGuard.calls).toBe(0);
  });

  it('runs the controller then the method guards first: their refusal wins over the body problem', async () => {
    const order: string[] = [];
    const refusal = new ApiError(401, 'STAFF_AUTH_REQUIRED', 'no');
    const classGuard = new ClassGuard(() => {
      order.push('class');
      return true;
    });
    const methodGuard = new MethodGuard(() => {
      order.push('method');
      throw refusal;
    });
    const guard = setup(
      new Map<unknown, CanActivate>([
        [ClassGuard, classGuard],
        [MethodGuard, methodGuard],
      ]),
    );
    expect(await outcome(guard.canActivate(contextFor(Guarded, 'both', malformed())))).toBe(refusal);
    expect(order).toEqual(['class', 'method']);
  });

  it('answers the body problem once the route guards let the request in (or at once on a route without guards)', async () => {
    const guard = setup(new Map([[ClassGuard, new ClassGuard(async () => true)]]));
    const passed = await outcome(guard.canActivate(contextFor(Guarded, 'classOnly', malformed())));
    expect(passed).toBeInstanceOf(ApiError);
    expect(passed).toMatchObject({ status: 400, code: 'VALIDATION_FAILED' });
    expect(await outcome(guard.canActivate(contextFor(Open, 'route', malformed())))).toMatchObject({ status: 400, code: 'VALIDATION_FAILED' });
  });

  it('leaves a guard that refuses without an error to Nest (which answers its own 403), and answers at once when a guard cannot be resolved', async () => {
    const guard = setup(new Map([[ClassGuard, new ClassGuard(() => false)]]));
    expect(await outcome(guard.canActivate(contextFor(Guarded, 'classOnly', malformed())))).toBe(true);
    expect(await outcome(guard.canActivate(contextFor(Open, 'odd', malformed())))).toMatchObject({ status: 400, code: 'VALIDATION_FAILED' });
  });

  it('does nothing outside HTTP (bus handlers inherit the global guards)', () => {
    const guard = setup(new Map());
    expect(guard.canActivate(contextFor(Open, 'route', malformed(), 'rpc'))).toBe(true);
  });
});
