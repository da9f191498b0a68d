import { Logger } from '@nestjs/common';
import { KafkaContext, KafkaOptions, OutgoingResponse, ServerKafka } from '@nestjs/microservices';
import type { Consumer, EachBatchPayload, EachMessagePayload, RecordMetadata } from 'kafkajs';
import { deadLetterRecord, errorCode } from './dead-letters';
import { KAFKA_GROUP_MEMBERSHIP } from './kafka';
import { consumedTopicSpecs, deadLetterTopic, ensureTopics } from './topics';

/** Pino-compatible logger (`logger.warn({ ...meta }, 'message')`): metadata only, never record values. */
export interface BusLogger {
  info?(meta: Record<string, unknown>, msg: string): void;
  warn(meta: Record<string, unknown>, msg: string): void;
  error(meta: Record<string, unknown>, msg: string): void;
}

/** How an app consumes its topics (every field has a default; see KAFKA_CONSUMER_DEFAULTS). */
export interface KafkaConsumerSettings {
  /** Partitions handled at the same time (kafkajs `partitionsConsumedConcurrently`); one message at a time within each. */
  partitionsConsumedConcurrently?: number;
  /** Times a message's handler is run before the message goes to `<topic>.dlq`. */
  maxAttempts?: number;
  /** Pause of the partition before the second attempt; doubled before each further one, up to maxRetryDelayMs. */
  retryDelayMs?: number;
  maxRetryDelayMs?: number;
  /** Longest wait at start for the group join (then start-up fails: the process exits and is restarted). */
  joinTimeoutMs?: number;
  /** kafkajs `maxWaitTimeInMs`: how long a fetch waits for new records (and close() for the fetch in flight). */
  maxWaitTimeInMs?: number;
  /** Where failed attempts (warn) and dead letters (error, with a counter) are logged. Default: Nest Logger. */
  logger?: BusLogger;
}

export const KAFKA_CONSUMER_DEFAULTS = {
  partitionsConsumedConcurrently: 16,
  maxAttempts: 8,
  retryDelayMs: 250,
  maxRetryDelayMs: 10_000,
  joinTimeoutMs: 60_000,
} as const;

/** The Nest Logger, pino style. */
export function nestBusLogger(context: string): BusLogger {
  const logger = new Logger(context);
  return {
    info: (meta, msg) => logger.log(`${msg} ${JSON.stringify(meta)}`),
    warn: (meta, msg) => logger.warn(`${msg} ${JSON.stringify(meta)}`),
    error: (meta, msg) => logger.error(`${msg} ${JSON.stringify(meta)}`),
  };
}

/**
 * Nest's Kafka server with the consumption this service needs (decisions: "Kafka consumers:
 * offsets, concurrency, dead letters"):
 * - topics it subscribes to, and their dead-letter topics, are created first when missing (kafkajs
 *   cannot subscribe to a missing topic on Kafka 4.x);
 * - a new consumer group starts at the earliest offset (`subscribe.fromBeginning`);
 * - `partitionsConsumedConcurrently` partitions are handled at once, the messages of one
 *   partition (hence of one key) one after the other, in order;
 * - a message whose handler fails is not marked consumed: its partition pauses for a doubling
 *   delay (the other partitions go on) and starts again at it, up to `maxAttempts` attempts; then
 *   it is produced to `<topic>.dlq` (same key, value and headers, plus DeadLetterHeaders), logged
 *   with a running count, and marked consumed, so the messages behind it go on. Failing to
 *   produce the dead letter fails the batch: kafkajs delivers the message again.
 * - `listen()` calls back once the group has joined (bounded by `joinTimeoutMs`).
 * Request/reply handlers answer errors to the caller (Nest does): they are never retried here. A
 * reply that cannot be produced (no broker past kafkajs's retries) is logged and dropped: the
 * caller's wait ends without it (its app answers 503, and the request is safe to send again).
 * Nest sends replies from a callback nobody awaits, so its failure would otherwise end the process.
 */
