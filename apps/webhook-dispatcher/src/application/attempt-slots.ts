import { randomUUID } from 'node:crypto';
import { Injectable } from '@nestjs/common';

/**
 * Most first attempts sent straight from the append that created or released their delivery
 * (running at once); past this, new deliveries are created without a lease and wait for the timer
 * worker (which runs at most its batchSize attempts at once), and releases of held deliveries wait
 * for a slot to be given back.
 */
export const MAX_DIRECT_ATTEMPTS = 512;

/**
 * The slot pool of direct first attempts: attempts sent by the process whose append created or
 * released their delivery with the lease in it, outside the retry worker. A slot is taken
 * synchronously, before the lease append, and given back once the attempt is recorded (or when
 * the append took no lease after all). Once shutdown began, no slot is given out and new work is
 * refused.
 */
@Injectable()
export class AttemptSlots {
  /** Direct first attempts running (sent by the append that leased them), by delivery id. */
  private readonly direct = new Map<string, Promise<void>>();
  /**
   * Slots taken (synchronously, in take) and not yet given back: from before the lease append
   * until the attempt is recorded. Bounded by MAX_DIRECT_ATTEMPTS.
   */
  private taken = 0;
  /** Releases of held deliveries waiting for a slot (woken one per slot given back). */
  private readonly waiters: (() => void)[] = [];
  private stopped = false;

  /** Refuses new work once shutdown began: the caller (a relay) fails and redelivers after a restart. */
  assertRunning(): void {
    if (this.stopped) throw new Error('webhook dispatcher stopping: not dispatched');
  }

  /**
   * A lease id if a first attempt may be sent directly now (bounded), else undefined (timer
   * worker). The slot is reserved here, before any await: the caller gives it back with giveBack()
   * unless it hands it to track (which gives it back when the attempt ends).
   */
  take(): string | undefined {
    this.assertRunning();
    if (this.taken >= MAX_DIRECT_ATTEMPTS) return undefined;
    this.taken++;
    return randomUUID();
  }

  giveBack(): void {
    this.taken--;
    this.waiters.shift()?.();
  }

  /**
   * As take, but waits (until `until`, real time) for a slot to be given back instead of
   * answering undefined at once: a released held delivery is then sent by the releasing process
   * (its lease in the release append) rather than by the timer worker, whose path costs one more
   * read, append and timer scan per delivery. `waited`: whether it had to wait (what was read
   * before may be stale by then). Throws once shutdown began.
   */
  async takeWhenFree(until: number): Promise<{ leaseId: string | undefined; waited: boolean }> {
    let waited = false;
    for (;;) {
      const leaseId = this.take();
      if (leaseId) return { leaseId, waited };
      const left = until - performance.now();
      if (left <= 0) return { leaseId: undefined, waited };
      waited = true;
      await new Promise<void>((resolve) => {
        const wake = () => {
          clearTimeout(timer);
          resolve();
        };
        const timer = setTimeout(() => {
          const i = this.waiters.indexOf(wake);
          if (i >= 0) this.waiters.splice(i, 1);
          resolve();
        }, left);
        this.waiters.push(wake);
      });
    }
  }

  /** Slots taken now (tests). */
  get inUse(): number {
    return this.taken;
  }

  /** Tracks a leased first attempt holding a slot (`run` never rejects); the slot is given back when it ends. */
  track(deliveryId: string, run: Promise<void>): void {
    this.direct.set(deliveryId, run);
    void run.finally(() => {
      this.direct.delete(deliveryId);
      this.giveBack();
    });
  }

  /** The direct first attempt of this delivery still running, if any. */
  running(deliveryId: string): Promise<void> | undefined {
    return this.direct.get(deliveryId);
  }

  /** Shutdown began: no slot is given out any more, and releases waiting for one stop waiting (and fail: the relay redelivers BaaSigned). */
  stop(): void {
    this.stopped = true;
    for (const wake of this.waiters.splice(0)) wake();
  }

  /**
   * Resolves once every slot is given back: a slot reserved before stop() may still be waiting for
   * its lease append and start its attempt after it.
   */
  async drain(): Promise<void> {
    while (this.taken > 0 || this.direct.size > 0) {
      if (this.direct.size > 0) await Promise.allSettled([...this.direct.values()]);
      else await new Promise((r) => setTimeout(r, 10));
    }
  }
}
