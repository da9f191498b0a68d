import { CanActivate, ExecutionContext, Injectable, SetMetadata } from '@nestjs/common';
import { GUARDS_METADATA, ROUTE_ARGS_METADATA } from '@nestjs/common/constants';
import { RouteParamtypes } from '@nestjs/common/enums/route-paramtypes.enum';
import { ModuleRef, Reflector } from '@nestjs/core';
import { isObservable, lastValueFrom } from 'rxjs';
import { ApiError } from './errors';
import { toErrorResponse } from './filter';
import { uuidParamProblem } from './path-params';

/**
 * Where the body parsers leave what was wrong with a body (malformed, empty or over-deep JSON, a
 * `__proto__` key, an unsupported media type) instead of failing the request: Fastify parses the
 * body before any Nest guard runs, and authentication (401/403) comes first (docs/decisions.md, "Errors and the HTTP edge").
 */
const BODY_PROBLEM = Symbol('svc.bodyProblem');

/** Set when the problem is a JSON content type with a zero-length body (no body at all on the wire). */
const EMPTY_JSON_BODY = Symbol('svc.emptyJsonBody');

type WithProblem = { [BODY_PROBLEM]?: ApiError; [EMPTY_JSON_BODY]?: boolean };

/**
 * Records a body problem on the request (the error as the filter answers it: same status, code,
 * message and details) and lets the request go on with no body; `BodyProblemGuard` answers it
 * once the route's own guards have passed.
 */
export function deferBodyProblem(request: object, err: unknown): void {
  const { status, body, headers } = toErrorResponse(err);
  (request as WithProblem)[BODY_PROBLEM] = new ApiError(status, body.code, body.message, body.details, headers);
  if ((err as { code?: unknown } | undefined)?.code === 'FST_ERR_CTP_EMPTY_JSON_BODY') (request as WithProblem)[EMPTY_JSON_BODY] = true;
}

/** The body problem recorded on a request, if any. */
export function bodyProblemOf(request: object | undefined): ApiError | undefined {
  return request ? (request as WithProblem)[BODY_PROBLEM] : undefined;
}

/**
 * What is wrong with the body of an authenticated request, for an operation that takes a body or
 * not (`takesBody`, asked only when it matters): the problem the parsers recorded, except a
 * zero-length body labelled JSON for an operation that takes none (RFC 9110: Content-Length 0 is
 * no content; clients that set `Content-Type: application/json` on every call), which passes as
 * a request without the header does (an operation that takes a body still answers 400 "empty
 * body"); and a body sent to an operation that takes none (acknowledge, activate, rotate, ...):
 * `{}` or no body passes, members are unknown fields and anything else is not an empty object,
 * both 400 VALIDATION_FAILED (docs/decisions.md, "Errors and the HTTP edge"), as a DTO route answers them.
 */
export function bodyProblemFor(request: { body?: unknown }, takesBody: () => boolean): ApiError | undefined {
  const problem = bodyProblemOf(request);
  if (problem) return (request as WithProblem)[EMPTY_JSON_BODY] && !takesBody() ? undefined : problem;
  const body = request.body;
  if (body === undefined || takesBody()) return undefined;
  if (body !== null && typeof body === 'object' && !Array.isArray(body)) {
    const keys = Object.keys(body);
    return keys.length ? ApiError.validation(keys.map((path) => ({ path, message: 'unknown field' }))) : undefined;
  }
  return ApiError.validation([{ path: '', message: 'this operation takes no request body (or an empty JSON object)' }]);
}

const OWN_PATH_ID_CHECK = 'svc:ownPathIdCheck';

/**
 * On a route that answers a malformed path id itself: BodyProblemGuard leaves its uuid path
 * parameters to the handler, which must answer a malformed one (uuidParamProblem) in its own form.
 * The check-in link takes it, so that a browser following a mangled link gets the check-in page's
 * kind "link does not work" answer, and an API client the same 400 VALIDATION_FAILED as elsewhere.
 */
