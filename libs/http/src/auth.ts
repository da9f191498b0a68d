import { CanActivate, ExecutionContext, Inject, Injectable, Optional, SetMetadata, createParamDecorator } from '@nestjs/common';
import { READ_STORE, ReadStore } from '@svc/read-store';
import { Reflector } from '@nestjs/core';
import type { FastifyRequest } from 'fastify';
import { CLOCK, Clock } from '@svc/clock';
import { STAFF_TOKEN_VERIFIER, StaffPrincipal, StaffTokenVerifier, hashApiKey, looksLikeApiKey } from '@svc/security';
import { ApiError } from './errors';
import { uuidParamProblem } from './path-params';
import { RateLimiter } from './rate-limit';
import { AccessCollections, OrganizationDoc, OrganizationRole, TenantDirectory, membership } from '@svc/access';
import type { EnvironmentKind } from '@svc/decider';

/** Who an API key speaks for. */
export interface ApiTenant {
  organizationId: string;
  environmentId: string;
  environmentKind: EnvironmentKind;
  keyId: string;
}

export interface StaffContext {
  principal: StaffPrincipal;
  organization?: OrganizationDoc;
  environment?: { id: string; kind: EnvironmentKind };
}

type AuthedRequest = FastifyRequest & { apiTenant?: ApiTenant; staff?: StaffContext };

function bearer(req: FastifyRequest): string | null {
  const h = req.headers.authorization;
  if (typeof h !== 'string') return null;
  const m = /^Bearer\s+(\S+)\s*$/i.exec(h);
  return m ? m[1] : null;
}

/**
 * API-key authentication for the caller-facing endpoints: 401 `INVALID_API_CREDENTIAL` for a
 * missing, unknown or revoked key; 429 `RATE_LIMITED` over the key's rate limit (counted once the
 * key is known); 403 `BAA_REQUIRED` until the organization signs its BAA.
 */
@Injectable()
export class ApiKeyGuard implements CanActivate {
  /**
   * Accepted keys by key hash, each with the read store's generation of the key and organization
   * collections when it was read. An entry is used only while both are unchanged: the access
   * projection's commit of a revocation (or of anything else in those collections) changes them
   * before the revoking request is answered, so a revoked key fails on the very next request.
   * Only with a read store that can tell (`generation`: SQLite); never with Redis, where other
   * processes write. Refusals are not cached.
   */
  private readonly accepted = new Map<string, { gen: number; tenant: ApiTenant }>();
  private static readonly MAX_CACHED = 10_000;

  constructor(
    private readonly tenants: TenantDirectory,
    @Optional() @Inject(READ_STORE) private readonly readStore?: ReadStore,
    @Optional() private readonly limiter?: RateLimiter,
  ) {}

  async canActivate(context: ExecutionContext): Promise<boolean> {
    await this.authenticate(context.switchToHttp().getRequest<AuthedRequest>());
    return true;
  }

  /** The tenant the request's API key speaks for (also set as the request's `apiTenant`), or the refusal. */
  async authenticate(req: AuthedRequest): Promise<ApiTenant> {
    const token = bearer(req);
    if (!token || !looksLikeApiKey(token)) throw new ApiError(401, 'INVALID_API_CREDENTIAL', 'A valid API key is required');
    const hash = hashApiKey(token);
    const store = this.readStore?.generation ? this.readStore : null;
    // Read before the documents, so an entry never claims a generation newer than what it saw.
    const gen = store ? store.generation!(AccessCollections.apiKeysByHash, AccessCollections.organizations) : 0;
    if (store) {
      const hit = this.accepted.get(hash);
      if (hit && hit.gen === gen) {
        const limited = this.limiter?.check('apiKey', hit.tenant.keyId);
        if (limited) await limited;
        return (req.apiTenant = { ...hit.tenant });
      }
      if (hit) this.accepted.delete(hash);
    }
    const key = await this.tenants.apiKeyByHash(hash);
    if (!key || key.revokedAt) throw new ApiError(401, 'INVALID_API_CREDENTIAL', 'A valid API key is required');
    const limited = this.limiter?.check('apiKey', key.id);
    if (limited) await limited;
    const org = await this.tenants.organization(key.organizationId);
    if (!org) throw new ApiError(401, 'INVALID_API_CREDENTIAL', 'A valid API key is required');
    if (!org.baaSignedAt) throw new ApiError(403, 'BAA_REQUIRED', 'The organization has not signed its business associate agreement');
    const tenant: ApiTenant = { organizationId: key.organizationId, environmentId: key.environmentId, environmentKind: key.environmentKind, keyId: key.id };
    req.apiTenant = tenant;
    if (store) {
      if (this.accepted.size >= ApiKeyGuard.MAX_CACHED) this.accepted.delete(this.accepted.keys().next().value as string);
      this.accepted.set(hash, { gen, tenant: { ...tenant } });
    }
    return tenant;
  }
}

/** The permission of the staff token that integration set-up needs. */
export const INTEGRATIONS_MANAGE = 'integrations.manage';

/**
 * What a staff route under `/organizations/{orgId}` needs beyond membership of that organization
 * (which every such route needs; membership alone is enough for clinical work and reading the
 * organization and its members):
 * - `integration-setup`: the token's `integrations.manage` (403 `PERMISSION_REQUIRED`) and the
 *   role owner or admin in the organization (403 `ROLE_REQUIRED`);
 * - `owner-or-admin`: the role owner or admin (403 `ROLE_REQUIRED`), no permission.
 */
