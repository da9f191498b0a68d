/** A workflow run (pinned to its version): started, then its machine state after each turn. */
import { Decider, DomainError, IntegrationEventTypes } from '@svc/decider';
import { RunState } from './engine';

export interface RunHeader {
  organizationId: string;
  environmentId: string;
  runId: string;
  workflowId: string;
  versionId: string;
  /** The widget conversation (null for test runs). */
  conversationId: string | null;
  startedAt: string;
}

export type RunEvent =
  /** A credit (docs/decisions.md, "Billing"): relayed on Topics.workflowEvents as is. */
  | ({ type: typeof IntegrationEventTypes.workflowRunStarted } & RunHeader)
  /** Test runs use no credit. */
  | ({ type: 'TestRunStarted' } & RunHeader)
  /** The patient's reply number `turn` is being answered (claimed before any call is made). */
  | { type: 'TurnStarted'; turn: number; at: string }
  /** `turn`: 0 for the start, else the turn it answers (absent on runs recorded before turns). */
  | { type: 'RunAdvanced'; state: RunState; at: string; turn?: number };

export type RunCommand =
  | { type: 'Start'; header: Omit<RunHeader, 'startedAt'>; test: boolean; state: RunState }
  /** Claims the next turn: only while the run waits for the patient at that turn and no turn is open. */
  | { type: 'StartTurn'; turn: number }
  /** The result of the claimed turn `turn`. */
  | { type: 'Advance'; turn: number; state: RunState };

export interface RunAggregate {
  header: RunHeader | null;
  test: boolean;
  state: RunState | null;
  endedAt: string | null;
  /** Turns answered so far (0 after the start). */
  turn: number;
  /** The turn being answered, and since when; null when none is open. */
  openTurn: { turn: number; at: string } | null;
}

/**
 * A claimed turn whose process died is taken over after this long: longer than any turn can take
 * (at most 30 calls of at most 5 s each), so a turn still working is never answered twice.
 */
export const TURN_TAKEOVER_MS = 5 * 60_000;

export const runStream = (runId: string) => `workflow-engine-run-${runId}`;

export const runDecider: Decider<RunCommand, RunEvent, RunAggregate> = {
  initialState: () => ({ header: null, test: false, state: null, endedAt: null, turn: 0, openTurn: null }),
  evolve(s, e) {
    switch (e.type) {
      case 'workflow_run.started':
      case 'TestRunStarted': {
        const { type, ...header } = e;
        return { ...s, header, test: type === 'TestRunStarted' };
      }
      case 'TurnStarted':
        return { ...s, openTurn: { turn: e.turn, at: e.at } };
      case 'RunAdvanced':
        return {
          ...s,
          state: e.state,
          endedAt: e.state.status === 'ended' ? (s.endedAt ?? e.at) : null,
          turn: e.turn ?? (s.state ? s.turn + 1 : 0),
          openTurn: null,
        };
      default: {
        const never: never = e;
        return never;
      }
    }
  },
  decide(c, s, now) {
    const at = now.toISOString();
    switch (c.type) {
      case 'Start':
        if (s.header) throw new DomainError(409, 'DUPLICATE_KEY', 'The run exists already');
        return [
          c.test ? { type: 'TestRunStarted', ...c.header, startedAt: at } : { type: IntegrationEventTypes.workflowRunStarted, ...c.header, startedAt: at },
          { type: 'RunAdvanced', state: c.state, at, turn: 0 },
        ];
      case 'StartTurn': {
        if (!s.header) throw new DomainError(404, 'NOT_FOUND', 'Run not found');
        const waiting = !s.endedAt && s.state?.status === 'waiting' && c.turn === s.turn + 1;
        const abandoned = s.openTurn && now.getTime() - Date.parse(s.openTurn.at) >= TURN_TAKEOVER_MS;
        if (!waiting || (s.openTurn && !abandoned)) throw new DomainError(409, 'TURN_IN_PROGRESS', 'The run is not waiting at this turn');
        return [{ type: 'TurnStarted', turn: c.turn, at }];
      }
      case 'Advance':
        if (!s.header) throw new DomainError(404, 'NOT_FOUND', 'Run not found');
        if (s.openTurn?.turn !== c.turn) throw new DomainError(409, 'TURN_IN_PROGRESS', 'This turn is not the one open on the run');
        return [{ type: 'RunAdvanced', state: c.state, at, turn: c.turn }];
      default: {
        const never: never = c;
        return never;
      }
    }
  },
};
