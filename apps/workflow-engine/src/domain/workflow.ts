/**
 * The workflow aggregate (docs/decisions.md, "Definitions, versions and runs"): a workflow and its versions. Every event carries an
 * explicit `audit` record (who, what, when) besides the metadata actor.
 */
import { Decider, DomainError } from '@svc/decider';
import { Definition } from './definition';

export type VersionState = 'draft' | 'live' | 'retired' | 'discarded';

export interface Audit {
  by: string;
  action: string;
  at: string;
}

export interface VersionRecord {
  id: string;
  workflowId: string;
  number: number;
  state: VersionState;
  revision: number;
  definition: Definition;
  lastTest: { passed: boolean; at: string; revision: number } | null;
  createdAt: string;
  activatedAt: string | null;
}

export interface WorkflowState {
  id: string | null;
  organizationId: string | null;
  environmentId: string | null;
  stableKey: string;
  name: string;
  active: boolean;
  archivedAt: string | null;
  everLive: boolean;
  deleted: boolean;
  liveVersionId: string | null;
  createdAt: string;
  updatedAt: string;
  versions: VersionRecord[];
}

export type WorkflowEvent =
  | {
      type: 'WorkflowCreated';
      workflowId: string;
      organizationId: string;
      environmentId: string;
      stableKey: string;
      name: string;
      versionId: string;
      definition: Definition;
      audit: Audit;
    }
  | { type: 'WorkflowRenamed'; name: string; audit: Audit }
  | { type: 'WorkflowDeleted'; stableKey: string; audit: Audit }
  | { type: 'WorkflowArchived'; retiredVersionId: string | null; audit: Audit }
  | { type: 'WorkflowRestored'; audit: Audit }
  | { type: 'DraftCreated'; versionId: string; number: number; definition: Definition; audit: Audit }
  | { type: 'DraftSaved'; versionId: string; revision: number; definition: Definition; audit: Audit }
  | { type: 'DraftDiscarded'; versionId: string; audit: Audit }
  | { type: 'VersionTested'; versionId: string; revision: number; passed: boolean; runId: string; audit: Audit }
  | { type: 'VersionActivated'; versionId: string; retiredVersionId: string | null; audit: Audit }
  | { type: 'WorkflowDeactivated'; retiredVersionId: string | null; audit: Audit };

export type WorkflowCommand =
  | {
      type: 'Create';
      workflowId: string;
      organizationId: string;
      environmentId: string;
      stableKey: string;
      name: string;
      versionId: string;
      definition: Definition;
      by: string;
    }
  | { type: 'Rename'; name: string; by: string }
  | { type: 'Delete'; by: string }
  | { type: 'Archive'; by: string }
  | { type: 'Restore'; by: string }
  | { type: 'CreateDraft'; versionId: string; by: string }
  | { type: 'SaveDraft'; versionId: string; expectedRevision: number; definition: Definition; by: string }
  | { type: 'DiscardDraft'; versionId: string; by: string }
  | { type: 'RecordTest'; versionId: string; expectedRevision: number; passed: boolean; runId: string; by: string }
  | { type: 'Activate'; versionId: string; expectedRevision: number; destinationsMissing: string[]; by: string }
  | { type: 'Deactivate'; by: string };

export interface Blocker {
  code: 'NOT_A_DRAFT' | 'NO_PASSING_TEST' | 'TEST_OUTDATED' | 'ARCHIVED' | 'DESTINATION_MISSING';
  message: string;
}

export const TEST_VALIDITY_MS = 24 * 60 * 60 * 1000;

export const workflowStream = (id: string) => `workflow-engine-workflow-${id}`;

const initialState = (): WorkflowState => ({
  id: null,
  organizationId: null,
  environmentId: null,
  stableKey: '',
  name: '',
  active: false,
  archivedAt: null,
  everLive: false,
  deleted: false,
  liveVersionId: null,
  createdAt: '',
  updatedAt: '',
  versions: [],
});

