import { createHash, randomUUID } from 'node:crypto';
import { Inject, Injectable } from '@nestjs/common';
import { CLOCK, Clock } from '@svc/clock';
import { CommandContext, CommandHandler, DomainError, EVENT_STORE, EventStore, NewEvent, RecordedEvent, WrongExpectedRevisionError } from '@svc/eventstore';
import { ApiError } from '@svc/http';
import { PROJECTIONS } from '@svc/platform';
import { ProjectionRunner, READ_STORE, ReadStore } from '@svc/read-store';
import { KEYRING, Keyring } from '@svc/security';
import { PATHWAY_PROJECTION, PathwayCollections, ProtocolDoc } from '../adapters/projections/pathway.projection';
import { LifecycleType, PatientState, Profile, ProtocolResolution, patientDecider } from '../domain/patient';
import { ProtocolDefinition, ProtocolView, protocolDecider, protocolProblems } from '../domain/protocol';
import { eventIdStream, identityStream, patientStream, programKeyStream, protocolStream } from '../domain/streams';

export interface LifecycleInput extends Profile {
  eventId: string;
  type: LifecycleType;
  externalPatientId: string;
  protocolId?: string;
  programKey?: string;
  checkInCadenceDays?: number;
}
export interface Tenancy {
  organizationId: string;
  environmentId: string;
}

/** JSON with keys sorted at every level: the body hash does not depend on key order. */
export function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (value && typeof value === 'object') {
    const entries = Object.entries(value as Record<string, unknown>)
      .filter(([, v]) => v !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonicalJson(v)}`).join(',')}}`;
  }
  return JSON.stringify(value);
}

/** Patient lifecycle and protocols: every write through a decider, first-writer-wins claims for ids. */
@Injectable()
export class PathwayService {
  readonly patients: CommandHandler<Parameters<typeof patientDecider.decide>[0], Parameters<typeof patientDecider.evolve>[1], PatientState>;
  readonly protocols: CommandHandler<Parameters<typeof protocolDecider.decide>[0], Parameters<typeof protocolDecider.evolve>[1], ReturnType<typeof protocolDecider.initialState>>;

  constructor(
    @Inject(EVENT_STORE) private readonly store: EventStore,
    @Inject(CLOCK) private readonly clock: Clock,
    @Inject(PROJECTIONS) private readonly projections: ProjectionRunner,
    @Inject(READ_STORE) private readonly readStore: ReadStore,
    @Inject(KEYRING) private readonly keyring: Keyring,
  ) {
    const now = () => clock.now();
    this.patients = new CommandHandler(store, patientDecider, now, { maxRetries: 50 });
    this.protocols = new CommandHandler(store, protocolDecider, now);
  }

  async applied(position: number): Promise<void> {
    if (position > 0) await this.projections.waitFor([PATHWAY_PROJECTION], position);
  }

  /**
   * Appends the first event of a claim stream with `no_stream`. Returns the stream's first event:
   * ours when we won, the earlier writer's otherwise.
   */
  async claim(streamId: string, type: string, data: Record<string, unknown>, ctx: CommandContext): Promise<{ won: boolean; first: RecordedEvent | { type: string; data: unknown } }> {
    const existing = await this.store.readStream(streamId);
    if (existing.length) return { won: false, first: existing[0] };
    const event: NewEvent = {
      type,
      data,
      metadata: {
        eventId: randomUUID(),
        correlationId: ctx.correlationId ?? randomUUID(),
        causationId: ctx.causationId ?? null,
        organizationId: ctx.organizationId ?? null,
        environmentId: ctx.environmentId ?? null,
        actor: ctx.actor,
        recordedAt: this.clock.now().toISOString(),
      },
    };
    try {
      await this.store.append(streamId, [event], 'no_stream');
      return { won: true, first: event };
    } catch (err) {
      if (!(err instanceof WrongExpectedRevisionError)) throw err;
      const after = await this.store.readStream(streamId);
      return { won: false, first: after[0] };
    }
  }

  externalIdHash(environmentId: string, externalPatientId: string): string {
    return this.keyring.keyedHash(environmentId, externalPatientId);
  }

  /** The patientId of an external ID in an environment; created (first writer wins) when asked. */
  async patientIdFor(tenancy: Tenancy, externalPatientId: string, create: boolean, actor = 'system'): Promise<string | null> {
    const stream = identityStream(tenancy.environmentId, this.externalIdHash(tenancy.environmentId, externalPatientId));
    if (!create) {
      const events = await this.store.readStream(stream);
      return events.length ? (events[0].data as { patientId: string }).patientId : null;
    }
    const r = await this.claim(stream, 'PatientIdentityAssigned', { patientId: randomUUID() }, { actor, ...tenancy });
    return (r.first.data as { patientId: string }).patientId;
  }

