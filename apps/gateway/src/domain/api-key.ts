import { Decider, DomainError } from '@svc/decider';
import { EnvironmentKind } from './organization';

export type ApiKeyEvent =
  | {
      type: 'ApiKeyCreated';
      keyId: string;
      organizationId: string;
      environmentId: string;
      environmentKind: EnvironmentKind;
      name: string;
      prefix: string;
      /** SHA-256 verifier; the key itself is never stored. */
      keyHash: string;
      createdBy: string;
      createdAt: string;
    }
  | { type: 'ApiKeyRevoked'; keyId: string; revokedBy: string; revokedAt: string };

export type ApiKeyCommand =
  | {
      type: 'CreateApiKey';
      keyId: string;
      organizationId: string;
      environmentId: string;
      environmentKind: EnvironmentKind;
      name: string;
      prefix: string;
      keyHash: string;
      by: string;
    }
  | { type: 'RevokeApiKey'; environmentId: string; by: string };

export interface ApiKeyState {
  keyId: string | null;
  environmentId: string | null;
  revoked: boolean;
}

export const apiKeyDecider: Decider<ApiKeyCommand, ApiKeyEvent, ApiKeyState> = {
  initialState: () => ({ keyId: null, environmentId: null, revoked: false }),
  evolve(state, event) {
    switch (event.type) {
      case 'ApiKeyCreated':
        return { keyId: event.keyId, environmentId: event.environmentId, revoked: false };
      case 'ApiKeyRevoked':
        return { ...state, revoked: true };
      default: {
        const never: never = event;
        return never;
      }
    }
  },
  decide(command, state, now) {
    switch (command.type) {
      case 'CreateApiKey': {
        if (state.keyId) throw new DomainError(409, 'DUPLICATE_KEY', 'The API key exists already');
        const { type: _t, by, ...rest } = command;
        return [{ type: 'ApiKeyCreated', ...rest, createdBy: by, createdAt: now.toISOString() }];
      }
      case 'RevokeApiKey':
        if (!state.keyId || state.environmentId !== command.environmentId) throw new DomainError(404, 'NOT_FOUND', 'API key not found');
        if (state.revoked) return [];
        return [{ type: 'ApiKeyRevoked', keyId: state.keyId, revokedBy: command.by, revokedAt: now.toISOString() }];
      default: {
        const never: never = command;
        return never;
      }
    }
  },
};

export const apiKeyStream = (keyId: string) => `gateway-apikey-${keyId}`;
