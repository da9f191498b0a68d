import type { EnvironmentKind } from '@svc/decider';

/**
 * The gateway's access read model: collection names and document shapes. The gateway's access
 * projection (apps/gateway/src/read-model/access.projection.ts) writes these documents; every
 * app's guards read them (`TenantDirectory`; in distributed mode from the same read store).
 */
export const AccessCollections = {
  /** `OrganizationDoc` by organization id. */
  organizations: 'access.organizations',
  /** `EnvironmentDoc` by environment id. */
  environments: 'access.environments',
  /** `ApiKeyDoc` by the key's hash, for the API-key guard; a revoked key's entry is deleted. */
  apiKeysByHash: 'access.api-keys-by-hash',
  /** `ApiKeyRecord` by key id, partition = the environment id, score = creation time: the key list. */
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

/** An entry of `AccessCollections.apiKeys`: the key's document and its hash. */
export interface ApiKeyRecord extends ApiKeyDoc {
  keyHash: string;
}
