import { RpcException } from '@nestjs/microservices';
import { DomainError } from '@svc/decider';

/**
 * Runs a bus handler and turns a DomainError into an RpcException carrying `{ status, code,
 * message, details? }`, so the refusal crosses the bus intact whichever exception filter the
 * hybrid app applies (in the standalone hybrid app a plain DomainError would arrive as
 * `{ status: 'error' }`).
 */
export async function rpc<T>(fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    if (err instanceof DomainError) {
      throw new RpcException({ status: err.status, code: err.code, message: err.message, ...(err.details !== undefined ? { details: err.details } : {}) });
    }
    throw err;
  }
}