const mapVersion = (s: WorkflowState, id: string, f: (v: VersionRecord) => VersionRecord): VersionRecord[] => s.versions.map((v) => (v.id === id ? f(v) : v));
const retire = (s: WorkflowState, id: string | null): VersionRecord[] => (id ? mapVersion(s, id, (v) => ({ ...v, state: 'retired' })) : s.versions);

export const draftOf = (s: WorkflowState): VersionRecord | undefined => s.versions.find((v) => v.state === 'draft');

/** What still blocks switching a version on. */
export function readiness(state: WorkflowState, versionId: string, now: Date, destinationsMissing: string[]): Blocker[] {
  const v = state.versions.find((x) => x.id === versionId);
  const blockers: Blocker[] = [];
  if (state.archivedAt) blockers.push({ code: 'ARCHIVED', message: 'The workflow is archived; restore it first' });
  if (!v || v.state !== 'draft') blockers.push({ code: 'NOT_A_DRAFT', message: 'Only a draft can be switched on' });
  if (v) {
    if (!v.lastTest || !v.lastTest.passed) blockers.push({ code: 'NO_PASSING_TEST', message: 'The version has no passing test' });
    else if (v.lastTest.revision !== v.revision || now.getTime() - Date.parse(v.lastTest.at) > TEST_VALIDITY_MS)
      blockers.push({ code: 'TEST_OUTDATED', message: 'The last passing test is older than 24 hours or of an earlier revision' });
  }
  for (const key of destinationsMissing) blockers.push({ code: 'DESTINATION_MISSING', message: `No destination with stableKey ${key} in this environment` });
  return blockers;
}

function existing(state: WorkflowState): void {
  if (!state.id || state.deleted) throw new DomainError(404, 'NOT_FOUND', 'Workflow not found');
}
function notArchived(state: WorkflowState): void {
  if (state.archivedAt) throw new DomainError(409, 'WORKFLOW_ARCHIVED', 'The workflow is archived; restore it first');
}
function version(state: WorkflowState, id: string): VersionRecord {
  const v = state.versions.find((x) => x.id === id);
  if (!v || v.state === 'discarded') throw new DomainError(404, 'NOT_FOUND', 'Workflow version not found');
  return v;
}

