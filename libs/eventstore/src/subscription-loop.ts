import { RecordedEvent, SubscribeOptions, Subscription } from './types';

/** Where subscription failures are reported: position, stream and type only, never event data. */
export interface EventStoreLogger {
  warn(message: string, meta: Record<string, unknown>): void;
}

export const defaultEventStoreLogger: EventStoreLogger = {
  warn(message, meta) {
    // Metadata only (the "no PHI in logs" rule): no event data, no error messages (they may quote data).
    console.warn(JSON.stringify({ level: 'warn', msg: message, ...meta }));
  },
};

export interface SubscriptionLoopOptions {
  /** Reads a page of the log after `position` (exclusive), unfiltered, oldest first. */
  readPage(position: number, limit: number): Promise<RecordedEvent[]>;
  pageSize?: number;
  /** Poll interval while live (catches appends made by other processes). */
  pollIntervalMs?: number;
  /** First retry delay after a handler failure; doubles up to `maxRetryDelayMs`. */
  retryDelayMs?: number;
  maxRetryDelayMs?: number;
  logger?: EventStoreLogger;
}

export function matchesPrefix(streamId: string, prefixes: string[] | undefined): boolean {
  if (!prefixes || prefixes.length === 0) return true;
  for (const p of prefixes) if (streamId.startsWith(p)) return true;
  return false;
}

/**
 * A polling catch-up subscription shared by the SQLite and in-memory stores: reads pages of the
 * log from the checkpoint, hands matching events to the handler one at a time (awaiting each),
 * then waits for a wake-up (own commit) or the poll interval. A failing handler is retried on the
 * same event after a growing delay; an event is never skipped.
 */
export class PollingSubscription implements Subscription {
  private closed = false;
  private wakeUp: (() => void) | null = null;
  private closeWake: (() => void) | null = null;
  private timer: NodeJS.Timeout | null = null;
  private inHandler = false;
  private readonly done: Promise<void>;
  private dirty = false;

  constructor(
    private readonly options: SubscribeOptions,
    private readonly handler: (event: RecordedEvent) => Promise<void>,
    private readonly loop: SubscriptionLoopOptions,
    private readonly onClosed: (s: PollingSubscription) => void,
  ) {
    this.done = this.run().finally(() => this.onClosed(this));
  }

  /** Called by the store after a commit: there may be something new to read. */
  notify(): void {
    this.dirty = true;
    const w = this.wakeUp;
    if (w) {
      this.wakeUp = null;
      w();
    }
  }

  async close(): Promise<void> {
    if (!this.closed) {
      this.closed = true;
      this.notify();
      const c = this.closeWake;
      this.closeWake = null;
      if (c) c();
    }
    // Closing from inside the handler must not wait for the loop that is awaiting that handler.
    if (this.inHandler) return;
    await this.done;
  }

  /** Waits `ms`; a poll wait (`wakeable`) also ends on notify(); every wait ends on close(). */
  private sleep(ms: number, wakeable: boolean): Promise<void> {
    return new Promise<void>((resolve) => {
      const finish = () => {
        if (this.timer) clearTimeout(this.timer);
        this.timer = null;
        this.wakeUp = null;
        this.closeWake = null;
        resolve();
      };
      if (wakeable) this.wakeUp = finish;
      this.closeWake = finish;
      this.timer = setTimeout(finish, ms);
    });
  }

  /** The subscriber took the event synchronously (`SubscribeOptions.passOver`); a throw counts as no. */
  private passedOver(event: RecordedEvent): boolean {
    const passOver = this.options.passOver;
    if (!passOver) return false;
    try {
      return passOver(event) === true;
    } catch {
      return false;
    }
  }

  private async run(): Promise<void> {
    const pageSize = this.loop.pageSize ?? 500;
    const poll = this.loop.pollIntervalMs ?? 250;
    const logger = this.loop.logger ?? defaultEventStoreLogger;
    let scanned = this.options.fromPosition;
    // Let the caller finish its synchronous setup before the first handler call.
    await Promise.resolve();
    while (!this.closed) {
      this.dirty = false;
      let page: RecordedEvent[];
      try {
        page = await this.loop.readPage(scanned, pageSize);
      } catch (err) {
        if (this.closed) return;
        logger.warn('eventstore subscription read failed; retrying', { position: scanned, error: errName(err) });
        await this.sleep(poll, false);
        continue;
      }
      for (const event of page) {
        if (this.closed) return;
        if (matchesPrefix(event.streamId, this.options.streamPrefix) && !this.passedOver(event)) {
          const handled = await handOffUntilHandled(event, {
            handler: this.handler,
            logger,
            firstDelayMs: this.loop.retryDelayMs ?? 50,
            maxDelayMs: this.loop.maxRetryDelayMs ?? 2000,
            isClosed: () => this.closed,
            sleep: (ms) => this.sleep(ms, false),
            inHandler: (running) => (this.inHandler = running),
          });
          if (!handled) return;
        }
        scanned = event.position;
      }
      if (page.length < pageSize && !this.dirty && !this.closed) await this.sleep(poll, true);
    }
  }
}

function errName(err: unknown): string {
  return err instanceof Error ? err.name : typeof err;
}

export interface HandOff {
  handler: (event: RecordedEvent) => Promise<void>;
  logger: EventStoreLogger;
  firstDelayMs: number;
  maxDelayMs: number;
  isClosed: () => boolean;
  sleep: (ms: number) => Promise<void>;
  /** Told when the handler starts and ends (close() waits for a running handler). */
  inHandler: (running: boolean) => void;
}

/**
 * Hands one event to the handler until it succeeds, retrying the same event after a growing delay
 * (an event is never skipped). Resolves false when the subscription closed before it was handled.
 * Shared by every subscription (polling and KurrentDB).
 */
export async function handOffUntilHandled(event: RecordedEvent, h: HandOff): Promise<boolean> {
  let delay = h.firstDelayMs;
  for (;;) {
    h.inHandler(true);
    try {
      await h.handler(event);
      return true;
    } catch (err) {
      h.logger.warn('eventstore subscription handler failed; retrying the same event', {
        position: event.position,
        streamId: event.streamId,
        type: event.type,
        error: errName(err),
      });
    } finally {
      h.inHandler(false);
    }
    if (h.isClosed()) return false;
    await h.sleep(delay);
    if (h.isClosed()) return false;
    delay = Math.min(delay * 2, h.maxDelayMs);
  }
}
