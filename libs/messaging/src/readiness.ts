import { Admin, Kafka, logLevel } from 'kafkajs';
import { BusKind, busKind } from './bus';
import { defaultBroker, InProcessBroker } from './inproc/broker';
import { kafkaBrokers } from './kafka';

/**
 * Readiness of the bus (GET /readyz): `ping()` resolves when the bus answers, rejects when it
 * cannot be reached. It may stay pending while a broker is silent: the caller bounds it.
 */
export interface BusPing {
  ping(): Promise<void>;
  close?(): Promise<void>;
}

/** DI token of the app's bus readiness probe. */
export const BUS_PING = Symbol('BUS_PING');

/** Longest wait for a TCP connection to a broker, and for one request's answer, of the Kafka probe. */
const KAFKA_PING_CONNECT_MS = 1000;
const KAFKA_PING_REQUEST_MS = 2000;

/**
 * Kafka: a metadata request (`describeCluster`) to the brokers on an admin connection of its own,
 * opened at the first ping and kept. No retries of its own (the next probe is the retry); a failed
 * ping drops the connection, so the next one starts afresh. Logs nothing (kafkajs would print
 * connection errors with the broker addresses).
 */
export class KafkaPing implements BusPing {
  private readonly kafka: Kafka;
  private admin: Admin | null = null;
  private connecting: Promise<Admin> | null = null;
  private closed = false;

  constructor(clientId: string, brokers: string[]) {
    this.kafka = new Kafka({
      clientId: `${clientId}-readiness`,
      brokers,
      connectionTimeout: KAFKA_PING_CONNECT_MS,
      requestTimeout: KAFKA_PING_REQUEST_MS,
      retry: { retries: 0 },
      logLevel: logLevel.NOTHING,
    });
  }

  async ping(): Promise<void> {
    if (this.closed) throw new Error('bus probe is closed');
    const admin = await this.connected();
    try {
      await admin.describeCluster();
    } catch (err) {
      await this.drop(admin);
      throw err;
    }
  }

  private connected(): Promise<Admin> {
    if (this.admin) return Promise.resolve(this.admin);
    this.connecting ??= (async () => {
      const admin = this.kafka.admin({ retry: { retries: 0 } });
      try {
        await admin.connect();
      } catch (err) {
        await admin.disconnect().catch(() => undefined);
        throw err;
      } finally {
        this.connecting = null;
      }
      if (this.closed) {
        await admin.disconnect().catch(() => undefined);
        throw new Error('bus probe is closed');
      }
      this.admin = admin;
      return admin;
    })();
    return this.connecting;
  }

  private async drop(admin: Admin): Promise<void> {
    if (this.admin === admin) this.admin = null;
    await admin.disconnect().catch(() => undefined);
  }

  async close(): Promise<void> {
    this.closed = true;
    const admin = this.admin;
    this.admin = null;
    if (admin) await admin.disconnect().catch(() => undefined);
  }
}

/** The readiness probe of the configured bus (`BUS`): the in-process broker itself, or a Kafka probe. */
export function busPing(serviceName: string, options: { kind?: BusKind; broker?: InProcessBroker; brokers?: string[] } = {}): BusPing {
  if ((options.kind ?? busKind()) === 'kafka') return new KafkaPing(serviceName, options.brokers ?? kafkaBrokers());
  return options.broker ?? defaultBroker();
}
