import { randomUUID } from 'node:crypto';
import { Inject, Injectable } from '@nestjs/common';
import { CLOCK, Clock } from '@svc/clock';
import { CommandContext, CommandHandler, DomainError, EVENT_STORE, EventStore } from '@svc/eventstore';
import { ApiError } from '@svc/http';
import { PROJECTIONS } from '@svc/platform';
import { ProjectionRunner, READ_STORE, ReadStore } from '@svc/read-store';
import { KEYRING, Keyring, bodyHash } from '@svc/security';
import { PATHWAY_PROJECTION, PathwayCollections, ProtocolDoc } from '../read-model/pathway.projection';
import { ClaimCommand, ClaimEvent, ClaimState, Claimed, claimDecider } from '../domain/claim';
import { LifecycleType, PatientCommand, PatientState, Profile, ProtocolResolution, patientDecider } from '../domain/patient';
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

/** Patient lifecycle and protocols: every write through a decider, first-writer-wins claims for ids. */
@Injectable()
export class PathwayService {
  readonly patients: CommandHandler<Parameters<typeof patientDecider.decide>[0], Parameters<typeof patientDecider.evolve>[1], PatientState>;
  readonly claims: CommandHandler<ClaimCommand, ClaimEvent, ClaimState>;
  readonly protocols: CommandHandler<
    Parameters<typeof protocolDecider.decide>[0],
    Parameters<typeof protocolDecider.evolve>[1],
    ReturnType<typeof protocolDecider.initialState>
  >;

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
    this.claims = new CommandHandler(store, claimDecider, now, { maxRetries: 50 });
  }

  async applied(position: number): Promise<void> {
    if (position > 0) await this.projections.waitFor([PATHWAY_PROJECTION], position);
  }

  /**
   * First-writer-wins claim (claim decider through the CommandHandler): returns the holder, ours
   * when we won, the earlier writer's otherwise.
   */
  async claim<C extends Claimed>(streamId: string, claim: C, ctx: CommandContext): Promise<{ won: boolean; holder: C }> {
    const r = await this.claims.handle(streamId, { type: 'Claim', claim }, ctx);
    return { won: r.newEvents.length > 0, holder: r.state.holder as C };
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
    const r = await this.claim(stream, { type: 'PatientIdentityAssigned', patientId: randomUUID() }, { actor, ...tenancy });
    return r.holder.patientId;
  }

  /** POST /client/patient-events (docs/decisions.md, "Patient pathway"). */
  async acceptLifecycleEvent(input: LifecycleInput, tenancy: Tenancy, actor: string): Promise<{ accepted: true; duplicate: boolean; patientId: string }> {
    const inputHash = bodyHash(input);
    const ctx = { actor, ...tenancy };
    const eventIdClaim = eventIdStream(tenancy.environmentId, input.eventId);
    // 1. Read only: a known eventId with another body is reused.
    const known = (await this.claims.load(eventIdClaim)).state.holder;
    if (known?.type === 'EventIdClaimed' && known.bodyHash !== inputHash) {
      throw new DomainError(409, 'IDEMPOTENCY_KEY_REUSED', 'This eventId was already used with a different body');
    }
    // 2. Read only: every refusal that can be known before writing (protocol, sequence) is decided by a
    //    dry run of the patient decider on the current state, so a 4xx leaves no claim behind.
    // A creation resolves its protocol (named, or the single active one); an update or cancel only
    // checks the one it names, if it names one.
    const protocol =
      input.type === 'patient.created' || input.programKey !== undefined || input.protocolId !== undefined
        ? await this.resolveProtocol(tenancy.environmentId, input)
        : undefined;
    const existingId = await this.patientIdFor(tenancy, input.externalPatientId, false);
    if (!existingId && input.type !== 'patient.created') throw new DomainError(409, 'OUT_OF_ORDER', 'The patient has no active pathway');
    const profile: Profile = { firstName: input.firstName, lastName: input.lastName, dateOfBirth: input.dateOfBirth, phone: input.phone, email: input.email };
    const command = (patientId: string): PatientCommand => ({
      type: 'ApplyLifecycleEvent',
      eventId: input.eventId,
      bodyHash: inputHash,
      lifecycle: input.type,
      patientId,
      organizationId: tenancy.organizationId,
      environmentId: tenancy.environmentId,
      profile,
      checkInCadenceDays: input.checkInCadenceDays,
      protocol,
      firstCheckInId: randomUUID(),
    });
    const current = existingId ? (await this.patients.load(patientStream(existingId))).state : patientDecider.initialState();
    patientDecider.decide(command(existingId ?? randomUUID()), current, this.clock.now());
    // 3. Idempotency of the eventId in the environment: first writer wins, its body hash decides.
    const claimed = await this.claim(eventIdClaim, { type: 'EventIdClaimed', bodyHash: inputHash }, ctx);
    if (claimed.holder.bodyHash !== inputHash) throw new DomainError(409, 'IDEMPOTENCY_KEY_REUSED', 'This eventId was already used with a different body');
    try {
      // 4. Identity: one patientId per (environment, keyed hash of the external ID).
      const patientId = existingId ?? (await this.patientIdFor(tenancy, input.externalPatientId, true, actor))!;
      // 5. The patient stream decides (it also keeps the eventIds it applied, for replays).
      const r = await this.patients.handle(patientStream(patientId), command(patientId), { ...ctx, correlationId: input.eventId });
      await this.applied(r.position);
      return { accepted: true, duplicate: r.newEvents.length === 0, patientId };
    } catch (err) {
      // Refused after the claim (a concurrent request changed the patient in between): release the
      // claim of this body, so nothing stays applied for this eventId and a corrected retry is accepted.
      if (err instanceof DomainError) await this.claims.handle(eventIdClaim, { type: 'ReleaseEventId', bodyHash: inputHash, code: err.code }, ctx);
      throw err;
    }
  }

  async resolveProtocol(environmentId: string, input: { protocolId?: string; programKey?: string }): Promise<ProtocolResolution> {
    const all = await this.readStore.list<ProtocolDoc>(PathwayCollections.protocols, environmentId);
    const notFound: ProtocolResolution = { ok: false, status: 404, code: 'PROTOCOL_NOT_FOUND', message: 'No active protocol matches' };
    let found: ProtocolDoc | undefined;
    if (input.protocolId) found = all.find((p) => p.id === input.protocolId && p.active);
    else if (input.programKey) found = all.find((p) => p.programKey === input.programKey && p.active);
    else {
      const active = all.filter((p) => p.active);
      if (active.length > 1)
        return { ok: false, status: 400, code: 'PROTOCOL_AMBIGUOUS', message: 'Several protocols are active: name one with programKey or protocolId' };
      found = active[0];
    }
    return found ? { ok: true, protocolId: found.id, defaultCadenceDays: found.defaultCadenceDays } : notFound;
  }

  // ---- protocols (staff) ----

  view(doc: ProtocolDoc | (ProtocolView & { organizationId?: string; environmentId?: string })): ProtocolView {
    return {
      id: doc.id,
      programKey: doc.programKey,
      name: doc.name,
      defaultCadenceDays: doc.defaultCadenceDays,
      questions: doc.questions,
      redFlags: doc.redFlags,
      active: doc.active,
      createdAt: doc.createdAt,
    };
  }

  async createProtocol(tenancy: Tenancy, def: ProtocolDefinition, actor: string): Promise<ProtocolView> {
    const problems = protocolProblems(def);
    if (problems.length) throw ApiError.validation(problems);
    const ctx = { actor, ...tenancy };
    const protocolId = randomUUID();
    const claimed = await this.claim(
      programKeyStream(tenancy.environmentId, def.programKey),
      { type: 'ProgramKeyClaimed', protocolId, programKey: def.programKey },
      ctx,
    );
    const id = claimed.holder.protocolId;
    if (!claimed.won) {
      // A claim whose protocol was never written (a crash in between) is taken over; otherwise the key is taken.
      // Concurrent takers race on the protocol stream itself (no_stream): CreateProtocol refuses the losers with DUPLICATE_KEY.
      if ((await this.store.readStream(protocolStream(id))).length)
        throw new DomainError(409, 'DUPLICATE_KEY', `A protocol with programKey ${def.programKey} exists in this environment`);
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

  /**
   * Whether the patient exists in the environment (enrolled now or earlier, cancelled included)
   * and its email, read from the patient's stream.
   */
  async patientContact(environmentId: string, patientId: string): Promise<{ known: boolean; email: string | null }> {
    const { state } = await this.patients.load(patientStream(patientId));
    if (state.status === 'none' || state.environmentId !== environmentId) return { known: false, email: null };
    return { known: true, email: state.profile.email ?? null };
  }
}
