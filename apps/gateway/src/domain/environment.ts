import { Decider, DomainError } from '@svc/decider';
import { EnvironmentKind } from './organization';

export type SecretKind = 'widget_signing' | 'identity_token';
export const SECRET_KINDS: SecretKind[] = ['widget_signing', 'identity_token'];

/** Secrets sit in events of the environment's stream, which the event store encrypts at rest. */
export type EnvironmentEvent =
  | {
      type: 'EnvironmentProvisioned';
      environmentId: string;
      organizationId: string;
      kind: EnvironmentKind;
      secrets: Record<SecretKind, string>;
      provisionedAt: string;
    }
  | { type: 'SecretRotated'; environmentId: string; kind: SecretKind; secret: string; rotatedBy: string; rotatedAt: string };

export type EnvironmentCommand =
  | { type: 'ProvisionEnvironment'; environmentId: string; organizationId: string; kind: EnvironmentKind; secrets: Record<SecretKind, string> }
  | { type: 'RotateSecret'; kind: SecretKind; secret: string; by: string };

export interface EnvironmentState {
  environmentId: string | null;
}

export const environmentDecider: Decider<EnvironmentCommand, EnvironmentEvent, EnvironmentState> = {
  initialState: () => ({ environmentId: null }),
  evolve(state, event) {
    switch (event.type) {
      case 'EnvironmentProvisioned':
        return { environmentId: event.environmentId };
      case 'SecretRotated':
        return state;
      default: {
        const never: never = event;
        return never;
      }
    }
  },
  decide(command, state, now) {
    switch (command.type) {
      case 'ProvisionEnvironment':
        if (state.environmentId) return [];
        return [
          {
            type: 'EnvironmentProvisioned',
            environmentId: command.environmentId,
            organizationId: command.organizationId,
            kind: command.kind,
            secrets: command.secrets,
            provisionedAt: now.toISOString(),
          },
        ];
      case 'RotateSecret':
        if (!state.environmentId) throw new DomainError(404, 'NOT_FOUND', 'Environment not found');
        return [
          {
            type: 'SecretRotated',
            environmentId: state.environmentId,
            kind: command.kind,
            secret: command.secret,
            rotatedBy: command.by,
            rotatedAt: now.toISOString(),
          },
        ];
      default: {
        const never: never = command;
        return never;
      }
    }
  },
};

export const environmentStream = (environmentId: string) => `gateway-environment-${environmentId}`;
