import { Inject, Injectable } from '@nestjs/common';
import { CLOCK, Clock } from '@svc/clock';
import { EVENT_STORE, EventStore, Leases, PositionStore } from '@svc/eventstore';
import { getLogger } from '@svc/http';
import { AnyClientProxy, BUS_CLIENT, IntegrationEventRelay, IntegrationEventRelayOptions } from '@svc/messaging';
import { READ_STORE, ReadStore, TimerDoc, TimerScheduler, TimerSchedulerOptions } from '@svc/read-store';
import { LEASES, RELAY_POSITIONS } from './leases';

export type RelaySpec = Omit<IntegrationEventRelayOptions, 'store' | 'readStore' | 'client' | 'logger' | 'positions'>;
export type TimerSpec<T extends TimerDoc> = Omit<TimerSchedulerOptions<T>, 'readStore' | 'clock' | 'logger'>;

/**
 * A context's background work: the relay that publishes its integration events from its own
 * streams, and the schedulers that fire its durable timers. Modules declare them in
 * `onModuleInit`; the platform starts them once the projections run and stops them before the
 * stores close. Each runs in one replica of the app at a time, the one holding its lease
 * (`relay:<name>`, `timers:<collection>/<partition>`; docs/scaling.md); a relay writes its
 * position with the lease's fencing token.
 */
@Injectable()
export class BackgroundWork {
  private readonly jobs: { name: string; start(token: number): Promise<void> | void; stop(): Promise<void> }[] = [];
  private started = false;

  constructor(
    @Inject(EVENT_STORE) private readonly store: EventStore,
    @Inject(READ_STORE) private readonly readStore: ReadStore,
    @Inject(BUS_CLIENT) private readonly client: AnyClientProxy,
    @Inject(CLOCK) private readonly clock: Clock,
    @Inject(LEASES) private readonly leases: Leases,
    @Inject(RELAY_POSITIONS) private readonly positions: PositionStore | null,
  ) {}

  relay(spec: RelaySpec): void {
    const log = getLogger();
    const relay = new IntegrationEventRelay({
      ...spec,
      store: this.store,
      readStore: this.readStore,
      ...(this.positions ? { positions: this.positions } : {}),
      client: this.client,
      logger: { warn: (msg: string) => log.warn({ relay: spec.name }, msg) },
    });
    this.jobs.push({ name: `relay:${spec.name}`, start: (token) => relay.start(token), stop: () => relay.stop() });
  }

  timers<T extends TimerDoc>(spec: TimerSpec<T>): void {
    const scheduler = new TimerScheduler<T>({ ...spec, readStore: this.readStore, clock: this.clock, logger: getLogger() });
    this.jobs.push({ name: `timers:${spec.collection}/${spec.partition}`, start: () => scheduler.start(), stop: () => scheduler.stop() });
  }

  /** Contends for every job's lease; each job runs while this replica holds it. */
  async start(): Promise<void> {
    if (this.started) return;
    this.started = true;
    for (const job of this.jobs) this.leases.run(job.name, { start: (token) => (this.started ? job.start(token) : undefined), stop: () => job.stop() });
    // The first claim is answered before start-up goes on: a replica alone runs its jobs at once.
    await this.leases.claimNow();
    await this.leases.settled();
  }

  /** Stops every job (a relay stores its position); the leases are released when the platform closes. */
  async stop(): Promise<void> {
    if (!this.started) return;
    this.started = false;
    await Promise.all(this.jobs.map((j) => j.stop()));
  }
}
