import { Inject, Module, OnModuleInit } from '@nestjs/common';
import { HttpAdapterHost } from '@nestjs/core';
import { ApiKeyGuard } from '@svc/http';
import { IntegrationEventTypes, Topics } from '@svc/messaging';
import { API_PREFIX, BackgroundWork, PROJECTIONS } from '@svc/platform';
import { ProjectionRunner } from '@svc/read-store';
import { KEYRING, Keyring } from '@svc/security';
import { CaseLedgerService } from './application/case-ledger.service';
import { CaseBusController } from './adapters/bus/case-bus.controller';
import { ClinicalCasesController, StaffClinicalCasesController, WidgetCasesController, registerCaseLeanRoutes } from './adapters/http/cases.controller';
import { caseLedgerProjections } from './read-model';
import { NOTIFY_PARTITION, NOTIFY_TIMERS, NotifyTimerDoc } from './read-model/case.projection';
import { CASE_STREAM_PREFIX } from './domain/case';

/** The case-ledger bounded context: clinical cases, their updates, provider messages, case events. */
@Module({
  controllers: [ClinicalCasesController, StaffClinicalCasesController, WidgetCasesController, CaseBusController],
  providers: [CaseLedgerService],
  exports: [CaseLedgerService],
})
export class CaseLedgerModule implements OnModuleInit {
  constructor(
    @Inject(PROJECTIONS) private readonly projections: ProjectionRunner,
    @Inject(KEYRING) private readonly keyring: Keyring,
    private readonly background: BackgroundWork,
    private readonly cases: CaseLedgerService,
    private readonly http: HttpAdapterHost,
    private readonly apiKeys: ApiKeyGuard,
  ) {}

  onModuleInit(): void {
    // Nest has registered the controllers' routes; Fastify takes routes until it starts listening.
    // (A context without HTTP, e.g. a bus-only microservice, has no adapter and no routes.)
    if (this.http.httpAdapter) registerCaseLeanRoutes(this.http.httpAdapter.getInstance(), API_PREFIX, this.apiKeys, this.cases);
    for (const projection of caseLedgerProjections(this.keyring)) this.projections.register(projection);
    this.background.relay({
      name: 'case-ledger-relay',
      topic: Topics.caseEvents,
      streamPrefixes: [CASE_STREAM_PREFIX],
      eventTypes: [IntegrationEventTypes.caseOpened, IntegrationEventTypes.caseAcknowledged, IntegrationEventTypes.caseResolved],
    });
    // Provider-message emails: durable timers put by the case projection, fired from the clock.
    this.background.timers<NotifyTimerDoc>({
      collection: NOTIFY_TIMERS,
      partition: NOTIFY_PARTITION,
      pollMs: 500,
      refireAfterMs: 5000,
      handler: (t) => this.cases.notifyDue(t),
    });
  }
}
