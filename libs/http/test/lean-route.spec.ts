import Fastify, { FastifyInstance } from 'fastify';
import { IsString } from 'class-validator';
import { ApiError, createValidationPipe, registerLeanRoute } from '../src';

class NameDto {
  @IsString() name!: string;
}

/**
 * registerLeanRoute on a real Fastify instance: the steps in Nest's order, and `coalesce` (a
 * successful answer to a request without a body written at the end of the event-loop turn, after
 * answers decided later in the same turn that are written at once).
 */
describe('registerLeanRoute', () => {
  let fastify: FastifyInstance;
  const pipe = createValidationPipe();
  const authenticate = async (req: { headers: Record<string, unknown> }) => {
    if (req.headers.authorization !== 'Bearer ok') throw new ApiError(401, 'INVALID_API_CREDENTIAL', 'A valid API key is required');
    return 'caller';
  };

  beforeEach(async () => {
    fastify = Fastify();
    registerLeanRoute<string, object>(fastify, pipe, {
      method: 'GET',
      url: '/c/:id',
      status: 200,
      authenticate,
      coalesce: true,
      handle: async (who, p) => ({ who, id: p.id }),
    });
    registerLeanRoute<string, object>(fastify, pipe, {
      method: 'GET',
      url: '/n/:id',
      status: 200,
      authenticate,
      handle: async (who, p) => ({ who, id: p.id }),
    });
    registerLeanRoute<string, NameDto>(fastify, pipe, {
      method: 'POST',
      url: '/b',
      status: 201,
      authenticate,
      body: NameDto,
      handle: async (who, _p, body) => ({ who, name: body.name }),
    });
    await fastify.ready();
  });
  afterEach(() => fastify.close());

  /** Requests started together; the order in which their answers were finished. */
  async function finishOrder(requests: { label: string; url: string; headers?: Record<string, string>; payload?: string }[]): Promise<string[]> {
    const order: string[] = [];
    await Promise.all(
      requests.map(async (r) => {
        const res = await fastify.inject({ method: 'GET', url: r.url, headers: { authorization: 'Bearer ok', ...r.headers }, payload: r.payload });
        expect(res.statusCode).toBe(200);
        order.push(r.label);
      }),
    );
    return order;
  }

  it('a coalescing route writes its answer after the turn’s immediate answers, even when decided first', async () => {
    expect(
      await finishOrder([
        { label: 'coalesced', url: '/c/1' },
        { label: 'immediate', url: '/n/2' },
      ]),
    ).toEqual(['immediate', 'coalesced']);
    // Two plain routes finish in the order they were decided (the check above is about coalescing).
    expect(
      await finishOrder([
        { label: 'first', url: '/n/1' },
        { label: 'second', url: '/n/2' },
      ]),
    ).toEqual(['first', 'second']);
  });

  it('a request that carries a body is answered at once, also on a coalescing route', async () => {
    expect(
      await finishOrder([
        { label: 'with-body', url: '/c/1', headers: { 'content-type': 'application/json' }, payload: '{}' },
        { label: 'immediate', url: '/n/2' },
      ]),
    ).toEqual(['with-body', 'immediate']);
  });

  it('the coalesced answers of one turn each reach their own request, with their status and body', async () => {
    const answers = await Promise.all(
      Array.from({ length: 20 }, (_, i) => fastify.inject({ method: 'GET', url: `/c/${i}`, headers: { authorization: 'Bearer ok' } })),
    );
    expect(answers.map((a) => [a.statusCode, a.json().id])).toEqual(Array.from({ length: 20 }, (_, i) => [200, String(i)]));
  });

  it('authenticates before the body, then validates the body with the DTO; errors in the error form', async () => {
    const noKey = await fastify.inject({ method: 'POST', url: '/b', payload: { name: 1 } });
    expect({ status: noKey.statusCode, body: noKey.json() }).toEqual({
      status: 401,
      body: { code: 'INVALID_API_CREDENTIAL', message: 'A valid API key is required' },
    });
    const bad = await fastify.inject({ method: 'POST', url: '/b', headers: { authorization: 'Bearer ok' }, payload: { name: 1, extra: true } });
    expect({
      status: bad.statusCode,
      code: bad.json().code,
      paths: bad
        .json()
        .details.map((d: { path: string }) => d.path)
        .sort(),
    }).toEqual({ status: 400, code: 'VALIDATION_FAILED', paths: ['extra', 'name'] });
    const good = await fastify.inject({ method: 'POST', url: '/b', headers: { authorization: 'Bearer ok' }, payload: { name: 'A' } });
    expect({ status: good.statusCode, body: good.json() }).toEqual({ status: 201, body: { who: 'caller', name: 'A' } });
    const refused = await fastify.inject({ method: 'GET', url: '/c/1' });
    expect(refused.statusCode).toBe(401);
  });

  it('an empty path parameter is "Route not found"', async () => {
    const r = await fastify.inject({ method: 'GET', url: '/c/', headers: { authorization: 'Bearer ok' } });
    expect(r.statusCode).toBe(404);
  });

  it('refuses to coalesce an operation that takes a body', () => {
    const f = Fastify();
    expect(() =>
      registerLeanRoute<string, NameDto>(f, pipe, {
        method: 'POST',
        url: '/x',
        status: 200,
        authenticate,
        body: NameDto,
        coalesce: true,
        handle: async () => ({}),
      }),
    ).toThrow(/without a body/);
    return f.close();
  });
});
