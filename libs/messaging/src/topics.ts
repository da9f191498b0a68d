import { ITopicConfig, Kafka, RetryOptions, logLevel } from 'kafkajs';
import { kafkaBrokers } from './kafka';
import { Patterns, Topics } from './names';

/** A Kafka topic and the settings it is created with (deploy/topics.md lists them all). */
export interface TopicSpec {
  topic: string;
  partitions: number;
  retentionMs: number;
}

const HOUR_MS = 3_600_000;
const DAY_MS = 24 * HOUR_MS;

/** Retention by kind of topic (`retention.ms`). */
export const TopicRetentionMs = {
  /** Integration events: 7 days (consumers rebuild from the event store, not from Kafka history). */
  events: 7 * DAY_MS,
  /** Commands and queries (request topics): 1 day. */
  commands: DAY_MS,
  /** Replies: 1 hour (a reply is read at once or never; some carry PHI). */
  replies: HOUR_MS,
  /** Dead letters: 14 days, time for a fix to be released before the replay. */
  deadLetters: 14 * DAY_MS,
} as const;

/** Partitions of event, command and reply topics: the most consumer instances of one group that get work. */
export const TOPIC_PARTITIONS = 6;
/** Partitions of a dead-letter topic: one, so a replay puts dead letters back in the order they were set aside. */
export const DEAD_LETTER_PARTITIONS = 1;

/** The topic Nest's Kafka transport answers a request pattern on. */
export function replyTopic(pattern: string): string {
  return `${pattern}.reply`;
}

/** Where a consumer sets aside a message of `topic` whose handler kept failing (see KafkaBusServer). */
export function deadLetterTopic(topic: string): string {
  return `${topic}.dlq`;
}

/**
 * Every Kafka topic of the service with its settings: the integration-event topics, each
 * command's request and reply topics, and a dead-letter topic for every topic that is consumed
 * (events and requests). The apps create the missing ones at start (ensureTopics); deploy/topics.md
 * documents the same list (a test holds the page to it).
 */
export function topicSpecs(): TopicSpec[] {
  const consumed = [...Object.values(Topics), ...Object.values(Patterns)];
  return [
    ...Object.values(Topics).map((topic) => ({ topic, partitions: TOPIC_PARTITIONS, retentionMs: TopicRetentionMs.events })),
    ...Object.values(Patterns).flatMap((pattern) => [
      { topic: pattern, partitions: TOPIC_PARTITIONS, retentionMs: TopicRetentionMs.commands },
      { topic: replyTopic(pattern), partitions: TOPIC_PARTITIONS, retentionMs: TopicRetentionMs.replies },
    ]),
    ...consumed.map((topic) => ({ topic: deadLetterTopic(topic), partitions: DEAD_LETTER_PARTITIONS, retentionMs: TopicRetentionMs.deadLetters })),
  ];
}

/**
 * The settings of one topic: as documented when names.ts has it, else those of its kind (a
 * `.dlq` topic as dead letters, a `.reply` topic as replies, any other as a command topic).
 */
export function topicSpec(topic: string): TopicSpec {
  const known = topicSpecs().find((s) => s.topic === topic);
  if (known) return known;
  if (topic.endsWith('.dlq')) return { topic, partitions: DEAD_LETTER_PARTITIONS, retentionMs: TopicRetentionMs.deadLetters };
  if (topic.endsWith('.reply')) return { topic, partitions: TOPIC_PARTITIONS, retentionMs: TopicRetentionMs.replies };
  return { topic, partitions: TOPIC_PARTITIONS, retentionMs: TopicRetentionMs.commands };
}

export interface EnsureTopicsOptions {
  /** Default: `KAFKA_BROKERS`. */
  brokers?: string[];
  /** Default: every topic of names.ts (topicSpecs()). */
  topics?: TopicSpec[];
  /**
   * Replication factor of the topics created. Default: follows the cluster (`replicationFor`): 3
   * on a cluster of 3 or more brokers, else the broker's `default.replication.factor` (-1 in the
   * CreateTopics request, 1 on a single test broker).
   */
  replicationFactor?: number;
  /**
   * `min.insync.replicas` of the topics created. Default: 2 when they are replicated 3 times or
   * more (a write is acknowledged by two brokers, so one broker can be lost), else the broker's.
   */
  minInsyncReplicas?: number;
  /** kafkajs client id of the admin connection. Default `svc-topics`. */
  clientId?: string;
  /** How long the broker may take to create them, and to elect their leaders. Default 30000 ms. */
  timeoutMs?: number;
  /** kafkajs retries of the admin connection (reaching a broker). Default kafkajs's: 5 retries, about 10 s in all. */
  retry?: RetryOptions;
}

