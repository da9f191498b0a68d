import { randomUUID } from 'node:crypto';
import { Inject, Injectable } from '@nestjs/common';
import { CLOCK, Clock } from '@svc/clock';
import { CommandHandler, EVENT_STORE, EventStore } from '@svc/eventstore';
import { ACCESS_PROJECTION, AccessCollections, ApiKeyDoc, MembershipDoc, OrganizationDoc, OrganizationMember, TenantDirectory, membership } from '@svc/access';
import { ApiError } from '@svc/http';
import { PROJECTIONS } from '@svc/platform';
import { ProjectionRunner, READ_STORE, ReadStore } from '@svc/read-store';
import { generateApiKey, randomToken } from '@svc/security';
import { apiKeyDecider, apiKeyStream } from '../domain/api-key';
import { SecretKind, environmentDecider, environmentStream } from '../domain/environment';
import { EnvironmentKind, Role, organizationDecider, organizationStream } from '../domain/organization';

export interface OrganizationView {
  id: string;
  name: string;
  baaSignedAt: string | null;
  environments: { id: string; kind: EnvironmentKind }[];
}

export interface StaffActor {
  sub: string;
  email: string;
}

export interface MemberView {
  sub: string;
  email: string;
  role: Role;
  addedAt: string;
}

const memberView = (org: OrganizationDoc, sub: string, m: OrganizationMember): MemberView => ({
  sub,
  email: m.email,
  role: m.role,
  addedAt: m.addedAt ?? org.createdAt,
});

/** Gateway use cases: every write goes through the decider handler, then waits for its read model. */
@Injectable()
export class GatewayService {
  private readonly organizations: CommandHandler<
    Parameters<typeof organizationDecider.decide>[0],
    Parameters<typeof organizationDecider.evolve>[1],
    ReturnType<typeof organizationDecider.initialState>
  >;
  private readonly apiKeys: CommandHandler<
    Parameters<typeof apiKeyDecider.decide>[0],
    Parameters<typeof apiKeyDecider.evolve>[1],
    ReturnType<typeof apiKeyDecider.initialState>
  >;
  private readonly environments: CommandHandler<
    Parameters<typeof environmentDecider.decide>[0],
    Parameters<typeof environmentDecider.evolve>[1],
    ReturnType<typeof environmentDecider.initialState>
  >;

  constructor(
    @Inject(EVENT_STORE) store: EventStore,
    @Inject(CLOCK) clock: Clock,
    @Inject(PROJECTIONS) private readonly projections: ProjectionRunner,
    @Inject(READ_STORE) private readonly readStore: ReadStore,
    private readonly tenants: TenantDirectory,
  ) {
    const now = () => clock.now();
    this.organizations = new CommandHandler(store, organizationDecider, now);
    this.apiKeys = new CommandHandler(store, apiKeyDecider, now);
    this.environments = new CommandHandler(store, environmentDecider, now);
  }

  private async applied(position: number): Promise<void> {
    if (position > 0) await this.projections.waitFor([ACCESS_PROJECTION], position);
  }

  async createOrganization(name: string, actor: StaffActor): Promise<OrganizationView> {
    const organizationId = randomUUID();
    const environments: { id: string; kind: EnvironmentKind }[] = [
      { id: randomUUID(), kind: 'sandbox' },
      { id: randomUUID(), kind: 'production' },
    ];
    let position = 0;
    for (const env of environments) {
      const r = await this.environments.handle(
        environmentStream(env.id),
        {
          type: 'ProvisionEnvironment',
          environmentId: env.id,
          organizationId,
          kind: env.kind,
          secrets: { widget_signing: `whsec_${randomToken(32)}`, identity_token: `idsec_${randomToken(32)}` },
        },
        { actor: `staff:${actor.sub}`, organizationId, environmentId: env.id },
      );
      position = Math.max(position, r.position);
    }
    const r = await this.organizations.handle(
      organizationStream(organizationId),
      { type: 'CreateOrganization', organizationId, name, owner: actor, environments },
      { actor: `staff:${actor.sub}`, organizationId },
    );
    await this.applied(Math.max(position, r.position));
    return { id: organizationId, name, baaSignedAt: null, environments };
  }

  view(org: OrganizationDoc): OrganizationView {
    return { id: org.id, name: org.name, baaSignedAt: org.baaSignedAt, environments: org.environments };
  }

