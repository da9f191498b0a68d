import { RecordedEvent } from '@svc/eventstore';
import {
  ACCESS_PROJECTION,
  AccessCollections,
  ApiKeyDoc,
  ApiKeyRecord,
  EnvironmentDoc,
  MembershipDoc,
  OrganizationDoc,
  identityTokenVersion,
  membership,
  membershipKey,
} from '@svc/access';
import { Projection, ProjectionTx } from '@svc/read-store';
import { Keyring } from '@svc/security';
import { ApiKeyEvent } from '../domain/api-key';
import { EnvironmentEvent } from '../domain/environment';
import { OrganizationEvent } from '../domain/organization';

type GatewayEvent = OrganizationEvent | ApiKeyEvent | EnvironmentEvent;

/** Indexes `sub` as a member of the organization, in order of joining (the event's log position). */
function indexMember(tx: ProjectionTx, organizationId: string, sub: string, position: number): void {
  const doc: MembershipDoc = { organizationId };
  tx.put(AccessCollections.organizationsByMember, membershipKey(organizationId, sub), doc, { partition: sub, score: position });
}

/**
 * Organizations (with their members, and each member's organizations indexed by `sub`),
 * environments (secrets re-encrypted), and API keys by hash, for the guards.
 */
export function accessProjection(keyring: Keyring): Projection {
  return {
    name: ACCESS_PROJECTION,
    collections: Object.values(AccessCollections),
    streamPrefixes: ['gateway-'],
    async apply(recorded: RecordedEvent, tx: ProjectionTx) {
      const event = { type: recorded.type, ...(recorded.data as object) } as GatewayEvent;
      switch (event.type) {
        case 'OrganizationCreated': {
          const doc: OrganizationDoc = {
            id: event.organizationId,
            name: event.name,
            baaSignedAt: null,
            environments: event.environments,
            members: { [event.owner.sub]: { role: 'owner', email: event.owner.email, addedAt: event.createdAt } },
            createdAt: event.createdAt,
          };
          tx.put(AccessCollections.organizations, event.organizationId, doc);
          indexMember(tx, event.organizationId, event.owner.sub, recorded.position);
          return;
        }
        case 'MemberAdded': {
          const orgId = recorded.metadata.organizationId!;
          const doc = await tx.get<OrganizationDoc>(AccessCollections.organizations, orgId);
          if (!doc) return;
          // A member already (a role change as streams wrote it before MemberRoleChanged): joined when it first did.
          const before = membership(doc, event.sub);
          const addedAt = before?.addedAt ?? event.addedAt;
          tx.put(AccessCollections.organizations, orgId, {
            ...doc,
            members: { ...doc.members, [event.sub]: { role: event.role, email: event.email, addedAt } },
          });
          if (!before) indexMember(tx, orgId, event.sub, recorded.position);
          return;
        }
        case 'MemberRoleChanged': {
          const orgId = recorded.metadata.organizationId!;
          const doc = await tx.get<OrganizationDoc>(AccessCollections.organizations, orgId);
          const member = doc && membership(doc, event.sub);
          if (!doc || !member) return;
          tx.put(AccessCollections.organizations, orgId, { ...doc, members: { ...doc.members, [event.sub]: { ...member, role: event.role } } });
          return;
        }
        case 'MemberRemoved': {
          const orgId = recorded.metadata.organizationId!;
          const doc = await tx.get<OrganizationDoc>(AccessCollections.organizations, orgId);
          if (!doc || !membership(doc, event.sub)) return;
          tx.put(AccessCollections.organizations, orgId, {
            ...doc,
            members: Object.fromEntries(Object.entries(doc.members).filter(([sub]) => sub !== event.sub)),
          });
          tx.delete(AccessCollections.organizationsByMember, membershipKey(orgId, event.sub));
          return;
        }
        case 'BaaSigned': {
          const orgId = recorded.metadata.organizationId!;
          const doc = await tx.get<OrganizationDoc>(AccessCollections.organizations, orgId);
          if (!doc || doc.baaSignedAt) return;
          tx.put(AccessCollections.organizations, orgId, { ...doc, baaSignedAt: event.baaSignedAt });
          return;
        }
        case 'EnvironmentProvisioned': {
          const doc: EnvironmentDoc = {
            id: event.environmentId,
            organizationId: event.organizationId,
            kind: event.kind,
            secrets: {
              widget_signing: keyring.encrypt(event.environmentId, event.secrets.widget_signing),
              identity_token: keyring.encrypt(event.environmentId, event.secrets.identity_token),
            },
          };
          tx.put(AccessCollections.environments, event.environmentId, doc);
          return;
        }
        case 'SecretRotated': {
          const doc = await tx.get<EnvironmentDoc>(AccessCollections.environments, event.environmentId);
          if (!doc) return;
          tx.put(AccessCollections.environments, event.environmentId, {
            ...doc,
            secrets: { ...doc.secrets, [event.kind]: keyring.encrypt(event.environmentId, event.secret) },
          });
          if (event.kind === 'identity_token') {
            // Counted on the organization, which the widget session guard reads: written in the
            // same commit as the new secret, so no read sees one without the other.
            const org = await tx.get<OrganizationDoc>(AccessCollections.organizations, doc.organizationId);
            if (org) {
              const versions = { ...org.identityTokenVersions, [event.environmentId]: identityTokenVersion(org, event.environmentId) + 1 };
              tx.put(AccessCollections.organizations, doc.organizationId, { ...org, identityTokenVersions: versions });
            }
          }
          return;
        }
        case 'ApiKeyCreated': {
          const doc: ApiKeyDoc = {
            id: event.keyId,
            organizationId: event.organizationId,
            environmentId: event.environmentId,
            environmentKind: event.environmentKind,
            name: event.name,
            prefix: event.prefix,
            createdAt: event.createdAt,
            revokedAt: null,
          };
          tx.put(AccessCollections.apiKeysByHash, event.keyHash, doc);
          const record: ApiKeyRecord = { ...doc, keyHash: event.keyHash };
          tx.put(AccessCollections.apiKeys, event.keyId, record, { partition: event.environmentId, score: Date.parse(event.createdAt) });
          return;
        }
        case 'ApiKeyRevoked': {
          const doc = await tx.get<ApiKeyRecord>(AccessCollections.apiKeys, event.keyId);
          if (!doc) return;
          const { keyHash, ...rest } = doc;
          tx.delete(AccessCollections.apiKeysByHash, keyHash);
          tx.put(
            AccessCollections.apiKeys,
            event.keyId,
            { ...doc, revokedAt: event.revokedAt },
            { partition: rest.environmentId, score: Date.parse(rest.createdAt) },
          );
          return;
        }
        default:
          return;
      }
    },
  };
}
