import { Inject, Injectable } from '@nestjs/common';
import { CLOCK, Clock } from '@svc/clock';
import { CommandHandler, EVENT_STORE, EventStore } from '@svc/eventstore';
import { KEYRING, Keyring, hmacHex } from '@svc/security';
import { IdentityTokenCommand, IdentityTokenEvent, IdentityTokenState, identityTokenDecider, identityTokenStream } from '../domain/identity-token';

/**
 * One session per widget identity token (docs/decisions.md "Widget sessions and identity tokens").
 * Each token's uses are a stream of the event store, keyed by environment and a keyed hash of the
 * token's id, so the first writer wins across restarts and across gateway processes: a second use
 * reads the first (or loses the append race, re-reads it) and the decider refuses it with 401
 * `INVALID_IDENTITY_TOKEN`. The hot path is that one stream's read and append; no read model holds
 * these uses, and a use is only consulted until the token expires.
 */
@Injectable()
export class IdentityTokenUses {
  private readonly handler: CommandHandler<IdentityTokenCommand, IdentityTokenEvent, IdentityTokenState>;

  constructor(
    @Inject(EVENT_STORE) store: EventStore,
    @Inject(CLOCK) clock: Clock,
    @Inject(KEYRING) private readonly keyring: Keyring,
  ) {
    this.handler = new CommandHandler(store, identityTokenDecider, () => clock.now());
  }

  /**
   * What a token is remembered by: its `jti` when it has one; otherwise the token itself, as its
   * signed part (`header.payload`) with the signature recomputed with the `secret` that verified
   * it. Not the signature segment as sent: base64url has spare bits, so one signature has several
   * spellings and a re-spelled copy of a used token must not look new. The same claims signed with
   * another secret (before and after a rotation) are another token. Keyed-hashed per environment:
   * a `jti` is the caller's text and must not appear in a stream name.
   */
  tokenKey(environmentId: string, compactToken: string, jti: string | undefined, secret: string): string {
    const signed = compactToken.split('.').slice(0, 2).join('.');
    const id = jti !== undefined ? `jti:${jti}` : `jws:${signed}.${hmacHex(secret, signed)}`;
    return this.keyring.purposeHash('identity-token', environmentId, id);
  }

  /** Records the token's use for `sessionId`; throws the 401 when it was used already and has not expired. */
  async use(input: { organizationId: string; environmentId: string; tokenKey: string; tokenExpS: number; sessionId: string }): Promise<void> {
    await this.handler.handle(
      identityTokenStream(input.environmentId, input.tokenKey),
      {
        type: 'UseIdentityToken',
        environmentId: input.environmentId,
        sessionId: input.sessionId,
        tokenExpiresAt: new Date(input.tokenExpS * 1000).toISOString(),
      },
      { actor: `widget-session:${input.sessionId}`, organizationId: input.organizationId, environmentId: input.environmentId },
    );
  }
}
