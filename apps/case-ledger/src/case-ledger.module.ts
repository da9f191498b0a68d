import { Inject, Module, OnApplicationBootstrap, OnModuleDestroy, OnModuleInit } from '@nestjs/common';
import { EVENT_STORE, EventStore } from '@svc/eventstore';
import { AnyClientProxy, BUS_CLIENT, IntegrationEventRelay, IntegrationEventTypes, Topics } from '@svc/messaging';
import { PROJECTIONS } from '@svc/platform';
import { ProjectionRunner, READ_STORE, ReadStore, TimerScheduler } from '@svc/read-store';
import { CLOCK, Clock } from '@svc/clock';
import { KEYRING, Keyring } from '@svc/security';
import { getLogger } from '@svc/http';
import { CaseLedgerService } from './application/case-ledger.service';
import { CaseBusController } from './adapters/bus/case-bus.controller';
import { ClinicalCasesController, StaffClinicalCasesController } from './adapters/http/cases.controller';
import { NOTIFY_PARTITION, NOTIFY_TIMERS, NotifyTimerDoc, caseProjection } from './adapters/projections/case.projection';
import { CASE_STREAM_PREFIX } from './domain/case';

/** The case-ledger bounded context: clinical cases, their updates, provider messages, case events. */
@Module({
  controllers: [ClinicalCasesController, StaffClinicalCasesController, CaseBusController],
  providers: [CaseLedgerService],
  exports: [CaseLedgerService],
})
export class CaseLedgerModule implements OnModuleInit, OnApplicationBootstrap, OnModuleDestroy {
  private relay: IntegrationEventRelay | null = null;
  private notifier: TimerScheduler<NotifyTimerDoc> | null = null;

  constructor(
    @Inject(PROJECTIONS) private readonly projections: ProjectionRunner,
    @Inject(KEYRING) private readonly keyring: Keyring,
    @Inject(EVENT_STORE) private readonly store: EventStore,
    @Inject(READ_STORE) private readonly readStore: ReadStore,
    @Inject(BUS_CLIENT) private readonly client: AnyClientProxy,
    @Inject(CLOCK) private readonly clock: Clock,
    private readonly cases: CaseLedgerService,
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
    // Provider-message emails: durable timers put by the case projection, fired from the clock.
    this.notifier = new TimerScheduler<NotifyTimerDoc>({
      readStore: this.readStore,
      clock: this.clock,
      collection: NOTIFY_TIMERS,
      partition: NOTIFY_PARTITION,
      pollMs: 500,
      refireAfterMs: 5000,
      logger: log,
      handler: (t) => this.cases.notifyDue(t),
    });
    this.notifier.start();
  }

  async onModuleDestroy(): Promise<void> {
    await this.notifier?.stop();
    this.notifier = null;
    await this.relay?.stop();
    this.relay = null;
  }
}
