import { Kafka, logLevel } from 'kafkajs';
import { topicSpecs } from '@svc/messaging';
import { FaultRun, eventually, faultSuite } from '@svc/testing';

/**
 * Issue 21, fault tests: a three-broker cluster of this suite's own (scripts/kafka.js --brokers 3,
 * own state dir and ports) loses one broker (SIGKILL to its JVM) under a steady load of writes
 * through the gateway (CaseLoad, libs/testing). The topics were created by the apps at start
 * (ensureTopics) with replication 3 and `min.insync.replicas` 2 because the cluster has three
 * brokers; with one broker gone every partition still has a leader and two copies in sync, so the
 * suite.topology keeps answering writes, relaying them and delivering webhooks, with no app restarted,
 * nothing lost and nothing delivered twice.
 */
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('fault: a three-broker cluster loses one broker under load', () => {
  const suite = faultSuite('fault-kafka-cluster', { brokers: 3 });
  const { kafka, receiver } = suite;

  it('the service topics are replicated 3 times with min.insync.replicas 2', async () => {
    const admin = new Kafka({ clientId: 'fault-test', brokers: kafka.brokers.split(','), logLevel: logLevel.NOTHING }).admin();
    await admin.connect();
    try {
      const names = topicSpecs().map((s) => s.topic);
      const { topics } = await admin.fetchTopicMetadata({ topics: names });
      const underReplicated = topics.flatMap((tp) =>
        tp.partitions.filter((p) => p.replicas.length !== 3).map((p) => `${tp.name}/${p.partitionId}: ${p.replicas.length}`),
      );
      expect(underReplicated).toEqual([]);
      const configs = await admin.describeConfigs({
        includeSynonyms: false,
        resources: names.map((name) => ({ type: 2 /* TOPIC */, name, configNames: ['min.insync.replicas'] })),
      });
      const minIsr = configs.resources
        .filter((r) => r.configEntries.find((c) => c.configName === 'min.insync.replicas')?.configValue !== '2')
        .map((r) => r.resourceName);
      expect(minIsr).toEqual([]);
    } finally {
      await admin.disconnect();
    }
  });

  it('with one broker killed, writes are answered, relayed and delivered; nothing lost, nothing twice, no app restarted', async () => {
    const run = await FaultRun.start(suite);
    const { load } = run;
    const mark = (what: string) => run.mark(what);

    load.start();
    await sleep(5000);
    load.phase = 'one broker down';
    // Node 1: a broker and one of the three controllers (the quorum keeps two).
    await kafka.kill9(1);
    mark('broker killed');
    // The cluster serves on two brokers: new cases (a Kafka round trip each) keep being opened.
    await eventually(() => load.openedIn('one broker down') >= 5, 60_000, 'five cases opened with one broker down');
    mark('five cases opened');
    await sleep(5000);
    await load.stop();
    mark('load over');
    expect(load.count('one broker down')).toBeGreaterThan(10);
    // Delivered with the broker still down: every acknowledged write has its effect, nothing twice.
    expect(kafka.pid(1)).toBeNull();
    await load.verify(receiver, 60_000);
    mark('verified');
    expect(run.restarts()).toEqual([]);
    process.stdout.write(`fault-kafka-cluster: ${load.summary()}, webhooks ${receiver.arrivals.length}; ${run.marks.join(', ')}\n`);
  }, 200_000);
});
