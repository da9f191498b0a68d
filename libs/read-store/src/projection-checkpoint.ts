/** A waitFor call: resolved once every projection it waits on has made `position` visible. */
export interface Waiter {
  position: number;
  /** Projections still behind. */
  remaining: number;
  resolve(): void;
  reject(err: Error): void;
  timer: NodeJS.Timeout | null;
  /** The projections it waits on (their waiter sets hold it). */
  workers: { readonly waiters: Set<Waiter> }[];
}

/**
 * Where one projection stands: the checkpoint known to be stored, the position visible to readers
 * (every effect up to it is in the store: what waitFor compares against) with the waiters on it,
 * and the timer that stores a checkpoint advanced only by events that wrote nothing (losing such a
 * checkpoint costs nothing but reading those events again).
 */
export class ProjectionCheckpoint {
  /** Highest checkpoint known to be stored. */
  stored = 0;
  /** Highest position whose effects are all in the store (what waitFor compares against). */
  visible = 0;
  /** Highest position ever visible here (what a read model the store lost had reached). */
  highest = 0;
  /**
   * After the store lost the read model: the position it had reached, while the rebuild has not
   * made it visible again (0: none). Until then the model is incomplete: reads of it would answer
   * wrong data (a 404 for what exists, a shorter list), so they are held back (`behind`).
   */
  rebuildTarget = 0;
  /** Times `lose` was called. */
  losses = 0;
  readonly waiters = new Set<Waiter>();
  /** Told each time the visible position moves up (the lease holder shares it with other replicas). */
  onVisible: ((position: number) => void) | null = null;
  /** Told when a rebuild has made its target visible again. */
  onRebuilt: ((target: number) => void) | null = null;
  private timer: NodeJS.Timeout | null = null;

  /** The read model is incomplete: a rebuild after a loss has not reached what it had. */
  get behind(): boolean {
    return this.rebuildTarget > 0;
  }

  /**
   * The store lost the read model (or is rebuilding it, `target`: its marker): nothing is visible
   * any more, and it is behind until the rebuild reaches what it had reached.
   */
  lose(target = 0): void {
    this.losses++;
    // `highest` is at least `visible` (advance raises both).
    this.rebuildTarget = Math.max(this.rebuildTarget, this.highest, target);
    this.visible = 0;
  }

  /** Makes `position` visible: the waiters it satisfies are resolved. */
  advance(position: number): void {
    if (position > this.visible) {
      this.visible = position;
      if (position > this.highest) this.highest = position;
      this.onVisible?.(position);
      if (this.rebuildTarget > 0 && position >= this.rebuildTarget) {
        const target = this.rebuildTarget;
        this.rebuildTarget = 0;
        this.onRebuilt?.(target);
      }
    }
    for (const w of this.waiters) {
      if (w.position <= this.visible) {
        this.waiters.delete(w);
        if (--w.remaining === 0) {
          if (w.timer) clearTimeout(w.timer);
          w.resolve();
        }
      }
    }
  }

  /** Runs `store` (which commits the checkpoint) in `intervalMs`, unless a run is scheduled already. */
  schedule(intervalMs: number, store: () => void): void {
    if (this.timer) return;
    this.timer = setTimeout(() => {
      this.timer = null;
      store();
    }, intervalMs);
    this.timer.unref?.();
  }

  /** Drops the scheduled run. */
  cancel(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
  }
}
