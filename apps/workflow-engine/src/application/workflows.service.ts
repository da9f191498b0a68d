import { randomUUID } from 'node:crypto';
import { Inject, Injectable } from '@nestjs/common';
import { CLOCK, Clock } from '@svc/clock';
import { CommandHandler, EVENT_STORE, EventStore, toDomainEvent } from '@svc/eventstore';
import { ApiError, ListCursors, getLogger } from '@svc/http';
import { PROJECTIONS } from '@svc/platform';
import { ProjectionRunner, READ_STORE, ReadStore } from '@svc/read-store';
import { KEYRING, Keyring } from '@svc/security';
import { Definition, validateDefinition } from '../domain/definition';
import { destinationDecider, destinationKeyStream, destinationStream } from '../domain/destination';
import {
  Blocker,
  HolderCheck,
  VersionRecord,
  WorkflowCommand,
  WorkflowState,
  readiness,
  workflowDecider,
  workflowKeyDecider,
  workflowKeyStream,
  workflowStream,
} from '../domain/workflow';
import { DestinationDoc, RunDoc, WORKFLOW_PROJECTION, WorkflowCollections } from '../read-model/workflow.projection';
import { SwitchOffGate } from './switch-off-gate';

export interface Actor {
  sub: string;
}
export interface Scope {
  organizationId: string;
  environmentId: string;
}

/** The workflow record of docs/decisions.md, "Definitions, versions and runs". */
export function workflowView(s: WorkflowState) {
  const draft = s.versions.find((v) => v.state === 'draft');
  const category = (s.versions.find((v) => v.id === s.liveVersionId) ?? draft ?? s.versions[s.versions.length - 1])?.definition.category;
  return {
    id: s.id!,
    stableKey: s.stableKey,
    name: s.name,
    category,
    active: s.active,
    archivedAt: s.archivedAt,
    everLive: s.everLive,
    liveVersionId: s.liveVersionId,
    draftVersionId: draft?.id ?? null,
    createdAt: s.createdAt,
    updatedAt: s.updatedAt,
    versions: s.versions.filter((v) => v.state !== 'discarded').map(versionView),
  };
}

export function versionView(v: VersionRecord) {
  return {
    id: v.id,
    workflowId: v.workflowId,
    number: v.number,
    state: v.state,
    revision: v.revision,
    definition: v.definition,
    lastTest: v.lastTest,
    createdAt: v.createdAt,
    activatedAt: v.activatedAt,
  };
}

/** Workflow lifecycle and destinations: every write through a decider, then read-your-writes. */
@Injectable()
export class WorkflowsService {
  readonly workflows: CommandHandler<WorkflowCommand, Parameters<typeof workflowDecider.evolve>[1], WorkflowState>;
  private readonly keys;
  private readonly destinations;
  private readonly log = getLogger();

  constructor(
    @Inject(EVENT_STORE) private readonly store: EventStore,
    @Inject(CLOCK) private readonly clock: Clock,
    @Inject(PROJECTIONS) private readonly projections: ProjectionRunner,
    @Inject(READ_STORE) private readonly readStore: ReadStore,
    @Inject(KEYRING) private readonly keyring: Keyring,
    private readonly gate: SwitchOffGate,
  ) {
    const now = () => clock.now();
    this.workflows = new CommandHandler(store, workflowDecider, now);
    this.keys = new CommandHandler(store, workflowKeyDecider, now);
    this.destinations = new CommandHandler(store, destinationDecider, now);
  }

  async applied(position: number): Promise<void> {
    if (position > 0) await this.projections.waitFor([WORKFLOW_PROJECTION], position);
  }

  private ctx(scope: Scope, actor: Actor) {
    return { actor: `staff:${actor.sub}`, organizationId: scope.organizationId, environmentId: scope.environmentId };
  }

  static checkDefinition(definition: unknown): Definition {
    const details = validateDefinition(definition);
    if (details.length) throw ApiError.validation(details, 'The workflow definition is not valid');
    return definition as Definition;
  }

  // ---------- reads ----------

  async list(envId: string) {
    const docs = await this.readStore.list<WorkflowState>(WorkflowCollections.workflows, envId);
    return docs.map(workflowView);
  }

