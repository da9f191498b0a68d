import { Decider, DomainError } from '@svc/decider';

/** Profile fields (PHI): only ever in event data, which the event store encrypts. */
export interface Profile {
  firstName?: string;
  lastName?: string;
  dateOfBirth?: string;
  phone?: string;
  email?: string;
}
export const PROFILE_FIELDS = ['firstName', 'lastName', 'dateOfBirth', 'phone', 'email'] as const;

export type LifecycleType = 'patient.created' | 'patient.updated' | 'patient.cancelled';

/**
 * On an update or cancel, a `programKey`/`protocolId` the event names must name an active protocol
 * (docs/decisions.md, "Patient pathway": 404 `PROTOCOL_NOT_FOUND`), though the patient is not moved to it. Absent: nothing to check.
 */
function refuseUnknownProtocol(protocol: ProtocolResolution | undefined): void {
  if (protocol && !protocol.ok) throw new DomainError(protocol.status, protocol.code, protocol.message);
}

/** The protocol named by the event (resolved by the application from the protocols read model). */
export type ProtocolResolution = { ok: true; protocolId: string; defaultCadenceDays: number } | { ok: false; status: number; code: string; message: string };

export interface ScheduledCheckIn {
  checkInId: string;
  dueAt: string;
}

export type PatientCommand =
  | {
      type: 'ApplyLifecycleEvent';
      eventId: string;
      bodyHash: string;
      lifecycle: LifecycleType;
      patientId: string;
      organizationId: string;
      environmentId: string;
      profile: Profile;
      checkInCadenceDays?: number;
      /** Needed for patient.created only. */
      protocol?: ProtocolResolution;
      /** Id of the first check-in if this enrolls. */
      firstCheckInId: string;
    }
  | { type: 'FireScheduledCheckIn'; checkInId: string; paused: boolean; nextCheckInId: string }
  | { type: 'SendCheckInNow'; checkInId: string };

export type PatientEvent =
  | {
      type: 'PatientEnrolled';
      eventId: string;
      bodyHash: string;
      patientId: string;
      organizationId: string;
      environmentId: string;
      protocolId: string;
      cadenceDays: number;
      profile: Profile;
      enrolledAt: string;
      next: ScheduledCheckIn;
    }
  | {
      type: 'PatientUpdated';
      eventId: string;
      bodyHash: string;
      changes: Profile;
      cadenceDays?: number;
      /** A new cadence moves the pending check-in: due one new cadence after the previous send (or enrolment), at the earliest now. */
      rescheduled?: ScheduledCheckIn & { patientId: string };
      updatedAt: string;
    }
  | { type: 'PatientCancelled'; eventId: string; bodyHash: string; cancelledAt: string; cancelledCheckInId: string | null }
  | {
      type: 'CheckInSent';
      checkInId: string;
      patientId: string;
      organizationId: string;
      environmentId: string;
      protocolId: string;
      reason: 'scheduled' | 'manual';
      sentAt: string;
      next: ScheduledCheckIn | null;
    }
  | { type: 'CheckInSkipped'; checkInId: string; patientId: string; reason: 'usage_paused'; at: string; next: ScheduledCheckIn };

export interface PatientState {
  patientId: string | null;
  organizationId: string | null;
  environmentId: string | null;
  status: 'none' | 'active' | 'cancelled';
  profile: Profile;
  protocolId: string | null;
  cadenceDays: number;
  /** Lifecycle eventIds applied to this patient, with their body hash (idempotency). */
  processed: Record<string, string>;
  scheduled: ScheduledCheckIn | null;
}

const DAY_MS = 86_400_000;
const after = (now: Date, days: number) => new Date(now.getTime() + days * DAY_MS).toISOString();

function definedFields(p: Profile): Profile {
  const out: Profile = {};
  for (const f of PROFILE_FIELDS) if (p[f] !== undefined) out[f] = p[f];
  return out;
}