export class KafkaBusServer extends ServerKafka {
  private readonly settings: Required<Omit<KafkaConsumerSettings, 'logger' | 'maxWaitTimeInMs'>>;
  private readonly log: BusLogger;
  private stopping = false;
  private joined: { promise: Promise<void>; resolve: () => void } = KafkaBusServer.signal();
  private deadLettered = 0;
  /** Failed attempts so far of the messages being retried (topic/partition/offset). */
  private readonly attempts = new Map<string, number>();
  private readonly resumeTimers = new Set<NodeJS.Timeout>();
  private readonly deadLetteredByTopic = new Map<string, number>();

  private static signal(): { promise: Promise<void>; resolve: () => void } {
    let resolve!: () => void;
    const promise = new Promise<void>((r) => (resolve = r));
    return { promise, resolve };
  }

  constructor(options: Required<KafkaOptions>['options'], settings: KafkaConsumerSettings = {}) {
    super(options);
    const { logger, maxWaitTimeInMs: _wait, ...rest } = settings;
    this.settings = { ...KAFKA_CONSUMER_DEFAULTS, ...Object.fromEntries(Object.entries(rest).filter(([, v]) => v !== undefined)) } as typeof this.settings;
    this.log = logger ?? nestBusLogger('KafkaBusServer');
  }

  /** Messages set aside into dead-letter topics by this process so far. */
  get deadLetterCount(): number {
    return this.deadLettered;
  }

  override async listen(callback: (err?: unknown, ...optionalParams: unknown[]) => void): Promise<void> {
    this.stopping = false;
    this.joined = KafkaBusServer.signal();
    await super.listen(callback);
  }

  override async start(callback: (err?: unknown) => void): Promise<void> {
    const patterns = [...this.messageHandlers.keys()];
    if (patterns.length) await ensureTopics({ brokers: this.brokers as string[], topics: consumedTopicSpecs(patterns), clientId: `${this.clientId}-topics` });
    await super.start(async () => {
      if (patterns.length === 0) return callback();
      // kafkajs's run() resolves after the first join, unless that join failed (it then restarts
      // the consumer after a delay): wait for a join, not longer than the bound.
      let timer: NodeJS.Timeout | undefined;
      const timedOut = new Promise<'timeout'>((r) => (timer = setTimeout(() => r('timeout'), this.settings.joinTimeoutMs)));
      const outcome = await Promise.race([this.joined.promise, timedOut]);
      clearTimeout(timer);
      if (outcome === 'timeout') return callback(new Error(`Kafka consumer group ${this.groupId} did not join within ${this.settings.joinTimeoutMs} ms`));
      callback();
    });
  }

  protected override registerConsumerEventListeners(): void {
    super.registerConsumerEventListeners();
    const consumer = this.consumer as Consumer;
    consumer.on(consumer.events.GROUP_JOIN, () => {
      // Partitions may have moved: a message retried here may now be another member's.
      this.attempts.clear();
      this.joined.resolve();
    });
  }

  override async bindEvents(consumer: Consumer): Promise<void> {
    const topics = [...this.messageHandlers.keys()];
    // No handlers (an app that only calls others): no subscription, and no consumer running.
    if (topics.length === 0) return;
    await consumer.subscribe({ ...(this.options.subscribe ?? {}), topics });
    // Batches, not Nest's eachMessage: a failed message must not be marked consumed, and its
    // partition must wait for the retry without holding the fetch of every other partition
    // (kafkajs fetches again only once every batch of the last fetch is done).
    await consumer.run({ ...(this.options.run ?? {}), eachBatchAutoResolve: false, eachBatch: (payload) => this.consumeBatch(payload) });
  }

  override async close(): Promise<void> {
    this.stopping = true;
    for (const t of this.resumeTimers) clearTimeout(t);
    this.resumeTimers.clear();
    await super.close();
  }

