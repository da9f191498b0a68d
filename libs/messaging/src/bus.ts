import { ClientProxy, CustomStrategy } from '@nestjs/microservices';
import { defaultBroker, InProcessBroker } from './inproc/broker';
import { InProcessClient } from './inproc/client';
import { InProcessServer } from './inproc/server';
import { kafkaBrokers, kafkaClientOptions, kafkaServerOptions } from './kafka';
import { KafkaBusClient } from './kafka-client';
import { KAFKA_CONSUMER_DEFAULTS, KafkaBusServer, KafkaConsumerSettings } from './kafka-server';

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
  /** Kafka server only: a new consumer group starts at the beginning of its topics (default true). */
  fromBeginning?: boolean;
  /** Kafka server only: concurrency, retries, dead letters, logger (defaults: KAFKA_CONSUMER_DEFAULTS). */
  consumer?: KafkaConsumerSettings;
}

/**
 * The microservice options of a service on the configured bus:
 *   const ms = await NestFactory.createMicroservice(AppModule, busServerStrategy('case-ledger'));
 *   // or, in a hybrid app: app.connectMicroservice(busServerStrategy('case-ledger'))
 *   ms.useGlobalFilters(new BusExceptionFilter());
 *   await ms.listen();
 */
export function busServerStrategy(serviceName: string, options: BusOptions = {}): CustomStrategy {
  if ((options.kind ?? busKind()) === 'kafka') {
    const consumer = options.consumer ?? {};
    const { options: kafka } = kafkaServerOptions(serviceName, options.brokers ?? kafkaBrokers(), {
      fromBeginning: options.fromBeginning,
      partitionsConsumedConcurrently: consumer.partitionsConsumedConcurrently ?? KAFKA_CONSUMER_DEFAULTS.partitionsConsumedConcurrently,
      maxWaitTimeInMs: consumer.maxWaitTimeInMs,
    });
    return { strategy: new KafkaBusServer(kafka, consumer) };
  }
  return { strategy: new InProcessServer(options.broker ?? defaultBroker()) };
}

export interface BusClientOptions extends BusOptions {
  /**
   * Kafka only: the request patterns this client will `send` (their reply topics are subscribed
   * before connecting). Without any, the Kafka client is producer-only (emit only).
   */
  replyPatterns?: string[];
  /**
   * Kafka only: longest wait of a `send` for the reply consumer (joined, reply partition
   * assigned) before it fails with BusUnavailableError. Default 5000 ms.
   */
  replyWaitMs?: number;
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
    const client = new KafkaBusClient(kafka, { replyWaitMs: options.replyWaitMs });
    for (const p of replyPatterns) client.subscribeToResponseOf(p);
    return client;
  }
  return new InProcessClient(options.broker ?? defaultBroker());
}

/**
 * Resolves once a bus client can send requests: on Kafka, its reply consumer has joined its group
 * with a partition of every reply topic (bounded by `timeoutMs`, else BusUnavailableError); the
 * in-process client at once. Apps call it at start, before they consume (connectBus).
 */
export async function busClientReady(client: AnyClientProxy, patterns: string[], timeoutMs: number): Promise<void> {
  if (!(client instanceof KafkaBusClient)) return;
  const deadline = Date.now() + timeoutMs;
  for (const p of patterns) await client.whenReady(p, Math.max(0, deadline - Date.now()));
}

/** DI token for a service's bus client. */
export const BUS_CLIENT = Symbol('BUS_CLIENT');

/** Any Nest client proxy, whatever its status type (ClientKafka, InProcessClient, ...). */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type AnyClientProxy = ClientProxy<any, any>;