  async state(envId: string, workflowId: string): Promise<WorkflowState> {
    const s = await this.readStore.get<WorkflowState>(WorkflowCollections.workflows, workflowId);
    if (!s || s.environmentId !== envId || s.deleted) throw ApiError.notFound('Workflow');
    return s;
  }

  async byVersion(envId: string, versionId: string): Promise<{ state: WorkflowState; version: VersionRecord }> {
    const ref = await this.readStore.get<{ workflowId: string; environmentId: string }>(WorkflowCollections.versions, versionId);
    if (!ref || ref.environmentId !== envId) throw ApiError.notFound('Workflow version');
    const state = await this.state(envId, ref.workflowId);
    const version = state.versions.find((v) => v.id === versionId);
    if (!version || version.state === 'discarded') throw ApiError.notFound('Workflow version');
    return { state, version };
  }

  async liveWorkflows(envId: string): Promise<WorkflowState[]> {
    const docs = await this.readStore.list<WorkflowState>(WorkflowCollections.workflows, envId);
    return docs.filter((d) => d.active && !d.archivedAt && d.liveVersionId);
  }

  // ---------- writes ----------

  private async exec(scope: Scope, actor: Actor, workflowId: string, command: WorkflowCommand) {
    const r = await this.workflows.handle(workflowStream(workflowId), command, this.ctx(scope, actor));
    await this.applied(r.position);
    return r;
  }

  /** Claims a stableKey, telling the decider what the current holder's own stream shows (S2). */
  private async claimKey(
    scope: Scope,
    actor: Actor,
    keyStream: string,
    id: string,
    holderFound: (holder: string) => Promise<'missing' | 'deleted' | null>,
  ): Promise<void> {
    const { state } = await this.keys.load(keyStream);
    let holderCheck: HolderCheck | null = null;
    if (state.holder && state.holder !== id) {
      const found = await holderFound(state.holder);
      if (found) holderCheck = { holder: state.holder, found };
    }
    await this.keys.handle(keyStream, { type: 'Claim', workflowId: id, holderCheck }, this.ctx(scope, actor));
  }

  async create(scope: Scope, body: { stableKey: string; name: string; definition: unknown }, actor: Actor) {
    const definition = WorkflowsService.checkDefinition(body.definition);
    const workflowId = randomUUID();
    // First writer wins on the key stream; a concurrent or later duplicate gets 409 DUPLICATE_KEY
    // (unless the holder's own stream shows it never got created or was deleted: then taken over).
    await this.claimKey(scope, actor, workflowKeyStream(scope.environmentId, body.stableKey), workflowId, async (holder) => {
      const { state } = await this.workflows.load(workflowStream(holder));
      return !state.id ? 'missing' : state.deleted ? 'deleted' : null;
    });
    const r = await this.exec(scope, actor, workflowId, {
      type: 'Create',
      workflowId,
      organizationId: scope.organizationId,
      environmentId: scope.environmentId,
      stableKey: body.stableKey,
      name: body.name,
      versionId: randomUUID(),
      definition,
      by: actor.sub,
    });
    return workflowView(r.state);
  }

  async rename(scope: Scope, id: string, name: string, actor: Actor) {
    await this.state(scope.environmentId, id);
    return workflowView((await this.exec(scope, actor, id, { type: 'Rename', name, by: actor.sub })).state);
  }

  async remove(scope: Scope, id: string, actor: Actor) {
    const s = await this.state(scope.environmentId, id);
    await this.exec(scope, actor, id, { type: 'Delete', by: actor.sub });
    await this.keys.handle(workflowKeyStream(scope.environmentId, s.stableKey), { type: 'Release', workflowId: id }, this.ctx(scope, actor));
  }

  async archive(scope: Scope, id: string, actor: Actor) {
    await this.state(scope.environmentId, id);
    const r = await this.exec(scope, actor, id, { type: 'Archive', by: actor.sub });
    await this.switchedOff(id);
    return workflowView(r.state);
  }

  async restore(scope: Scope, id: string, actor: Actor) {
    await this.state(scope.environmentId, id);
    return workflowView((await this.exec(scope, actor, id, { type: 'Restore', by: actor.sub })).state);
  }

