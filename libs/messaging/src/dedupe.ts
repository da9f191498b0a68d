import type { ReadStore, WriteOp } from '@svc/read-store';

export const PROCESSED_EVENTS = 'processed-events';

export function processedEventKey(consumer: string, eventId: string): string {
  return `${consumer}:${eventId}`;
}

/**
 * Consumer-side dedupe by event id (the "at least once, deduped by consumers" rule): remembers processed event ids in the
 * read store (collection `processed-events`, key `${consumer}:${eventId}`, partition = consumer).
 * Best: put `markOp(...)` in the same `commit`/`write` as the consumer's own writes, so the
 * effect and the mark land together.
 */
export class ProcessedEvents {
  constructor(private readonly readStore: ReadStore) {}

  async seen(consumer: string, eventId: string): Promise<boolean> {
    return (await this.readStore.get(PROCESSED_EVENTS, processedEventKey(consumer, eventId))) !== null;
  }

  markOp(consumer: string, eventId: string, processedAt: string = new Date().toISOString()): WriteOp {
    return {
      op: 'put',
      collection: PROCESSED_EVENTS,
      key: processedEventKey(consumer, eventId),
      partition: consumer,
      doc: { consumer, eventId, processedAt },
    };
  }

  async mark(consumer: string, eventId: string, processedAt?: string): Promise<void> {
    await this.readStore.write([this.markOp(consumer, eventId, processedAt)]);
  }

  /**
   * Runs `effect` unless the event was already processed by this consumer, then marks it.
   * Returns false when skipped. (Not atomic against a concurrent delivery of the same event;
   * in-order consumers see one delivery at a time.)
   */
  async once(consumer: string, eventId: string, effect: () => Promise<void>): Promise<boolean> {
    if (await this.seen(consumer, eventId)) return false;
    await effect();
    await this.mark(consumer, eventId);
    return true;
  }
}
