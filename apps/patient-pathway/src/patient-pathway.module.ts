import { Module, OnModuleInit, Inject } from '@nestjs/common';
import { IntegrationEventTypes, Topics } from '@svc/messaging';
import { BackgroundWork, PROJECTIONS } from '@svc/platform';
import { ProjectionRunner } from '@svc/read-store';
import { CheckInsService } from './application/check-ins.service';
import { PathwayService } from './application/pathway.service';
import { PathwayQueriesController } from './adapters/bus/pathway-queries.controller';
import { PatientEventsController } from './adapters/http/patient-events.controller';
import { PathwayStaffController } from './adapters/http/staff.controller';
import { WidgetCheckInsController } from './adapters/http/widget-check-ins.controller';
import { patientPathwayProjections } from './read-model';
import { CaseOpenDoc, CheckInTimerDoc, DispatchDoc, PathwayCollections, TIMER_PARTITION } from './read-model/pathway.projection';
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
export class PatientPathwayModule implements OnModuleInit {
  constructor(
    @Inject(PROJECTIONS) private readonly projections: ProjectionRunner,
    private readonly background: BackgroundWork,
    private readonly checkIns: CheckInsService,
  ) {}

  onModuleInit(): void {
    for (const projection of patientPathwayProjections()) this.projections.register(projection);
    const base = { partition: TIMER_PARTITION };
    this.background.timers<CheckInTimerDoc>({ ...base, collection: PathwayCollections.checkInTimers, handler: (t) => this.checkIns.fireScheduled(t) });
    this.background.timers<DispatchDoc>({ ...base, collection: PathwayCollections.dispatch, pollMs: 500, handler: (t) => this.checkIns.dispatch(t) });
    this.background.timers<CaseOpenDoc>({
      ...base,
      collection: PathwayCollections.caseOpen,
      pollMs: 5000,
      refireAfterMs: 5000,
      handler: (t) => this.checkIns.retryCaseOpen(t),
    });
    this.background.relay({
      name: 'patient-pathway-relay',
      topic: Topics.pathwayEvents,
      streamPrefixes: [CHECK_IN_STREAM_PREFIX],
      eventTypes: [IntegrationEventTypes.checkInSent],
    });
  }
}
