import { RecordedEvent } from '@svc/eventstore';
import { Projection, ProjectionTx, cancelTimer, scheduleTimer } from '@svc/read-store';
import { DELIVERY_STREAM_PREFIX, DeliveryEvent } from '../domain/delivery';
import { Keyring } from '@svc/security';
import { DestinationEvent } from '../domain/destination';
import { RunAggregate, RunEvent, runDecider } from '../domain/run';
import { WorkflowEvent, WorkflowState, workflowDecider } from '../domain/workflow';

/** `-v2`: runs are scored by the log position of their start (see `runs`), so an existing read model is rebuilt once. */
export const WORKFLOW_PROJECTION = 'workflow-engine-workflows-v2';

export const WorkflowCollections = {
  /** WorkflowState by workflow id, partition environment id. */
  workflows: 'workflow-engine.workflows',
  /** { workflowId, environmentId } by version id. */
  versions: 'workflow-engine.versions',
  /** DestinationDoc by id, partition environment id. */
  destinations: 'workflow-engine.destinations',
  /**
   * RunDoc by run id, partition workflow id, score the log position of the run's start (newest first
   * reads the partition descending; runs started in the same millisecond keep the log's order).
   * Outcomes only, never values.
   */
  runs: 'workflow-engine.runs',
  /** { runId, workflowId, versionId } by conversation id while a run waits for the patient. */
  pending: 'workflow-engine.pending',
  /** Timer docs { id: requestId, dueAt } of cases and hand-offs not delivered yet (partition DELIVERY_PARTITION). */
  deliveries: 'workflow-engine.deliveries',
} as const;

export const DELIVERY_PARTITION = 'due';
/** The first retry of an undelivered request (the inline attempt comes first). */
export const DELIVERY_RETRY_MS = 15_000;

export interface DestinationDoc {
  id: string;
  environmentId: string;
  stableKey: string;
  name: string;
  baseUrl: string;
  timeoutMs: number;
  /** Header values, AES-GCM encrypted with the environment's key (JSON of the object). */
  headersEncrypted: string;
  headerNames: string[];
  createdAt: string;
}

export interface RunDoc {
  runId: string;
  workflowId: string;
  versionId: string;
  test: boolean;
  conversationId: string | null;
  /** Global position of the start (orders runs that started in the same millisecond). */
  position: number;
  startedAt: string;
  endedAt: string | null;
  outcome: string;
  steps: { stepId: string; type: string; outcome: string }[];
}

/** Workflows, versions, destinations, runs (outcomes only) and pending conversations. */
export function workflowProjection(keyring: Keyring): Projection {
  return {
    name: WORKFLOW_PROJECTION,
    collections: Object.values(WorkflowCollections),
    streamPrefixes: ['workflow-engine-workflow-', 'workflow-engine-destination-', 'workflow-engine-run-', DELIVERY_STREAM_PREFIX],
    async apply(recorded: RecordedEvent, tx: ProjectionTx) {
      const envId = recorded.metadata.environmentId ?? '';
      if (recorded.streamId.startsWith(DELIVERY_STREAM_PREFIX)) {
        const requestId = recorded.streamId.slice(DELIVERY_STREAM_PREFIX.length);
        const event = { type: recorded.type, ...(recorded.data as object) } as DeliveryEvent;
        if (event.type === 'CaseRequested' || event.type === 'HandOffRequested')
          scheduleTimer(tx, WorkflowCollections.deliveries, DELIVERY_PARTITION, { id: requestId, dueAt: Date.parse(event.at) + DELIVERY_RETRY_MS });
        else cancelTimer(tx, WorkflowCollections.deliveries, requestId);
        return;
      }
      if (recorded.streamId.startsWith('workflow-engine-workflow-')) {
        const id = recorded.streamId.slice('workflow-engine-workflow-'.length);
        const event = { type: recorded.type, ...(recorded.data as object) } as WorkflowEvent;
        const prev = (await tx.get<WorkflowState>(WorkflowCollections.workflows, id)) ?? workflowDecider.initialState();
        const next = workflowDecider.evolve(prev, event);
        if (next.deleted) {
          tx.delete(WorkflowCollections.workflows, id);
          for (const v of next.versions) tx.delete(WorkflowCollections.versions, v.id);
          return;
        }
        tx.put(WorkflowCollections.workflows, id, next, { partition: envId, score: Date.parse(next.createdAt) || 0 });
        if (event.type === 'WorkflowCreated' || event.type === 'DraftCreated')
          tx.put(WorkflowCollections.versions, event.versionId, { workflowId: id, environmentId: envId });
        return;
      }
      if (recorded.streamId.startsWith('workflow-engine-destination-')) {
        const event = { type: recorded.type, ...(recorded.data as object) } as DestinationEvent;
        if (event.type === 'DestinationCreated') {
          const doc: DestinationDoc = {
            id: event.destinationId,
            environmentId: event.environmentId,
            stableKey: event.stableKey,
            name: event.name,
            baseUrl: event.baseUrl,
            timeoutMs: event.timeoutMs,
            headersEncrypted: keyring.encrypt(event.environmentId, JSON.stringify(event.headers ?? {})),
            headerNames: Object.keys(event.headers ?? {}),
            createdAt: event.audit.at,
          };
          tx.put(WorkflowCollections.destinations, event.destinationId, doc, { partition: event.environmentId, score: Date.parse(event.audit.at) });
        } else if (event.type === 'DestinationDeleted') {
          tx.delete(WorkflowCollections.destinations, event.destinationId);
        }
        return;
      }
      if (recorded.streamId.startsWith('workflow-engine-run-')) {
        const runId = recorded.streamId.slice('workflow-engine-run-'.length);
        const event = { type: recorded.type, ...(recorded.data as object) } as RunEvent;
        const prev = await tx.get<RunDoc>(WorkflowCollections.runs, runId);
        if (event.type === 'workflow_run.started' || event.type === 'TestRunStarted') {
          const doc: RunDoc = {
            runId,
            workflowId: event.workflowId,
            versionId: event.versionId,
            test: event.type === 'TestRunStarted',
            conversationId: event.conversationId,
            position: recorded.position,
            startedAt: event.startedAt,
            endedAt: null,
            outcome: 'running',
            steps: [],
          };
          tx.put(WorkflowCollections.runs, runId, doc, { partition: event.workflowId, score: recorded.position });
          if (event.conversationId)
            tx.put(WorkflowCollections.pending, event.conversationId, {
              runId,
              workflowId: event.workflowId,
              versionId: event.versionId,
              environmentId: envId,
            });
          return;
        }
        if (!prev || event.type === 'TurnStarted') return;
        const agg: RunAggregate = runDecider.evolve({ ...runDecider.initialState(), test: prev.test, endedAt: prev.endedAt }, event);
        const s = agg.state!;
        const doc: RunDoc = {
          ...prev,
          endedAt: s.status === 'ended' ? (prev.endedAt ?? (event as { at: string }).at) : null,
          outcome: s.status === 'ended' ? (s.outcome ?? 'completed') : 'waiting_for_patient',
          steps: s.steps.map((x) => ({ stepId: x.stepId, type: x.type, outcome: x.outcome })),
        };
        tx.put(WorkflowCollections.runs, runId, doc, { partition: prev.workflowId, score: prev.position });
        if (s.status === 'ended' && prev.conversationId) {
          const pending = await tx.get<{ runId: string }>(WorkflowCollections.pending, prev.conversationId);
          if (pending?.runId === runId) tx.delete(WorkflowCollections.pending, prev.conversationId);
        }
        return;
      }
    },
  };
}
