import { ClientKafka, KafkaOptions } from '@nestjs/microservices';
import type { Consumer, ConsumerGroupJoinEvent, Producer } from 'kafkajs';
import { defer, mergeMap, Observable, throwError } from 'rxjs';
import { ensureTopics, replyTopic, topicSpec } from './topics';

/**
 * A bus request could not be sent: the caller's reply consumer was not ready (not joined, or
 * rebalancing, or no broker answering) within the bound. Nothing was sent; the same request
 * again later is safe. The HTTP edge answers it 503 UNAVAILABLE with Retry-After.
 */
export class BusUnavailableError extends Error {
  override readonly name = 'BusUnavailableError';
  readonly status = 503;
  readonly code = 'UNAVAILABLE';

  constructor(readonly pattern: string) {
    super(`bus request ${pattern} not sent: its reply consumer is not ready`);
  }
}

export interface KafkaBusClientSettings {
  /** Longest wait of a `send` for the reply consumer to be ready. Default 5000 ms. */
  replyWaitMs?: number;
}

export const KAFKA_CLIENT_DEFAULTS = { replyWaitMs: 5000 } as const;
/** kafkajs retries of one attempt to reach a broker for the reply topics: about 0.3 s in all. */
const CONNECT_RETRY = { retries: 2, initialRetryTime: 100, maxRetryTime: 200 };

type ReplyState = 'idle' | 'joined' | 'rebalancing' | 'down';

/**
 * Nest's Kafka client with a request/reply that does not throw before its reply consumer has
 * joined: a `send` first waits (bounded by `replyWaitMs`) until the client is connected, its reply
 * topics exist (created with their documented settings when missing) and its consumer group has
 * joined with a partition of the pattern's reply topic assigned; then Nest sends the request with
 * that partition in its headers. Past the bound: BusUnavailableError. A failed connection attempt
 * is not kept (Nest's would be, for ever): the next send connects again. `emit` only needs the
 * producer and never waits for the reply consumer.
 */
export class KafkaBusClient extends ClientKafka {
  private state: ReplyState = 'idle';
  private stateWaiters: Array<() => void> = [];
  private readonly replyWaitMs: number;
  private closed = false;
  private connecting: Promise<Producer> | null = null;

  constructor(options: Required<KafkaOptions>['options'], settings: KafkaBusClientSettings = {}) {
    super(options);
    this.replyWaitMs = settings.replyWaitMs ?? KAFKA_CLIENT_DEFAULTS.replyWaitMs;
  }

  /** Whether a send would go out now: joined, with a partition of every reply topic. */
  get replyReady(): boolean {
    return this.state === 'joined' && this.responsePatterns.every((t) => this.consumerAssignments[t] !== undefined);
  }

  override connect(): Promise<Producer> {
    this.closed = false;
    this.connecting ??= this.connectOnce().catch((err: unknown) => {
      // Not kept (Nest would keep a failed attempt for ever): the next connect tries again.
      this.connecting = null;
      throw err;
    });
    return this.connecting;
  }

  private async connectOnce(): Promise<Producer> {
    // Reply topics first: kafkajs cannot subscribe to a missing topic on Kafka 4.x.
    if (!this.producerOnlyMode && this.responsePatterns.length) {
      // One short attempt to reach a broker (whenReady tries again until its caller's deadline):
      // kafkajs's own retries would go on for about 10 s after the caller gave up, or the client closed.
      await ensureTopics({
        brokers: this.brokers as string[],
        topics: this.responsePatterns.map(topicSpec),
        clientId: `${this.clientId}-topics`,
        retry: CONNECT_RETRY,
      });
    }
    try {
      const producer = await super.connect();
      if (this.closed) throw new Error('bus client closed while connecting');
      return producer;
    } catch (err) {
      this.setState('down');
      await this.reset();
      throw err;
    }
  }

  override async close(): Promise<void> {
    this.closed = true;
    this.connecting = null;
    this.setState('idle');
    await super.close();
  }