export const ChecksOwnPathIds = (): MethodDecorator => SetMetadata(OWN_PATH_ID_CHECK, true);

/**
 * The global guard that answers what is wrong with the request itself on every HTTP route,
 * guarded or not, after the route's own guards: first a uuid path parameter that is not a uuid
 * (`uuidParamProblem`, 400 VALIDATION_FAILED naming it), then a recorded body problem (400
 * VALIDATION_FAILED, 415 UNSUPPORTED_MEDIA_TYPE). A request is authenticated (401/403/429, and a
 * guard's 404 for another organization) before its path ids and body are judged, and the DTO
 * validation (pipes) and the lookups of the handler come after that.
 *
 * Global guards run before the controller's and the route's, so when there is a problem (only
 * then) this guard runs the route's guards itself, in Nest's order (controller, then method),
 * and answers their refusal; if they all let the request in, it answers the body problem. A
 * request without a problem costs one property read (a global interceptor, which would run after
 * the guards, costs Nest's RxJS pipeline on every request). A guard it cannot resolve (not an
 * injectable of the app, or request-scoped) makes it answer the body problem at once.
 */
@Injectable()
export class BodyProblemGuard implements CanActivate {
  constructor(
    private readonly reflector: Reflector,
    private readonly moduleRef: ModuleRef,
  ) {}

  canActivate(context: ExecutionContext): boolean | Promise<boolean> {
    if (context.getType() !== 'http') return true;
    const request = context.switchToHttp().getRequest<{ body?: unknown; params?: unknown }>();
    let idProblem = uuidParamProblem(request.params);
    if (idProblem && this.reflector.get<boolean | undefined>(OWN_PATH_ID_CHECK, context.getHandler())) idProblem = undefined;
    const problem = idProblem ?? bodyProblemFor(request, () => this.routeTakesBody(context));
    if (!problem) return true;
    return this.routeGuardsThenProblem(context, problem);
  }

  /** Route handler -> whether it declares a body parameter (`@Body()` or the whole `@Req()`). */
  private readonly takesBody = new WeakMap<object, boolean>();

  private routeTakesBody(context: ExecutionContext): boolean {
    const handler = context.getHandler();
    let takes = this.takesBody.get(handler);
    if (takes === undefined) {
      const args = (Reflect.getMetadata(ROUTE_ARGS_METADATA, context.getClass(), handler.name) ?? {}) as Record<string, unknown>;
      const types = Object.keys(args).map((k) => Number(k.split(':')[0]));
      takes = types.includes(RouteParamtypes.BODY) || types.includes(RouteParamtypes.REQUEST);
      this.takesBody.set(handler, takes);
    }
    return takes;
  }

  private async routeGuardsThenProblem(context: ExecutionContext, problem: ApiError): Promise<boolean> {
    const declared = [
      ...(this.reflector.get<unknown[] | undefined>(GUARDS_METADATA, context.getClass()) ?? []),
      ...(this.reflector.get<unknown[] | undefined>(GUARDS_METADATA, context.getHandler()) ?? []),
    ];
    const guards: CanActivate[] = [];
    for (const g of declared) {
      const guard = this.resolve(g);
      if (!guard) throw problem;
      guards.push(guard);
    }
    for (const guard of guards) {
      const result = guard.canActivate(context);
      const allowed = isObservable(result) ? await lastValueFrom(result) : await result;
      // A guard that refuses without an error: Nest runs the route's guards next and answers as it does.
      if (!allowed) return true;
    }
    throw problem;
  }

  private resolve(guard: unknown): CanActivate | undefined {
    if (guard && typeof (guard as CanActivate).canActivate === 'function') return guard as CanActivate;
    if (typeof guard !== 'function') return undefined;
    try {
      const instance = this.moduleRef.get(guard, { strict: false }) as CanActivate | undefined;
      return instance && typeof instance.canActivate === 'function' ? instance : undefined;
    } catch {
      return undefined;
    }
  }
}