  /**
   * The organizations `sub` is a member of (any role), oldest membership first, each as
   * GET /organizations/{orgId} answers it: the index by member, then each organization, kept only
   * where it still lists `sub` among its members (the guards' own rule).
   */
  async organizationsOf(sub: string): Promise<OrganizationView[]> {
    const memberships = await this.readStore.list<MembershipDoc>(AccessCollections.organizationsByMember, sub);
    const orgs = await Promise.all(memberships.map((m) => this.tenants.organization(m.organizationId)));
    return orgs.filter((org): org is OrganizationDoc => !!org && !!membership(org, sub)).map((org) => this.view(org));
  }

  /** Adds the subject, or gives a member the role (decided by the organization); answers its record as it now is. */
  async addMember(organizationId: string, input: { sub: string; email: string; role: Exclude<Role, 'owner'> }, actor: StaffActor): Promise<MemberView> {
    const r = await this.organizations.handle(
      organizationStream(organizationId),
      { type: 'AddMember', by: actor.sub, ...input },
      { actor: `staff:${actor.sub}`, organizationId },
    );
    await this.applied(r.position);
    const org = await this.organization(organizationId);
    const member = membership(org, input.sub);
    if (!member) throw ApiError.notFound('Member'); // removed again since, by another request
    return memberView(org, input.sub, member);
  }

  async removeMember(organizationId: string, sub: string, actor: StaffActor): Promise<void> {
    const r = await this.organizations.handle(
      organizationStream(organizationId),
      { type: 'RemoveMember', by: actor.sub, sub },
      { actor: `staff:${actor.sub}`, organizationId },
    );
    await this.applied(r.position);
  }

  /** Oldest first (`addedAt`, then `sub`): an object's own keys are not kept in insertion order when they look like integers. */
  listMembers(org: OrganizationDoc): MemberView[] {
    return Object.entries(org.members)
      .map(([sub, member]) => memberView(org, sub, member))
      .sort((a, b) => (a.addedAt < b.addedAt ? -1 : a.addedAt > b.addedAt ? 1 : a.sub < b.sub ? -1 : a.sub > b.sub ? 1 : 0));
  }

  /** Returns the first signing time and whether this call signed it. */
  async signBaa(
    organizationId: string,
    input: { signerName: string; signerTitle: string },
    actor: StaffActor,
  ): Promise<{ baaSignedAt: string; created: boolean }> {
    const r = await this.organizations.handle(
      organizationStream(organizationId),
      { type: 'SignBaa', by: actor.sub, ...input },
      { actor: `staff:${actor.sub}`, organizationId },
    );
    await this.applied(r.position);
    return { baaSignedAt: r.state.baaSignedAt!, created: r.newEvents.length > 0 };
  }

  async createApiKey(organizationId: string, env: { id: string; kind: EnvironmentKind }, name: string, actor: StaffActor) {
    const keyId = randomUUID();
    const { key, hash, prefix } = generateApiKey(env.kind);
    const r = await this.apiKeys.handle(
      apiKeyStream(keyId),
      { type: 'CreateApiKey', keyId, organizationId, environmentId: env.id, environmentKind: env.kind, name, prefix, keyHash: hash, by: actor.sub },
      { actor: `staff:${actor.sub}`, organizationId, environmentId: env.id },
    );
    await this.applied(r.position);
    return { id: keyId, name, prefix, key };
  }

  async listApiKeys(environmentId: string) {
    const docs = await this.readStore.list<ApiKeyDoc>(AccessCollections.apiKeys, environmentId);
    return docs.map((d) => ({ id: d.id, name: d.name, prefix: d.prefix, createdAt: d.createdAt, revokedAt: d.revokedAt }));
  }

  async revokeApiKey(organizationId: string, environmentId: string, keyId: string, actor: StaffActor): Promise<void> {
    const r = await this.apiKeys.handle(
      apiKeyStream(keyId),
      { type: 'RevokeApiKey', environmentId, by: actor.sub },
      { actor: `staff:${actor.sub}`, organizationId, environmentId },
    );
    await this.applied(r.position);
  }

  async rotateSecret(organizationId: string, environmentId: string, kind: SecretKind, actor: StaffActor) {
    const secret = kind === 'widget_signing' ? `whsec_${randomToken(32)}` : `idsec_${randomToken(32)}`;
    const r = await this.environments.handle(
      environmentStream(environmentId),
      { type: 'RotateSecret', kind, secret, by: actor.sub },
      { actor: `staff:${actor.sub}`, organizationId, environmentId },
    );
    await this.applied(r.position);
    return { kind, secret };
  }

  async organization(id: string): Promise<OrganizationDoc> {
    const org = await this.tenants.organization(id);
    if (!org) throw ApiError.notFound('Organization');
    return org;
  }
}
