import { Decider, DomainError } from '@svc/eventstore';

export type Role = 'owner' | 'admin' | 'member';
export type EnvironmentKind = 'sandbox' | 'production';

export type OrganizationEvent =
  | {
      type: 'OrganizationCreated';
      organizationId: string;
      name: string;
      owner: { sub: string; email: string };
      environments: { id: string; kind: EnvironmentKind }[];
      createdAt: string;
    }
  | { type: 'MemberAdded'; sub: string; email: string; role: Exclude<Role, 'owner'>; addedBy: string; addedAt: string }
  | { type: 'BaaSigned'; signerName: string; signerTitle: string; signedBy: string; baaSignedAt: string };

export type OrganizationCommand =
  | { type: 'CreateOrganization'; organizationId: string; name: string; owner: { sub: string; email: string }; environments: { id: string; kind: EnvironmentKind }[] }
  | { type: 'AddMember'; by: string; sub: string; email: string; role: Exclude<Role, 'owner'> }
  | { type: 'SignBaa'; by: string; signerName: string; signerTitle: string };

export interface OrganizationState {
  exists: boolean;
  members: Record<string, Role>;
  baaSignedAt: string | null;
}

/** A member's role; `sub` is the identity provider's choice, so inherited names are no members. */
const roleOf = (state: OrganizationState, sub: string): Role | undefined => (Object.prototype.hasOwnProperty.call(state.members, sub) ? state.members[sub] : undefined);

function requireManager(state: OrganizationState, by: string): void {
  const role = roleOf(state, by);
  if (role !== 'owner' && role !== 'admin') throw new DomainError(403, 'ROLE_REQUIRED', 'Only an owner or administrator may do this');
}

export const organizationDecider: Decider<OrganizationCommand, OrganizationEvent, OrganizationState> = {
  initialState: () => ({ exists: false, members: {}, baaSignedAt: null }),

  evolve(state, event) {
    switch (event.type) {
      case 'OrganizationCreated':
        return { ...state, exists: true, members: { [event.owner.sub]: 'owner' } };
      case 'MemberAdded':
        return { ...state, members: { ...state.members, [event.sub]: event.role } };
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
      case 'AddMember':
        if (!state.exists) throw new DomainError(404, 'NOT_FOUND', 'Organization not found');
        requireManager(state, command.by);
        if (roleOf(state, command.sub) === 'owner') throw new DomainError(409, 'INVALID_TRANSITION', 'The owner cannot be changed to another role');
        if (roleOf(state, command.sub) === command.role) return [];
        return [{ type: 'MemberAdded', sub: command.sub, email: command.email, role: command.role, addedBy: command.by, addedAt: now.toISOString() }];
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
