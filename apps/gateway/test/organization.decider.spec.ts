import { deciderSpec } from '../../../libs/eventstore/src/testing';
import { OrganizationCommand, OrganizationEvent, organizationDecider } from '../src/domain/organization';

const now = new Date('2026-01-01T00:00:00Z');
const at = now.toISOString();
const orgId = 'o0000000-0000-4000-8000-000000000001';
const created: OrganizationEvent = {
  type: 'OrganizationCreated',
  organizationId: orgId,
  name: 'Clinic',
  owner: { sub: 'owner', email: 'owner@example.test' },
  environments: [],
  createdAt: '2025-12-01T00:00:00.000Z',
};
const added = (sub: string, role: 'admin' | 'member', by = 'owner'): OrganizationEvent => ({
  type: 'MemberAdded',
  sub,
  email: `${sub}@example.test`,
  role,
  addedBy: by,
  addedAt: '2025-12-02T00:00:00.000Z',
});
const add = (by: string, sub: string, role: 'admin' | 'member'): OrganizationCommand => ({ type: 'AddMember', by, sub, email: `${sub}@example.test`, role });
const remove = (by: string, sub: string): OrganizationCommand => ({ type: 'RemoveMember', by, sub });
/** The organization with an owner, two admins and a member. */
const team = [created, added('admin', 'admin'), added('admin2', 'admin'), added('member', 'member')];
const spec = deciderSpec(organizationDecider);
const membersAfter = (events: OrganizationEvent[]) => events.reduce(organizationDecider.evolve, organizationDecider.initialState()).members;

