import { ClientKafka, ClientProxy, CustomStrategy } from '@nestjs/microservices';
import { defaultBroker, InProcessBroker } from './inproc/broker';
import { InProcessClient } from './inproc/client';
import { InProcessServer } from './inproc/server';
import { kafkaBrokers, kafkaClientOptions, KafkaTransportOptions, kafkaServerOptions } from './kafka';

export type BusKind = 'inproc' | 'kafka';

/** `BUS=inproc|kafka` (default inproc, the standalone mode). */
export function busKind(env: NodeJS.ProcessEnv = process.env): BusKind {
  const v = (env.BUS ?? 'inproc').trim().toLowerCase();
  if (v === '' || v === 'inproc') return 'inproc';
  if (v === 'kafka') return 'kafka';
  throw new Error(`BUS must be "inproc" or "kafka", got "${env.BUS}"`);
}

export interface BusOptions {
  /** Overrides `BUS`. */
  kind?: BusKind;
  /** In-process only: the broker (default: the process-wide one). */
  broker?: InProcessBroker;
  /** Kafka only: overrides `KAFKA_BROKERS`. */
  brokers?: string[];
  /** Kafka server only: new consumer group starts at the beginning of its topics. */
  fromBeginning?: boolean;
}

/**
 * The microservice options of a service on the configured bus:
 *   const ms = await NestFactory.createMicroservice(AppModule, busServerStrategy('case-ledger'));
 *   // or, in a hybrid app: app.connectMicroservice(busServerStrategy('case-ledger'))
 *   ms.useGlobalFilters(new BusExceptionFilter());
 *   await ms.listen();
 */
export function busServerStrategy(serviceName: string, options: BusOptions = {}): CustomStrategy | KafkaTransportOptions {
  if ((options.kind ?? busKind()) === 'kafka') {
    return kafkaServerOptions(serviceName, options.brokers ?? kafkaBrokers(), { fromBeginning: options.fromBeginning });
  }
  return { strategy: new InProcessServer(options.broker ?? defaultBroker()) };
}

export interface BusClientOptions extends BusOptions {
  /**
   * Kafka only: the request patterns this client will `send` (their reply topics are subscribed
   * before connecting). Without any, the Kafka client is producer-only (emit only).
   */
  replyPatterns?: string[];
}

/**
 * A ClientProxy on the configured bus (call `connect()` at start-up, `close()` at shutdown).
 * As a Nest provider: `{ provide: BUS_CLIENT, useFactory: () => busClient('gateway', { replyPatterns: [Patterns.openClinicalCase] }) }`.
 */
export function busClient(serviceName: string, options: BusClientOptions = {}): AnyClientProxy {
  if ((options.kind ?? busKind()) === 'kafka') {
    const replyPatterns = options.replyPatterns ?? [];
    const { options: kafka } = kafkaClientOptions(serviceName, options.brokers ?? kafkaBrokers(), {
      producerOnlyMode: replyPatterns.length === 0,
    });
    const client = new ClientKafka(kafka);
    for (const p of replyPatterns) client.subscribeToResponseOf(p);
    return client;
  }
  return new InProcessClient(options.broker ?? defaultBroker());
}

/** DI token for a service's bus client. */
export const BUS_CLIENT = Symbol('BUS_CLIENT');

/** Any Nest client proxy, whatever its status type (ClientKafka, InProcessClient, ...). */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type AnyClientProxy = ClientProxy<any, any>;
