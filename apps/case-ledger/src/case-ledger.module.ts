import { Inject, Module, OnApplicationBootstrap, OnModuleDestroy, OnModuleInit } from '@nestjs/common';
import { EVENT_STORE, EventStore } from '@svc/eventstore';
import { AnyClientProxy, BUS_CLIENT, IntegrationEventRelay, IntegrationEventTypes, Topics } from '@svc/messaging';
import { PROJECTIONS } from '@svc/platform';
import { ProjectionRunner, READ_STORE, ReadStore } from '@svc/read-store';
import { KEYRING, Keyring } from '@svc/security';
import { getLogger } from '@svc/http';
import { CaseLedgerService } from './application/case-ledger.service';
import { CaseBusController } from './adapters/bus/case-bus.controller';
import { ClinicalCasesController, StaffClinicalCasesController } from './adapters/http/cases.controller';
import { caseProjection } from './adapters/projections/case.projection';
import { CASE_STREAM_PREFIX } from './domain/case';

/** The case-ledger bounded context: clinical cases, their updates, provider messages, case events. */
@Module({
  controllers: [ClinicalCasesController, StaffClinicalCasesController, CaseBusController],
  providers: [CaseLedgerService],
  exports: [CaseLedgerService],
})
export class CaseLedgerModule implements OnModuleInit, OnApplicationBootstrap, OnModuleDestroy {
  private relay: IntegrationEventRelay | null = null;

  constructor(
    @Inject(PROJECTIONS) private readonly projections: ProjectionRunner,
    @Inject(KEYRING) private readonly keyring: Keyring,
    @Inject(EVENT_STORE) private readonly store: EventStore,
    @Inject(READ_STORE) private readonly readStore: ReadStore,
    @Inject(BUS_CLIENT) private readonly client: AnyClientProxy,
  ) {}

  onModuleInit(): void {
    this.projections.register(caseProjection(this.keyring));
  }

  async onApplicationBootstrap(): Promise<void> {
    const log = getLogger();
    this.relay = new IntegrationEventRelay({
      name: 'case-ledger-relay',
      store: this.store,
      readStore: this.readStore,
      client: this.client,
      topic: Topics.caseEvents,
      streamPrefixes: [CASE_STREAM_PREFIX],
      eventTypes: [IntegrationEventTypes.caseOpened, IntegrationEventTypes.caseAcknowledged, IntegrationEventTypes.caseResolved],
      logger: { warn: (msg: string) => log.warn({ relay: 'case-ledger-relay' }, msg) },
    });
    await this.relay.start();
  }

  async onModuleDestroy(): Promise<void> {
    await this.relay?.stop();
    this.relay = null;
  }
}