export type StaffAccess = 'integration-setup' | 'owner-or-admin';
export const STAFF_ACCESS = 'svc:staff-access';

/**
 * Marks a staff route (or every route of a controller) as integration set-up: API keys, webhook
 * endpoints and their deliveries, environment secrets, Destinations, protocols, workflows.
 */
export const IntegrationSetup = () => SetMetadata<string, StaffAccess>(STAFF_ACCESS, 'integration-setup');
/** Marks a staff route (or controller) as the organization's owners' and admins' (billing). */
export const OwnerOrAdmin = () => SetMetadata<string, StaffAccess>(STAFF_ACCESS, 'owner-or-admin');

export const isOwnerOrAdmin = (role: OrganizationRole | undefined): boolean => role === 'owner' || role === 'admin';

export const MFA_MAX_AGE_S = Symbol('MFA_MAX_AGE_S');

/**
 * Staff ID-token authentication and access, in this order: 401 `STAFF_AUTH_REQUIRED` without a
 * valid token (API keys are refused); 429 `RATE_LIMITED` over the subject's rate limit; 400
 * `VALIDATION_FAILED` for a uuid path parameter that is not a uuid; 404 for an organization the caller is not a member of or
 * an environment outside it; on routes marked `@IntegrationSetup()` 403 `PERMISSION_REQUIRED`
 * without `integrations.manage`; on those and on `@OwnerOrAdmin()` routes 403 `ROLE_REQUIRED`
 * for a `member`; writes need a recent MFA sign-in (403 `MFA_REQUIRED`).
 */
@Injectable()
export class StaffGuard implements CanActivate {
  constructor(
    @Inject(STAFF_TOKEN_VERIFIER) private readonly verifier: StaffTokenVerifier,
    private readonly tenants: TenantDirectory,
    private readonly reflector: Reflector,
    @Inject(CLOCK) private readonly clock: Clock,
    @Inject(MFA_MAX_AGE_S) private readonly mfaMaxAgeS: number,
    @Optional() private readonly limiter?: RateLimiter,
  ) {}

  async canActivate(context: ExecutionContext): Promise<boolean> {
    const req = context.switchToHttp().getRequest<AuthedRequest>();
    const token = bearer(req);
    if (!token || looksLikeApiKey(token)) throw new ApiError(401, 'STAFF_AUTH_REQUIRED', 'A staff ID token is required');
    let principal: StaffPrincipal;
    try {
      principal = await this.verifier.verify(token);
    } catch {
      throw new ApiError(401, 'STAFF_AUTH_REQUIRED', 'A valid staff ID token is required');
    }
    const limited = this.limiter?.check('staff', principal.sub);
    if (limited) await limited;
    // Before the path's ids are looked up: a malformed one is 400, a well-formed unknown one 404.
    const malformed = uuidParamProblem(req.params);
    if (malformed) throw malformed;
    const staff: StaffContext = { principal };
    const params = (req.params ?? {}) as Record<string, string>;
    const orgId = params.orgId ?? params.organizationId;
    if (orgId !== undefined) {
      const org = await this.tenants.organization(orgId);
      if (!org || !membership(org, principal.sub)) throw ApiError.notFound('Organization');
      staff.organization = org;
      const envId = params.envId ?? params.environmentId;
      if (envId !== undefined) {
        const env = org.environments.find((e) => e.id === envId);
        if (!env) throw ApiError.notFound('Environment');
        staff.environment = env;
      }
    }
    const access = this.reflector.getAllAndOverride<StaffAccess | undefined>(STAFF_ACCESS, [context.getHandler(), context.getClass()]);
    if (access === 'integration-setup' && !principal.permissions.includes(INTEGRATIONS_MANAGE)) {
      throw new ApiError(403, 'PERMISSION_REQUIRED', `The permission ${INTEGRATIONS_MANAGE} is required`);
    }
    // The role in the organization of the path (a marked route without one is refused, never let through).
    if (access && !isOwnerOrAdmin(staff.organization ? membership(staff.organization, principal.sub)?.role : undefined)) {
      throw new ApiError(403, 'ROLE_REQUIRED', 'Only an owner or administrator of the organization may do this');
    }
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      const nowS = Math.floor(this.clock.now().getTime() / 1000);
      if (!principal.mfa || principal.authTime === null || nowS - principal.authTime > this.mfaMaxAgeS) {
        throw new ApiError(403, 'MFA_REQUIRED', 'A recent multi-factor sign-in is required for changes');
      }
    }
    req.staff = staff;
    return true;
  }
}

export const Tenant = createParamDecorator((_: unknown, ctx: ExecutionContext): ApiTenant => {
  const t = ctx.switchToHttp().getRequest<AuthedRequest>().apiTenant;
  if (!t) throw new ApiError(401, 'INVALID_API_CREDENTIAL', 'A valid API key is required');
  return t;
});

export const Staff = createParamDecorator((_: unknown, ctx: ExecutionContext): StaffContext => {
  const s = ctx.switchToHttp().getRequest<AuthedRequest>().staff;
  if (!s) throw new ApiError(401, 'STAFF_AUTH_REQUIRED', 'A staff ID token is required');
  return s;
});
