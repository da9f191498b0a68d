import { EachMessagePayload, IHeaders, Kafka, KafkaMessage, logLevel, Partitioners } from 'kafkajs';
import { kafkaBrokers } from './kafka';
import { deadLetterTopic } from './topics';

/**
 * Headers a dead letter carries besides the original record's own (key, value and headers are
 * the original's, unchanged). Values are strings; none of them holds data of the record.
 */
export const DeadLetterHeaders = {
  /** The topic the record was consumed from (where a replay puts it back). */
  originalTopic: 'dlq-original-topic',
  originalPartition: 'dlq-original-partition',
  originalOffset: 'dlq-original-offset',
  /** The consumer group whose handler kept failing (`<app>-server`). */
  consumerGroup: 'dlq-consumer-group',
  /** The error's code (`code` of a domain refusal or bus error, else the error's name): never its message. */
  errorCode: 'dlq-error-code',
  /** How many times the handler was run on it. */
  attempts: 'dlq-attempts',
  /** When it was set aside (ISO 8601, wall clock). */
  deadLetteredAt: 'dlq-dead-lettered-at',
  /** On a replayed record: `<dlq topic>/<partition>/<offset>` of the dead letter it came from. */
  replayedFrom: 'dlq-replayed-from',
} as const;

const DLQ_HEADER_PREFIX = 'dlq-';

/** The replay's consumer group: its committed offsets on a dead-letter topic mark what was put back. */
export const DLQ_REPLAY_GROUP = 'svc-dlq-replay';

/**
 * A code for an error that can go into logs and headers: a `code` that looks like one
 * (`DEPENDENCY_DOWN`, `UNKNOWN_TOPIC_OR_PARTITION`), else the error's name, else `error`. Never
 * the message: messages of lower layers may quote data (PHI).
 */
export function errorCode(err: unknown): string {
  const e = err as { code?: unknown; name?: unknown; type?: unknown } | null;
  for (const v of [e?.code, e?.type]) if (typeof v === 'string' && /^[A-Za-z0-9_.:-]{1,64}$/.test(v)) return v;
  if (typeof e?.name === 'string' && /^[A-Za-z0-9_.:-]{1,64}$/.test(e.name)) return e.name;
  return 'error';
}

/** The dead letter of a consumed record: the same key, value and headers, plus where it came from and why. */
export function deadLetterRecord(
  payload: Pick<EachMessagePayload, 'topic' | 'partition' | 'message'>,
  info: { group: string; error: unknown; attempts: number; at: Date },
) {
  const { topic, partition, message } = payload;
  return {
    topic: deadLetterTopic(topic),
    message: {
      key: message.key,
      value: message.value,
      headers: {
        ...withoutDeadLetterHeaders(message.headers),
        [DeadLetterHeaders.originalTopic]: topic,
        [DeadLetterHeaders.originalPartition]: String(partition),
        [DeadLetterHeaders.originalOffset]: message.offset,
        [DeadLetterHeaders.consumerGroup]: info.group,
        [DeadLetterHeaders.errorCode]: errorCode(info.error),
        [DeadLetterHeaders.attempts]: String(info.attempts),
        [DeadLetterHeaders.deadLetteredAt]: info.at.toISOString(),
      },
    },
  };
}

function withoutDeadLetterHeaders(headers: IHeaders | undefined): IHeaders {
  const out: IHeaders = {};
  for (const [k, v] of Object.entries(headers ?? {})) if (!k.startsWith(DLQ_HEADER_PREFIX) && v !== undefined) out[k] = v;
  return out;
}

/** What the replay reports of one dead letter: where it is, where it came from, why. Never its value. */
export interface DeadLetter {
  dlqTopic: string;
  partition: number;
  offset: string;
  originalTopic: string | null;
  originalPartition: string | null;
  originalOffset: string | null;
  consumerGroup: string | null;
  errorCode: string | null;
  attempts: string | null;
  deadLetteredAt: string | null;
  eventType: string | null;
  eventId: string | null;
}

export interface ReplayOptions {
  /** The topic whose dead letters are put back (`svc.case-ledger.events`), or its dead-letter topic (`….dlq`). */
  topic: string;
  /** Default: `KAFKA_BROKERS`. */
  brokers?: string[];
  /** List what would be put back; put back nothing and record nothing. */
  dryRun?: boolean;
  /** Called once per dead letter, after it was put back (or, in a dry run, found). */
  onDeadLetter?: (d: DeadLetter) => void;
  /** Longest wait for the replay group to join and read up to the end. Default 60000 ms. */
  timeoutMs?: number;
}

export interface ReplayResult {
  dlqTopic: string;
  deadLetters: DeadLetter[];
  dryRun: boolean;
}

function header(message: KafkaMessage, name: string): string | null {
  const v = message.headers?.[name];
  if (v === undefined || v === null) return null;
  return Array.isArray(v) ? String(v[0]) : String(v);
}

/**
 * Puts the dead letters of a topic back on the topic they were consumed from, once each: reads
 * the dead-letter topic from where the last replay stopped (the committed offsets of the group
 * `svc-dlq-replay`) up to its end as it is when the replay starts, produces each record again
 * (same key, so the same partition as before; same value; its headers minus the dead-letter
 * ones, plus `dlq-replayed-from`), and commits past it. Every consumer group of that topic gets
 * it again: consumers are idempotent (by event id, or by the ids in the streams), so the groups
 * that had handled it do nothing twice. A dry run lists and changes nothing.
 */
