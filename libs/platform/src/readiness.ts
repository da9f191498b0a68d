import { Inject, Injectable } from '@nestjs/common';
import { EVENT_STORE, EventStore } from '@svc/eventstore';
import { getLogger } from '@svc/http';
import { BUS_PING, BusPing } from '@svc/messaging';
import { READ_STORE, ReadStore } from '@svc/read-store';

/** What GET /readyz asks, by the names its answer uses. */
export const READINESS_CHECKS = ['eventStore', 'bus', 'readStore'] as const;
export type ReadinessCheckName = (typeof READINESS_CHECKS)[number];

/**
 * One check's answer. `reason` is one of two words and nothing else (never an error message: a
 * driver's message can hold a host, a user or a connection string).
 */
export type ReadinessCheck = { status: 'ok'; durationMs: number } | { status: 'failed'; reason: 'timeout' | 'unavailable'; durationMs: number };

export interface ReadinessReport {
  ready: boolean;
  checks: Record<ReadinessCheckName, ReadinessCheck>;
  /** The checks that failed, in READINESS_CHECKS order. */
  failing: ReadinessCheckName[];
}

/** Longest wait for one dependency's answer: past it, the check fails as `timeout`. */
export const READINESS_TIMEOUT_MS = 2000;

export interface ReadinessProbes {
  eventStore: { ping(): Promise<void> };
  bus: { ping(): Promise<void> };
  readStore: { ping(): Promise<void> };
}

/**
 * Asks each dependency through its own port's `ping()` (each adapter answers its own check), all
 * at once, each bounded by `timeoutMs`, so a dependency that hangs makes the answer 503, never a
 * request that hangs.
 *
 * At most one ping per dependency is in flight: a probe that arrives while one is pending (a
 * silent server, or simply concurrent probes) waits for that same ping under its own timeout
 * instead of sending another, so probes against a hung dependency never pile up connections or
 * commands behind it.
 */
export class ReadinessProbe {
  private readonly pending = new Map<ReadinessCheckName, Promise<void>>();

  constructor(
    private readonly probes: ReadinessProbes,
    private readonly timeoutMs: number = READINESS_TIMEOUT_MS,
  ) {}

  async check(): Promise<ReadinessReport> {
    const results = await Promise.all(READINESS_CHECKS.map((name) => this.one(name)));
    const checks = Object.fromEntries(READINESS_CHECKS.map((name, i) => [name, results[i]])) as Record<ReadinessCheckName, ReadinessCheck>;
    const failing = READINESS_CHECKS.filter((name) => checks[name].status !== 'ok');
    return { ready: failing.length === 0, checks, failing };
  }

  private async one(name: ReadinessCheckName): Promise<ReadinessCheck> {
    const started = performance.now();
    const elapsed = () => Math.round((performance.now() - started) * 10) / 10;
    let ping = this.pending.get(name);
    if (!ping) {
      // A ping that throws at once is a rejected promise like any other.
      ping = Promise.resolve().then(() => this.probes[name].ping());
      const settled = ping.then(
        () => undefined,
        () => undefined,
      );
      this.pending.set(name, ping);
      void settled.then(() => {
        if (this.pending.get(name) === ping) this.pending.delete(name);
      });
    }
    let timer: NodeJS.Timeout | undefined;
    const timedOut = new Promise<'timeout'>((resolve) => {
      timer = setTimeout(() => resolve('timeout'), this.timeoutMs);
      timer.unref();
    });
    try {
      const outcome = await Promise.race([ping.then(() => 'ok' as const), timedOut]);
      if (outcome === 'timeout') {
        getLogger().warn({ check: name, reason: 'timeout', timeoutMs: this.timeoutMs }, 'readiness check failed');
        return { status: 'failed', reason: 'timeout', durationMs: elapsed() };
      }
      return { status: 'ok', durationMs: elapsed() };
    } catch (err) {
      // The error's name only: its message may quote an address or credentials.
      getLogger().warn({ check: name, reason: 'unavailable', error: (err as Error)?.name ?? typeof err }, 'readiness check failed');
      return { status: 'failed', reason: 'unavailable', durationMs: elapsed() };
    } finally {
      clearTimeout(timer);
    }
  }
}

/** The app's readiness: its event store, bus and read store (the ports PlatformModule provides). */
@Injectable()
export class Readiness extends ReadinessProbe {
  constructor(@Inject(EVENT_STORE) eventStore: EventStore, @Inject(BUS_PING) bus: BusPing, @Inject(READ_STORE) readStore: ReadStore) {
    super({ eventStore, bus, readStore });
  }
}