  async deactivate(scope: Scope, id: string, actor: Actor) {
    await this.state(scope.environmentId, id);
    const r = await this.exec(scope, actor, id, { type: 'Deactivate', by: actor.sub });
    await this.switchedOff(id);
    return workflowView(r.state);
  }

  /**
   * After a switch-off (or archive) is stored: waits for the Destination calls of its runs already
   * under way in this process (at most SWITCH_OFF_DRAIN_MS), so that no call is sent after the 200;
   * calls checked after the switch-off's event are not made (SwitchOffGate). Also when the
   * command changed nothing (already off): an earlier switch-off's calls may still be under way.
   */
  private async switchedOff(workflowId: string): Promise<void> {
    if (!(await this.gate.drain(workflowId)))
      this.log.warn({ workflowId, calls: this.gate.count(workflowId) }, 'workflow switch-off: calls still under way after the drain limit');
  }

  /**
   * Whether the workflow is live (switched on, not archived), read from its stream (not the read
   * model): a switch-off already stored is seen, in any process. Incremental: the state folded at
   * the last look is kept (at most LIVENESS_CACHE workflows) and only the events recorded since are
   * read, so a long-edited workflow (drafts, tests) costs a short read per Destination call.
   */
  async isLive(workflowId: string): Promise<boolean> {
    const known = this.liveness.get(workflowId);
    let state = known?.state ?? workflowDecider.initialState();
    let revision = known?.revision ?? -1;
    for (const e of await this.store.readStream(workflowStream(workflowId), revision + 1)) {
      state = workflowDecider.evolve(state, toDomainEvent(e));
      revision = e.revision;
    }
    if (revision >= 0) {
      this.liveness.delete(workflowId); // re-inserted last: oldest first
      this.liveness.set(workflowId, { state, revision });
      if (this.liveness.size > WorkflowsService.LIVENESS_CACHE) this.liveness.delete(this.liveness.keys().next().value as string);
    }
    return !!state.id && state.active && !state.archivedAt && !state.deleted;
  }

  private static readonly LIVENESS_CACHE = 1000;
  private readonly liveness = new Map<string, { state: WorkflowState; revision: number }>();

  async createDraft(scope: Scope, id: string, actor: Actor) {
    await this.state(scope.environmentId, id);
    const r = await this.exec(scope, actor, id, { type: 'CreateDraft', versionId: randomUUID(), by: actor.sub });
    return versionView(r.state.versions.find((v) => v.state === 'draft')!);
  }

  async saveDraft(scope: Scope, versionId: string, body: { expectedRevision: number; definition: unknown }, actor: Actor) {
    const { state } = await this.byVersion(scope.environmentId, versionId);
    const definition = WorkflowsService.checkDefinition(body.definition);
    const r = await this.exec(scope, actor, state.id!, { type: 'SaveDraft', versionId, expectedRevision: body.expectedRevision, definition, by: actor.sub });
    return workflowView(r.state);
  }

  async discardDraft(scope: Scope, versionId: string, actor: Actor) {
    const { state } = await this.byVersion(scope.environmentId, versionId);
    await this.exec(scope, actor, state.id!, { type: 'DiscardDraft', versionId, by: actor.sub });
  }

  async missingDestinations(envId: string, version: VersionRecord): Promise<string[]> {
    const have = new Set((await this.readStore.list<DestinationDoc>(WorkflowCollections.destinations, envId)).map((d) => d.stableKey));
    const used = [...new Set(version.definition.steps.flatMap((s) => (s.type === 'call_api' ? [s.destinationStableKey] : [])))];
    return used.filter((k) => !have.has(k));
  }

  async readiness(envId: string, versionId: string): Promise<{ ready: boolean; blockers: Blocker[] }> {
    const { state, version } = await this.byVersion(envId, versionId);
    const blockers = readiness(state, versionId, this.clock.now(), await this.missingDestinations(envId, version));
    return { ready: blockers.length === 0, blockers };
  }

  async activate(scope: Scope, versionId: string, expectedRevision: number, actor: Actor) {
    const { state, version } = await this.byVersion(scope.environmentId, versionId);
    const destinationsMissing = await this.missingDestinations(scope.environmentId, version);
    const r = await this.exec(scope, actor, state.id!, { type: 'Activate', versionId, expectedRevision, destinationsMissing, by: actor.sub });
    return workflowView(r.state);
  }

