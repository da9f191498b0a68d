/**
 * @svc/messaging: bus names, the in-process transport, Kafka wiring (topics and their settings,
 * ensureTopics; KafkaBusServer: earliest offset for new groups, partitions consumed at once,
 * bounded retries, dead letters and their replay; KafkaBusClient: requests only once the reply
 * consumer joined), the integration-event relay and consumer-side dedupe.
 *
 * Wiring a service (same code on both buses; `BUS=inproc|kafka`, `KAFKA_BROKERS=h1:9092,h2:9092`):
 *   const ms = await NestFactory.createMicroservice(CaseLedgerModule, busServerStrategy('case-ledger'));
 *   ms.useGlobalFilters(new BusExceptionFilter());   // domain refusals keep status/code
 *   await ms.listen();
 *   // hybrid HTTP app: app.connectMicroservice(busServerStrategy('gateway')); await app.startAllMicroservices();
 *
 *   { provide: BUS_CLIENT, useFactory: () => busClient('gateway', { replyPatterns: [Patterns.openClinicalCase] }) }
 *   await ask<OpenClinicalCaseReply>(client, Patterns.openClinicalCase, dto, { timeoutMs: 10_000 });
 *
 *   const relay = new IntegrationEventRelay({ name: 'case-ledger-relay', store, readStore, client,
 *     topic: Topics.caseEvents, streamPrefixes: ['case-'] });
 *   await relay.start();  // ... await relay.stop();
 *
 *   @EventPattern(Topics.caseEvents) async on(@Payload() m: IntegrationMessage) {
 *     await processed.once('workflow-engine', m.metadata.eventId, () => handle(m));
 *   }
 * In standalone mode every app uses the process-wide broker (defaultBroker()), so each app's
 * @EventPattern subscriber gets every event.
 */
export * from './names';
export * from './contracts';
export * from './inproc/broker';
export * from './inproc/context';
export * from './inproc/server';
export * from './inproc/client';
export * from './record';
export * from './errors';
export * from './kafka';
export * from './topics';
export * from './kafka-server';
export * from './kafka-client';
export * from './dead-letters';
export * from './bus';
export * from './readiness';
export * from './relay';
export * from './dedupe';
export * from './credits';
export * from './rpc';
export * from './ask';
