import { Decider, DomainError } from '@svc/decider';

/** A webhook endpoint of one environment. The secret lives in the (encrypted) event data only. */
export type EndpointEvent =
  | {
      type: 'WebhookEndpointCreated';
      endpointId: string;
      organizationId: string;
      environmentId: string;
      url: string;
      events: string[];
      description: string | null;
      secret: string;
      createdBy: string;
      createdAt: string;
    }
  | { type: 'WebhookEndpointSecretRotated'; endpointId: string; secret: string; rotatedBy: string; rotatedAt: string }
  | { type: 'WebhookEndpointDeleted'; endpointId: string; deletedBy: string; deletedAt: string };

export type EndpointCommand =
  | {
      type: 'CreateEndpoint';
      endpointId: string;
      organizationId: string;
      environmentId: string;
      url: string;
      events: string[];
      description: string | null;
      secret: string;
      by: string;
    }
  | { type: 'RotateSecret'; environmentId: string; secret: string; by: string }
  | { type: 'DeleteEndpoint'; environmentId: string; by: string };

export interface EndpointState {
  endpointId: string | null;
  environmentId: string | null;
  deleted: boolean;
}

const notFound = () => new DomainError(404, 'NOT_FOUND', 'Webhook endpoint not found');

export const endpointDecider: Decider<EndpointCommand, EndpointEvent, EndpointState> = {
  initialState: () => ({ endpointId: null, environmentId: null, deleted: false }),
  evolve(state, event) {
    switch (event.type) {
      case 'WebhookEndpointCreated':
        return { endpointId: event.endpointId, environmentId: event.environmentId, deleted: false };
      case 'WebhookEndpointSecretRotated':
        return state;
      case 'WebhookEndpointDeleted':
        return { ...state, deleted: true };
      default: {
        const never: never = event;
        return never;
      }
    }
  },
  decide(command, state, now) {
    switch (command.type) {
      case 'CreateEndpoint': {
        if (state.endpointId) throw new DomainError(409, 'DUPLICATE_KEY', 'The webhook endpoint exists already');
        const { type: _t, by, ...rest } = command;
        return [{ type: 'WebhookEndpointCreated', ...rest, createdBy: by, createdAt: now.toISOString() }];
      }
      case 'RotateSecret':
        if (!state.endpointId || state.deleted || state.environmentId !== command.environmentId) throw notFound();
        return [
          { type: 'WebhookEndpointSecretRotated', endpointId: state.endpointId, secret: command.secret, rotatedBy: command.by, rotatedAt: now.toISOString() },
        ];
      case 'DeleteEndpoint':
        if (!state.endpointId || state.deleted || state.environmentId !== command.environmentId) throw notFound();
        return [{ type: 'WebhookEndpointDeleted', endpointId: state.endpointId, deletedBy: command.by, deletedAt: now.toISOString() }];
      default: {
        const never: never = command;
        return never;
      }
    }
  },
};

export const endpointStream = (endpointId: string) => `webhook-dispatcher-endpoint-${endpointId}`;