export const workflowDecider: Decider<WorkflowCommand, WorkflowEvent, WorkflowState> = {
  initialState,
  evolve(state, event) {
    const at = event.audit.at;
    switch (event.type) {
      case 'WorkflowCreated':
        return {
          ...initialState(),
          id: event.workflowId,
          organizationId: event.organizationId,
          environmentId: event.environmentId,
          stableKey: event.stableKey,
          name: event.name,
          createdAt: at,
          updatedAt: at,
          versions: [
            {
              id: event.versionId,
              workflowId: event.workflowId,
              number: 1,
              state: 'draft',
              revision: 1,
              definition: event.definition,
              lastTest: null,
              createdAt: at,
              activatedAt: null,
            },
          ],
        };
      case 'WorkflowRenamed':
        return { ...state, name: event.name, updatedAt: at };
      case 'WorkflowDeleted':
        return { ...state, deleted: true, updatedAt: at };
      case 'WorkflowArchived':
        return { ...state, archivedAt: at, active: false, liveVersionId: null, versions: retire(state, event.retiredVersionId), updatedAt: at };
      case 'WorkflowRestored':
        return { ...state, archivedAt: null, updatedAt: at };
      case 'DraftCreated':
        return {
          ...state,
          updatedAt: at,
          versions: [
            ...state.versions,
            {
              id: event.versionId,
              workflowId: state.id!,
              number: event.number,
              state: 'draft',
              revision: 1,
              definition: event.definition,
              lastTest: null,
              createdAt: at,
              activatedAt: null,
            },
          ],
        };
      case 'DraftSaved':
        return {
          ...state,
          updatedAt: at,
          versions: mapVersion(state, event.versionId, (v) => ({ ...v, revision: event.revision, definition: event.definition })),
        };
      case 'DraftDiscarded':
        return { ...state, updatedAt: at, versions: mapVersion(state, event.versionId, (v) => ({ ...v, state: 'discarded' })) };
      case 'VersionTested':
        return { ...state, versions: mapVersion(state, event.versionId, (v) => ({ ...v, lastTest: { passed: event.passed, at, revision: event.revision } })) };
      case 'VersionActivated': {
        const versions = mapVersion({ ...state, versions: retire(state, event.retiredVersionId) }, event.versionId, (v) => ({
          ...v,
          state: 'live',
          activatedAt: at,
        }));
        return { ...state, active: true, everLive: true, liveVersionId: event.versionId, versions, updatedAt: at };
      }
      case 'WorkflowDeactivated':
        return { ...state, active: false, liveVersionId: null, versions: retire(state, event.retiredVersionId), updatedAt: at };
      default: {
        const never: never = event;
        return never;
      }
    }
  },
  decide(command, state, now) {
    const audit = (action: string): Audit => ({ by: command.by, action, at: now.toISOString() });
    switch (command.type) {
      case 'Create': {
        if (state.id) throw new DomainError(409, 'DUPLICATE_KEY', 'The workflow exists already');
        const { type: _t, by: _b, ...rest } = command;
        return [{ type: 'WorkflowCreated', ...rest, audit: audit('create') }];
      }
      case 'Rename':
        existing(state);
        notArchived(state);
        if (state.name === command.name) return [];
        return [{ type: 'WorkflowRenamed', name: command.name, audit: audit('rename') }];
      case 'Delete':
        existing(state);
        if (state.everLive) throw new DomainError(409, 'WORKFLOW_EVER_LIVE', 'A workflow that has been live cannot be deleted; archive it');
        return [{ type: 'WorkflowDeleted', stableKey: state.stableKey, audit: audit('delete') }];
      case 'Archive':
        existing(state);
        if (state.archivedAt) return [];
        return [{ type: 'WorkflowArchived', retiredVersionId: state.liveVersionId, audit: audit('archive') }];
      case 'Restore':
        existing(state);
        if (!state.archivedAt) return [];
        return [{ type: 'WorkflowRestored', audit: audit('restore') }];
      case 'CreateDraft': {
        existing(state);
        notArchived(state);
        if (draftOf(state)) return [];
        const base =
          state.versions.find((v) => v.id === state.liveVersionId) ??
          [...state.versions].reverse().find((v) => v.state !== 'discarded') ??
          state.versions[state.versions.length - 1];
        const number = Math.max(...state.versions.map((v) => v.number)) + 1;
        return [{ type: 'DraftCreated', versionId: command.versionId, number, definition: base.definition, audit: audit('create_draft') }];
      }
      case 'SaveDraft': {
        existing(state);
        const v = version(state, command.versionId);
        notArchived(state);
        if (v.state !== 'draft') throw new DomainError(409, 'VERSION_LOCKED', `Version ${v.number} is ${v.state} and can no longer change; create a draft`);
        if (command.expectedRevision !== v.revision) throw new DomainError(409, 'STALE_REVISION', `The draft is at revision ${v.revision}`);
        return [{ type: 'DraftSaved', versionId: v.id, revision: v.revision + 1, definition: command.definition, audit: audit('save_draft') }];
      }
      case 'DiscardDraft': {
        existing(state);
        const v = version(state, command.versionId);
        notArchived(state);
        if (v.state !== 'draft') throw new DomainError(409, 'VERSION_LOCKED', `Version ${v.number} is ${v.state}; only a draft can be discarded`);
        if (!state.versions.some((x) => x.state === 'live' || x.state === 'retired'))
          throw new DomainError(409, 'VERSION_LOCKED', "A workflow's only draft is removed by deleting the workflow");
        return [{ type: 'DraftDiscarded', versionId: v.id, audit: audit('discard_draft') }];
      }
      case 'RecordTest': {
        existing(state);
        const v = version(state, command.versionId);
        if (command.expectedRevision !== v.revision) throw new DomainError(409, 'STALE_REVISION', `The version is at revision ${v.revision}`);
        return [{ type: 'VersionTested', versionId: v.id, revision: v.revision, passed: command.passed, runId: command.runId, audit: audit('test') }];
      }
      case 'Activate': {
        existing(state);
        const v = version(state, command.versionId);
        notArchived(state);
        if (v.state === 'draft' && command.expectedRevision !== v.revision)
          throw new DomainError(409, 'STALE_REVISION', `The draft is at revision ${v.revision}`);
        const blockers = readiness(state, v.id, now, command.destinationsMissing);
        if (blockers.length)
          throw new DomainError(
            400,
            'VALIDATION_FAILED',
            'The version is not ready to switch on',
            blockers.map((b) => ({ path: `versions.${v.id}`, message: b.message, code: b.code })),
          );
        return [{ type: 'VersionActivated', versionId: v.id, retiredVersionId: state.liveVersionId, audit: audit('activate') }];
      }
      case 'Deactivate':
        existing(state);
        if (!state.active) return [];
        return [{ type: 'WorkflowDeactivated', retiredVersionId: state.liveVersionId, audit: audit('deactivate') }];
      default: {
        const never: never = command;
        return never;
      }
    }
  },
};

