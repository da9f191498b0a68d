/**
 * Two replicas of an app on a real Kafka broker (docs/decisions.md, "Replicas"): the replicas of
 * one app are members of one consumer group, so the partitions of the topics they consume are
 * split between them; and their request/reply clients share one reply group, in which each
 * replica asks for its replies on the lowest partition of the reply topic it was assigned (Nest's
 * reply-partition assigner keeps that partition with its member across rebalances), so each reply
 * reaches the replica that asked, also while a replica joins or leaves.
 *
 * Runs on KAFKA_BROKERS (`npm run kafka:up`; `npm test` starts a broker); skips without it, unless
 * KAFKA_REQUIRED=1 or CI. Topics and groups carry a run id; the topics are deleted at the end.
 */
import 'reflect-metadata';
import { randomUUID } from 'node:crypto';
import { Controller, INestMicroservice, Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { MessagePattern, Payload } from '@nestjs/microservices';
import { AssignerProtocol, Kafka, logLevel } from 'kafkajs';
import { AnyClientProxy, ask, busClient, BusExceptionFilter, busServerStrategy, ensureTopics, kafkaBrokers } from '../src';

const GIVEN = (process.env.KAFKA_BROKERS ?? '').trim() ? kafkaBrokers() : null;
const REQUIRED = process.env.KAFKA_REQUIRED === '1' || ['1', 'true'].includes((process.env.CI ?? '').toLowerCase());
if (!GIVEN && !REQUIRED) process.stdout.write('Kafka replicas suite skipped: no KAFKA_BROKERS (npm run kafka:up starts a broker)\n');

const RUN = randomUUID().slice(0, 8);
const PATTERN = `kafka-replicas-${RUN}.echo`;
const REPLY = `${PATTERN}.reply`;
const PARTITIONS = 6;
const SERVICE = `kafka-replicas-service-${RUN}`;
const CALLER = `kafka-replicas-caller-${RUN}`;

/** One server replica: answers with its own name, so the test sees which replica took a request. */
function replicaModule(replica: string) {
  @Controller()
  class EchoController {
    @MessagePattern(PATTERN)
    echo(@Payload() data: { from: string; n: number }) {
      return { ...data, servedBy: replica };
    }
  }
  @Module({ controllers: [EchoController] })
  class ReplicaModule {}
  return ReplicaModule;
}

async function startServer(replica: string, brokers: string[]): Promise<INestMicroservice> {
  const strategy = busServerStrategy(SERVICE, { kind: 'kafka', brokers, consumer: { maxWaitTimeInMs: 500 } });
  const ms = await NestFactory.createMicroservice(replicaModule(replica), { ...(strategy as object), logger: false });
  ms.useGlobalFilters(new BusExceptionFilter());
  await ms.listen();
  return ms;
}

/** A caller replica: the client every app builds (busClient), all replicas under one service name. */
async function startCaller(brokers: string[]): Promise<AnyClientProxy> {
  const client = busClient(CALLER, { kind: 'kafka', brokers, replyPatterns: [PATTERN], replyWaitMs: 20_000 });
  await client.connect();
  return client;
}

/** The reply partition a caller asks its replies on (Nest's lowest assigned partition). */
const replyPartitionOf = (client: AnyClientProxy) => (client as unknown as { consumerAssignments: Record<string, number> }).consumerAssignments[REPLY];

type Answer = { from: string; n: number; servedBy: string };

(GIVEN || REQUIRED ? describe : describe.skip)('two replicas of an app on Kafka', () => {
  jest.setTimeout(180_000);
  let brokers: string[];
  let kafka: Kafka;
  const servers: INestMicroservice[] = [];
  const callers: AnyClientProxy[] = [];

  beforeAll(async () => {
    if (!GIVEN) throw new Error('no Kafka broker: KAFKA_BROKERS is not set (npm run kafka:up prints it)');
    brokers = GIVEN;
    kafka = new Kafka({ clientId: `kafka-replicas-admin-${RUN}`, brokers, logLevel: logLevel.NOTHING });
    await ensureTopics({ brokers, topics: [PATTERN, REPLY].map((topic) => ({ topic, partitions: PARTITIONS, retentionMs: 3_600_000 })) });
    servers.push(await startServer('server-1', brokers), await startServer('server-2', brokers));
    callers.push(await startCaller(brokers), await startCaller(brokers));
  });

  afterAll(async () => {
    for (const c of callers) await c.close().catch(() => undefined);
    for (const s of servers) await s.close().catch(() => undefined);
    if (kafka) {
      const admin = kafka.admin();
      await admin.connect();
      await admin.deleteTopics({ topics: [PATTERN, REPLY] }).catch(() => undefined);
      await admin.disconnect();
    }
  });

  /** Each group member's partitions of `topic`, once the group is stable with `members` members. */
  async function assignments(groupId: string, topic: string, members: number): Promise<number[][]> {
    const admin = kafka.admin();
    await admin.connect();
    try {
      const until = Date.now() + 60_000;
      for (;;) {
        const { groups } = await admin.describeGroups([groupId]);
        const g = groups[0];
        if (g.state === 'Stable' && g.members.length === members) {
          return g.members.map((m) => (AssignerProtocol.MemberAssignment.decode(m.memberAssignment)?.assignment[topic] ?? []).slice().sort((a, b) => a - b));
        }
        if (Date.now() > until) throw new Error(`group ${groupId}: ${g.state} with ${g.members.length} members`);
        await new Promise((r) => setTimeout(r, 250));
      }
    } finally {
      await admin.disconnect();
    }
  }

  const askFrom = (client: AnyClientProxy, from: string, n: number) => ask<Answer>(client, PATTERN, { from, n }, { timeoutMs: 30_000 });

  it("splits the request topic's partitions between the server replicas, and both serve requests", async () => {
    const split = await assignments(`${SERVICE}-server`, PATTERN, 2);
    expect(split.every((p) => p.length > 0)).toBe(true);
    expect(split.flat().sort((a, b) => a - b)).toEqual([0, 1, 2, 3, 4, 5]);
    const answers = await Promise.all(Array.from({ length: 60 }, (_, n) => askFrom(callers[0], 'caller-1', n)));
    expect(answers.map((a) => a.n)).toEqual(Array.from({ length: 60 }, (_, n) => n));
    const servedBy = new Set(answers.map((a) => a.servedBy));
    expect([...servedBy].sort()).toEqual(['server-1', 'server-2']);
  });

  it('the caller replicas share one reply group, each on a reply partition of its own, and each gets every answer to its own requests', async () => {
    const split = await assignments(`${CALLER}-client`, REPLY, 2);
    expect(split.every((p) => p.length > 0)).toBe(true);
    const [a, b] = callers.map(replyPartitionOf);
    expect(a).not.toBe(b);
    const sends = callers.flatMap((c, i) =>
      Array.from({ length: 40 }, (_, n) => askFrom(c, `caller-${i + 1}`, n).then((r) => ({ asked: `caller-${i + 1}`, r }))),
    );
    const results = await Promise.all(sends);
    for (const { asked, r } of results) expect(r.from).toBe(asked);
    expect(results).toHaveLength(80);
  });

  it('answers still reach the replica that asked while a third caller replica joins the reply group and leaves it', async () => {
    const before = callers.map(replyPartitionOf);
    let stop = false;
    let n = 0;
    const load = callers.map(async (c, i) => {
      const got: Answer[] = [];
      while (!stop) {
        const batch = await Promise.all(Array.from({ length: 5 }, () => askFrom(c, `caller-${i + 1}`, n++)));
        got.push(...batch);
      }
      return got;
    });
    const third = await startCaller(brokers);
    try {
      await assignments(`${CALLER}-client`, REPLY, 3);
      const r = await askFrom(third, 'caller-3', -1);
      expect(r.from).toBe('caller-3');
    } finally {
      await third.close();
    }
    await assignments(`${CALLER}-client`, REPLY, 2);
    await new Promise((r) => setTimeout(r, 1000));
    stop = true;
    const got = await Promise.all(load);
    got.forEach((answers, i) => {
      expect(answers.length).toBeGreaterThan(0);
      expect(answers.every((a) => a.from === `caller-${i + 1}`)).toBe(true);
    });
    // Each kept its reply partition through both rebalances (Nest's assigner keeps a member's lowest one).
    expect(callers.map(replyPartitionOf)).toEqual(before);
  });
});
