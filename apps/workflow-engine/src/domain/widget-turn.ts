/**
 * One patient message to the widget agent sent with an `Idempotency-Key` (a stream per key of a
 * signed-in patient, or of an anonymous visitor's session): the first sender claims the turn, answers it, and records the answer; a retry with the
 * same key and message gets that answer again instead of a second run, case or credit.
 */
import { Decider, DomainError } from '@svc/decider';

/** The widget's answer to a message, as sent (event data is encrypted at rest). */
export interface WidgetAnswer {
  conversationId: string;
  replies: unknown[];
  handedOff: boolean;
  caseReference?: string;
}

export type WidgetTurnEvent =
  | { type: 'WidgetTurnClaimed'; claimId: string; bodyHash: string; claimedAt: string; leaseUntil: string }
  | { type: 'WidgetTurnReleased'; releasedAt: string }
  | { type: 'WidgetTurnAnswered'; bodyHash: string; answer: WidgetAnswer; answeredAt: string };

export type WidgetTurnCommand =
  | { type: 'Claim'; claimId: string; bodyHash: string; leaseMs: number }
  | { type: 'Release'; claimId: string }
  /**
   * Recorded by the holder of the current claim, or by the first sender once its claim was taken
   * over and released (a retry that found the turn still busy): the answer it gave is the turn's.
   * Not while another sender holds a claim (that one will answer).
   */
  | { type: 'Answer'; claimId: string; bodyHash: string; answer: WidgetAnswer };

export interface WidgetTurnState {
  claim: { claimId: string; bodyHash: string; leaseUntil: string } | null;
  answer: { bodyHash: string; answer: WidgetAnswer } | null;
}

const reused = () => new DomainError(409, 'IDEMPOTENCY_KEY_REUSED', 'This Idempotency-Key was used with another message');

export const widgetTurnDecider: Decider<WidgetTurnCommand, WidgetTurnEvent, WidgetTurnState> = {
  initialState: () => ({ claim: null, answer: null }),
  evolve(state, event) {
    switch (event.type) {
      case 'WidgetTurnClaimed':
        return { ...state, claim: { claimId: event.claimId, bodyHash: event.bodyHash, leaseUntil: event.leaseUntil } };
      case 'WidgetTurnReleased':
        return { ...state, claim: null };
      case 'WidgetTurnAnswered':
        return { claim: null, answer: { bodyHash: event.bodyHash, answer: event.answer } };
      default: {
        const never: never = event;
        return never;
      }
    }
  },
  decide(command, state, now) {
    switch (command.type) {
      case 'Claim': {
        if (state.answer) {
          if (state.answer.bodyHash !== command.bodyHash) throw reused();
          return []; // answered: the caller gives the recorded answer
        }
        if (state.claim && Date.parse(state.claim.leaseUntil) > now.getTime()) {
          if (state.claim.bodyHash !== command.bodyHash) throw reused();
          throw new DomainError(409, 'TURN_IN_PROGRESS', 'This message is still being answered');
        }
        return [
          {
            type: 'WidgetTurnClaimed',
            claimId: command.claimId,
            bodyHash: command.bodyHash,
            claimedAt: now.toISOString(),
            leaseUntil: new Date(now.getTime() + command.leaseMs).toISOString(),
          },
        ];
      }
      case 'Release':
        return state.claim?.claimId === command.claimId && !state.answer ? [{ type: 'WidgetTurnReleased', releasedAt: now.toISOString() }] : [];
      case 'Answer':
        if (state.answer || (state.claim !== null && state.claim.claimId !== command.claimId)) return [];
        return [{ type: 'WidgetTurnAnswered', bodyHash: command.bodyHash, answer: command.answer, answeredAt: now.toISOString() }];
      default: {
        const never: never = command;
        return never;
      }
    }
  },
};

export const widgetTurnStream = (turnId: string) => `workflow-engine-widget-turn-${turnId}`;
