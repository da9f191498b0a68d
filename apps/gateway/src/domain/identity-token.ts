import { Decider, DomainError } from '@svc/decider';

/** Identity tokens may live at most 10 minutes (`exp` - `iat`). */
export const MAX_IDENTITY_TOKEN_LIFETIME_S = 600;

/**
 * Clock skew tolerated on an identity token's `iat` and `exp` (the caller's servers mint them): a
 * token is taken until `exp` + this, so its use is remembered that long.
 */
export const IDENTITY_TOKEN_CLOCK_TOLERANCE_S = 60;

/**
 * The uses of one identity token (one stream per environment and token id: its `jti`, or the token
 * itself when it has none; see docs/decisions.md "Widget sessions and identity tokens"). A token
 * opens at most one session: a use is remembered until the token can no longer be accepted
 * (`exp` + the clock tolerance); after that the same `jti` may name a new token.
 */
export type IdentityTokenEvent = {
  type: 'IdentityTokenUsed';
  environmentId: string;
  /** The session this use opened. */
  sessionId: string;
  /** The token's `exp`. */
  tokenExpiresAt: string;
  /** Until when a second use is refused. */
  rememberedUntil: string;
  usedAt: string;
};

export type IdentityTokenCommand = { type: 'UseIdentityToken'; environmentId: string; sessionId: string; tokenExpiresAt: string };

export interface IdentityTokenState {
  /** The latest use's `rememberedUntil`, or null when the token was never used. */
  rememberedUntil: string | null;
}

export const identityTokenDecider: Decider<IdentityTokenCommand, IdentityTokenEvent, IdentityTokenState> = {
  initialState: () => ({ rememberedUntil: null }),
  evolve(state, event) {
    switch (event.type) {
      case 'IdentityTokenUsed':
        return { rememberedUntil: event.rememberedUntil };
      default: {
        const never: never = event.type;
        return never;
      }
    }
  },
  decide(command, state, now) {
    switch (command.type) {
      case 'UseIdentityToken': {
        if (state.rememberedUntil !== null && now.getTime() < Date.parse(state.rememberedUntil)) {
          throw new DomainError(401, 'INVALID_IDENTITY_TOKEN', 'The identity token has already been used');
        }
        const rememberedUntil = new Date(Date.parse(command.tokenExpiresAt) + IDENTITY_TOKEN_CLOCK_TOLERANCE_S * 1000).toISOString();
        return [
          {
            type: 'IdentityTokenUsed',
            environmentId: command.environmentId,
            sessionId: command.sessionId,
            tokenExpiresAt: command.tokenExpiresAt,
            rememberedUntil,
            usedAt: now.toISOString(),
          },
        ];
      }
      default: {
        const never: never = command.type;
        return never;
      }
    }
  },
};

/** `tokenKey`: a keyed hash of the token's id (never the id itself: a caller may put anything in `jti`). */
export const identityTokenStream = (environmentId: string, tokenKey: string) => `gateway-identity-token-${environmentId}-${tokenKey}`;
