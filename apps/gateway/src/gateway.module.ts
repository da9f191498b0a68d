import { DynamicModule, Inject, Module, OnApplicationBootstrap, OnModuleDestroy, OnModuleInit } from '@nestjs/common';
import { EVENT_STORE, EventStore } from '@svc/eventstore';
import { AnyClientProxy, BUS_CLIENT, IntegrationEventRelay, IntegrationEventTypes, Topics } from '@svc/messaging';
import { READ_STORE, ReadStore } from '@svc/read-store';
import { PROJECTIONS } from '@svc/platform';
import { ProjectionRunner } from '@svc/read-store';
import { KEYRING, Keyring } from '@svc/security';
import { GatewayService } from './application/gateway.service';
import { DevController } from './adapters/http/dev.controller';
import { EnvironmentAccessController, OrganizationsController } from './adapters/http/organizations.controller';
import { PingController } from './adapters/http/ping.controller';
import { WidgetSessionsController } from './adapters/http/widget-sessions.controller';
import { accessProjection } from './adapters/projections/access.projection';

/** The gateway's bounded context: organizations, members, BAA, API keys, secrets, dev tools. */
@Module({})
export class GatewayModule implements OnModuleInit, OnApplicationBootstrap, OnModuleDestroy {
  private relay: IntegrationEventRelay | undefined;

  constructor(
    @Inject(EVENT_STORE) private readonly store: EventStore,
    @Inject(READ_STORE) private readonly readStore: ReadStore,
    @Inject(BUS_CLIENT) private readonly bus: AnyClientProxy,
    @Inject(PROJECTIONS) private readonly projections: ProjectionRunner,
    @Inject(KEYRING) private readonly keyring: Keyring,
  ) {}

  static forRoot(options: { devTools: boolean }): DynamicModule {
    return {
      module: GatewayModule,
      controllers: [OrganizationsController, EnvironmentAccessController, PingController, WidgetSessionsController, ...(options.devTools ? [DevController] : [])],
      providers: [GatewayService],
      exports: [GatewayService],
    };
  }

  onModuleInit(): void {
    this.projections.register(accessProjection(this.keyring));
  }

  /** Organization facts other contexts follow (environments, BAA signed), from the gateway's own streams. */
  async onApplicationBootstrap(): Promise<void> {
    this.relay = new IntegrationEventRelay({
      name: 'gateway-relay',
      store: this.store,
      readStore: this.readStore,
      client: this.bus,
      topic: Topics.gatewayEvents,
      streamPrefixes: ['gateway-organization-'],
      eventTypes: [IntegrationEventTypes.organizationCreated, IntegrationEventTypes.baaSigned],
    });
    await this.relay.start();
  }

  async onModuleDestroy(): Promise<void> {
    await this.relay?.stop();
  }
}
