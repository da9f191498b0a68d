import { DynamicModule, Inject, Module, OnModuleInit } from '@nestjs/common';
import { IntegrationEventTypes, Topics } from '@svc/messaging';
import { HttpAdapterHost } from '@nestjs/core';
import { BackgroundWork, CONFIG, PROJECTIONS, ServiceConfig, registerWebRoutes } from '@svc/platform';
import { ProjectionRunner } from '@svc/read-store';
import { KEYRING, Keyring } from '@svc/security';
import { GatewayService } from './application/gateway.service';
import { IdentityTokenUses } from './application/identity-tokens.service';
import { DevController } from './adapters/http/dev.controller';
import { EnvironmentAccessController, OrganizationsController } from './adapters/http/organizations.controller';
import { PingController } from './adapters/http/ping.controller';
import { ReferenceController } from './adapters/http/reference.controller';
import { WidgetSessionsController } from './adapters/http/widget-sessions.controller';
import { gatewayProjections } from './read-model';

/** The gateway's bounded context: organizations, members, BAA, API keys, secrets, dev tools. */
@Module({})
export class GatewayModule implements OnModuleInit {
  constructor(
    @Inject(PROJECTIONS) private readonly projections: ProjectionRunner,
    @Inject(KEYRING) private readonly keyring: Keyring,
    private readonly background: BackgroundWork,
    private readonly http: HttpAdapterHost,
    @Inject(CONFIG) private readonly config: ServiceConfig,
  ) {}

  static forRoot(options: { devTools: boolean }): DynamicModule {
    return {
      module: GatewayModule,
      controllers: [
        OrganizationsController,
        EnvironmentAccessController,
        PingController,
        ReferenceController,
        WidgetSessionsController,
        ...(options.devTools ? [DevController] : []),
      ],
      providers: [GatewayService, IdentityTokenUses],
      exports: [GatewayService],
    };
  }

  onModuleInit(): void {
    // The pages for people outside the API prefix: /widget.js, /assets/*, /console/*, /widget-demo with the dev
    // tools (libs/platform web-pages; Fastify takes routes until it listens).
    if (this.http.httpAdapter) registerWebRoutes(this.http.httpAdapter.getInstance(), { devTools: this.config.devTools, staffOidc: this.config.staffOidc });
    for (const projection of gatewayProjections(this.keyring)) this.projections.register(projection);
    // Organization facts other contexts follow (environments, BAA signed), from the gateway's own streams.
    this.background.relay({
      name: 'gateway-relay',
      topic: Topics.gatewayEvents,
      streamPrefixes: ['gateway-organization-'],
      eventTypes: [IntegrationEventTypes.organizationCreated, IntegrationEventTypes.baaSigned],
    });
  }
}