  override async sendMessage(
    message: OutgoingResponse,
    replyTopic: string,
    replyPartition: string | undefined | null,
    correlationId: string,
    context: KafkaContext,
  ): Promise<RecordMetadata[]> {
    try {
      return await super.sendMessage(message, replyTopic, replyPartition, correlationId, context);
    } catch (err) {
      this.log.warn({ replyTopic, replyPartition: replyPartition ?? null, group: this.groupId, errorCode: errorCode(err) }, 'bus reply not sent');
      return [];
    }
  }

  /**
   * The messages of one partition's batch, in order. A message whose handler fails (and has
   * attempts left) is not marked consumed: its partition is paused for the retry delay and set
   * back to it, and the batch ends there (the messages behind it wait; other partitions go on).
   * Out of attempts, it goes to the dead-letter topic and is marked consumed.
   */
  private async consumeBatch(payload: EachBatchPayload): Promise<void> {
    // Heartbeats while the handlers run (kafkajs sends one only between messages): a handler
    // slower than the session timeout would otherwise lose the group its partitions.
    const beat = setInterval(() => void payload.heartbeat().catch(() => undefined), KAFKA_GROUP_MEMBERSHIP.heartbeatInterval);
    try {
      await this.consumeMessages(payload);
    } finally {
      clearInterval(beat);
    }
  }

  private async consumeMessages({ batch, resolveOffset, heartbeat, pause, isRunning, isStale }: EachBatchPayload): Promise<void> {
    const { topic, partition } = batch;
    for (const message of batch.messages) {
      if (!isRunning() || isStale() || this.stopping) return;
      const attemptKey = `${topic}/${partition}/${message.offset}`;
      try {
        await this.handleMessage({ topic, partition, message, heartbeat, pause });
      } catch (err) {
        if (this.stopping) return; // not marked consumed: delivered again after the restart
        const attempt = (this.attempts.get(attemptKey) ?? 0) + 1;
        const where = { topic, partition, offset: message.offset, group: this.groupId, errorCode: errorCode(err) };
        if (attempt < this.settings.maxAttempts) {
          this.attempts.set(attemptKey, attempt);
          const delay = Math.min(this.settings.retryDelayMs * 2 ** (attempt - 1), this.settings.maxRetryDelayMs);
          this.log.warn({ ...where, attempt, maxAttempts: this.settings.maxAttempts, retryInMs: delay }, 'bus handler failed; the message is tried again');
          const resume = pause();
          (this.consumer as Consumer).seek({ topic, partition, offset: message.offset });
          const timer = setTimeout(() => {
            this.resumeTimers.delete(timer);
            resume();
          }, delay);
          this.resumeTimers.add(timer);
          return;
        }
        // Producing the dead letter may fail too: then this throws, nothing is marked consumed,
        // and kafkajs delivers the message again.
        await this.deadLetter({ topic, partition, message }, err, attempt, where);
      }
      this.attempts.delete(attemptKey);
      resolveOffset(message.offset);
      await heartbeat();
    }
  }

  private async deadLetter(
    payload: Pick<EachMessagePayload, 'topic' | 'partition' | 'message'>,
    err: unknown,
    attempts: number,
    where: Record<string, unknown>,
  ): Promise<void> {
    const record = deadLetterRecord(payload, { group: this.groupId, error: err, attempts, at: new Date() });
    await this.producer!.send({ topic: record.topic, messages: [record.message] });
    this.deadLettered++;
    const onTopic = (this.deadLetteredByTopic.get(payload.topic) ?? 0) + 1;
    this.deadLetteredByTopic.set(payload.topic, onTopic);
    this.log.error(
      { ...where, attempts, deadLetterTopic: deadLetterTopic(payload.topic), deadLettered: onTopic, deadLetteredTotal: this.deadLettered },
      'bus message dead-lettered after its attempts',
    );
  }
}