  private cursorCodec: ListCursors | undefined;
  private get cursors(): ListCursors {
    return (this.cursorCodec ??= new ListCursors(this.keyring));
  }

  /**
   * One page of the workflow's runs, newest first (by the log position of each run's start), at most
   * `limit`, after the position sealed in `cursor`; read as a range of the workflow's partition.
   * `nextCursor` is null at the end. Outcomes only, never values.
   */
  async runs(envId: string, workflowId: string, page: { limit: number; cursor?: unknown }) {
    const scope = `workflow-runs|${envId}|${workflowId}`;
    const after = this.cursors.open(page.cursor, scope);
    await this.state(envId, workflowId);
    const read = await this.readStore.page<RunDoc>(WorkflowCollections.runs, workflowId, { order: 'desc', limit: page.limit, after });
    const last = read.entries.at(-1);
    const runs = read.entries.map(({ doc: d }) => ({
      runId: d.runId,
      versionId: d.versionId,
      test: d.test,
      startedAt: d.startedAt,
      endedAt: d.endedAt,
      outcome: d.outcome,
      steps: d.steps.map((s) => ({ stepId: s.stepId, type: s.type, outcome: s.outcome })),
    }));
    return { runs, nextCursor: read.hasMore && last ? this.cursors.seal(scope, { score: last.score, key: last.key }) : null };
  }

  // ---------- destinations ----------

  async createDestination(
    scope: Scope,
    body: { stableKey: string; name: string; baseUrl: string; headers?: Record<string, string>; timeoutMs?: number },
    actor: Actor,
  ) {
    const destinationId = randomUUID();
    await this.claimKey(scope, actor, destinationKeyStream(scope.environmentId, body.stableKey), destinationId, async (holder) => {
      const { state } = await this.destinations.load(destinationStream(holder));
      return !state.id ? 'missing' : state.deleted ? 'deleted' : null;
    });
    const r = await this.destinations.handle(
      destinationStream(destinationId),
      {
        type: 'Create',
        destinationId,
        organizationId: scope.organizationId,
        environmentId: scope.environmentId,
        stableKey: body.stableKey,
        name: body.name,
        baseUrl: body.baseUrl,
        headers: body.headers ?? {},
        timeoutMs: body.timeoutMs ?? 5000,
        by: actor.sub,
      },
      this.ctx(scope, actor),
    );
    await this.applied(r.position);
    const doc = await this.readStore.get<DestinationDoc>(WorkflowCollections.destinations, destinationId);
    return destinationView(doc!);
  }

  async listDestinations(envId: string) {
    return (await this.readStore.list<DestinationDoc>(WorkflowCollections.destinations, envId)).map(destinationView);
  }

  async deleteDestination(scope: Scope, id: string, actor: Actor) {
    const doc = await this.readStore.get<DestinationDoc>(WorkflowCollections.destinations, id);
    if (!doc || doc.environmentId !== scope.environmentId) throw ApiError.notFound('Destination');
    const r = await this.destinations.handle(
      destinationStream(id),
      { type: 'Delete', environmentId: scope.environmentId, by: actor.sub },
      this.ctx(scope, actor),
    );
    await this.keys.handle(destinationKeyStream(scope.environmentId, doc.stableKey), { type: 'Release', workflowId: id }, this.ctx(scope, actor));
    await this.applied(r.position);
  }

  /** A destination with its header values decrypted (for calls only; never returned or logged). */
  async destinationForCall(envId: string, stableKey: string): Promise<(DestinationDoc & { headers: Record<string, string> }) | null> {
    const doc = (await this.readStore.list<DestinationDoc>(WorkflowCollections.destinations, envId)).find((d) => d.stableKey === stableKey);
    if (!doc) return null;
    return { ...doc, headers: JSON.parse(this.keyring.decrypt(envId, doc.headersEncrypted)) as Record<string, string> };
  }
}

/** Header values are never returned: only their names. */
export function destinationView(d: DestinationDoc) {
  return { id: d.id, stableKey: d.stableKey, name: d.name, baseUrl: d.baseUrl, timeoutMs: d.timeoutMs, headerNames: d.headerNames, createdAt: d.createdAt };
}
