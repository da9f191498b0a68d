import { Inject, Module, OnApplicationBootstrap, OnModuleDestroy, OnModuleInit } from '@nestjs/common';
import { CLOCK, Clock } from '@svc/clock';
import { EVENT_STORE, EventStore } from '@svc/eventstore';
import { getLogger } from '@svc/http';
import { AnyClientProxy, BUS_CLIENT, IntegrationEventRelay, IntegrationEventTypes, Topics } from '@svc/messaging';
import { PROJECTIONS } from '@svc/platform';
import { ProjectionRunner, READ_STORE, ReadStore, TimerScheduler } from '@svc/read-store';
import { CheckInsService } from './application/check-ins.service';
import { PathwayService } from './application/pathway.service';
import { PathwayQueriesController } from './adapters/bus/pathway-queries.controller';
import { PatientEventsController } from './adapters/http/patient-events.controller';
import { PathwayStaffController } from './adapters/http/staff.controller';
import { WidgetCheckInsController } from './adapters/http/widget-check-ins.controller';
import { CaseOpenDoc, CheckInTimerDoc, DispatchDoc, PathwayCollections, TIMER_PARTITION, pathwayProjection } from './adapters/projections/pathway.projection';
import { CHECK_IN_STREAM_PREFIX } from './domain/streams';

/**
 * The patient-pathway bounded context: patient lifecycle, protocols, check-ins (durable timers on
 * the service clock), the patient-side check-in flow, and `check_in.sent` on Topics.pathwayEvents.
 */
@Module({
  controllers: [PatientEventsController, PathwayStaffController, WidgetCheckInsController, PathwayQueriesController],
  providers: [PathwayService, CheckInsService],
  exports: [PathwayService],
})
export class PatientPathwayModule implements OnModuleInit, OnApplicationBootstrap, OnModuleDestroy {
  private schedulers: TimerScheduler<never>[] = [];
  private relay: IntegrationEventRelay | null = null;

  constructor(
    @Inject(PROJECTIONS) private readonly projections: ProjectionRunner,
    @Inject(READ_STORE) private readonly readStore: ReadStore,
    @Inject(EVENT_STORE) private readonly store: EventStore,
    @Inject(CLOCK) private readonly clock: Clock,
    @Inject(BUS_CLIENT) private readonly bus: AnyClientProxy,
    private readonly checkIns: CheckInsService,
  ) {}

  onModuleInit(): void {
    this.projections.register(pathwayProjection());
  }

  async onApplicationBootstrap(): Promise<void> {
    const logger = getLogger();
    const base = { readStore: this.readStore, clock: this.clock, partition: TIMER_PARTITION, logger };
    this.schedulers = [
      new TimerScheduler<CheckInTimerDoc>({ ...base, collection: PathwayCollections.checkInTimers, handler: (t) => this.checkIns.fireScheduled(t) }),
      new TimerScheduler<DispatchDoc>({ ...base, collection: PathwayCollections.dispatch, pollMs: 500, handler: (t) => this.checkIns.dispatch(t) }),
      new TimerScheduler<CaseOpenDoc>({ ...base, collection: PathwayCollections.caseOpen, pollMs: 5000, refireAfterMs: 5000, handler: (t) => this.checkIns.retryCaseOpen(t) }),
    ] as unknown as TimerScheduler<never>[];
    for (const s of this.schedulers) s.start();
    this.relay = new IntegrationEventRelay({
      name: 'patient-pathway-relay',
      store: this.store,
      readStore: this.readStore,
      client: this.bus,
      topic: Topics.pathwayEvents,
      streamPrefixes: [CHECK_IN_STREAM_PREFIX],
      eventTypes: [IntegrationEventTypes.checkInSent],
      logger: { warn: (message: string) => logger.warn({ relay: 'patient-pathway-relay' }, message) },
    });
    await this.relay.start();
  }

  async onModuleDestroy(): Promise<void> {
    await Promise.all(this.schedulers.map((s) => s.stop()));
    this.schedulers = [];
    await this.relay?.stop();
    this.relay = null;
  }
}
