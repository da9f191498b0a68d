import { CanActivate, ExecutionContext, Inject, Injectable, createParamDecorator } from '@nestjs/common';
import type { FastifyRequest } from 'fastify';
import { EncryptJWT, jwtDecrypt } from 'jose';
import { CLOCK, Clock } from '@svc/clock';
import { AnyClientProxy, FindPatientQuery, FindPatientReply, Patterns, ask } from '@svc/messaging';
import { KEYRING, Keyring } from '@svc/security';
import { ApiError } from './errors';
import { OrganizationDoc, TenantDirectory, identityTokenVersion } from '@svc/access';

/** A patient's (or anonymous visitor's) widget session (docs/decisions.md, "Widget sessions and identity tokens"). */
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
  /**
   * Sessions opened with an identity token: the environment's `identity_token` rotation count
   * (`identityTokenVersion`) when the token was checked. A rotation ends the session.
   */
  identityTokenVersion?: number;
}

/** A session lives an hour from its opening... */
export const WIDGET_SESSION_TTL_S = 3600;
/** ... and one opened with an identity token no longer than an hour after the token's `exp`. */
export const WIDGET_SESSION_AFTER_IDENTITY_TOKEN_S = 3600;

/**
 * When a session opened at `issuedAtS` ends (Unix seconds): an hour later, and for a session opened
 * with an identity token never after the token's `exp` + 60 minutes (docs/decisions.md "Widget
 * sessions and identity tokens"). Fixed at opening: activity does not extend it.
 */
export function widgetSessionExpiry(issuedAtS: number, identityTokenExpS: number | null): number {
  const ttl = issuedAtS + WIDGET_SESSION_TTL_S;
  return identityTokenExpS === null ? ttl : Math.min(ttl, identityTokenExpS + WIDGET_SESSION_AFTER_IDENTITY_TOKEN_S);
}

/**
 * True when the session was opened with an identity token and the environment's `identity_token`
 * secret has been rotated since (the organization as read now). Sessions issued without a version
 * but with an external id were opened with an identity token before any version was recorded: 0.
 */
export function widgetSessionEnded(session: WidgetSessionContext, org: Pick<OrganizationDoc, 'identityTokenVersions'>): boolean {
  const openedUnder = session.identityTokenVersion ?? (session.externalPatientId !== null ? 0 : null);
  return openedUnder !== null && openedUnder !== identityTokenVersion(org, session.environmentId);
}

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

  /** `identityTokenExpS`: the `exp` of the identity token the session is opened with (bounds its life). */
  async issue(session: WidgetSessionContext, identityTokenExpS: number | null = null): Promise<{ sessionToken: string; expiresAt: string }> {
    const iat = Math.floor(this.clock.now().getTime() / 1000);
    const exp = widgetSessionExpiry(iat, identityTokenExpS);
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

/**
 * 401 `SESSION_REQUIRED` without a valid, unexpired session, or for a session opened with an identity
 * token whose environment's `identity_token` secret was rotated since; 403 `BAA_REQUIRED` until signed.
 */
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
    // One read for both checks: the organization carries the BAA and the identity_token rotation
    // counts (the rotation's 201 is sent after this document has the new count).
    const org = await this.tenants.organization(session.organizationId);
    if (!org || widgetSessionEnded(session, org)) throw new ApiError(401, 'SESSION_REQUIRED', 'The widget session is missing or expired');
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

/** The session as a request must treat it now (see `currentPatientLink`). */
export interface CurrentWidgetLink {
  /** The session with its patient link as it stands now: unlinked sessions have no patient identity at all. */
  session: WidgetSessionContext;
  /** True when the token named a patient whose link no longer holds (cancelled, or no longer this patient). */
  revoked: boolean;
}

/** How long (real time) a widget request waits for the patient-pathway's answer before 503. */
export const PATIENT_LINK_TIMEOUT_MS = 5000;

/**
 * A session token carries the patient id it was linked to when it was issued (at most an hour's life), but
 * `patient.cancelled` ends the link at once (docs/decisions.md, "Check-ins after a cancellation":
 * "the widget does not link the patient"). A request that needs the link asks the patient-pathway again (`Patterns.findPatient`,
 * as the session's creation did; it reads the patient's stream, so it sees every cancellation
 * already answered 202) and keeps the link only when it still names the same, active patient. A
 * session that lost its link is treated like an anonymous visitor's: no patient id, no external id,
 * no email (no case, no call that identifies the patient, no case-thread reply). Nothing is cached:
 * no cache could be told of a cancellation before its 202 is sent. Sessions without a link are
 * returned as they are, without a question (anonymous ones, and signed-in patients who were not
 * enrolled when the session was made: a later enrolment does not link them). The pathway not
 * answering is 503 `UNAVAILABLE` (ApiError, retry) so that a stale link is never used for lack of
 * an answer.
 */
export async function currentPatientLink(bus: AnyClientProxy, session: WidgetSessionContext, timeoutMs = PATIENT_LINK_TIMEOUT_MS): Promise<CurrentWidgetLink> {
  if (!session.patientId) return { session, revoked: false };
  // The sessions endpoint links a session only through the identity token's `sub`, so a linked
  // token always names the external id too; one without it cannot be checked and links nobody.
  if (!session.externalPatientId) return { session: { ...session, patientId: null, email: null }, revoked: true };
  const query: FindPatientQuery = { environmentId: session.environmentId, externalPatientId: session.externalPatientId };
  const reply = await ask<FindPatientReply, null>(bus, Patterns.findPatient, query, { timeoutMs, onError: () => null });
  if (reply === null) throw new ApiError(503, 'UNAVAILABLE', 'The patient directory is not reachable; retry shortly', undefined, { 'retry-after': '1' });
  if (reply.patientId === session.patientId) return { session, revoked: false };
  return { session: { ...session, patientId: null, externalPatientId: null, email: null }, revoked: true };
}
