/** A workflow run (pinned to its version): started, then its machine state after each turn. */
import { Decider, DomainError } from '@svc/eventstore';
import { IntegrationEventTypes } from '@svc/messaging';
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
  /** A credit (decisions 9): relayed on Topics.workflowEvents as is. */
  | ({ type: typeof IntegrationEventTypes.workflowRunStarted } & RunHeader)
  /** Test runs use no credit. */
  | ({ type: 'TestRunStarted' } & RunHeader)
  | { type: 'RunAdvanced'; state: RunState; at: string };

export type RunCommand = { type: 'Start'; header: Omit<RunHeader, 'startedAt'>; test: boolean; state: RunState } | { type: 'Advance'; state: RunState };

export interface RunAggregate {
  header: RunHeader | null;
  test: boolean;
  state: RunState | null;
  endedAt: string | null;
}

export const runStream = (runId: string) => `workflow-engine-run-${runId}`;

export const runDecider: Decider<RunCommand, RunEvent, RunAggregate> = {
  initialState: () => ({ header: null, test: false, state: null, endedAt: null }),
  evolve(s, e) {
    switch (e.type) {
      case 'workflow_run.started':
      case 'TestRunStarted': {
        const { type, ...header } = e;
        return { ...s, header, test: type === 'TestRunStarted' };
      }
      case 'RunAdvanced':
        return { ...s, state: e.state, endedAt: e.state.status === 'ended' ? (s.endedAt ?? e.at) : null };
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
          { type: 'RunAdvanced', state: c.state, at },
        ];
      case 'Advance':
        if (!s.header) throw new DomainError(404, 'NOT_FOUND', 'Run not found');
        if (s.endedAt) return [];
        return [{ type: 'RunAdvanced', state: c.state, at }];
      default: {
        const never: never = c;
        return never;
      }
    }
  },
};
