import { CanActivate, ExecutionContext, Inject, Injectable, createParamDecorator } from '@nestjs/common';
import type { FastifyRequest } from 'fastify';
import { EncryptJWT, jwtDecrypt } from 'jose';
import { CLOCK, Clock } from '@svc/clock';
import { KEYRING, Keyring } from '@svc/security';
import { ApiError } from './errors';
import { TenantDirectory } from './tenants';

/** A patient's (or anonymous visitor's) widget session (decisions section 7). */
export interface WidgetSessionContext {
  sessionId: string;
  organizationId: string;
  environmentId: string;
  /** The service's patient id, when the identity token named an enrolled patient. */
  patientId: string | null;
  /** From the identity token's `sub`; null for an anonymous visitor. PHI: never log. */
  externalPatientId: string | null;
  /** From the identity token's optional `email`. PHI: never log. */
  email: string | null;
}

export const WIDGET_SESSION_TTL_S = 3600;

/**
 * Session tokens are encrypted JWTs (`dir` + A256GCM, key derived from the master key), so the
 * external patient ID and email they carry are unreadable to anyone but the service, and no
 * session state needs storing.
 */
@Injectable()
export class WidgetSessions {
  private readonly key: Buffer;
  constructor(
    @Inject(KEYRING) keyring: Keyring,
    @Inject(CLOCK) private readonly clock: Clock,
  ) {
    this.key = keyring.serviceKey('widget-session');
  }

  async issue(session: Omit<WidgetSessionContext, 'sessionId'> & { sessionId: string }): Promise<{ sessionToken: string; expiresAt: string }> {
    const iat = Math.floor(this.clock.now().getTime() / 1000);
    const exp = iat + WIDGET_SESSION_TTL_S;
    const sessionToken = await new EncryptJWT({ s: session })
      .setProtectedHeader({ alg: 'dir', enc: 'A256GCM' })
      .setIssuedAt(iat)
      .setExpirationTime(exp)
      .encrypt(this.key);
    return { sessionToken, expiresAt: new Date(exp * 1000).toISOString() };
  }

  async verify(token: string): Promise<WidgetSessionContext> {
    const { payload } = await jwtDecrypt(token, this.key, { currentDate: this.clock.now() });
    return payload.s as WidgetSessionContext;
  }
}

type SessionRequest = FastifyRequest & { widgetSession?: WidgetSessionContext };

/** 401 `SESSION_REQUIRED` without a valid, unexpired session; 403 `BAA_REQUIRED` until signed. */
@Injectable()
export class WidgetSessionGuard implements CanActivate {
  constructor(
    private readonly sessions: WidgetSessions,
    private readonly tenants: TenantDirectory,
  ) {}

  async canActivate(context: ExecutionContext): Promise<boolean> {
    const req = context.switchToHttp().getRequest<SessionRequest>();
    const m = /^Bearer\s+(\S+)\s*$/i.exec(String(req.headers.authorization ?? ''));
    if (!m) throw new ApiError(401, 'SESSION_REQUIRED', 'A widget session is required');
    let session: WidgetSessionContext;
    try {
      session = await this.sessions.verify(m[1]);
    } catch {
      throw new ApiError(401, 'SESSION_REQUIRED', 'The widget session is missing or expired');
    }
    const org = await this.tenants.organization(session.organizationId);
    if (!org) throw new ApiError(401, 'SESSION_REQUIRED', 'The widget session is missing or expired');
    if (!org.baaSignedAt) throw new ApiError(403, 'BAA_REQUIRED', 'The organization has not signed its business associate agreement');
    req.widgetSession = session;
    return true;
  }
}

export const WidgetSession = createParamDecorator((_: unknown, ctx: ExecutionContext): WidgetSessionContext => {
  const s = ctx.switchToHttp().getRequest<SessionRequest>().widgetSession;
  if (!s) throw new ApiError(401, 'SESSION_REQUIRED', 'A widget session is required');
  return s;
});
