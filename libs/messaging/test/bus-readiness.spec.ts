import { freePort } from '@svc/testing';
import { InProcessBroker, KafkaPing, busPing } from '../src';

/**
 * `ping()` of each bus (GET /readyz): the in-process broker answers while the process runs; the
 * Kafka probe asks the brokers for the cluster's metadata. Kafka against a real broker only when
 * KAFKA_BROKERS names one (`npm test` starts one; `npm run kafka:up` by hand): otherwise one line
 * says it skipped, unless KAFKA_REQUIRED=1. Against a port where nothing listens it must fail
 * (that needs no broker).
 */
const brokers = (process.env.KAFKA_BROKERS ?? '').trim();
const required = process.env.KAFKA_REQUIRED === '1';

describe('bus ping', () => {
  it('in-process: the broker answers', async () => {
    const broker = new InProcessBroker();
    await expect(broker.ping()).resolves.toBeUndefined();
    await expect(busPing('test', { kind: 'inproc', broker }).ping()).resolves.toBeUndefined();
  });

  it('Kafka: fails, without hanging, when nothing listens at the brokers given', async () => {
    const port = await freePort();
    const probe = new KafkaPing('readiness-test', [`127.0.0.1:${port}`]);
    try {
      const started = Date.now();
      await expect(probe.ping()).rejects.toThrow();
      expect(Date.now() - started).toBeLessThan(10_000);
      // And again: a failed probe does not stay stuck on its first connection.
      await expect(probe.ping()).rejects.toThrow();
    } finally {
      await probe.close();
    }
  });

  if (brokers || required) {
    it('Kafka: the broker at KAFKA_BROKERS answers', async () => {
      if (!brokers) throw new Error('KAFKA_REQUIRED=1 but KAFKA_BROKERS is not set');
      const probe = busPing('readiness-test', { kind: 'kafka', brokers: brokers.split(',') });
      try {
        await expect(probe.ping()).resolves.toBeUndefined();
        await expect(probe.ping()).resolves.toBeUndefined();
      } finally {
        await probe.close?.();
      }
    });
  } else {
    it.skip('Kafka against a real broker: KAFKA_BROKERS is not set (npm run kafka:up prints it)', () => undefined);
  }
});
