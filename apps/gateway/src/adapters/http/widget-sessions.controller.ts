import { randomUUID } from 'node:crypto';
import { Body, Controller, Inject, Post } from '@nestjs/common';
import { ClientProxy } from '@nestjs/microservices';
import { IsString, IsUUID, MaxLength } from 'class-validator';
import { jwtVerify } from 'jose';
import { CLOCK, Clock } from '@svc/clock';
import { TenantDirectory, identityTokenVersion } from '@svc/access';
import { ApiError, IfPresent, LowercaseUuid, WidgetSessions } from '@svc/http';
import { BUS_CLIENT, FindPatientQuery, FindPatientReply, Patterns, ask } from '@svc/messaging';
import { IdentityTokenUses } from '../../application/identity-tokens.service';
import { IDENTITY_TOKEN_CLOCK_TOLERANCE_S, MAX_IDENTITY_TOKEN_LIFETIME_S } from '../../domain/identity-token';

export class CreateWidgetSessionDto {
  @LowercaseUuid() @IsUUID() environmentId!: string;
  @IfPresent() @IsString() @MaxLength(8192) identityToken?: string;
}

/**
 * `POST /widget/v1/sessions`: a patient signed in by the caller's identity token, or an anonymous
 * visitor. An identity token opens one session only (`IdentityTokenUses`), which ends no later than
 * an hour after the token's `exp` and when the environment's `identity_token` secret is rotated
 * (docs/decisions.md "Widget sessions and identity tokens").
 */
@Controller('widget/v1/sessions')
export class WidgetSessionsController {
  constructor(
    private readonly tenants: TenantDirectory,
    private readonly sessions: WidgetSessions,
    @Inject(CLOCK) private readonly clock: Clock,
    @Inject(BUS_CLIENT) private readonly bus: ClientProxy,
    private readonly identityTokens: IdentityTokenUses,
  ) {}

  @Post()
  async create(@Body() body: CreateWidgetSessionDto) {
    const env = await this.tenants.environment(body.environmentId);
    if (!env) throw ApiError.notFound('Environment');
    const org = await this.tenants.organization(env.organizationId);
    if (!org) throw ApiError.notFound('Environment');
    if (!org.baaSignedAt) throw new ApiError(403, 'BAA_REQUIRED', 'The organization has not signed its business associate agreement');

    let externalPatientId: string | null = null;
    let email: string | null = null;
    let identity: { tokenKey: string; exp: number; version: number } | null = null;
    if (body.identityToken !== undefined) {
      // The rotation count comes from the organization read above, made BEFORE the secret is read:
      // a rotation landing in between leaves this session with the old count and so ends it (a
      // session never carries a count newer than the secret its token was checked with).
      const version = identityTokenVersion(org, env.id);
      const secret = await this.tenants.secret(env.id, 'identity_token');
      try {
        const { payload } = await jwtVerify(body.identityToken, new TextEncoder().encode(secret!), {
          algorithms: ['HS256'],
          currentDate: this.clock.now(),
          requiredClaims: ['sub', 'iat', 'exp'],
          // Short-lived means issued recently too: an `iat` in the future or older than the
          // lifetime is refused (jose checks both with maxTokenAge).
          maxTokenAge: MAX_IDENTITY_TOKEN_LIFETIME_S,
          // The caller's servers mint these: a clock a few seconds ahead of ours must not lock
          // patients out (a minute, as for staff tokens' iat and auth_time).
          clockTolerance: IDENTITY_TOKEN_CLOCK_TOLERANCE_S,
        });
        // 1-200 characters (code points), as the lifecycle events' externalPatientId.
        if (typeof payload.sub !== 'string' || payload.sub.length < 1 || [...payload.sub].length > 200) throw new Error('sub');
        if (payload.exp! - payload.iat! > MAX_IDENTITY_TOKEN_LIFETIME_S) throw new Error('lifetime');
        // A `jti` is what the token is remembered by: it must be a non-empty string when present.
        if (payload.jti !== undefined && (typeof payload.jti !== 'string' || payload.jti.length === 0)) throw new Error('jti');
        externalPatientId = payload.sub;
        email = typeof payload.email === 'string' ? payload.email : null;
        identity = { tokenKey: this.identityTokens.tokenKey(env.id, body.identityToken, payload.jti, secret!), exp: payload.exp!, version };
      } catch {
        throw new ApiError(401, 'INVALID_IDENTITY_TOKEN', 'The identity token is not valid');
      }
    }

    let patientId: string | null = null;
    if (externalPatientId !== null) {
      const query: FindPatientQuery = { environmentId: env.id, externalPatientId };
      const reply = await ask<FindPatientReply, null>(this.bus, Patterns.findPatient, query, { timeoutMs: 5000, onError: () => null });
      // A signed-in patient must not silently become an unlinked session: if the pathway cannot
      // be asked, the caller retries.
      if (reply === null) throw new ApiError(503, 'UNAVAILABLE', 'The patient directory is not reachable; retry shortly', undefined, { 'retry-after': '1' });
      patientId = reply.patientId;
    }
    const sessionId = randomUUID();
    // Recorded last, once nothing else can refuse or fail the request (a 503 above leaves the token
    // unused for the caller's retry). Two uses at once: one append wins, the other is 401.
    if (identity)
      await this.identityTokens.use({ organizationId: org.id, environmentId: env.id, tokenKey: identity.tokenKey, tokenExpS: identity.exp, sessionId });
    const { sessionToken, expiresAt } = await this.sessions.issue(
      {
        sessionId,
        organizationId: org.id,
        environmentId: env.id,
        patientId,
        externalPatientId,
        email,
        ...(identity ? { identityTokenVersion: identity.version } : {}),
      },
      identity?.exp ?? null,
    );
    return { sessionToken, patientId, expiresAt };
  }
}
