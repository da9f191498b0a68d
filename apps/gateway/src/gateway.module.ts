import { DynamicModule, Inject, Module, OnModuleInit } from '@nestjs/common';
import { PROJECTIONS } from '@svc/platform';
import { ProjectionRunner } from '@svc/read-store';
import { KEYRING, Keyring } from '@svc/security';
import { GatewayService } from './application/gateway.service';
import { DevController } from './adapters/http/dev.controller';
import { EnvironmentAccessController, OrganizationsController } from './adapters/http/organizations.controller';
import { PingController } from './adapters/http/ping.controller';
import { accessProjection } from './adapters/projections/access.projection';

/** The gateway's bounded context: organizations, members, BAA, API keys, secrets, dev tools. */
@Module({})
export class GatewayModule implements OnModuleInit {
  constructor(
    @Inject(PROJECTIONS) private readonly projections: ProjectionRunner,
    @Inject(KEYRING) private readonly keyring: Keyring,
  ) {}

  static forRoot(options: { devTools: boolean }): DynamicModule {
    return {
      module: GatewayModule,
      controllers: [OrganizationsController, EnvironmentAccessController, PingController, ...(options.devTools ? [DevController] : [])],
      providers: [GatewayService],
      exports: [GatewayService],
    };
  }

  onModuleInit(): void {
    this.projections.register(accessProjection(this.keyring));
  }
}