describe('organization decider: members', () => {
  it('adds a subject who is not a member', () => {
    spec
      .given([created])
      .when(add('owner', 'new', 'member'), now)
      .then([{ type: 'MemberAdded', sub: 'new', email: 'new@example.test', role: 'member', addedBy: 'owner', addedAt: at }]);
    spec
      .given(team)
      .when(add('admin', 'new', 'admin'), now)
      .then([{ type: 'MemberAdded', sub: 'new', email: 'new@example.test', role: 'admin', addedBy: 'admin', addedAt: at }]);
  });

  it('re-adding a member with the role it has decides nothing (whatever the email)', () => {
    spec
      .given(team)
      .when(add('owner', 'member', 'member'), now)
      .then([]);
    spec.given(team).when({ type: 'AddMember', by: 'admin', sub: 'admin2', email: 'other@example.test', role: 'admin' }, now).then([]);
  });

  it('changes the role of a member: owner or admin, also admin to admin', () => {
    spec
      .given(team)
      .when(add('owner', 'member', 'admin'), now)
      .then([{ type: 'MemberRoleChanged', sub: 'member', role: 'admin', previousRole: 'member', changedBy: 'owner', changedAt: at }]);
    spec
      .given(team)
      .when(add('admin', 'admin2', 'member'), now)
      .then([{ type: 'MemberRoleChanged', sub: 'admin2', role: 'member', previousRole: 'admin', changedBy: 'admin', changedAt: at }]);
    spec
      .given(team)
      .when(add('admin', 'admin', 'member'), now)
      .then([{ type: 'MemberRoleChanged', sub: 'admin', role: 'member', previousRole: 'admin', changedBy: 'admin', changedAt: at }]);
    const changed = organizationDecider.decide(
      add('owner', 'member', 'admin'),
      team.reduce(organizationDecider.evolve, organizationDecider.initialState()),
      now,
    );
    expect(membersAfter([...team, ...changed])).toEqual({ owner: 'owner', admin: 'admin', admin2: 'admin', member: 'admin' });
  });

  it('lets only an owner or admin add, change or remove (403 ROLE_REQUIRED), and nobody outside the organization', () => {
    spec
      .given(team)
      .when(add('member', 'new', 'member'), now)
      .thenThrows('ROLE_REQUIRED');
    spec
      .given(team)
      .when(add('member', 'member', 'admin'), now)
      .thenThrows('ROLE_REQUIRED');
    spec.given(team).when(remove('member', 'admin'), now).thenThrows('ROLE_REQUIRED');
    spec.given(team).when(remove('member', 'member'), now).thenThrows('ROLE_REQUIRED');
    spec.given(team).when(remove('stranger', 'member'), now).thenThrows('ROLE_REQUIRED');
    spec.given(team).when(remove('member', 'nobody'), now).thenThrows('ROLE_REQUIRED');
    spec
      .given([])
      .when(add('owner', 'new', 'member'), now)
      .thenThrows('NOT_FOUND');
    spec.given([]).when(remove('owner', 'new'), now).thenThrows('NOT_FOUND');
  });

  it('an admin may neither change nor remove an owner (403 ROLE_REQUIRED)', () => {
    spec
      .given(team)
      .when(add('admin', 'owner', 'admin'), now)
      .thenThrows('ROLE_REQUIRED');
    spec
      .given(team)
      .when(add('admin', 'owner', 'member'), now)
      .thenThrows('ROLE_REQUIRED');
    spec.given(team).when(remove('admin', 'owner'), now).thenThrows('ROLE_REQUIRED');
  });

  it('the last owner can be neither demoted nor removed (409 LAST_OWNER)', () => {
    spec
      .given(team)
      .when(add('owner', 'owner', 'admin'), now)
      .thenThrows('LAST_OWNER');
    spec
      .given(team)
      .when(add('owner', 'owner', 'member'), now)
      .thenThrows('LAST_OWNER');
    spec.given(team).when(remove('owner', 'owner'), now).thenThrows('LAST_OWNER');
    spec.given([created]).when(remove('owner', 'owner'), now).thenThrows('LAST_OWNER');
  });

  it('removes a member or admin; the removed subject is no member any more, and removing it again is 404', () => {
    spec
      .given(team)
      .when(remove('owner', 'admin'), now)
      .then([{ type: 'MemberRemoved', sub: 'admin', previousRole: 'admin', removedBy: 'owner', removedAt: at }]);
    spec
      .given(team)
      .when(remove('admin', 'admin2'), now)
      .then([{ type: 'MemberRemoved', sub: 'admin2', previousRole: 'admin', removedBy: 'admin', removedAt: at }]);
    spec
      .given(team)
      .when(remove('admin', 'admin'), now)
      .then([{ type: 'MemberRemoved', sub: 'admin', previousRole: 'admin', removedBy: 'admin', removedAt: at }]);
    const gone: OrganizationEvent = { type: 'MemberRemoved', sub: 'member', previousRole: 'member', removedBy: 'admin', removedAt: at };
    expect(membersAfter([...team, gone])).toEqual({ owner: 'owner', admin: 'admin', admin2: 'admin' });
    spec
      .given([...team, gone])
      .when(remove('owner', 'member'), now)
      .thenThrows('NOT_FOUND');
    // Removed, the subject can no longer act as what it was...
    const adminGone: OrganizationEvent = { type: 'MemberRemoved', sub: 'admin', previousRole: 'admin', removedBy: 'owner', removedAt: at };
    spec
      .given([...team, adminGone])
      .when(add('admin', 'new', 'member'), now)
      .thenThrows('ROLE_REQUIRED');
    // ...and added again it is a new member.
    spec
      .given([...team, gone])
      .when(add('owner', 'member', 'member'), now)
      .then([{ type: 'MemberAdded', sub: 'member', email: 'member@example.test', role: 'member', addedBy: 'owner', addedAt: at }]);
  });

  it('an unknown subject is 404 on removal, also when named like an inherited member of an object', () => {
    for (const sub of ['nobody', 'constructor', '__proto__', 'toString', 'hasOwnProperty'])
      spec.given(team).when(remove('owner', sub), now).thenThrows('NOT_FOUND');
  });

  it('keeps a member whose sub is named like an inherited member an ordinary own member through add, change and removal', () => {
    const events = [created, added('__proto__', 'admin'), added('constructor', 'member')];
    expect(membersAfter(events)).toEqual({ owner: 'owner', ['__proto__']: 'admin', constructor: 'member' });
    spec
      .given(events)
      .when(add('__proto__', 'constructor', 'admin'), now)
      .then([{ type: 'MemberRoleChanged', sub: 'constructor', role: 'admin', previousRole: 'member', changedBy: '__proto__', changedAt: at }]);
    const removed: OrganizationEvent = { type: 'MemberRemoved', sub: '__proto__', previousRole: 'admin', removedBy: 'owner', removedAt: at };
    const after = membersAfter([...events, removed]);
    expect(after).toEqual({ owner: 'owner', constructor: 'member' });
    expect(Object.getPrototypeOf(after)).toBe(Object.prototype);
    spec
      .given([...events, removed])
      .when(remove('owner', '__proto__'), now)
      .thenThrows('NOT_FOUND');
  });

  it('reads a MemberAdded for a member that is one already as its new role (streams written before MemberRoleChanged)', () => {
    expect(membersAfter([...team, added('member', 'admin')])).toMatchObject({ member: 'admin' });
  });
});
