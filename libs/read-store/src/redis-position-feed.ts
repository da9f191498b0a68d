import type Redis from 'ioredis';

/**
 * Projection positions shared over a Redis channel (`ReadStore.publishPositions` and
 * `watchPositions` of RedisReadStore): one JSON object of projection name -> visible position per
 * message. The subscriber connection is opened on the first watch and closed with the store.
 */
export class RedisPositionFeed {
  private subscriber: Redis | null = null;
  private readonly listeners = new Set<(positions: Record<string, number>) => void>();

  constructor(
    private readonly redis: Redis,
    private readonly channel: string,
  ) {}

  async publish(positions: Record<string, number>): Promise<void> {
    await this.redis.publish(this.channel, JSON.stringify(positions));
  }

  watch(listener: (positions: Record<string, number>) => void): () => void {
    this.listeners.add(listener);
    if (!this.subscriber) {
      const sub = this.redis.duplicate({ maxRetriesPerRequest: null });
      this.subscriber = sub;
      sub.on('error', () => undefined); // reconnects by itself; followers also poll meanwhile
      sub.on('message', (_channel: string, message: string) => {
        let positions: Record<string, number>;
        try {
          positions = JSON.parse(message) as Record<string, number>;
        } catch {
          return;
        }
        for (const l of this.listeners) l(positions);
      });
      void sub.subscribe(this.channel).catch(() => undefined);
    }
    return () => {
      this.listeners.delete(listener);
    };
  }

  async close(): Promise<void> {
    const sub = this.subscriber;
    this.subscriber = null;
    this.listeners.clear();
    if (sub && sub.status !== 'end') await sub.quit().catch(() => sub.disconnect());
  }
}