  /** POST /client/patient-events (decisions 4). */
  async acceptLifecycleEvent(input: LifecycleInput, tenancy: Tenancy, actor: string): Promise<{ accepted: true; duplicate: boolean; patientId: string }> {
    const bodyHash = createHash('sha256').update(canonicalJson(input)).digest('hex');
    const ctx = { actor, ...tenancy };
    // 1. Idempotency of the eventId in the environment: first writer wins, its body hash decides.
    const claimed = await this.claim(eventIdStream(tenancy.environmentId, input.eventId), 'EventIdClaimed', { bodyHash }, ctx);
    if (!claimed.won && (claimed.first.data as { bodyHash: string }).bodyHash !== bodyHash) {
      throw new DomainError(409, 'IDEMPOTENCY_KEY_REUSED', 'This eventId was already used with a different body');
    }
    // 2. Identity: one patientId per (environment, keyed hash of the external ID).
    const patientId = await this.patientIdFor(tenancy, input.externalPatientId, input.type === 'patient.created', actor);
    if (!patientId) throw new DomainError(409, 'OUT_OF_ORDER', 'The patient has no active pathway');
    // 3. The patient stream decides (it also keeps the eventIds it applied, for replays).
    const protocol = input.type === 'patient.created' ? await this.resolveProtocol(tenancy.environmentId, input) : undefined;
    const profile: Profile = { firstName: input.firstName, lastName: input.lastName, dateOfBirth: input.dateOfBirth, phone: input.phone, email: input.email };
    const r = await this.patients.handle(
      patientStream(patientId),
      {
        type: 'ApplyLifecycleEvent',
        eventId: input.eventId,
        bodyHash,
        lifecycle: input.type,
        patientId,
        organizationId: tenancy.organizationId,
        environmentId: tenancy.environmentId,
        profile,
        checkInCadenceDays: input.checkInCadenceDays,
        protocol,
        firstCheckInId: randomUUID(),
      },
      { ...ctx, correlationId: input.eventId },
    );
    await this.applied(r.position);
    return { accepted: true, duplicate: r.newEvents.length === 0, patientId };
  }

  async resolveProtocol(environmentId: string, input: { protocolId?: string; programKey?: string }): Promise<ProtocolResolution> {
    const all = await this.readStore.list<ProtocolDoc>(PathwayCollections.protocols, environmentId);
    const notFound: ProtocolResolution = { ok: false, status: 404, code: 'PROTOCOL_NOT_FOUND', message: 'No active protocol matches' };
    let found: ProtocolDoc | undefined;
    if (input.protocolId) found = all.find((p) => p.id === input.protocolId && p.active);
    else if (input.programKey) found = all.find((p) => p.programKey === input.programKey && p.active);
    else {
      const active = all.filter((p) => p.active);
      if (active.length > 1) return { ok: false, status: 400, code: 'PROTOCOL_AMBIGUOUS', message: 'Several protocols are active: name one with programKey or protocolId' };
      found = active[0];
    }
    return found ? { ok: true, protocolId: found.id, defaultCadenceDays: found.defaultCadenceDays } : notFound;
  }

  // ---- protocols (staff) ----

  view(doc: ProtocolDoc | (ProtocolView & { organizationId?: string; environmentId?: string })): ProtocolView {
    return { id: doc.id, programKey: doc.programKey, name: doc.name, defaultCadenceDays: doc.defaultCadenceDays, questions: doc.questions, redFlags: doc.redFlags, active: doc.active, createdAt: doc.createdAt };
  }

  async createProtocol(tenancy: Tenancy, def: ProtocolDefinition, actor: string): Promise<ProtocolView> {
    const problems = protocolProblems(def);
    if (problems.length) throw ApiError.validation(problems);
    const ctx = { actor, ...tenancy };
    const protocolId = randomUUID();
    const claimed = await this.claim(programKeyStream(tenancy.environmentId, def.programKey), 'ProgramKeyClaimed', { protocolId, programKey: def.programKey }, ctx);
    let id: string = protocolId;
    if (!claimed.won) {
      // A claim whose protocol was never written (a crash in between) is taken over; otherwise the key is taken.
      // Concurrent takers race on the protocol stream itself (no_stream): CreateProtocol refuses the losers with DUPLICATE_KEY.
      id = (claimed.first.data as { protocolId: string }).protocolId;
      if ((await this.store.readStream(protocolStream(id))).length) throw new DomainError(409, 'DUPLICATE_KEY', `A protocol with programKey ${def.programKey} exists in this environment`);
    }
    const r = await this.protocols.handle(protocolStream(id), { type: 'CreateProtocol', protocolId: id, ...tenancy, ...def }, ctx);
    await this.applied(r.position);
    return this.view(r.state.protocol!);
  }

  async protocolDoc(environmentId: string, protocolId: string): Promise<ProtocolDoc> {
    const doc = await this.readStore.get<ProtocolDoc>(PathwayCollections.protocols, protocolId);
    if (!doc || doc.environmentId !== environmentId) throw ApiError.notFound('Protocol');
    return doc;
  }

  async setProtocolActive(tenancy: Tenancy, protocolId: string, active: boolean, actor: string): Promise<ProtocolView> {
    await this.protocolDoc(tenancy.environmentId, protocolId);
    const r = await this.protocols.handle(protocolStream(protocolId), { type: active ? 'ActivateProtocol' : 'DeactivateProtocol' }, { actor, ...tenancy });
    await this.applied(r.position);
    return this.view(r.state.protocol!);
  }

  async listProtocols(environmentId: string): Promise<ProtocolView[]> {
    return (await this.readStore.list<ProtocolDoc>(PathwayCollections.protocols, environmentId)).map((d) => this.view(d));
  }

  // ---- bus queries ----

  async findPatient(environmentId: string, externalPatientId: string): Promise<string | null> {
    const patientId = await this.patientIdFor({ environmentId, organizationId: '' }, externalPatientId, false);
    if (!patientId) return null;
    const { state } = await this.patients.load(patientStream(patientId));
    // Enrolled patients only: a cancelled (or never enrolled) patient is not found.
    return state.status === 'active' && state.environmentId === environmentId ? patientId : null;
  }

  async patientContact(environmentId: string, patientId: string): Promise<string | null> {
    const { state } = await this.patients.load(patientStream(patientId));
    if (state.status === 'none' || state.environmentId !== environmentId) return null;
    return state.profile.email ?? null;
  }
}