export const patientDecider: Decider<PatientCommand, PatientEvent, PatientState> = {
  initialState: () => ({
    patientId: null,
    organizationId: null,
    environmentId: null,
    status: 'none',
    profile: {},
    protocolId: null,
    cadenceDays: 0,
    processed: {},
    scheduled: null,
  }),

  evolve(state, event) {
    switch (event.type) {
      case 'PatientEnrolled':
        return {
          ...state,
          patientId: event.patientId,
          organizationId: event.organizationId,
          environmentId: event.environmentId,
          status: 'active',
          profile: { ...state.profile, ...event.profile },
          protocolId: event.protocolId,
          cadenceDays: event.cadenceDays,
          processed: { ...state.processed, [event.eventId]: event.bodyHash },
          scheduled: event.next,
        };
      case 'PatientUpdated':
        return {
          ...state,
          profile: { ...state.profile, ...event.changes },
          cadenceDays: event.cadenceDays ?? state.cadenceDays,
          processed: { ...state.processed, [event.eventId]: event.bodyHash },
          scheduled: event.rescheduled ? { checkInId: event.rescheduled.checkInId, dueAt: event.rescheduled.dueAt } : state.scheduled,
        };
      case 'PatientCancelled':
        return { ...state, status: 'cancelled', scheduled: null, processed: { ...state.processed, [event.eventId]: event.bodyHash } };
      case 'CheckInSent':
        return event.reason === 'scheduled' ? { ...state, scheduled: event.next } : state;
      case 'CheckInSkipped':
        return { ...state, scheduled: event.next };
      default: {
        const never: never = event;
        return never;
      }
    }
  },

  decide(command, state, now) {
    switch (command.type) {
      case 'ApplyLifecycleEvent': {
        // Order of checks: idempotency, then sequence (OUT_OF_ORDER), then the protocol.
        const seen = state.processed[command.eventId];
        if (seen !== undefined) {
          if (seen === command.bodyHash) return [];
          throw new DomainError(409, 'IDEMPOTENCY_KEY_REUSED', 'This eventId was already used with a different body');
        }
        const base = { eventId: command.eventId, bodyHash: command.bodyHash };
        switch (command.lifecycle) {
          case 'patient.created': {
            if (state.status === 'active') throw new DomainError(409, 'OUT_OF_ORDER', 'The patient already has an active pathway');
            const protocol = command.protocol;
            if (!protocol) throw new DomainError(404, 'PROTOCOL_NOT_FOUND', 'No active protocol');
            if (!protocol.ok) throw new DomainError(protocol.status, protocol.code, protocol.message);
            const cadenceDays = command.checkInCadenceDays ?? protocol.defaultCadenceDays;
            return [
              {
                type: 'PatientEnrolled',
                ...base,
                patientId: command.patientId,
                organizationId: command.organizationId,
                environmentId: command.environmentId,
                protocolId: protocol.protocolId,
                cadenceDays,
                profile: definedFields(command.profile),
                enrolledAt: now.toISOString(),
                next: { checkInId: command.firstCheckInId, dueAt: after(now, cadenceDays) },
              },
            ];
          }
          case 'patient.updated': {
            if (state.status !== 'active') throw new DomainError(409, 'OUT_OF_ORDER', 'The patient has no active pathway');
            refuseUnknownProtocol(command.protocol);
            const event: PatientEvent = { type: 'PatientUpdated', ...base, changes: definedFields(command.profile), updatedAt: now.toISOString() };
            if (command.checkInCadenceDays !== undefined) {
              event.cadenceDays = command.checkInCadenceDays;
              // The pending check-in was set one old cadence after the last send (or the enrolment):
              // it moves to one new cadence after that, at the earliest now. Going from 30 days to 1
              // does not wait out the 30.
              if (state.scheduled && command.checkInCadenceDays !== state.cadenceDays) {
                const basis = Date.parse(state.scheduled.dueAt) - state.cadenceDays * DAY_MS;
                const dueAt = new Date(Math.max(now.getTime(), basis + command.checkInCadenceDays * DAY_MS)).toISOString();
                event.rescheduled = { checkInId: state.scheduled.checkInId, dueAt, patientId: state.patientId! };
              }
            }
            return [event];
          }
          case 'patient.cancelled':
            if (state.status !== 'active') throw new DomainError(409, 'OUT_OF_ORDER', 'The patient has no active pathway');
            refuseUnknownProtocol(command.protocol);
            return [{ type: 'PatientCancelled', ...base, cancelledAt: now.toISOString(), cancelledCheckInId: state.scheduled?.checkInId ?? null }];
          default: {
            const never: never = command.lifecycle;
            return never;
          }
        }
      }
      case 'FireScheduledCheckIn': {
        // A stale timer (cancelled, already fired, or replaced) decides nothing.
        if (state.status !== 'active' || state.scheduled?.checkInId !== command.checkInId) return [];
        const next = { checkInId: command.nextCheckInId, dueAt: after(now, state.cadenceDays) };
        if (command.paused)
          return [{ type: 'CheckInSkipped', checkInId: command.checkInId, patientId: state.patientId!, reason: 'usage_paused', at: now.toISOString(), next }];
        return [
          {
            type: 'CheckInSent',
            checkInId: command.checkInId,
            patientId: state.patientId!,
            organizationId: state.organizationId!,
            environmentId: state.environmentId!,
            protocolId: state.protocolId!,
            reason: 'scheduled',
            sentAt: now.toISOString(),
            next,
          },
        ];
      }
      case 'SendCheckInNow': {
        if (state.status === 'none') throw new DomainError(404, 'NOT_FOUND', 'Patient not found');
        if (state.status !== 'active') throw new DomainError(409, 'OUT_OF_ORDER', 'The patient has no active pathway');
        return [
          {
            type: 'CheckInSent',
            checkInId: command.checkInId,
            patientId: state.patientId!,
            organizationId: state.organizationId!,
            environmentId: state.environmentId!,
            protocolId: state.protocolId!,
            reason: 'manual',
            sentAt: now.toISOString(),
            next: null,
          },
        ];
      }
      default: {
        const never: never = command;
        return never;
      }
    }
  },
};
