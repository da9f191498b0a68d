import { Inject, Injectable } from '@nestjs/common';
import type { EnvironmentKind } from '@svc/decider';
import { READ_STORE, ReadStore } from '@svc/read-store';
import { KEYRING, Keyring } from '@svc/security';

/**
 * The gateway's access read model, shared by every app's guards (in distributed mode it is
 * read from the same Redis). Collection names and document shapes are owned by the gateway's
 * access projection (apps/gateway/src/adapters/projections/access.projection.ts).
 */
export const AccessCollections = {
  organizations: 'access.organizations',
  environments: 'access.environments',
  apiKeysByHash: 'access.api-keys-by-hash',
  apiKeys: 'access.api-keys',
  /**
   * The organizations of each staff subject: partition = the member's `sub`, key
   * `${organizationId}:${sub}`, score = the log position of the event that made it a member (oldest
   * membership first), doc `MembershipDoc`. Written in the same commit as the organization's `members`.
   */
  organizationsByMember: 'access.organizations-by-member',
} as const;

/** `-v2`: the index of organizations by member is built from the log on an existing read store. */
export const ACCESS_PROJECTION = 'gateway-access-v2';

/** An entry of `AccessCollections.organizationsByMember`. */
export interface MembershipDoc {
  organizationId: string;
}

/** The key of a membership in `AccessCollections.organizationsByMember` (an organization id has a fixed shape, so the pair is unambiguous). */
export const membershipKey = (organizationId: string, sub: string): string => `${organizationId}:${sub}`;

/** Defined once, in the dependency-free core. */
export type { EnvironmentKind };

export type OrganizationRole = 'owner' | 'admin' | 'member';

export interface OrganizationMember {
  role: OrganizationRole;
  email: string;
  /** Absent only in a record projected before members carried it (read as the organization's `createdAt`). */
  addedAt?: string;
}

export interface OrganizationDoc {
  id: string;
  name: string;
  baaSignedAt: string | null;
  environments: { id: string; kind: EnvironmentKind }[];
  /** By `sub`; `addedAt` is when the subject last joined (a role change keeps it). */
  members: Record<string, OrganizationMember>;
  createdAt: string;
  /**
   * Per environment id, how many times its `identity_token` secret was rotated (absent: never).
   * Kept on the organization, not the environment, because the widget session guard reads the
   * organization on every request already (BAA): a session opened with an identity token carries
   * the count it was opened under and ends when the count moves (see `widgetSessionEnded`).
   */
  identityTokenVersions?: Record<string, number>;
}

/** The rotation count of an environment's `identity_token` secret (0 until it is first rotated). */
export function identityTokenVersion(org: Pick<OrganizationDoc, 'identityTokenVersions'>, environmentId: string): number {
  const versions = org.identityTokenVersions;
  return versions && Object.prototype.hasOwnProperty.call(versions, environmentId) ? versions[environmentId] : 0;
}

/**
 * The staff user's membership of an organization, or null. `members` is keyed by the token's
 * `sub`, which the identity provider chooses: a lookup must find own members only, never what
 * every object inherits (`constructor`, `toString`, `__proto__`...).
 */
export function membership(org: Pick<OrganizationDoc, 'members'>, sub: string): OrganizationDoc['members'][string] | null {
  return Object.prototype.hasOwnProperty.call(org.members, sub) ? org.members[sub] : null;
}

export interface EnvironmentDoc {
  id: string;
  organizationId: string;
  kind: EnvironmentKind;
  /** Secrets encrypted with the environment's key (AES-256-GCM envelopes). */
  secrets: Record<'widget_signing' | 'identity_token', string>;
}

export interface ApiKeyDoc {
  id: string;
  organizationId: string;
  environmentId: string;
  environmentKind: EnvironmentKind;
  name: string;
  prefix: string;
  createdAt: string;
  revokedAt: string | null;
}

@Injectable()
export class TenantDirectory {
  constructor(
    @Inject(READ_STORE) private readonly readStore: ReadStore,
    @Inject(KEYRING) private readonly keyring: Keyring,
  ) {}

  organization(id: string): Promise<OrganizationDoc | null> {
    return this.readStore.get<OrganizationDoc>(AccessCollections.organizations, id);
  }

  environment(id: string): Promise<EnvironmentDoc | null> {
    return this.readStore.get<EnvironmentDoc>(AccessCollections.environments, id);
  }

  apiKeyByHash(hash: string): Promise<ApiKeyDoc | null> {
    return this.readStore.get<ApiKeyDoc>(AccessCollections.apiKeysByHash, hash);
  }

  /** A secret of an environment, decrypted (for signing Destination calls or verifying identity tokens). */
  async secret(environmentId: string, kind: 'widget_signing' | 'identity_token'): Promise<string | null> {
    const env = await this.environment(environmentId);
    if (!env) return null;
    return this.keyring.decrypt(environmentId, env.secrets[kind]);
  }
}
