import { ArgumentsHost, Catch, HttpException, Logger, RpcExceptionFilter } from '@nestjs/common';
import { RpcException } from '@nestjs/microservices';
import { Observable, throwError } from 'rxjs';

/** The error payload that crosses the bus: `{ status, code, message, details? }`. */
export interface BusError {
  status: number | string;
  code?: string;
  message: string;
  details?: unknown;
}

/**
 * Maps anything a bus handler throws to a JSON-safe {@link BusError}:
 * - RpcException: its error object as is (a string becomes `{ status: 'error', message }`);
 * - HttpException: `{ status: getStatus(), code?, message, details? }` from its response;
 * - an error carrying a numeric `status` and a string `code` (e.g. DomainError): those, its
 *   message and details;
 * - anything else: `{ status: 500, code: 'INTERNAL', message: 'Internal server error' }` (logged
 *   by name only, never its message, which might carry PHI).
 */
export function toBusError(exception: unknown): BusError | object {
  if (exception instanceof RpcException) {
    const err = exception.getError();
    return typeof err === 'object' && err !== null ? err : { status: 'error', message: String(err) };
  }
  if (exception instanceof HttpException) {
    const res = exception.getResponse();
    const body = typeof res === 'object' && res !== null ? (res as Record<string, unknown>) : { message: String(res) };
    return { ...body, status: exception.getStatus(), message: String(body.message ?? exception.message) };
  }
  const e = exception as { status?: unknown; code?: unknown; message?: unknown; details?: unknown } | null;
  if (e && typeof e === 'object' && typeof e.status === 'number' && typeof e.code === 'string') {
    const out: BusError = { status: e.status, code: e.code, message: typeof e.message === 'string' ? e.message : e.code };
    if (e.details !== undefined) out.details = e.details;
    return out;
  }
  BusExceptionFilter.logger.error(`unhandled error in bus handler: ${(exception as Error)?.name ?? typeof exception}`);
  return { status: 500, code: 'INTERNAL', message: 'Internal server error' };
}

/**
 * RPC exception filter for bus handlers (both transports), so domain refusals keep their
 * status/code on the way back. Nest's default filter turns every non-RpcException into
 * `{ status: 'error', message: 'Internal server error' }`. Use it on the microservice:
 *   const ms = await NestFactory.createMicroservice(AppModule, busServerStrategy('case-ledger'));
 *   ms.useGlobalFilters(new BusExceptionFilter());
 * or `@UseFilters(new BusExceptionFilter())` on a bus controller.
 */
@Catch()
export class BusExceptionFilter implements RpcExceptionFilter<unknown> {
  static readonly logger = new Logger('BusExceptionFilter');

  catch(exception: unknown, _host: ArgumentsHost): Observable<never> {
    const payload = toBusError(exception);
    return throwError(() => payload);
  }
}