export async function replayDeadLetters(options: ReplayOptions): Promise<ReplayResult> {
  const dlqTopic = options.topic.endsWith('.dlq') ? options.topic : deadLetterTopic(options.topic);
  const dryRun = options.dryRun ?? false;
  const timeoutMs = options.timeoutMs ?? 60_000;
  const kafka = new Kafka({ clientId: 'svc-dlq-replay', brokers: options.brokers ?? kafkaBrokers(), logLevel: logLevel.NOTHING });
  const admin = kafka.admin();
  await admin.connect();
  let ends: Map<number, bigint>;
  let from: Map<number, bigint>;
  try {
    const topics = await admin.listTopics();
    if (!topics.includes(dlqTopic)) throw new Error(`no topic ${dlqTopic} on the brokers`);
    const offsets = await admin.fetchTopicOffsets(dlqTopic);
    ends = new Map(offsets.map((p) => [p.partition, BigInt(p.high)]));
    const lows = new Map(offsets.map((p) => [p.partition, BigInt(p.low)]));
    const [committed] = await admin.fetchOffsets({ groupId: DLQ_REPLAY_GROUP, topics: [dlqTopic] });
    from = new Map(
      offsets.map((p) => {
        const c = committed?.partitions.find((x) => x.partition === p.partition)?.offset;
        const start = c !== undefined && c !== '-1' ? BigInt(c) : lows.get(p.partition)!;
        return [p.partition, start < lows.get(p.partition)! ? lows.get(p.partition)! : start];
      }),
    );
  } finally {
    await admin.disconnect();
  }
  const pending = [...ends].filter(([p, end]) => from.get(p)! < end).map(([p]) => p);
  const deadLetters: DeadLetter[] = [];
  if (pending.length === 0) return { dlqTopic, deadLetters, dryRun };

  const producer = kafka.producer({ createPartitioner: Partitioners.DefaultPartitioner, idempotent: false });
  const consumer = kafka.consumer({ groupId: DLQ_REPLAY_GROUP, maxWaitTimeInMs: 500, retry: { retries: 3 } });
  await producer.connect();
  await consumer.connect();
  try {
    const left = new Set(pending);
    let failure: unknown = null;
    let finished!: () => void;
    const done = new Promise<void>((r) => (finished = r));
    await consumer.subscribe({ topics: [dlqTopic], fromBeginning: true });
    await consumer.run({
      autoCommit: false,
      eachMessage: async ({ partition, message }) => {
        if (!left.has(partition) || failure) return;
        const offset = BigInt(message.offset);
        if (offset < from.get(partition)!) return;
        const d: DeadLetter = {
          dlqTopic,
          partition,
          offset: message.offset,
          originalTopic: header(message, DeadLetterHeaders.originalTopic),
          originalPartition: header(message, DeadLetterHeaders.originalPartition),
          originalOffset: header(message, DeadLetterHeaders.originalOffset),
          consumerGroup: header(message, DeadLetterHeaders.consumerGroup),
          errorCode: header(message, DeadLetterHeaders.errorCode),
          attempts: header(message, DeadLetterHeaders.attempts),
          deadLetteredAt: header(message, DeadLetterHeaders.deadLetteredAt),
          eventType: header(message, 'event-type'),
          eventId: header(message, 'event-id'),
        };
        try {
          if (!dryRun) {
            if (!d.originalTopic) throw new Error(`dead letter ${dlqTopic}/${partition}/${message.offset} has no ${DeadLetterHeaders.originalTopic} header`);
            await producer.send({
              topic: d.originalTopic,
              messages: [
                {
                  key: message.key,
                  value: message.value,
                  headers: { ...withoutDeadLetterHeaders(message.headers), [DeadLetterHeaders.replayedFrom]: `${dlqTopic}/${partition}/${message.offset}` },
                },
              ],
            });
            await consumer.commitOffsets([{ topic: dlqTopic, partition, offset: String(offset + 1n) }]);
          }
          deadLetters.push(d);
          options.onDeadLetter?.(d);
        } catch (err) {
          failure = err;
          finished();
          return;
        }
        if (offset + 1n >= ends.get(partition)!) {
          left.delete(partition);
          if (left.size === 0) finished();
        }
      },
    });
    // Start each partition where the last replay stopped (a dry run reads the same ones again).
    for (const p of pending) consumer.seek({ topic: dlqTopic, partition: p, offset: String(from.get(p)!) });
    let timer: NodeJS.Timeout | undefined;
    const timedOut = new Promise<'timeout'>((r) => (timer = setTimeout(() => r('timeout'), timeoutMs)));
    const outcome = await Promise.race([done, timedOut]);
    clearTimeout(timer);
    if (failure) throw failure;
    if (outcome === 'timeout') throw new Error(`replay of ${dlqTopic} did not reach the end within ${timeoutMs} ms (${deadLetters.length} done)`);
    return { dlqTopic, deadLetters, dryRun };
  } finally {
    await consumer.disconnect().catch(() => undefined);
    await producer.disconnect().catch(() => undefined);
  }
}
