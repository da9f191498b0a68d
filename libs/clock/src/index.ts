import { existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';

/**
 * The one clock of every time rule (the "one clock" rule): nothing else in the service reads Date.now()
 * for a time it emits or checks. The exception is WALL_CLOCK below (signature timestamps, rate limits).
 */
export interface Clock {
  now(): Date;
  /** Called after the clock jumps (dev clock); timers use it to fire at once. */
  onAdvance(listener: (now: Date) => void): () => void;
}

export const CLOCK = Symbol('CLOCK');

export class SystemClock implements Clock {
  now(): Date {
    return new Date(Date.now());
  }
  onAdvance(): () => void {
    return () => undefined;
  }
}

/**
 * Real time, whatever the service clock says: read only for the `x-svc-timestamp` of webhook
 * attempts and Destination calls, which receivers compare with their own clocks (a dev clock moved
 * days ahead must not make every receiver reject), and for the refill of the rate limits' token
 * buckets, which protect the process in real time (moving the dev clock must neither refill nor
 * drain them). Every time rule reads CLOCK instead.
 */
export interface WallClock {
  now(): Date;
}

export const WALL_CLOCK = Symbol('WALL_CLOCK');

/** The wall clock of every running mode (the dev clock never moves it). */
export class SystemWallClock implements WallClock {
  now(): Date {
    return new Date(Date.now());
  }
}

/**
 * The dev clock of docs/decisions.md, "Dev tools and the dev clock": real time plus an offset that only moves forward.
 * The offset is kept in a file in the data dir so a restart keeps the time it had reached.
 */
export class DevClock implements Clock {
  private offsetMs = 0;
  private readonly listeners = new Set<(now: Date) => void>();

  constructor(private readonly file?: string) {
    if (file && existsSync(file)) {
      const saved = JSON.parse(readFileSync(file, 'utf8')) as { offsetMs: number };
      this.offsetMs = Number(saved.offsetMs) || 0;
    }
  }

  now(): Date {
    return new Date(Date.now() + this.offsetMs);
  }

  /** How far ahead of real time the clock is (ms). */
  get offset(): number {
    return this.offsetMs;
  }

  /**
   * The offset `seconds` further on from `fromOffsetMs` (default: this clock's), checked like an
   * advance: a whole number of seconds, not negative, and not past the last valid date.
   */
  offsetAfter(seconds: number, fromOffsetMs: number = this.offsetMs): number {
    if (!Number.isInteger(seconds) || seconds < 0) throw new RangeError('advanceSeconds must be an integer >= 0');
    const next = fromOffsetMs + seconds * 1000;
    if (Number.isNaN(new Date(Date.now() + next).getTime())) throw new RangeError('advanceSeconds moves the clock past the last valid date');
    return next;
  }

  /**
   * Takes an offset decided elsewhere (distributed mode: the dev clock shared by every app, see
   * libs/platform dev-clock-sync.ts). Forward only: an offset at or behind this clock's changes
   * nothing. When it moves, the listeners run (timers fire at once), as after an advance. Not saved
   * to the file: whoever decided the offset keeps it.
   */
  follow(offsetMs: number): boolean {
    if (!Number.isSafeInteger(offsetMs) || offsetMs <= this.offsetMs || Number.isNaN(new Date(Date.now() + offsetMs).getTime())) return false;
    this.offsetMs = offsetMs;
    const now = this.now();
    for (const l of this.listeners) l(now);
    return true;
  }

  advance(seconds: number): Date {
    this.offsetMs = this.offsetAfter(seconds);
    if (this.file) {
      // Owner-only, like everything in the data dir (docs/decisions.md, "Deployment safety").
      mkdirSync(dirname(this.file), { recursive: true, mode: 0o700 });
      const tmp = `${this.file}.tmp`;
      writeFileSync(tmp, JSON.stringify({ offsetMs: this.offsetMs }), { mode: 0o600 });
      renameSync(tmp, this.file);
    }
    const now = this.now();
    for (const l of this.listeners) l(now);
    return now;
  }

  onAdvance(listener: (now: Date) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }
}