// ---------- stableKey uniqueness: first writer wins ----------

/**
 * How the service found the current holder's own stream when it asked to claim: `deleted` (its
 * delete was recorded; the process died before the release) or `missing` (no stream: the process
 * died between the claim and the create). A `missing` holder is taken over only after
 * KEY_CLAIM_GRACE_MS, so a create still in flight is never overtaken.
 */
export interface HolderCheck {
  holder: string;
  found: 'missing' | 'deleted';
}

export const KEY_CLAIM_GRACE_MS = 60_000;

export type KeyEvent = { type: 'KeyClaimed'; workflowId: string; at: string; takenOverFrom?: string } | { type: 'KeyReleased'; workflowId: string; at: string };
export type KeyCommand = { type: 'Claim'; workflowId: string; holderCheck?: HolderCheck | null } | { type: 'Release'; workflowId: string };

export const workflowKeyStream = (envId: string, stableKey: string) => `workflow-engine-key-${envId}-${stableKey}`;

export const workflowKeyDecider: Decider<KeyCommand, KeyEvent, { holder: string | null; claimedAt: string | null }> = {
  initialState: () => ({ holder: null, claimedAt: null }),
  evolve: (state, event) => {
    switch (event.type) {
      case 'KeyClaimed':
        return { holder: event.workflowId, claimedAt: event.at };
      case 'KeyReleased':
        return { holder: null, claimedAt: null };
      default: {
        const never: never = event;
        return never;
      }
    }
  },
  decide(command, state, now) {
    switch (command.type) {
      case 'Claim': {
        if (state.holder === command.workflowId) return [];
        if (state.holder) {
          const check = command.holderCheck;
          const stale =
            !!check && check.holder === state.holder && (check.found === 'deleted' || now.getTime() - Date.parse(state.claimedAt ?? '') >= KEY_CLAIM_GRACE_MS);
          if (!stale) throw new DomainError(409, 'DUPLICATE_KEY', 'A resource with this stableKey exists in the environment');
          return [{ type: 'KeyClaimed', workflowId: command.workflowId, at: now.toISOString(), takenOverFrom: state.holder }];
        }
        return [{ type: 'KeyClaimed', workflowId: command.workflowId, at: now.toISOString() }];
      }
      case 'Release':
        if (state.holder !== command.workflowId) return [];
        return [{ type: 'KeyReleased', workflowId: command.workflowId, at: now.toISOString() }];
      default: {
        const never: never = command;
        return never;
      }
    }
  },
};
