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
  /** Start a new consumer group at the beginning of its topics (default false: latest). */
  fromBeginning?: boolean;
}

function producerConfig() {
  // Keyed records (aggregate id) land on the partition Java clients would pick too.
  return { createPartitioner: Partitioners.DefaultPartitioner, allowAutoTopicCreation: true };
}

/**
 * Server side of a service on Kafka: clientId and consumer group per service (Nest appends
 * `-server`), so every service's group gets every integration event.
 *   NestFactory.createMicroservice(AppModule, kafkaServerOptions('case-ledger', kafkaBrokers()))
 */
export function kafkaServerOptions(serviceName: string, brokers: string[] = kafkaBrokers(), wiring: KafkaWiringOptions = {}): KafkaTransportOptions {
  return {
    transport: Transport.KAFKA,
    options: {
      client: { clientId: serviceName, brokers },
      consumer: { groupId: serviceName, allowAutoTopicCreation: true },
      subscribe: { fromBeginning: wiring.fromBeginning ?? false },
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

/** Client side of a service on Kafka (Nest appends `-client` to clientId and groupId). */
export function kafkaClientOptions(serviceName: string, brokers: string[] = kafkaBrokers(), wiring: KafkaClientWiringOptions = {}): KafkaTransportOptions {
  return {
    transport: Transport.KAFKA,
    options: {
      client: { clientId: serviceName, brokers },
      consumer: { groupId: serviceName, allowAutoTopicCreation: true },
      producer: producerConfig(),
      producerOnlyMode: wiring.producerOnlyMode ?? false,
    },
  };
}
