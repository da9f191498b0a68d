import { Inject, Injectable } from '@nestjs/common';
import { READ_STORE, ReadStore } from '@svc/read-store';
import { KEYRING, Keyring } from '@svc/security';
import { AccessCollections, ApiKeyDoc, EnvironmentDoc, OrganizationDoc } from './documents';

/** Reads the access model for the guards and the apps (a global provider of `PlatformModule`). */
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
