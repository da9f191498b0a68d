import { Decider, DomainError, type EnvironmentKind } from '@svc/decider';

export type Role = 'owner' | 'admin' | 'member';
export type { EnvironmentKind };

export type OrganizationEvent =
  | {
      type: 'OrganizationCreated';
      organizationId: string;
      name: string;
      owner: { sub: string; email: string };
      environments: { id: string; kind: EnvironmentKind }[];
      createdAt: string;
    }
  /** A subject who was not a member joins (in streams written before `MemberRoleChanged`, also a member's new role). */
  | { type: 'MemberAdded'; sub: string; email: string; role: Exclude<Role, 'owner'>; addedBy: string; addedAt: string }
  | { type: 'MemberRoleChanged'; sub: string; role: Exclude<Role, 'owner'>; previousRole: Role; changedBy: string; changedAt: string }
  | { type: 'MemberRemoved'; sub: string; previousRole: Role; removedBy: string; removedAt: string }
  | { type: 'BaaSigned'; signerName: string; signerTitle: string; signedBy: string; baaSignedAt: string };

export type OrganizationCommand =
  | {
      type: 'CreateOrganization';
      organizationId: string;
      name: string;
      owner: { sub: string; email: string };
      environments: { id: string; kind: EnvironmentKind }[];
    }
  /** Adds the subject, or changes the role of a subject who is a member already. */
  | { type: 'AddMember'; by: string; sub: string; email: string; role: Exclude<Role, 'owner'> }
  | { type: 'RemoveMember'; by: string; sub: string }
  | { type: 'SignBaa'; by: string; signerName: string; signerTitle: string };

export interface OrganizationState {
  exists: boolean;
  members: Record<string, Role>;
  baaSignedAt: string | null;
}

/** A member's role; `sub` is the identity provider's choice, so inherited names are no members. */
const roleOf = (state: OrganizationState, sub: string): Role | undefined =>
  Object.prototype.hasOwnProperty.call(state.members, sub) ? state.members[sub] : undefined;

function requireManager(state: OrganizationState, by: string): void {
  const role = roleOf(state, by);
  if (role !== 'owner' && role !== 'admin') throw new DomainError(403, 'ROLE_REQUIRED', 'Only an owner or administrator may do this');
}

/**
 * A change to an owner's membership (a new role, or removal): only an owner may make it (an admin
 * gets 403 `ROLE_REQUIRED`), and never to the last owner (409 `LAST_OWNER`).
 */
function requireOwnerMayGo(state: OrganizationState, by: string): void {
  if (roleOf(state, by) !== 'owner') throw new DomainError(403, 'ROLE_REQUIRED', 'Only an owner may change or remove an owner');
  const owners = Object.values(state.members).filter((r) => r === 'owner').length;
  if (owners <= 1) throw new DomainError(409, 'LAST_OWNER', 'The last owner can be neither removed nor given another role');
}

/** The members without `sub` (an own property like any other, whatever its name). */
const without = (members: Record<string, Role>, sub: string): Record<string, Role> => Object.fromEntries(Object.entries(members).filter(([s]) => s !== sub));

export const organizationDecider: Decider<OrganizationCommand, OrganizationEvent, OrganizationState> = {
  initialState: () => ({ exists: false, members: {}, baaSignedAt: null }),

  evolve(state, event) {
    switch (event.type) {
      case 'OrganizationCreated':
        return { ...state, exists: true, members: { [event.owner.sub]: 'owner' } };
      case 'MemberAdded':
      case 'MemberRoleChanged':
        return { ...state, members: { ...state.members, [event.sub]: event.role } };
      case 'MemberRemoved':
        return { ...state, members: without(state.members, event.sub) };
      case 'BaaSigned':
        return { ...state, baaSignedAt: state.baaSignedAt ?? event.baaSignedAt };
      default: {
        const never: never = event;
        return never;
      }
    }
  },

  decide(command, state, now) {
    switch (command.type) {
      case 'CreateOrganization':
        if (state.exists) throw new DomainError(409, 'DUPLICATE_KEY', 'The organization exists already');
        return [
          {
            type: 'OrganizationCreated',
            organizationId: command.organizationId,
            name: command.name,
            owner: command.owner,
            environments: command.environments,
            createdAt: now.toISOString(),
          },
        ];
      case 'AddMember': {
        if (!state.exists) throw new DomainError(404, 'NOT_FOUND', 'Organization not found');
        requireManager(state, command.by);
        const current = roleOf(state, command.sub);
        if (current === undefined)
          return [{ type: 'MemberAdded', sub: command.sub, email: command.email, role: command.role, addedBy: command.by, addedAt: now.toISOString() }];
        if (current === command.role) return [];
        if (current === 'owner') requireOwnerMayGo(state, command.by);
        return [
          { type: 'MemberRoleChanged', sub: command.sub, role: command.role, previousRole: current, changedBy: command.by, changedAt: now.toISOString() },
        ];
      }
      case 'RemoveMember': {
        if (!state.exists) throw new DomainError(404, 'NOT_FOUND', 'Organization not found');
        requireManager(state, command.by);
        const current = roleOf(state, command.sub);
        if (current === undefined) throw new DomainError(404, 'NOT_FOUND', 'Member not found');
        if (current === 'owner') requireOwnerMayGo(state, command.by);
        return [{ type: 'MemberRemoved', sub: command.sub, previousRole: current, removedBy: command.by, removedAt: now.toISOString() }];
      }
      case 'SignBaa':
        if (!state.exists) throw new DomainError(404, 'NOT_FOUND', 'Organization not found');
        requireManager(state, command.by);
        if (state.baaSignedAt) return [];
        return [{ type: 'BaaSigned', signerName: command.signerName, signerTitle: command.signerTitle, signedBy: command.by, baaSignedAt: now.toISOString() }];
      default: {
        const never: never = command;
        return never;
      }
    }
  },
};

export const organizationStream = (organizationId: string) => `gateway-organization-${organizationId}`;
