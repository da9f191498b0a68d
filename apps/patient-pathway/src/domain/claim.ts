import { Decider } from '@svc/decider';

/**
 * First-writer-wins claim streams (the "idempotency lives in the streams" rule): a lifecycle eventId (with its body hash),
 * a patient identity (environment + keyed hash of the external ID → patientId) and a programKey
 * (→ protocolId). The first Claim appends; a later one decides nothing, and the caller reads the
 * holder from the state. Appended through the CommandHandler like every other write, so the
 * expected revision, the metadata and the conflict retry are the same as everywhere.
 *
 * An eventId claim whose lifecycle event was refused is released (EventIdReleased), so that the
 * same eventId with a corrected body is accepted: a 4xx leaves the eventId as if unused.
 */
export type Claimed =
  | { type: 'EventIdClaimed'; bodyHash: string }
  | { type: 'PatientIdentityAssigned'; patientId: string }
  | { type: 'ProgramKeyClaimed'; protocolId: string; programKey: string };

export type ClaimEvent = Claimed | { type: 'EventIdReleased'; bodyHash: string; code: string; at: string };

export type ClaimCommand = { type: 'Claim'; claim: Claimed } | { type: 'ReleaseEventId'; bodyHash: string; code: string };

export interface ClaimState {
  holder: Claimed | null;
}

export const claimDecider: Decider<ClaimCommand, ClaimEvent, ClaimState> = {
  initialState: () => ({ holder: null }),
  evolve(state, event) {
    switch (event.type) {
      case 'EventIdClaimed':
      case 'PatientIdentityAssigned':
      case 'ProgramKeyClaimed':
        return state.holder ? state : { holder: event };
      case 'EventIdReleased':
        return state.holder?.type === 'EventIdClaimed' && state.holder.bodyHash === event.bodyHash ? { holder: null } : state;
      default: {
        const never: never = event;
        return never;
      }
    }
  },
  decide(command, state, now) {
    switch (command.type) {
      case 'Claim':
        return state.holder ? [] : [command.claim];
      case 'ReleaseEventId':
        // Only the claim of this very body is released (never a later claim of another body).
        if (state.holder?.type !== 'EventIdClaimed' || state.holder.bodyHash !== command.bodyHash) return [];
        return [{ type: 'EventIdReleased', bodyHash: command.bodyHash, code: command.code, at: now.toISOString() }];
      default: {
        const never: never = command;
        return never;
      }
    }
  },
};
