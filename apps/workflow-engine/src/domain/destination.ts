/** Destinations (docs/decisions.md, "Destinations and calls"): a caller's system a workflow may call. Header values are secrets. */
import { Decider, DomainError } from '@svc/decider';

export interface DestinationState {
  id: string | null;
  environmentId: string | null;
  stableKey: string;
  deleted: boolean;
}

export type DestinationEvent =
  | {
      type: 'DestinationCreated';
      destinationId: string;
      organizationId: string;
      environmentId: string;
      stableKey: string;
      name: string;
      baseUrl: string;
      /** Header values (secrets; the event data is encrypted at rest, the read model re-encrypts). */
      headers: Record<string, string>;
      timeoutMs: number;
      audit: { by: string; action: 'create'; at: string };
    }
  | { type: 'DestinationDeleted'; destinationId: string; stableKey: string; audit: { by: string; action: 'delete'; at: string } };

export type DestinationCommand =
  | {
      type: 'Create';
      destinationId: string;
      organizationId: string;
      environmentId: string;
      stableKey: string;
      name: string;
      baseUrl: string;
      headers: Record<string, string>;
      timeoutMs: number;
      by: string;
    }
  | { type: 'Delete'; environmentId: string; by: string };

export const destinationStream = (id: string) => `workflow-engine-destination-${id}`;
export const destinationKeyStream = (envId: string, stableKey: string) => `workflow-engine-destkey-${envId}-${stableKey}`;

export const destinationDecider: Decider<DestinationCommand, DestinationEvent, DestinationState> = {
  initialState: () => ({ id: null, environmentId: null, stableKey: '', deleted: false }),
  evolve(state, event) {
    switch (event.type) {
      case 'DestinationCreated':
        return { id: event.destinationId, environmentId: event.environmentId, stableKey: event.stableKey, deleted: false };
      case 'DestinationDeleted':
        return { ...state, deleted: true };
      default: {
        const never: never = event;
        return never;
      }
    }
  },
  decide(command, state, now) {
    switch (command.type) {
      case 'Create': {
        if (state.id) throw new DomainError(409, 'DUPLICATE_KEY', 'The destination exists already');
        const { type: _t, by, ...rest } = command;
        return [{ type: 'DestinationCreated', ...rest, audit: { by, action: 'create', at: now.toISOString() } }];
      }
      case 'Delete':
        if (!state.id || state.deleted || state.environmentId !== command.environmentId) throw new DomainError(404, 'NOT_FOUND', 'Destination not found');
        return [
          {
            type: 'DestinationDeleted',
            destinationId: state.id,
            stableKey: state.stableKey,
            audit: { by: command.by, action: 'delete', at: now.toISOString() },
          },
        ];
      default: {
        const never: never = command;
        return never;
      }
    }
  },
};
