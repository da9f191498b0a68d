import { KafkaOptions, Transport } from '@nestjs/microservices';
import { Partitioners } from 'kafkajs';

/** `KAFKA_BROKERS` (comma separated, default `localhost:9092`) as a list. */
export function kafkaBrokers(env: NodeJS.ProcessEnv = process.env): string[] {
  const list = (env.KAFKA_BROKERS ?? 'localhost:9092')
    .split(',')
    .map((b) => b.trim())
    .filter(Boolean);
  return list.length ? list : ['localhost:9092'];
}

export type KafkaTransportOptions = KafkaOptions & { transport: Transport.KAFKA; options: NonNullable<KafkaOptions['options']> };

export interface KafkaWiringOptions {
  /**
   * Where a consumer group with no committed offset starts: at the beginning of its topics
   * (default true), so that nothing published before the group's first join is missed. False:
   * at the latest offset (kafkajs's default).
   */
  fromBeginning?: boolean;
  /** kafkajs `partitionsConsumedConcurrently` (KafkaBusServer passes its setting). Default 1. */
  partitionsConsumedConcurrently?: number;
  /** kafkajs `maxWaitTimeInMs` of the consumer's fetches. */
  maxWaitTimeInMs?: number;
}

/**
 * Consumer group membership (every group: the apps' handlers and their reply consumers). A member
 * whose heartbeats stop for `sessionTimeout` is dropped from its group. kafkajs starts a crashed
 * consumer as a new member (a broker restart crashes every consumer), and its group can rebalance
 * only once the old member is dropped: a group stays stopped for up to one session after its
 * broker comes back (kafkajs's default would make that 30 s). KafkaBusServer heartbeats while a
 * handler runs, so a slow handler does not lose its member.
 */
export const KAFKA_GROUP_MEMBERSHIP = { sessionTimeout: 10_000, heartbeatInterval: 3000 } as const;

function producerConfig() {
  // Keyed records (aggregate id) land on the partition Java clients would pick too.
  return { createPartitioner: Partitioners.DefaultPartitioner, allowAutoTopicCreation: true };
}

/**
 * Server side of a service on Kafka: clientId and consumer group per service (Nest appends
 * `-server`), so every service's group gets every integration event; a new group starts at the
 * earliest offset. These are the options of Nest's own Kafka transport; the apps run them in
 * KafkaBusServer (busServerStrategy), which adds concurrency, bounded retries and dead letters.
 */
export function kafkaServerOptions(serviceName: string, brokers: string[] = kafkaBrokers(), wiring: KafkaWiringOptions = {}): KafkaTransportOptions {
  return {
    transport: Transport.KAFKA,
    options: {
      client: { clientId: serviceName, brokers },
      consumer: {
        groupId: serviceName,
        allowAutoTopicCreation: true,
        ...KAFKA_GROUP_MEMBERSHIP,
        ...(wiring.maxWaitTimeInMs !== undefined ? { maxWaitTimeInMs: wiring.maxWaitTimeInMs } : {}),
      },
      subscribe: { fromBeginning: wiring.fromBeginning ?? true },
      run: { partitionsConsumedConcurrently: wiring.partitionsConsumedConcurrently ?? 1 },
      producer: producerConfig(),
    },
  };
}

export interface KafkaClientWiringOptions {
  /**
   * Send-only client (no consumer; `emit` only). Default false. A client that `send`s commands
   * must call `subscribeToResponseOf(pattern)` for each before connecting (busClient does it).
   */
  producerOnlyMode?: boolean;
}

/**
 * Client side of a service on Kafka (Nest appends `-client` to clientId and groupId). Its reply
 * consumer group, when new, starts at the earliest offset of the reply topics: a reply written
 * between the group's join and its first fetch is not skipped (replies to other requests, older
 * ones included, are dropped by correlation id).
 */
export function kafkaClientOptions(serviceName: string, brokers: string[] = kafkaBrokers(), wiring: KafkaClientWiringOptions = {}): KafkaTransportOptions {
  return {
    transport: Transport.KAFKA,
    options: {
      client: { clientId: serviceName, brokers },
      consumer: { groupId: serviceName, allowAutoTopicCreation: true, ...KAFKA_GROUP_MEMBERSHIP },
      subscribe: { fromBeginning: true },
      producer: producerConfig(),
      producerOnlyMode: wiring.producerOnlyMode ?? false,
    },
  };
}