  /**
   * Resolves once a send of `pattern` would go out (see replyReady), retrying the connection
   * meanwhile; rejects with BusUnavailableError after `timeoutMs`.
   */
  async whenReady(pattern: string, timeoutMs = this.replyWaitMs): Promise<void> {
    const topic = replyTopic(this.normalizePattern(pattern));
    const deadline = Date.now() + timeoutMs;
    let retryDelay = 100;
    for (;;) {
      if (this.closed) throw new BusUnavailableError(pattern);
      try {
        await this.within(this.connect(), deadline - Date.now());
      } catch {
        // connection refused, topics not creatable yet, join failed: tried again below
      }
      if (this.state === 'joined' && this.consumerAssignments[topic] !== undefined) return;
      const left = deadline - Date.now();
      if (left <= 0) throw new BusUnavailableError(pattern);
      // A state change (join, rebalance) or a short delay, whichever first.
      await new Promise<void>((resolve) => {
        const timer = setTimeout(done, Math.min(retryDelay, left));
        this.stateWaiters.push(done);
        function done() {
          clearTimeout(timer);
          resolve();
        }
      });
      retryDelay = Math.min(retryDelay * 2, 1000);
    }
  }

  override send<TResult = unknown, TInput = unknown>(pattern: unknown, data: TInput): Observable<TResult> {
    const route = this.normalizePattern(pattern as string);
    if (this.producerOnlyMode || !this.responsePatterns.includes(replyTopic(route))) {
      return throwError(() => new Error(`bus client is not subscribed to the replies of ${route}`));
    }
    return defer(() => this.whenReady(route)).pipe(mergeMap(() => super.send<TResult, TInput>(pattern, data)));
  }

  protected override registerConsumerEventListeners(): void {
    super.registerConsumerEventListeners();
    const consumer = this._consumer as Consumer;
    // Registered before Nest's own GROUP_JOIN listener: the assignments are set here first.
    consumer.on(consumer.events.GROUP_JOIN, (event: ConsumerGroupJoinEvent) => {
      this.setConsumerAssignments(event);
      // Each replica of an app needs a partition of every reply topic of its own (the replies to
      // its requests come there): with more replicas than partitions, this one's requests wait and fail.
      const without = this.responsePatterns.filter((t) => this.consumerAssignments[t] === undefined);
      if (without.length)
        this.logger.warn(
          `reply group ${this.groupId}: no partition of ${without.length} reply topic(s) for this replica (more replicas than reply partitions?); its bus requests answer 503`,
        );
      this.setState('joined');
    });
    consumer.on(consumer.events.REBALANCING, () => this.setState('rebalancing'));
    consumer.on(consumer.events.CRASH, (event: { payload: { restart: boolean } }) => {
      this.setState('down');
      // kafkajs restarts a consumer after a retriable crash (a join follows); after any other, it
      // stays down: start again from scratch at the next send.
      if (!event.payload.restart) void this.reset();
    });
    consumer.on(consumer.events.STOP, () => this.setState('down'));
    consumer.on(consumer.events.DISCONNECT, () => this.setState('down'));
  }

  /** Drops the connection (consumer and producer) so that the next connect starts afresh. */
  private async reset(): Promise<void> {
    const consumer = this._consumer;
    const producer = this._producer;
    this._consumer = null;
    this._producer = null;
    this.initialized = null;
    this.connecting = null;
    await consumer?.disconnect().catch(() => undefined);
    await producer?.disconnect().catch(() => undefined);
  }

  private setState(state: ReplyState): void {
    this.state = state;
    const waiters = this.stateWaiters;
    this.stateWaiters = [];
    for (const w of waiters) w();
  }

  private async within<T>(p: Promise<T>, ms: number): Promise<T> {
    let timer: NodeJS.Timeout | undefined;
    const timedOut = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error('timeout')), Math.max(0, ms))));
    try {
      return await Promise.race([p, timedOut]);
    } finally {
      clearTimeout(timer);
    }
  }
}