export interface EnsureTopicsResult {
  /** Created by this call. */
  created: string[];
  /** There already (created by another app, the topics Job, or an earlier start). */
  existing: string[];
  /**
   * Existing topics whose partition count differs from the documented one. Left as they are:
   * adding partitions to a keyed topic would move keys to other partitions (and break the order
   * per key while both old and new partitions hold messages of a key); an operator decides.
   */
  mismatched: { topic: string; partitions: number; expected: number }[];
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Replication of production topics on a cluster of 3+ brokers (deploy/topics.md, "Settings"). */
export const CLUSTER_REPLICATION_FACTOR = 3;
export const CLUSTER_MIN_INSYNC_REPLICAS = 2;

/**
 * The replication of topics created on a cluster of `brokers` brokers: 3 copies, 2 in sync for a
 * write, from 3 brokers on (one broker may be lost without losing an acknowledged message or
 * refusing writes); below that the broker's own defaults (`replicationFactor` -1, no
 * `min.insync.replicas` of the topic's own).
 */
export function replicationFor(brokers: number): { replicationFactor: number; minInsyncReplicas: number | null } {
  return brokers >= CLUSTER_REPLICATION_FACTOR
    ? { replicationFactor: CLUSTER_REPLICATION_FACTOR, minInsyncReplicas: CLUSTER_MIN_INSYNC_REPLICAS }
    : { replicationFactor: -1, minInsyncReplicas: null };
}

/**
 * Creates the topics that are missing, with their documented settings (partitions, `retention.ms`,
 * `cleanup.policy=delete`, and the replication of `replicationFor` the cluster's size): idempotent, so every app calls it at start and the first one creates
 * them; two apps racing both succeed (a topic another created meanwhile counts as existing).
 * Topics that exist are not altered (see `mismatched`). Returns once every topic has a leader.
 *
 * kafkajs 2.2 on Kafka 4.x cannot subscribe to a topic that does not exist (the metadata request
 * fails with UNKNOWN_TOPIC_OR_PARTITION and is not retried), so topics must exist before any
 * consumer subscribes: apps call this before their clients connect and their consumers start.
 * It needs the CREATE permission only when a topic is missing (production creates them with the
 * Job of deploy/k8s, and the apps then find them all).
 */
export async function ensureTopics(options: EnsureTopicsOptions = {}): Promise<EnsureTopicsResult> {
  const specs = [...new Map((options.topics ?? topicSpecs()).map((s) => [s.topic, s])).values()];
  const timeout = options.timeoutMs ?? 30_000;
  const kafka = new Kafka({
    clientId: options.clientId ?? 'svc-topics',
    brokers: options.brokers ?? kafkaBrokers(),
    logLevel: logLevel.NOTHING,
    retry: options.retry,
  });
  const admin = kafka.admin();
  await admin.connect();
  try {
    const present = new Set(await admin.listTopics());
    const missing = specs.filter((s) => !present.has(s.topic));
    if (missing.length) {
      const byCluster = replicationFor((await admin.describeCluster()).brokers.length);
      const replicationFactor = options.replicationFactor ?? byCluster.replicationFactor;
      const minInsync = options.minInsyncReplicas ?? (replicationFactor >= CLUSTER_REPLICATION_FACTOR ? CLUSTER_MIN_INSYNC_REPLICAS : null);
      await admin.createTopics({
        // Not kafkajs's wait: on Kafka 4.x its metadata request right after the creation can answer
        // UNKNOWN_TOPIC_OR_PARTITION, which it does not retry. The loop below waits instead.
        waitForLeaders: false,
        timeout,
        topics: missing.map((s): ITopicConfig => ({
          topic: s.topic,
          numPartitions: s.partitions,
          replicationFactor,
          configEntries: [
            { name: 'retention.ms', value: String(s.retentionMs) },
            { name: 'cleanup.policy', value: 'delete' },
            ...(minInsync !== null ? [{ name: 'min.insync.replicas', value: String(minInsync) }] : []),
          ],
        })),
      });
    }
    // Another app may have created some of them meanwhile (createTopics then answers false for
    // those and does not wait for their leaders): wait until every topic has a leader everywhere.
    const names = specs.map((s) => s.topic);
    const deadline = Date.now() + timeout;
    let partitions = new Map<string, number>();
    for (;;) {
      try {
        const { topics } = await admin.fetchTopicMetadata({ topics: names });
        if (topics.every((t) => t.partitions.length > 0 && t.partitions.every((p) => p.leader >= 0))) {
          partitions = new Map(topics.map((t) => [t.name, t.partitions.length]));
          break;
        }
      } catch (err) {
        if (Date.now() > deadline) throw err;
      }
      if (Date.now() > deadline) throw new Error(`Kafka topics without a leader after ${timeout} ms`);
      await sleep(100);
    }
    // Created by a concurrent caller: counted as existing (their settings came from the same specs).
    const createdNow = new Set(missing.map((s) => s.topic));
    const existingBefore = specs.filter((s) => present.has(s.topic));
    return {
      created: [...createdNow],
      existing: existingBefore.map((s) => s.topic),
      mismatched: existingBefore
        .filter((s) => partitions.get(s.topic) !== s.partitions)
        .map((s) => ({ topic: s.topic, partitions: partitions.get(s.topic) ?? 0, expected: s.partitions })),
    };
  } finally {
    await admin.disconnect();
  }
}

/** The topics a consumer reads, and the dead-letter topic of each. */
export function consumedTopicSpecs(topics: string[]): TopicSpec[] {
  return topics.flatMap((t) => [topicSpec(t), topicSpec(deadLetterTopic(t))]);
}
