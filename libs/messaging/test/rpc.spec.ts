import { RpcException } from '@nestjs/microservices';
import { DomainError } from '@svc/decider';
import { rpc, toBusError } from '../src';

describe('rpc (bus handler wrapper)', () => {
  it('returns the handler result', async () => {
    await expect(rpc(async () => ({ ok: 1 }))).resolves.toEqual({ ok: 1 });
  });

  it('turns a DomainError into an RpcException carrying status, code, message and details', async () => {
    const err = await rpc(async () => {
      throw new DomainError(409, 'CONFLICT', 'already resolved', { caseId: 'c1' });
    }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(RpcException);
    expect((err as RpcException).getError()).toEqual({ status: 409, code: 'CONFLICT', message: 'already resolved', details: { caseId: 'c1' } });
    expect(toBusError(err)).toEqual({ status: 409, code: 'CONFLICT', message: 'already resolved', details: { caseId: 'c1' } });
  });

  it('leaves details out when the DomainError has none', async () => {
    const err = await rpc(async () => {
      throw new DomainError(404, 'NOT_FOUND', 'no such case');
    }).catch((e: unknown) => e);
    expect((err as RpcException).getError()).toEqual({ status: 404, code: 'NOT_FOUND', message: 'no such case' });
  });

  it('rethrows anything else as it is', async () => {
    const boom = new TypeError('boom');
    await expect(
      rpc(async () => {
        throw boom;
      }),
    ).rejects.toBe(boom);
  });
});
